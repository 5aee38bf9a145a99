"""Request bodies of the HTTP API (the engine's models plus transport fields)."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from rcll.banks.ids import BANK_ID_PATTERN
from rcll.banks.ids import check_bank_id as _check
from rcll.retain.models import RetainItem
from rcll.validation import TextModel

BANK_ID_RULE = BANK_ID_PATTERN  # Hindsight's rule: rcll.banks.ids


class RetainRequest(TextModel):
    """``POST /v1/default/banks/{bank_id}/memories`` — Hindsight's shape plus RCLL fields."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    items: list[RetainItem] = Field(min_length=1)
    async_: bool = Field(True, alias="async")
    # the idempotency key (body field or header) is checked once, by the retain service


def check_bank_id(bank_id: str) -> str:
    """``bank_id`` when it is a bank id by Hindsight's rule (:mod:`rcll.banks.ids`: 1-256
    characters, no '/', no control characters, not '.' or '..'); else 400
    ``invalid_bank_id``."""
    return _check(bank_id)
