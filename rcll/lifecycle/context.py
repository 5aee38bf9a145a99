"""What the lifecycle verbs need from the process, gathered once by
:class:`rcll.lifecycle.service.Lifecycle` from :class:`rcll.bootstrap.Services`."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from rcll.hierarchy.classifier import Classifier
from rcll.models.embedder import EmbedderHandle
from rcll.models.tokenizer import TokenCounter


@dataclass
class LifecycleContext:
    """``pool`` read-write, ``read_pool`` for ``read``; ``embedder``/``tokens``/
    ``classifier`` as retain uses them; ``max_tokens`` the longest unit text (the
    embedder's window: every token of a unit is embedded); ``hot`` tier 1 (invalidated after
    commits; ``None`` without a cascade); the configured ``purposes`` and
    ``default_purpose``; the link stage's ``semantic_link_top_k``/``min_cosine``;
    ``skip_stages`` as in ``RCLL_RETAIN_SKIP_STAGES`` (``entities``, ``link``)."""

    pool: ConnectionPool
    read_pool: ConnectionPool
    embedder: EmbedderHandle
    tokens: TokenCounter
    classifier: Classifier
    max_tokens: int
    hot: object | None
    purposes: tuple[str, ...]
    default_purpose: str
    semantic_link_top_k: int = 5
    semantic_link_min_cosine: float = 0.60
    skip_stages: frozenset[str] = frozenset()
