"""``derive`` (work in progress)."""

from __future__ import annotations


def derive(ctx, principal, bank_id, *args, **kwargs):
    raise NotImplementedError("derive")
