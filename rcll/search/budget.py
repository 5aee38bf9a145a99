"""Cut a ranked list to a token budget, counted with a real tokenizer (spec §5)."""

from __future__ import annotations

from rcll.models.tokenizer import TokenCounter


def cut_to_budget(units: list[dict], max_tokens: int, limit: int,
                  tokens: TokenCounter) -> tuple[list[dict], int]:
    """Keep units in rank order while they fit ``max_tokens`` (a unit that does not fit is
    skipped, later smaller ones may still fit), at most ``limit``. ``(kept, tokens_used)``.

    A unit's ``tokens`` is the count stored at retain; units stored without one are counted
    here with the same tokenizer.
    """
    missing = [u for u in units if u.get("tokens") is None]
    for unit, n in zip(missing, tokens.count_many([u["text"] for u in missing]), strict=True):
        unit["tokens"] = n
    kept, used = [], 0
    for unit in units:
        if len(kept) >= limit:
            break
        if used + unit["tokens"] > max_tokens:
            continue
        kept.append(unit)
        used += unit["tokens"]
    return kept, used
