"""Every Prometheus metric RCLL exports, defined once (docs/reference/metrics.md).

The engine observes them where the work happens (recall, the retain stages, the LLM client,
the embedder); the API (``api/metrics.py``) and each worker (``workers/telemetry.py``) expose
them. Labels never carry bank ids, member ids or text: their values come from the code (route
templates, phase, tier, channel, stage and queue names), so the series stay few.

prometheus_client picks its storage when it is first imported: with
``PROMETHEUS_MULTIPROC_DIR`` set (``rcll serve`` and ``rcll worker`` set it, see
:mod:`rcll.telemetry.exposition`) every process writes its values to files there and the
exporter sums them over the processes (gunicorn workers, Celery pool children).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from prometheus_client import Counter, Histogram

# Latency buckets in seconds: 1 ms … 60 s (recall phases are milliseconds, stages seconds).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0, 60.0)
STAGE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
COUNT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 300, 500, 1000)
TOKEN_BUCKETS = (0, 50, 100, 250, 500, 1000, 2000, 4096, 8192, 16384, 65536)

# -- API ------------------------------------------------------------------------------------
HTTP_REQUEST_SECONDS = Histogram(
    "rcll_http_request_duration_seconds",
    "API request latency, seconds, by route template (endpoint), method and status code.",
    ["endpoint", "method", "status"], buckets=LATENCY_BUCKETS)

# -- recall ---------------------------------------------------------------------------------
RECALL_SECONDS = Histogram(
    "rcll_recall_duration_seconds",
    "Whole recall latency (cascade), seconds, by the tier that answered (hot, warm, cold, "
    "none).", ["tier"], buckets=LATENCY_BUCKETS)
RECALL_TIER_SECONDS = Histogram(
    "rcll_recall_tier_duration_seconds",
    "Time spent in one cascade tier, seconds: hot and warm lookups, their verification "
    "through the caller scope (hot_verify, warm_verify), the cold pipeline (cold).",
    ["tier"], buckets=LATENCY_BUCKETS)
RECALL_PHASE_SECONDS = Histogram(
    "rcll_recall_phase_duration_seconds",
    "Time spent in one phase of the cold recall pipeline, seconds (embed_query, prepare, "
    "each channel by name, fuse, the recipe's steps, hydrate, budget, total).",
    ["phase"], buckets=LATENCY_BUCKETS)
RECALL_CANDIDATES = Histogram(
    "rcll_recall_candidates",
    "Candidates one recall channel returned before fusion (dense, lexical, graph, temporal, "
    "…), per recall.", ["channel"], buckets=COUNT_BUCKETS)
RECALL_TOKENS = Histogram(
    "rcll_recall_tokens_returned",
    "Tokens of the units one recall returned (after the budget cut).", buckets=TOKEN_BUCKETS)
RECALL_RESULTS = Histogram(
    "rcll_recall_results", "Units one recall returned.", buckets=COUNT_BUCKETS)

# -- write path -----------------------------------------------------------------------------
STAGE_ITEMS = Counter(
    "rcll_stage_items_total",
    "Retain items that went through a pipeline stage (rate() = items per second per stage).",
    ["stage"])
STAGE_UNITS = Counter(
    "rcll_stage_units_total",
    "Units a pipeline stage produced (rate() = units per second): chunk = units stored, "
    "extract = facts derived, entities = entity mentions, embed = vectors, link = units "
    "linked.", ["stage"])
TASK_SECONDS = Histogram(
    "rcll_task_duration_seconds",
    "One Celery task run, seconds, by task name and outcome (success, retry, failure).",
    ["task", "outcome"], buckets=STAGE_BUCKETS)

# What "units" means per stage: the key of the stage's counts (rcll.retain.stages).
STAGE_UNIT_KEYS = {"chunk": "units_created", "extract": "facts_created",
                   "entities": "entity_mentions", "embed": "units_embedded",
                   "link": "units_linked"}

# -- models ---------------------------------------------------------------------------------
EMBED_BATCH_SIZE = Histogram(
    "rcll_embed_batch_size", "Texts in one embedder call (one query, or a batch of units).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
EMBED_SECONDS = Histogram(
    "rcll_embed_duration_seconds", "One embedder call, seconds (all its forward passes).",
    buckets=LATENCY_BUCKETS)
LLM_CALLS = Counter(
    "rcll_llm_calls_total",
    "LLM calls by model and outcome (ok, invalid_reply, transient_error, error).",
    ["model", "outcome"])
LLM_TOKENS = Counter(
    "rcll_llm_tokens_total", "LLM tokens by model and kind (prompt, completion).",
    ["model", "kind"])
LLM_COST = Counter(
    "rcll_llm_cost_usd_total", "LLM cost in US dollars (litellm's price; 0 when unknown).",
    ["model"])
LLM_ERRORS = Counter(
    "rcll_llm_errors_total",
    "Failed LLM calls by model and error (the exception class, or invalid_reply).",
    ["model", "error"])
LLM_SECONDS = Histogram(
    "rcll_llm_call_duration_seconds", "One LLM call, seconds.", ["model"],
    buckets=LATENCY_BUCKETS)
LLM_LOG_DROPPED = Counter(
    "rcll_llm_request_log_dropped_total",
    "LLM request log entries not written, by reason (queue_full: the writer could not keep "
    "up; write_failed: the database refused or was away; error).", ["reason"])


OVERLOADED = Counter(
    "rcll_overloaded_total", "Requests refused 503 overloaded after their bounded wait for a "
    "slot (rcll.admission).", ["what"])


# -- observation helpers ---------------------------------------------------------------------
def observe_recall_pipeline(timings_ms: dict[str, float], candidates: dict[str, int]) -> None:
    """Record one cold-pipeline run (:func:`rcll.search.recall.recall`): ``timings_ms`` maps a
    phase name to milliseconds, ``candidates`` each channel that ran to the candidates it
    returned."""
    for phase, ms in timings_ms.items():
        RECALL_PHASE_SECONDS.labels(phase).observe(ms / 1000.0)
    for channel, n in candidates.items():
        RECALL_CANDIDATES.labels(channel).observe(n)


def observe_recall(timings_ms: dict[str, float], tiers: list[str], tokens: int,
                   results: int) -> None:
    """Record one cascade recall: ``timings_ms`` its timings (``tier_hot``, ``tier_warm``,
    ``tier_*_verify``, ``tier_cold``, ``total``; ms), ``tiers`` the tiers tried (the answering
    one last; empty: none), ``tokens`` and ``results`` what it returned."""
    for key, ms in timings_ms.items():
        if key.startswith("tier_"):
            RECALL_TIER_SECONDS.labels(key[len("tier_"):]).observe(ms / 1000.0)
    if "total" in timings_ms:
        RECALL_SECONDS.labels(tiers[-1] if tiers else "none").observe(timings_ms["total"] / 1000.0)
    RECALL_TOKENS.observe(tokens)
    RECALL_RESULTS.observe(results)


def observe_overloaded(what: str) -> None:
    """Count one request refused past saturation (:class:`rcll.admission.Gate`)."""
    OVERLOADED.labels(what).inc()


def stage_done(stage: str, counts: dict, items: int | None) -> None:
    """Record a stage that finished for one job: ``items`` the job's items (None: unknown),
    units from ``counts`` (:data:`STAGE_UNIT_KEYS`). Stage run times are the retain tasks'
    ``rcll_task_duration_seconds{task="retain.<stage>"}``."""
    if items:
        STAGE_ITEMS.labels(stage).inc(items)
    key = STAGE_UNIT_KEYS.get(stage)
    units = counts.get(key) if key else None
    if isinstance(units, int) and units > 0:
        STAGE_UNITS.labels(stage).inc(units)


@contextmanager
def embed_call(n_texts: int):
    """Time one embedder call of ``n_texts`` texts (batch size and latency)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        EMBED_BATCH_SIZE.observe(n_texts)
        EMBED_SECONDS.observe(time.perf_counter() - t0)


def llm_call(model: str, outcome: str, seconds: float, prompt_tokens: int = 0,
             completion_tokens: int = 0, cost_usd: float = 0.0, error: str | None = None) -> None:
    """Record one LLM call: ``outcome`` ok | invalid_reply | transient_error | error; tokens and
    cost as litellm reported them; ``error`` the failure's name (counted in the errors)."""
    LLM_CALLS.labels(model, outcome).inc()
    LLM_SECONDS.labels(model).observe(seconds)
    if prompt_tokens:
        LLM_TOKENS.labels(model, "prompt").inc(prompt_tokens)
    if completion_tokens:
        LLM_TOKENS.labels(model, "completion").inc(completion_tokens)
    if cost_usd:
        LLM_COST.labels(model).inc(cost_usd)
    if error is not None:
        LLM_ERRORS.labels(model, error).inc()


def llm_request_log_dropped(reason: str, n: int = 1) -> None:
    """``n`` request log entries dropped for ``reason`` (queue_full, write_failed, error)."""
    LLM_LOG_DROPPED.labels(reason).inc(n)
