"""Entities: deterministic extraction and per-bank resolution."""
