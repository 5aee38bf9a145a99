"""``supersede`` (work in progress)."""

from __future__ import annotations


def supersede(ctx, principal, bank_id, *args, **kwargs):
    raise NotImplementedError("supersede")
