"""Dedup proposals: find near-duplicate units of a bank and propose them, never merge them.

Spec §4.7 and claim 6: pairs with cosine ≥ ``dedup_min_cosine`` (0.80, the spec's figure)
among the ``dedup_window`` (500) newest units a caller may see become ``open`` proposals —
a cluster of units at cosine ≥ ``dedup_cluster_min_cosine`` (0.98) one proposal for all of
them, markup-only units none (:func:`rcll.store.dedup.scan`);
only an explicit decision (``POST …/dedup-proposals/{id}``, :func:`rcll.store.dedup.decide`)
merges. No LLM: chunk mode has proposals too. On MiniLM and LoCoMo turns 0.80 is the p99.9
of all turn pairs (benchmarks/results/link_cosines.txt): about one pair in 700.

Run per bank by the Celery task ``consolidate.dedup_scan`` (queue ``consolidate``); the beat
task ``consolidate.dedup_sweep`` enqueues every bank with units newer than its last scan
(:func:`banks_due`), and ``POST …/dedup-proposals/scan`` runs a scan at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from rcll.store import dedup


@dataclass(frozen=True)
class DedupSettings:
    """``model``: the embedder whose vectors are compared; ``window``: newest units per scan;
    ``min_cosine``: the proposal floor; ``cluster_min_cosine``: the floor from which units
    are one cluster (one proposal for all of them)."""

    model: str
    window: int = 500
    min_cosine: float = 0.80
    cluster_min_cosine: float = 0.98

    @classmethod
    def from_settings(cls, settings) -> DedupSettings:
        """From :class:`rcll.config.Settings` (``embedder_stamp``, ``dedup_window``,
        ``dedup_min_cosine``, ``dedup_cluster_min_cosine``)."""
        return cls(model=settings.embedder_stamp, window=settings.dedup_window,
                   min_cosine=settings.dedup_min_cosine,
                   cluster_min_cosine=settings.dedup_cluster_min_cosine)


def scan_bank(pool: ConnectionPool, bank_id: str, cfg: DedupSettings) -> dict:
    """Scan ``bank_id`` once, in one transaction (:func:`rcll.store.dedup.scan`); returns
    ``{"bank_id", "units_compared", "proposals_added", "proposals_extended",
    "scanned_through"}``. Raises :class:`rcll.errors.BankNotFound`."""
    with pool.connection() as conn, conn.transaction():
        out = dedup.scan(conn, bank_id, model=cfg.model, window=cfg.window,
                         min_cosine=cfg.min_cosine, cluster_min_cosine=cfg.cluster_min_cosine)
    return {"bank_id": bank_id, **out}


def banks_due(pool: ConnectionPool, limit: int = 1000) -> list[str]:
    """Banks with units created after their last scan (:func:`rcll.store.dedup.banks_due`)."""
    with pool.connection() as conn:
        return dedup.banks_due(conn, limit)
