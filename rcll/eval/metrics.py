"""Retrieval metrics with binary relevance (pure functions, no I/O).

Definitions follow ``../shared/data/README.md`` and LongMemEval (Wu et al., ICLR 2025,
arXiv 2410.10813, §5 retrieval evaluation). For a ranking ``r_1, r_2, ...`` (duplicates
dropped, first occurrence kept), a gold set ``G`` (non-empty) and a cut-off ``k``:

- recall@k      = |G ∩ top_k| / |G|                  (LoCoMo "fraction of gold found")
- recall_any@k  = 1 if |G ∩ top_k| > 0 else 0        (LongMemEval recall_any)
- recall_all@k  = 1 if G ⊆ top_k else 0              (LongMemEval recall_all)
- MRR@k         = 1 / rank of the first gold id in top_k (0 when none is)
- nDCG@k        = DCG@k / IDCG@k, DCG@k = Σ_{i=1..k} rel_i / log2(i + 1),
                  IDCG@k = Σ_{i=1..min(|G|, k)} 1 / log2(i + 1), rel_i ∈ {0, 1}.

Session-level rankings are derived from the turn ranking: sessions ordered by the first
appearance of any of their turns (README, LoCoMo protocol).

Every metric raises ``ValueError`` for an empty gold set or ``k < 1``: a question with no
gold is not scorable and must be skipped by the caller, not scored 0 or 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

LOCOMO_KS: tuple[int, ...] = (1, 5, 10, 20, 50)
LONGMEMEVAL_KS: tuple[int, ...] = (5, 10, 50)
BASE_METRICS: tuple[str, ...] = ("recall", "recall_all", "ndcg")
ALL_METRICS: tuple[str, ...] = ("recall", "recall_any", "recall_all", "ndcg")


def _top_k(ranked_ids: Iterable[Hashable], gold: Iterable[Hashable], k: int):
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("empty gold set: question is not scorable")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    top = list(dict.fromkeys(ranked_ids))[:k]
    return top, gold_set


def recall_at_k(ranked_ids: Iterable[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """Fraction of the gold ids found in the top ``k``: |G ∩ top_k| / |G|."""
    top, gold_set = _top_k(ranked_ids, gold, k)
    return len(gold_set.intersection(top)) / len(gold_set)


def recall_any_at_k(ranked_ids: Iterable[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """1.0 if at least one gold id is in the top ``k``, else 0.0."""
    top, gold_set = _top_k(ranked_ids, gold, k)
    return 1.0 if gold_set.intersection(top) else 0.0


def recall_all_at_k(ranked_ids: Iterable[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """1.0 if every gold id is in the top ``k``, else 0.0 (0.0 whenever |G| > k)."""
    top, gold_set = _top_k(ranked_ids, gold, k)
    return 1.0 if gold_set.issubset(top) else 0.0


def ndcg_at_k(ranked_ids: Iterable[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """nDCG@k with binary relevance.

    DCG@k = Σ_{i=1..k} rel_i / log2(i + 1) over 1-based ranks; IDCG@k is the DCG of an ideal
    ranking, i.e. min(|G|, k) relevant ids at ranks 1, 2, ...
    """
    top, gold_set = _top_k(ranked_ids, gold, k)
    dcg = sum(1.0 / math.log2(i + 1) for i, rid in enumerate(top, start=1) if rid in gold_set)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gold_set), k) + 1))
    return dcg / idcg


def mrr_at_k(ranked_ids: Iterable[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """Reciprocal rank of the first gold id in the top ``k`` (1 / rank), 0.0 when none is."""
    top, gold_set = _top_k(ranked_ids, gold, k)
    return next((1.0 / i for i, rid in enumerate(top, start=1) if rid in gold_set), 0.0)


METRIC_FUNCTIONS: dict[str, Callable[[Iterable[Hashable], Iterable[Hashable], int], float]] = {
    "recall": recall_at_k,
    "recall_any": recall_any_at_k,
    "recall_all": recall_all_at_k,
    "ndcg": ndcg_at_k,
}


def session_ranking(
    turn_ranking: Sequence[Hashable],
    session_of: Callable[[Hashable], Hashable | None] | Mapping[Hashable, Hashable],
) -> list:
    """Rank sessions by the first appearance of any of their turns in ``turn_ranking``.

    ``session_of`` maps a turn id to its session id (a callable or a mapping); turns whose
    session is unknown (None / missing key) are skipped.
    """
    lookup = session_of.get if isinstance(session_of, Mapping) else session_of
    ranking: dict[Hashable, None] = {}
    for turn in turn_ranking:
        session = lookup(turn)
        if session is not None and session not in ranking:
            ranking[session] = None
    return list(ranking)


def merge_ks(base: Iterable[int], extra: Iterable[int] = ()) -> tuple[int, ...]:
    """Sorted union of cut-offs, e.g. ``merge_ks(LONGMEMEVAL_KS, [1, 20])`` → (1, 5, 10, 20, 50)."""
    return tuple(sorted({int(k) for k in (*base, *extra)}))


def score_ranking(
    ranked_ids: Sequence[Hashable],
    gold: Iterable[Hashable],
    ks: Iterable[int] = LOCOMO_KS,
    metrics: Iterable[str] = BASE_METRICS,
) -> dict[str, float]:
    """All requested metrics of one ranking, keyed ``"<metric>@<k>"`` (e.g. ``"ndcg@5"``).

    ``metrics`` names come from ``recall``, ``recall_any``, ``recall_all``, ``ndcg``.
    Raises ``ValueError`` for an empty gold set.
    """
    gold_set = set(gold)
    return {
        f"{name}@{k}": METRIC_FUNCTIONS[name](ranked_ids, gold_set, k)
        for name in metrics
        for k in ks
    }


def mean_scores(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per-key arithmetic mean over question-level score dicts ({} for no rows)."""
    if not rows:
        return {}
    keys = list(rows[0])
    return {key: sum(row[key] for row in rows) / len(rows) for key in keys}


