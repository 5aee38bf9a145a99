"""The read path (recall). Reads only: no INSERT, UPDATE or DELETE lives in this package,
and every query runs in a READ ONLY transaction, so a SELECT-only role suffices (spec §1.2).
"""
