"""Run a retrieval benchmark against a live RCLL server: ingest every turn, ask every question.

Steps (protocol: ``../shared/data/README.md``):

1. Unless ``reuse``, delete every eval bank, so ingest is measured from empty.
2. Ingest: POST each bank's items in batches (async), then poll all operations to a terminal
   state. Wall time runs from the first POST to the moment the last operation is seen
   terminal (polling granularity ``poll_s``). Any failed/partial operation raises
   :class:`EvalIngestError`. With ``reuse`` the banks are taken as already ingested and
   nothing is posted.
3. Ask every question of its own bank, sequentially, timing each HTTP call (wall ms).
4. Map results to turn ids through their metadata, derive the session ranking from the
   turn ranking, score (``rcll.eval.metrics``) and aggregate overall and by category.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from rcll.client import TERMINAL_STATES, RCLLClient
from rcll.eval.datasets import EvalDataset, EvalQuestion, load_locomo, load_longmemeval
from rcll.eval.metrics import (
    ALL_METRICS,
    BASE_METRICS,
    LOCOMO_KS,
    LONGMEMEVAL_KS,
    aggregate,
    latency_summary,
    merge_ks,
    score_ranking,
    session_ranking,
)

LME_KS = merge_ks(LONGMEMEVAL_KS, LOCOMO_KS)  # (1, 5, 10, 20, 50)


class EvalIngestError(RuntimeError):
    """An ingest operation ended failed or partial; ``operations`` holds the bad ones."""

    def __init__(self, message: str, operations: list[dict]) -> None:
        super().__init__(message)
        self.operations = operations


def _progress(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        disable=not enabled,
    )


# -- ingest --------------------------------------------------------------------------------
def _batches(items: Sequence[dict], size: int) -> Iterable[Sequence[dict]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def ingest(
    client: RCLLClient,
    dataset: EvalDataset,
    *,
    batch_size: int = 200,
    progress: bool = True,
    poll_s: float = 0.25,
    timeout_s: float = 4 * 3600,
) -> dict:
    """POST every bank's items in batches, wait for all operations, and time the whole.

    Returns ``{"units", "items", "operations", "units_skipped", "seconds", "units_per_s",
    "reused": False}`` where ``units`` is the sum of the operations' ``units_created`` (the
    item count when the server does not report it). Raises :class:`EvalIngestError` when an
    operation ends failed or partial, ``TimeoutError`` after ``timeout_s``.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    pending: list[tuple[str, str]] = []
    sizes: dict[str, int] = {}
    sync_done = 0
    with _progress(progress) as bar:
        post_task = bar.add_task("retain (POST)", total=dataset.n_items)
        done_task = bar.add_task("retain (done)", total=dataset.n_items)
        started = time.perf_counter()
        for bank_id, items in dataset.banks.items():
            for batch in _batches(items, batch_size):
                answer = client.retain(bank_id, list(batch), async_=True)
                op_id = answer.get("operation_id")
                if op_id:
                    pending.append((bank_id, str(op_id)))
                    sizes[str(op_id)] = len(batch)
                else:  # the server chose to run it synchronously
                    sync_done += len(batch)
                bar.advance(post_task, len(batch))

        def on_update(latest: Mapping[str, dict]) -> None:
            processed = sync_done
            for op_id, op in latest.items():
                size = sizes.get(op_id, 0)
                if op.get("state") in TERMINAL_STATES:
                    processed += size
                else:
                    counts = op.get("counts") or {}
                    seen = (counts.get("units_created") or 0) + (counts.get("units_skipped") or 0)
                    processed += min(size, seen)
            bar.update(done_task, completed=processed)

        final = client.wait_many(pending, poll_s=poll_s, timeout_s=timeout_s,
                                 on_update=on_update) if pending else []
        seconds = time.perf_counter() - started
        bar.update(done_task, completed=dataset.n_items)

    bad = [op for op in final if op.get("state") != "succeeded"]
    if bad:
        first = bad[0]
        raise EvalIngestError(
            f"{len(bad)} of {len(final)} retain operations did not succeed; first: "
            f"{first.get('id')} in bank {first.get('bank_id')} is {first.get('status')} "
            f"at stage {first.get('stage')}: {first.get('error')}",
            bad,
        )
    created = [(op.get("counts") or {}).get("units_created") for op in final]
    if final and all(c is not None for c in created):
        units = sum(created) + sync_done
    else:
        units = dataset.n_items
    return {
        "units": units,
        "items": dataset.n_items,
        "operations": len(final),
        "units_skipped": sum((op.get("counts") or {}).get("units_skipped") or 0 for op in final),
        "seconds": seconds,
        "units_per_s": units / seconds if seconds > 0 else None,
        "reused": False,
    }


