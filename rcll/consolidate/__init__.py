"""Consolidation (queue ``consolidate``): closets, summaries of a room x hall group."""
