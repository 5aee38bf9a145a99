"""Request bodies of the HTTP API (the engine's models plus transport fields)."""

from __future__ import annotations

import re

from pydantic import ConfigDict, Field

from api.errors import APIError
from rcll.retain.models import RetainItem
from rcll.validation import TextModel

BANK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


class RetainRequest(TextModel):
    """``POST /v1/default/banks/{bank_id}/memories`` — Hindsight's shape plus RCLL fields."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    items: list[RetainItem] = Field(min_length=1)
    async_: bool = Field(True, alias="async")
    # the idempotency key (body field or header) is checked once, by the retain service


def check_bank_id(bank_id: str) -> str:
    """Raise a 400 ``invalid_bank_id`` unless the id is 1–128 of ``[A-Za-z0-9_.:-]``."""
    if not BANK_ID.fullmatch(bank_id):
        raise APIError(400, "invalid_bank_id",
                       "bank_id must be 1-128 characters of letters, digits, '_', '.', ':', '-'",
                       {"bank_id": bank_id})
    return bank_id
