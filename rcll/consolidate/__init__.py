"""Consolidation (queue ``consolidate``, spec §4.7): background work over a bank's units —
closet summaries of a room × hall group, dedup proposals."""