def aggregate(records: Sequence[Mapping]) -> dict:
    """Average question-level scores overall and by category.

    Each record is ``{"category": str, "turn": scores | None, "session": scores | None}``
    where ``scores`` is a :func:`score_ranking` dict and None means "not scorable at this
    level" (no gold). Answer::

        {"turn": {...means}, "session": {...means}, "n_questions": int,
         "n_scored": {"turn": int, "session": int},
         "by_category": {category: {"n": int, "n_scored": {...}, "turn": {...}, "session": {...}}}}
    """

    def summarize(group: Sequence[Mapping]) -> dict:
        turn = [r["turn"] for r in group if r.get("turn") is not None]
        session = [r["session"] for r in group if r.get("session") is not None]
        return {
            "turn": mean_scores(turn),
            "session": mean_scores(session),
            "n_scored": {"turn": len(turn), "session": len(session)},
        }

    out = summarize(records)
    out["n_questions"] = len(records)
    categories: dict[str, list[Mapping]] = {}
    for record in records:
        categories.setdefault(str(record["category"]), []).append(record)
    out["by_category"] = {
        name: {"n": len(group), **summarize(group)} for name, group in sorted(categories.items())
    }
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0–100) with linear interpolation between closest ranks
    (NumPy's default method). Raises ``ValueError`` on an empty sequence."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_summary(values_ms: Sequence[float]) -> dict[str, float | None]:
    """``{"p50", "p95", "mean"}`` of latencies in milliseconds (None values when empty)."""
    if not values_ms:
        return {"p50": None, "p95": None, "mean": None}
    return {
        "p50": percentile(values_ms, 50),
        "p95": percentile(values_ms, 95),
        "mean": sum(values_ms) / len(values_ms),
    }
