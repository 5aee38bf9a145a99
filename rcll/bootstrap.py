"""Composition root: the one place that decides which database, pools and models are wired in.

The API and the workers call :func:`bootstrap` once per process; tests call it with their
own :class:`~rcll.config.Settings`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from psycopg_pool import ConnectionPool

from rcll.config import Settings, get_settings
from rcll.db import make_pool
from rcll.files.convert import ConvertLimits
from rcll.hierarchy.classifier import default_classifier
from rcll.models.embedder import EmbedderHandle
from rcll.models.reranker import RerankerHandle
from rcll.models.tokenizer import TokenCounter
from rcll.retain.pipeline import RetainContext
from rcll.retain.service import RetainLimits, RetainService
from rcll.search.query_cache import QueryVectorCache
from rcll.search.recall import RecallContext

if TYPE_CHECKING:
    from rcll.cascade.cascade import Cascade

log = logging.getLogger(__name__)


@dataclass
class Services:
    """Process-wide resources, created lazily: pools open on first use, models load once.
    ``core_leases``: the worker's :class:`rcll.models.cores.CoreLeases` (its embedder borrows
    idle cores per pass), ``None`` elsewhere."""

    settings: Settings
    core_leases: object | None = None

    @cached_property
    def pool(self) -> ConnectionPool:
        """The read-write pool; in a read-only deployment (``RCLL_READ_ONLY``) the SELECT-only
        role's, so nothing in the process can write."""
        url = self.settings.db_url_readonly if self.settings.read_only else self.settings.db_url
        pool = make_pool(url, max_size=8, name="rcll-rw",
                         timeout=self.settings.db_pool_timeout_s)
        pool.open(wait=False)
        return pool

    @cached_property
    def read_pool(self) -> ConnectionPool:
        if self.settings.read_only or self.settings.db_url_readonly == self.settings.db_url:
            return self.pool
        pool = make_pool(self.settings.db_url_readonly, max_size=8, name="rcll-ro",
                         timeout=self.settings.db_pool_timeout_s)
        pool.open(wait=False)
        return pool

    @cached_property
    def replica_pool(self) -> ConnectionPool | None:
        """The pool on the streaming replica (``RCLL_REPLICA_DATABASE_URL``), or None."""
        if not self.settings.replica_database_url:
            return None
        pool = make_pool(self.settings.replica_database_url, max_size=8, name="rcll-replica",
                         timeout=self.settings.db_pool_timeout_s)
        pool.open(wait=False)
        return pool

    @cached_property
    def replica(self):
        """The :class:`rcll.replica.ReplicaRouter` (None without a replica): which pool a
        recall, read or session context of a bank runs on, and the write fence."""
        if self.replica_pool is None:
            return None
        from rcll.replica import ReplicaRouter

        return ReplicaRouter(self.read_pool, self.pool, self.replica_pool, self.redis,
                             wait_s=self.settings.replica_fence_wait_s)

    def recall_pool(self, bank_id: str) -> ConnectionPool:
        """The pool a recall, ``read`` or session context of ``bank_id`` runs on: the
        replica when it is fresh enough for the bank (:meth:`ReplicaRouter.pool_for`),
        else the read pool."""
        router = self.replica
        return router.pool_for(bank_id) if router is not None else self.read_pool

    @cached_property
    def access(self):
        """Members, keys, grants and authentication (:class:`rcll.access.service.AccessService`)."""
        from rcll.access.service import AccessService

        return AccessService(self.pool, self.read_pool, self.settings)

    @cached_property
    def web_sessions(self):
        """Sign-ins of the web screens (:class:`rcll.access.web_sessions.WebSessions`), in
        Redis, ``web_session_ttl_s`` without use."""
        from rcll.access.web_sessions import WebSessions

        return WebSessions(self.redis, self.access, self.settings.web_session_ttl_s)

    @cached_property
    def operations(self):
        """Jobs as callers see them (:class:`rcll.operations.service.OperationService`)."""
        from rcll.operations.service import OperationService

        return OperationService(self)

    @cached_property
    def documents(self):
        """Documents and bank contents (:class:`rcll.documents.service.DocumentService`)."""
        from rcll.documents.service import DocumentService

        return DocumentService(self)

    @cached_property
    def embedder(self) -> EmbedderHandle:
        s = self.settings
        return EmbedderHandle(s.embedder_model, s.embed_batch_size, s.embedder_enabled,
                              expected_dim=s.embedding_dim, torch_threads=s.torch_threads,
                              query_batch_wait_s=s.query_batch_wait_ms / 1000,
                              batch_tokens=s.embed_batch_tokens, runtime=s.embed_runtime,
                              precision=s.embed_precision, onnx_threads=s.onnx_threads,
                              state_dir=s.state_dir, cores=self.core_leases)

    @cached_property
    def reranker(self) -> RerankerHandle:
        """The cross-encoder handle (``RCLL_RERANKER_MODEL``; off when unset), loaded and
        checked on first use (the API warms it up at start-up)."""
        s = self.settings
        from rcll.models import threads

        threads.configure(s.torch_threads)
        return RerankerHandle(s.reranker_model, allow_untrained=s.reranker_allow_untrained,
                              runtime=s.reranker_runtime, precision=s.reranker_precision,
                              onnx_threads=s.onnx_threads, state_dir=s.state_dir)

    @cached_property
    def redis(self):
        """The cascade's Redis client (:func:`rcll.cascade.redis_client.make_redis` on
        ``redis_url``); connects lazily."""
        from rcll.cascade.redis_client import make_redis

        return make_redis(self.settings.redis_url)

    @cached_property
    def hot_tier(self):
        """Tier 1 (:class:`rcll.cascade.hot.HotTier`), ``hot_capacity`` units per bank. Its
        keys are under ``rcll:hot:<input stamp of the embedder's stamp>``: vectors of another
        model, precision (``Settings.embedder_stamp``) or embed-input version are never
        compared with this one's queries."""
        from rcll.cascade.hot import HotTier
        from rcll.models.embedder import input_stamp

        hot = HotTier(self.redis, capacity=self.settings.hot_capacity,
                      prefix=f"rcll:hot:{input_stamp(self.settings.embedder_stamp)}")
        hot.replica = self.replica  # the invalidation points fence the replica too
        return hot

    @cached_property
    def after_recall(self):
        """The after-response worker (:class:`rcll.cascade.after.AfterRecall`) over the read
        pool; a no-op when ``activation`` is off."""
        from rcll.cascade.after import AfterRecall

        return AfterRecall(self.hot_tier, self.read_pool, self.settings.embedder_stamp,
                           enabled=self.settings.activation)

    @cached_property
    def tokens(self) -> TokenCounter:
        return TokenCounter(self.settings.embedder_model)

    @property
    def chunk_tokens(self) -> int:
        """The effective chunk size: ``chunk_max_tokens``, cut to what the embedder reads
        (its window minus special tokens, read from the model's files), so no part of a
        chunk is invisible to the dense channel."""
        window = self.tokens.max_input_tokens
        limit = self.settings.chunk_max_tokens
        return min(limit, window) if window else limit

    @cached_property
    def llm(self):
        """The LLM client (:class:`rcll.llm.client.LLMClient`), ``None`` in chunk mode."""
        if self.settings.llm_provider == "none":
            return None
        from rcll.llm.client import LLMClient, LLMConfig

        return LLMClient(LLMConfig.from_settings(self.settings),
                         request_log=self.llm_request_log)

    @cached_property
    def llm_request_log(self):
        """The LLM request log's writer (:class:`rcll.llm.request_log.RequestLog`) over the
        read-write pool; ``None`` when ``llm_request_log`` is off or the deployment is
        read-only."""
        if not self.settings.llm_request_log or self.settings.read_only:
            return None
        from rcll.llm.request_log import RequestLog

        return RequestLog(lambda: self.pool)

    @cached_property
    def llm_requests(self):
        """The LLM request log as admins read it
        (:class:`rcll.llm.requests.LLMRequestService`)."""
        from rcll.llm.requests import LLMRequestService

        return LLMRequestService(self)

    def llm_health(self) -> dict:
        """``checks.llm`` of ``/readyz``: ``{provider, model, ok, error?}``; chunk mode
        ``{"provider": "none", "ok": true}``. Never raises."""
        if self.settings.llm_provider == "none":
            return {"provider": "none", "ok": True}
        try:
            return self.llm.health()
        except Exception as exc:
            return {"provider": self.settings.llm_provider, "model": self.settings.llm_model,
                    "ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def retain_context(self) -> RetainContext:
        """The write path's context; ``skip_stages`` from ``retain_skip_stages``, plus
        ``extract`` in chunk mode (no LLM: the stage has nothing to do, and a job skips its
        task, lease and stage transition)."""
        s = self.settings
        skip = skip_stages(s.retain_skip_stages)
        if s.llm_provider == "none":
            skip |= {"extract"}
        return RetainContext(pool=self.pool, classifier=default_classifier(), tokens=self.tokens,
                             embedder=self.embedder, chunk_max_tokens=self.chunk_tokens,
                             skip_stages=skip,
                             semantic_link_top_k=self.settings.semantic_link_top_k,
                             semantic_link_min_cosine=self.settings.semantic_link_min_cosine,
                             llm=self.llm,
                             extract_recent_facts=self.settings.extract_recent_facts,
                             hot=self.hot_tier,
                             convert_limits=ConvertLimits.from_settings(s))

    def retain_service(self, enqueue: Callable[[str, str], None]) -> RetainService:
        """The retain service over this process's pool, sending stages with ``enqueue``."""
        return RetainService(self.pool, self.retain_context, enqueue,
                             RetainLimits.from_settings(self.settings),
                             purposes=tuple(self.settings.purposes))

    @cached_property
    def query_cache(self) -> QueryVectorCache:
        return QueryVectorCache(self.settings.query_cache_size)

    @cached_property
    def cascade(self) -> Cascade:
        """The recall cascade (tiers 1–3) over this process's read pool and Redis."""
        from rcll.cascade.wiring import build_cascade
        return build_cascade(self)

    @cached_property
    def recall_gate(self):
        """Backpressure of this process's recalls (:class:`rcll.admission.Gate`:
        ``recall_max_in_flight`` at once, ``recall_queue_wait_ms`` of wait), or None when
        unlimited."""
        s = self.settings
        if s.recall_max_in_flight <= 0:
            return None
        from rcll.admission import Gate

        return Gate(s.recall_max_in_flight, s.recall_queue_wait_ms / 1000)

    @cached_property
    def tunnels(self):
        """Tunnels between banks (:class:`rcll.hierarchy.tunnels.TunnelService`); the bridge
        searches through the cascade with the deployment's recipe."""
        from rcll.hierarchy.tunnels import TunnelService

        return TunnelService(self.pool, self.read_pool, recall=self.cascade.recall,
                             recipe=self.settings.recall_recipe)

    @cached_property
    def lifecycle(self):
        """The lifecycle verbs (:class:`rcll.lifecycle.service.Lifecycle`: read, remember,
        derive, correct, supersede, forget) over this process's pools."""
        from rcll.lifecycle.service import Lifecycle

        return Lifecycle(self)

    @cached_property
    def banks(self):
        """Banks (:class:`rcll.banks.service.BankService`: list, create, profile, config,
        stats, delete) over this process's pool."""
        from rcll.banks.service import BankService

        return BankService(self)

    @cached_property
    def bank_aliases(self):
        """Bank aliases and the resolution of every route's bank id
        (:class:`rcll.banks.aliases.BankAliasService`, cached ``bank_alias_cache_s``)."""
        from rcll.banks.aliases import BankAliasService

        return BankAliasService(self, self.settings.bank_alias_cache_s)

    @cached_property
    def mental_models(self):
        """Mental models: stored reflect answers
        (:class:`rcll.mental_models.service.MentalModelService`)."""
        from rcll.mental_models.service import MentalModelService

        return MentalModelService(self)

    @cached_property
    def webhooks(self):
        """A bank's webhooks and their delivery log
        (:class:`rcll.webhooks.service.WebhookService`)."""
        from rcll.webhooks.service import WebhookService

        return WebhookService(self)

    @cached_property
    def entities(self):
        """Entities (:class:`rcll.entities.service.EntityService`: list, detail, proposals,
        merge, split) over this process's pool."""
        from rcll.entities.service import EntityService

        return EntityService(self)

    @cached_property
    def directives(self):
        """A bank's rules for reflect (:class:`rcll.directives.service.DirectiveService`)."""
        from rcll.directives.service import DirectiveService

        return DirectiveService(self)

    @cached_property
    def feedback(self):
        """Memory Worth feedback (:class:`rcll.feedback.service.FeedbackService`) over this
        process's pool."""
        from rcll.feedback.service import FeedbackService

        return FeedbackService(self)

    def consolidate_service(self, enqueue: Callable[[str, str], None]):
        """Closets and dedup proposals (:class:`rcll.consolidate.service.ConsolidateService`)
        over this process's pool, sending closets jobs with ``enqueue``."""
        from rcll.consolidate.service import ConsolidateService

        return ConsolidateService(self, enqueue)

    def transfer_service(self, enqueue: Callable[[str, str], None]):
        """Bank export, import and clone (:class:`rcll.transfer.service.TransferService`)
        over this process's pools, sending an import's embed step with ``enqueue``."""
        from rcll.transfer.service import TransferService

        return TransferService(self, enqueue)

    def recall_context(self) -> RecallContext:
        s = self.settings
        return RecallContext(pool=self.read_pool, embedder=self.embedder, tokens=self.tokens,
                             candidates_per_channel=s.candidates_per_channel,
                             dense_floor=s.dense_floor, rrf_k=s.rrf_k,
                             lexical_df_cutoff=s.lexical_df_cutoff,
                             default_recipe=s.recall_recipe, rerank_top_n=s.rerank_top_n,
                             rerank_batch_size=s.rerank_batch_size, reranker=self.reranker,
                             query_cache=self.query_cache,
                             purposes=tuple(s.purposes), default_purpose=s.default_purpose)

    def close(self) -> None:
        """Write what the LLM request log still holds (at most 2 s), then close the pools."""
        request_log = self.__dict__.get("llm_request_log")
        if request_log is not None:
            request_log.flush(2.0)
        for name in ("pool", "read_pool", "replica_pool"):
            pool = self.__dict__.get(name)
            if pool is not None and not pool.closed:
                pool.close()


def skip_stages(value: str) -> frozenset[str]:
    """Parse ``RCLL_RETAIN_SKIP_STAGES`` (comma-separated stage names). Raises
    ``ValueError`` naming an unknown stage or one that always runs (chunk, embed)."""
    from rcll.retain import stages

    names = frozenset(n.strip() for n in value.split(",") if n.strip())
    known = {st.name for st in stages.STAGES} - stages.ALWAYS_RUN
    bad = sorted(names - known)
    if bad:
        raise ValueError(f"RCLL_RETAIN_SKIP_STAGES: cannot skip {', '.join(bad)}; "
                         f"skippable stages: {', '.join(sorted(known))}")
    return names


def bootstrap(settings: Settings | None = None, *, worker: bool = False) -> Services:
    """Build the services for this process from ``settings`` (default: the environment);
    ``worker``: a worker pool process, whose embedder borrows the cores no other pool process
    of the worker holds (``RCLL_WORKER_SPARE_CORES``, :func:`worker_core_leases`)."""
    s = settings or get_settings()
    return Services(s, core_leases=worker_core_leases(s) if worker else None)


def worker_core_leases(settings: Settings):
    """The :class:`rcll.models.cores.CoreLeases` of this host's worker (one token per core,
    under ``<run_dir>/cores-<hostname>``: workers of other hosts sharing a state volume keep
    their own), or ``None`` when ``worker_spare_cores`` is off, the embedder is not on
    onnxruntime, or the folder cannot be made."""
    import socket

    from rcll.models.cores import CoreLeases

    if not settings.worker_spare_cores or settings.embed_runtime != "onnx":
        return None
    try:
        return CoreLeases(settings.run_dir / f"cores-{socket.gethostname()}",
                          os.cpu_count() or 1)
    except OSError as exc:
        log.warning("no core leases: %s", exc)
        return None
