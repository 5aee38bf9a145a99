"""``rcll ingest``'s progress and summary in units, from the operations it polls.

Each operation reports ``progress`` (:func:`rcll.store.jobs.unit_progress`): its units
total once chunked, and units embedded. Operations not chunked yet have no total; their
share is estimated from the bytes they were sent with, at the units per byte of the
operations of the same kind (items or files) that have one, so the bar's total is known
early and grows to the exact figure as jobs are chunked.
"""

from __future__ import annotations

from dataclasses import dataclass

TERMINAL = ("succeeded", "failed", "partial", "cancelled")


@dataclass
class UnitsProgress:
    """``done``/``total`` units (``total`` estimated while some jobs are not chunked;
    ``None`` when nothing is known yet), ``exact``: no estimate in ``total``; jobs ended of
    all; ``units_per_s`` over ``elapsed_s`` (real seconds since the ingest began) and
    ``eta_s`` (``None`` when unknown)."""

    done: int
    total: int | None
    exact: bool
    jobs_done: int
    jobs: int
    elapsed_s: float
    units_per_s: float | None
    eta_s: float | None


def measure(ops: list[str], latest: dict[str, dict], sizes: dict[str, tuple[str, int]],
            elapsed_s: float) -> UnitsProgress:
    """Progress over operation ids ``ops`` from the ``latest`` operation dicts seen (an id
    not seen yet counts as not chunked); ``sizes``: ``{op id: (kind, bytes sent)}``, kind
    ``"items"`` or ``"files"``, for the estimate; ``elapsed_s``: seconds since the ingest
    began (the rate's denominator)."""
    done = known = jobs_done = 0
    per_kind: dict[str, list[int]] = {}  # kind -> [units, bytes] of chunked operations
    pending: list[str] = []
    for op_id in ops:
        op = latest.get(op_id) or {}
        prog = op.get("unit_progress") or {}
        if op.get("state") in TERMINAL:
            jobs_done += 1
        total = prog.get("units_total")
        if total is None:
            if op.get("state") not in TERMINAL:  # ended without units: nothing to expect
                pending.append(op_id)
            continue
        known += int(total)
        done += int(prog.get("units_done") or 0)
        kind, size = sizes.get(op_id, ("items", 0))
        acc = per_kind.setdefault(kind, [0, 0])
        acc[0] += int(total)
        acc[1] += size
    estimate, exact = 0.0, not pending
    for op_id in pending:
        kind, size = sizes.get(op_id, ("items", 0))
        units, nbytes = per_kind.get(kind) or [sum(v[0] for v in per_kind.values()),
                                              sum(v[1] for v in per_kind.values())]
        if not nbytes:
            estimate = None
            break
        estimate += size * units / nbytes
    total = None if estimate is None else known + round(estimate)
    if total is None and not pending:
        total = known
    rate = done / elapsed_s if done and elapsed_s > 0 else None
    eta = (max(total - done, 0) / rate if rate and total is not None else None)
    if jobs_done == len(ops):
        eta = 0.0
    return UnitsProgress(done, total, exact, jobs_done, len(ops), elapsed_s, rate, eta)


def summary(final: list[dict], n_item_ops: int, n_items: int, n_files: int,
            elapsed_s: float) -> str:
    """The closing line: items taken, units created, units already stored (chunks of a
    document version already live: a re-ingest of unchanged files), document files
    converted, and files/s and units/s over ``elapsed_s`` (the whole ingest, reading to the
    last job's end); then, on a line of its own, the items that made no units (the jobs'
    ``without_units``). ``final``: the operations, item operations first (``n_item_ops``)."""
    counts = [o.get("counts") or {} for o in final]
    created = sum(int(c.get("units_created") or 0) for c in counts)
    stored = sum(int(c.get("units_skipped") or 0) for c in counts)
    line = f"{n_items} items → {created} new units, {stored} already stored"
    if n_files:
        converted = sum(1 for o in final[n_item_ops:] if o.get("state") != "failed")
        line += f"; {n_files} document files, {converted} converted"
        if elapsed_s > 0:
            line += f", {n_files / elapsed_s:.2f} files/s"
    if elapsed_s > 0:
        line += f"; {created / elapsed_s:.1f} units/s over {elapsed_s:.1f} s"
    empty = [d for c in counts for d in c.get("without_units") or []]
    n_empty = sum(int(c.get("items_without_units") or 0) for c in counts)
    if n_empty:
        line += (f"\n{n_empty} item(s) made no units (only markup, navigation or boilerplate;"
                 f" an earlier version of the same document is no longer live): "
                 + ", ".join(empty[:10]) + (f" and {n_empty - 10} more" if n_empty > 10 else ""))
    return line
