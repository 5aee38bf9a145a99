"""Retrieval evaluation of RCLL on LoCoMo and LongMemEval, with no LLM in the loop.

``metrics`` holds the pure metric functions, ``datasets`` the loaders, ``runner`` the
ingest-then-query runs against a live server and ``report`` the markdown rendering.
The protocol is the one in ``../shared/data/README.md``.
"""
