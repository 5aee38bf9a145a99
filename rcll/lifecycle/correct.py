"""``correct`` (work in progress)."""

from __future__ import annotations


def correct(ctx, principal, bank_id, *args, **kwargs):
    raise NotImplementedError("correct")
