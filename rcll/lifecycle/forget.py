"""``forget`` (work in progress)."""

from __future__ import annotations


def forget(ctx, principal, bank_id, *args, **kwargs):
    raise NotImplementedError("forget")