def ready_questions(conn, questions: Sequence[EvalQuestion]) -> list[EvalQuestion]:
    """The ``questions`` whose bank has retain jobs and none of them queued or running (an
    ingest still under way would be scored half-built). One query on ``jobs``."""
    rows = conn.execute(
        """SELECT bank_id, bool_or(state IN ('queued', 'running')) AS busy
           FROM jobs GROUP BY bank_id""").fetchall()
    ready = {r["bank_id"] for r in rows if not r["busy"]}
    return [q for q in questions if q.bank_id in ready]


# -- scoring -------------------------------------------------------------------------------
def rankings(
    results: Sequence[Mapping],
    unit_ids: Callable[[Mapping], tuple[str, str] | None],
) -> tuple[list[str], list[str]]:
    """(turn ranking, session ranking) of one recall answer's ``results``.

    Turns appear once, at their best rank (several units of one turn collapse); results that
    cannot be traced to a turn are dropped; sessions rank by first appearance of a turn.
    """
    turn_order: dict[str, None] = {}
    session_of: dict[str, str] = {}
    for result in results:
        ids = unit_ids(result)
        if ids is None:
            continue
        turn, session = ids
        turn_order.setdefault(turn, None)
        session_of.setdefault(turn, session)
    turns = list(turn_order)
    return turns, session_ranking(turns, session_of)


def score_question(
    question: EvalQuestion,
    results: Sequence[Mapping],
    unit_ids: Callable[[Mapping], tuple[str, str] | None],
    ks: Iterable[int] = LOCOMO_KS,
    metrics: Iterable[str] = BASE_METRICS,
) -> dict:
    """Score one question from its recall ``results``.

    Returns ``{"qid", "category", "turn": scores | None, "session": scores | None}``; a level
    is None when the question has no gold there (skipped, not scored 0).
    """
    ks, metrics = tuple(ks), tuple(metrics)
    turns, sessions = rankings(results, unit_ids)
    return {
        "qid": question.qid,
        "category": question.category,
        "turn": score_ranking(turns, question.gold_turns, ks, metrics)
        if question.gold_turns else None,
        "session": score_ranking(sessions, question.gold_sessions, ks, metrics)
        if question.gold_sessions else None,
    }


