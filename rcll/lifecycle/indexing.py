"""Make one unit searchable inside the transaction that writes it, exactly as the retain
pipeline does for a job's units (the same functions, not copies): its vector (same model
and input stamp as the ``embed`` stage, :func:`rcll.models.embedder.input_stamp`), its
entities and ``entity``/``temporal`` links (:func:`rcll.retain.entity_stage.write_batch`),
and its ``semantic`` links (:func:`rcll.store.links.write_semantic`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from psycopg import Connection

from rcll.errors import Rejected
from rcll.lifecycle.context import LifecycleContext
from rcll.models.embedder import input_stamp
from rcll.retain.entity_stage import unit_mentions, write_batch
from rcll.store import embeddings, links


@dataclass(frozen=True)
class Prepared:
    """A text ready to store: its token count and vector (``None`` when the embedder is
    unavailable: the unit is stored, searchable lexically, and ``rcll embeddings rebuild``
    adds the vector later)."""

    tokens: int
    vector: np.ndarray | None
    model: str | None
    stamp: str | None


def prepare(ctx: LifecycleContext, text: str) -> Prepared:
    """Count and embed ``text`` (outside any transaction: the model is the slow part).
    Raises 413 ``unit_too_long`` (details ``{tokens, max}``) over ``ctx.max_tokens``: a unit
    is at most what the embedder reads; longer text goes through retain, which chunks."""
    n = ctx.tokens.count(text)
    if n > ctx.max_tokens:
        raise Rejected(413, "unit_too_long",
                       f"a unit holds at most {ctx.max_tokens} tokens (this text has {n}); "
                       "retain longer text as a document", {"tokens": n, "max": ctx.max_tokens})
    emb = ctx.embedder.get()
    if emb is None:
        return Prepared(n, None, None, None)
    return Prepared(n, emb.embed([text])[0], emb.stamp, input_stamp(emb.stamp))


def index(conn: Connection, ctx: LifecycleContext, bank_id: str, unit_id: str, text: str,
          metadata: dict | None, prepared: Prepared) -> dict:
    """Write the unit's vector, entities, entity/temporal links and semantic links (the
    stages ``RCLL_RETAIN_SKIP_STAGES`` skips are skipped here too). Run in the unit's
    transaction, last (the semantic kNN sets transaction-local planner settings). Returns
    ``{"embedded": bool, "entity_mentions", "semantic_links", …}``."""
    out: dict = {"embedded": False}
    if prepared.vector is not None:
        embeddings.write(conn, [{"id": unit_id}], prepared.vector[None, :],
                         model=prepared.model, stamp=prepared.stamp)
        out["embedded"] = True
    if "entities" not in ctx.skip_stages:
        unit = {"text": text, "metadata": metadata or {}, "entity_names": []}
        out.update(write_batch(conn, bank_id, [(unit_id, unit_mentions(unit))]))
    if out["embedded"] and "link" not in ctx.skip_stages:
        out["semantic_links"] = links.write_semantic(
            conn, bank_id=bank_id, unit_ids=[unit_id], model=prepared.model,
            top_k=ctx.semantic_link_top_k, min_cosine=ctx.semantic_link_min_cosine)
    return out
