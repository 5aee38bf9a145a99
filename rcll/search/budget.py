"""Cut a ranked list to a token budget, counted with a real tokenizer (spec §5)."""

from __future__ import annotations

from rcll.models.tokenizer import TokenCounter


def cut_to_budget(units: list[dict], max_tokens: int, limit: int,
                  tokens: TokenCounter) -> tuple[list[dict], int]:
    """Keep units in rank order while they fit ``max_tokens`` (a unit that does not fit is
    skipped, later smaller ones may still fit), at most ``limit``. ``(kept, tokens_used)``.
    """
    kept, used = [], 0
    for unit, n in zip(units, tokens.count_many([u["text"] for u in units]), strict=False):
        if len(kept) >= limit:
            break
        if used + n > max_tokens:
            continue
        unit["tokens"] = n
        kept.append(unit)
        used += n
    return kept, used
