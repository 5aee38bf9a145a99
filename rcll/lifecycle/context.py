"""What the lifecycle verbs need from the process, read from
:class:`rcll.bootstrap.Services` on first use — so a read-only deployment that only ever
calls ``read`` never opens the read-write pool, loads the embedder or reaches Redis."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from rcll.hierarchy.classifier import Classifier, default_classifier

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    from rcll.bootstrap import Services
    from rcll.models.embedder import EmbedderHandle
    from rcll.models.tokenizer import TokenCounter


class LifecycleContext:
    """``pool`` read-write, ``read_pool`` for ``read``; ``embedder``/``tokens``/
    ``classifier`` as retain uses them; ``max_tokens`` the longest unit text (the
    embedder's window: every token of a unit is embedded); ``hot`` tier 1 (invalidated after
    commits); the configured ``purposes`` and ``default_purpose``; the link stage's
    ``semantic_link_top_k``/``semantic_link_min_cosine``; ``skip_stages`` as in
    ``RCLL_RETAIN_SKIP_STAGES`` (``entities``, ``link``)."""

    def __init__(self, services: Services) -> None:
        s = services.settings
        self._services = services
        self.purposes: tuple[str, ...] = tuple(s.purposes)
        self.default_purpose: str = s.default_purpose
        self.semantic_link_top_k: int = s.semantic_link_top_k
        self.semantic_link_min_cosine: float = s.semantic_link_min_cosine
        from rcll.bootstrap import skip_stages

        self.skip_stages: frozenset[str] = skip_stages(s.retain_skip_stages)

    @property
    def pool(self) -> ConnectionPool:
        return self._services.pool

    @property
    def read_pool(self) -> ConnectionPool:
        return self._services.read_pool

    def recall_pool(self, bank_id: str) -> ConnectionPool:
        """The pool ``read`` of ``bank_id`` runs on: the read replica when it has replayed
        the bank's last write, else the read pool (:meth:`Services.recall_pool`)."""
        return self._services.recall_pool(bank_id)

    @property
    def embedder(self) -> EmbedderHandle:
        return self._services.embedder

    @property
    def tokens(self) -> TokenCounter:
        return self._services.tokens

    @property
    def max_tokens(self) -> int:
        return self._services.chunk_tokens

    @property
    def hot(self):
        """Tier 1 (:class:`rcll.cascade.hot.HotTier`)."""
        return self._services.hot_tier

    @cached_property
    def classifier(self) -> Classifier:
        return default_classifier()