# -- the run -------------------------------------------------------------------------------
def run_dataset(
    client: RCLLClient,
    dataset: EvalDataset,
    *,
    ks: Iterable[int],
    metrics: Iterable[str],
    recipe: str | None = None,
    tiers: Iterable[str] | None = ("cold",),
    bank_prefix: str = "",
    reuse: bool = False,
    batch_size: int = 200,
    limit: int = 50,
    max_tokens: int = 200_000,
    progress: bool = True,
    keep_per_question: bool = False,
) -> dict:
    """Delete (unless ``reuse``), ingest (unless ``reuse``), ask and score one dataset.

    Result keys: ``turn``, ``session`` (means keyed ``"<metric>@<k>"``), ``by_category``
    (``{name: {"n", "n_scored", "turn", "session"}}``), ``n_questions``, ``n_scored``
    (``{"turn", "session"}``), ``ingest``, ``recall_latency_ms`` (``{"p50", "p95", "mean"}``),
    ``config``; plus ``per_question`` when ``keep_per_question``.
    ``tiers``: the recall cascade tiers asked (default the cold tier only, so a rerun scores
    the pipeline, not what earlier runs left in the hot tier; None = the server's cascade).
    Raises :class:`EvalIngestError`, ``TimeoutError`` or ``rcll.client.RCLLHTTPError``.
    """
    ks, metrics = tuple(ks), tuple(metrics)
    if reuse:
        ingest_stats = {"units": None, "seconds": None, "units_per_s": None, "reused": True}
    else:
        for bank_id in dataset.banks:
            client.delete_bank(bank_id)
        ingest_stats = ingest(client, dataset, batch_size=batch_size, progress=progress)

    records: list[dict] = []
    latencies: list[float] = []
    first: dict | None = None
    with _progress(progress) as bar:
        task = bar.add_task("recall", total=len(dataset.questions))
        for question in dataset.questions:
            started = time.perf_counter()
            answer = client.recall(question.bank_id, question.query, recipe=recipe,
                                   limit=limit, max_tokens=max_tokens,
                                   query_timestamp=question.query_timestamp,
                                   tiers=list(tiers) if tiers else None)
            latencies.append((time.perf_counter() - started) * 1000.0)
            first = first if first is not None else answer
            record = score_question(question, answer.get("results") or [], dataset.unit_ids,
                                    ks, metrics)
            record["latency_ms"] = latencies[-1]
            records.append(record)
            bar.advance(task)

    summary = aggregate(records)
    result = {
        "dataset": dataset.name,
        "turn": summary["turn"],
        "session": summary["session"],
        "by_category": summary["by_category"],
        "n_questions": summary["n_questions"],
        "n_scored": summary["n_scored"],
        "ingest": ingest_stats,
        "recall_latency_ms": latency_summary(latencies),
        "config": {
            "recipe": (first or {}).get("recipe", recipe),
            "tiers": (first or {}).get("tiers"),
            "limit": limit,
            "max_tokens": max_tokens,
            "batch_size": batch_size,
            "bank_prefix": bank_prefix,
            "base_url": client.base_url,
            "data": dataset.source,
            "ks": list(ks),
            "mode": (first or {}).get("mode"),
            "dense_available": (first or {}).get("dense_available"),
        },
    }
    if keep_per_question:
        result["per_question"] = records
    return result


def run_locomo(
    client: RCLLClient,
    data_dir: str | Path,
    *,
    recipe: str | None = None,
    tiers: Iterable[str] | None = ("cold",),
    bank_prefix: str = "eval-locomo-",
    reuse: bool = False,
    batch_size: int = 200,
    limit: int = 50,
    max_tokens: int = 200_000,
    progress: bool = True,
    keep_per_question: bool = False,
) -> dict:
    """LoCoMo: 10 banks, 5,882 turns, 1,536 questions; recall@k, recall_all@k, nDCG@k for
    k in {1, 5, 10, 20, 50} at turn and session level, by category. See :func:`run_dataset`."""
    dataset = load_locomo(data_dir, bank_prefix=bank_prefix)
    return run_dataset(client, dataset, ks=LOCOMO_KS, metrics=BASE_METRICS, recipe=recipe,
                       tiers=tiers,
                       bank_prefix=bank_prefix, reuse=reuse, batch_size=batch_size, limit=limit,
                       max_tokens=max_tokens, progress=progress,
                       keep_per_question=keep_per_question)


def run_longmemeval(
    client: RCLLClient,
    data_file: str | Path,
    *,
    recipe: str | None = None,
    tiers: Iterable[str] | None = ("cold",),
    bank_prefix: str = "eval-lme-",
    reuse: bool = False,
    batch_size: int = 200,
    limit: int = 50,
    max_tokens: int = 200_000,
    progress: bool = True,
    keep_per_question: bool = False,
) -> dict:
    """LongMemEval: one bank per question; recall@k, recall_any@k, recall_all@k, nDCG@k for
    k in {1, 5, 10, 20, 50} at turn and session level, by question type.
    See :func:`run_dataset`."""
    dataset = load_longmemeval(data_file, bank_prefix=bank_prefix)
    return run_dataset(client, dataset, ks=LME_KS, metrics=ALL_METRICS, recipe=recipe,
                       tiers=tiers,
                       bank_prefix=bank_prefix, reuse=reuse, batch_size=batch_size, limit=limit,
                       max_tokens=max_tokens, progress=progress,
                       keep_per_question=keep_per_question)
