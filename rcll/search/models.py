"""Recall request and result shapes (spec §5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from pydantic import ConfigDict, Field, field_validator, model_validator

from rcll.hierarchy import Hall, Room
from rcll.search.recipes import RECIPES
from rcll.text import is_blank
from rcll.validation import TextModel, clean_text, utc_in_range

MAX_QUERY_CHARS = 2_000
MAX_TOKENS_CAP = 1_000_000
MAX_LIMIT = 500
# The recall cascade (spec §5), in the order it runs.
TIERS = ("hot", "warm", "cold")
# memory_units.kind (migration 0010's CHECK constraint)
KINDS = ("chunk", "fact", "note", "decision", "preference", "event", "summary")
# how a recall's ``tags`` match a unit's (Hindsight's names and meanings)
TAGS_MATCH = ("any", "all", "any_strict", "all_strict", "exact")


class RecallQuery(TextModel):
    """A recall request.

    ``max_tokens``: budget for the returned texts, counted with the embedder's tokenizer
    (1..1,000,000; default 4,096). ``limit``: most units returned (1..500, default 50).
    ``recipe``: the read path to run, a name in :data:`rcll.search.recipes.RECIPES`
    (default: the deployment's, ``RCLL_RECALL_RECIPE``); ``channels`` is its older name and
    may be given instead (both given and different → error).
    ``max_layer``: highest layer returned (default 2; L3 archive only when asked).
    ``query_timestamp``: the reference time for relative time expressions in the query
    ("last May", "two weeks ago"; ISO 8601, naive means UTC; default now).
    ``include_superseded``: also return superseded and invalidated units (default no).
    ``context_tokens_left``: the context the caller has left, in tokens (≥ 0); when given,
    the token-budget-adaptive policy of spec §5 picks the tiers, the result count and the
    rendering (:func:`rcll.cascade.policy.plan`). ``tiers``: the cascade tiers allowed, a
    non-empty subset of ``hot``, ``warm``, ``cold`` (default all; ``["cold"]`` is the full
    pipeline alone). ``purpose``: what the recall is for, one of the configured purposes
    (``RCLL_PURPOSES``); only units whose ``purposes`` hold it are candidates. Default: the
    deployment's ``RCLL_DEFAULT_PURPOSE`` for a member, no purpose filter for an internal or
    auth-off call (:func:`rcll.access.purposes.recall_purpose`).
    ``follow_tunnels``: after the bank's own ranking, bring in the units tunnels join its
    top results to, in banks the caller may read (default true; :mod:`rcll.search.tunnels`).
    ``kinds``: only units of these kinds (:data:`KINDS`; default all). ``tags`` with
    ``tags_match`` (:data:`TAGS_MATCH`, default ``any``): only units whose tags match —
    ``any`` (shares a tag, or untagged), ``all`` (holds every tag, or untagged),
    ``any_strict`` / ``all_strict`` (the same, untagged units excluded), ``exact`` (the same
    set). Both filter inside every candidate query (:class:`rcll.search.scope.CallerScope`).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    max_tokens: int = Field(4_096, ge=1, le=MAX_TOKENS_CAP)
    limit: int = Field(50, ge=1, le=MAX_LIMIT)
    recipe: str | None = Field(None, max_length=64)
    channels: str | None = Field(None, max_length=64)
    query_timestamp: datetime | None = Field(None, strict=False)
    include_superseded: bool = False
    room: Room | None = None
    hall: Hall | None = None
    max_layer: int | None = Field(None, ge=0, le=3)
    include_archive: bool = False
    trace: bool = False
    context_tokens_left: int | None = Field(None, ge=0, le=MAX_TOKENS_CAP * 100)
    tiers: list[str] | None = Field(None, min_length=1, max_length=3)
    purpose: str | None = Field(None, min_length=1, max_length=64)
    follow_tunnels: bool = True
    kinds: list[str] | None = Field(None, min_length=1, max_length=len(KINDS))
    tags: list[str] | None = Field(None, max_length=64)
    tags_match: str = "any"

    @field_validator("kinds")
    @classmethod
    def _known_kinds(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        unknown = [k for k in v if k not in KINDS]
        if unknown:
            shown = ", ".join(repr(k[:32]) for k in unknown[:3])
            raise ValueError(f"unknown kind(s) {shown}; known: {', '.join(KINDS)}")
        return sorted(set(v))

    @field_validator("tags")
    @classmethod
    def _tag_text(cls, v: list[str] | None) -> list[str] | None:
        for tag in v or []:
            if not 1 <= len(tag) <= 200:
                raise ValueError("each tag must be 1-200 characters")
        return v

    @field_validator("tags_match")
    @classmethod
    def _tags_match(cls, v: str) -> str:
        if v not in TAGS_MATCH:
            raise ValueError(f"tags_match must be one of {', '.join(TAGS_MATCH)}")
        return v

    @field_validator("tiers")
    @classmethod
    def _known_tiers(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        unknown = [t for t in v if t not in TIERS]
        if unknown:  # echo at most a short prefix of what was sent
            shown = ", ".join(repr(t[:32]) for t in unknown[:3])
            raise ValueError(f"unknown tier(s) {shown}; known: {', '.join(TIERS)}")
        if len(set(v)) != len(v):
            raise ValueError("tiers must not repeat")
        return [t for t in TIERS if t in v]  # cascade order whatever the request's order

    @field_validator("query")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if is_blank(v):
            raise ValueError("query must not be blank")
        return clean_text(v)

    @field_validator("query_timestamp", mode="before")
    @classmethod
    def _iso_only(cls, v):
        # numbers would be read as epoch seconds or, above 2e10, milliseconds: refuse them
        if v is not None and not isinstance(v, (str, datetime)):
            raise ValueError("query_timestamp must be an ISO 8601 string")
        if isinstance(v, str) and v.strip().lstrip("+-").replace(".", "", 1).isdigit():
            raise ValueError("query_timestamp must be an ISO 8601 string, not a number")
        return v

    @field_validator("query_timestamp")
    @classmethod
    def _utc(cls, v: datetime | None) -> datetime | None:
        return utc_in_range(v)

    @model_validator(mode="after")
    def _known_recipe(self) -> RecallQuery:
        if self.recipe and self.channels and self.recipe != self.channels:
            raise ValueError(f"recipe {self.recipe!r} and channels {self.channels!r} differ; "
                             "give one")
        name = self.recipe or self.channels
        if name is not None and name not in RECIPES:
            raise ValueError(f"unknown recipe {name!r}; known: {', '.join(sorted(RECIPES))}")
        return self

    @property
    def recipe_name(self) -> str | None:
        """The recipe asked for, or None for the deployment default."""
        return self.recipe or self.channels

    @property
    def layer_cap(self) -> int:
        if self.max_layer is not None:
            return self.max_layer
        return 3 if self.include_archive else 2


@dataclass
class Candidate:
    """A unit id with its rank (1-based) and raw score in one channel."""

    unit_id: str
    rank: int
    score: float


@dataclass
class RecallResult:
    """What recall returns: ranked units plus how they were found."""

    results: list[dict]
    mode: str
    channels: list[str]
    dense_available: bool
    reranked: bool
    tokens_used: int
    counts: dict
    degraded: list[str] = field(default_factory=list)
    timings_ms: dict | None = None
    recipe: str | None = None
    query: dict | None = None
    tiers: list[str] = field(default_factory=lambda: ["cold"])
    tier_reason: str | None = None
    # documents ranked as well as units (the ``documents`` step ran): ``[{"document_id",
    # "score", "units": [unit ids in result order]}]`` in rank order over the returned
    # results, and the aggregation that scored them (``maxp`` or ``sum_top<k>``)
    documents: list[dict] | None = None
    aggregation: str | None = None
    # how the recipe was chosen when the request named none: the bank's kind and the
    # sample that decided it (rcll.search.documents.bank_kind)
    bank_kind: dict | None = None

    def to_json(self) -> dict:
        out = {
            "results": self.results, "mode": self.mode, "channels": self.channels,
            "dense_available": self.dense_available, "reranked": self.reranked,
            "tiers": self.tiers, "tier_reason": self.tier_reason,
            "tokens_used": self.tokens_used, "counts": self.counts,
            "degraded": self.degraded, "recipe": self.recipe,
        }
        if self.documents is not None:
            out["documents"] = self.documents
            out["aggregation"] = self.aggregation
        if self.bank_kind is not None:
            out["bank_kind"] = self.bank_kind
        if self.query is not None:
            out["query"] = self.query
        if self.timings_ms is not None:
            out["timings_ms"] = self.timings_ms
        return out
