"""Export → import round trip of the LoCoMo banks from one RCLL stack into a second one.

Stack A and stack B each run their own embedded PostgreSQL (own state folder, own port,
own database) with their own API app (``api.app.create_app``, called in-process through
its WSGI test client: the HTTP routes, not the service, are measured). A gets the ten LoCoMo
conversations (one bank each, one unit per turn, through the retain service as
``benchmarks/locomo_inprocess.py`` does); then for every bank: ``GET /banks/{id}/export``
on A (vectors on, streamed to a file; the wall time and bytes recorded; the gzip stream
too), ``POST /banks/{id}/import`` of that file on B (ids auto: kept, since B does not hold
the bank), and every question of the bank is asked of both stacks through the cold
pipeline (``rcll.search.recall.recall``, limit 10, the default recipe), comparing the
top-10 unit ids and texts. The largest bank is also exported without vectors and imported
into B as ``<bank>-reembedded`` (new ids, vectors made by B's embedder), and its top-10
texts compared.

    cd <checkout> && PYTHONPATH=$PWD HF_HUB_OFFLINE=1 .venv/bin/python \\
        benchmarks/transfer_roundtrip.py [--data ../shared/data/locomo] [--reuse]

Prints the figures and writes them to ``benchmarks/results/transfer_roundtrip.txt`` (the
printed lines) and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.retain.models import RetainItem  # noqa: E402
from rcll.search.models import RecallQuery  # noqa: E402
from rcll.search.recall import recall  # noqa: E402

LINES: list[str] = []


def say(text: str) -> None:
    print(text, flush=True)
    LINES.append(text)


def stack(state: Path, port: int, name: str, reuse: bool, models=None):
    """Services and an API app on a PostgreSQL of its own (``state``, ``port``)."""
    from api.app import create_app
    from rcll.bootstrap import bootstrap
    from rcll.config import Settings
    from rcll.dev import postgres
    from rcll.dev.scratch import scratch_database
    from rcll.store import migrate

    if reuse:
        s = Settings(state_dir=state, pg_port=port,
                     database_url=f"postgresql://rcll@127.0.0.1:{port}/{name}")
        postgres.start(s, log=lambda *_: None)
        migrate.upgrade(s)
    else:
        s = scratch_database(state, port, name)
    # no Redis: tier 1 is not asked (the cold pipeline is); its invalidation is best effort
    s = s.model_copy(update={"redis_url": "redis://127.0.0.1:1/0", "metrics_port": 0,
                             "auth": False})
    svc = bootstrap(s)
    if models is not None:  # the same model files: one copy in memory
        for attr in ("embedder", "tokens", "reranker"):
            svc.__dict__[attr] = getattr(models, attr)
    app = create_app(services=svc, enqueue=lambda *_: None)
    return svc, app.test_client()


def ingest(svc, ds) -> None:
    retain = svc.retain_service(lambda *_: None)
    for bank, items in ds.banks.items():
        for a in range(0, len(items), 100):
            job, _ = retain.retain(bank, [RetainItem(**i) for i in items[a:a + 100]],
                                   async_=False)
            assert job["state"] == "succeeded", job
        print(f"  ingested {bank}: {len(items)} turns", file=sys.stderr, flush=True)
    with svc.pool.connection() as conn:
        conn.execute("ANALYZE")


def top10(ctx, bank: str, q) -> list[tuple[str, str]]:
    res = recall(ctx, bank, RecallQuery(query=q.query, limit=10, max_tokens=200_000,
                                        query_timestamp=q.query_timestamp))
    return [(str(r["id"]), r["text"]) for r in res.results[:10]]


def export_to(client, bank: str, path: Path, **query) -> tuple[int, float]:
    started = time.perf_counter()
    r = client.get(f"/banks/{bank}/export", query_string=query, buffered=False)
    assert r.status_code == 200, r.get_data()[:300]
    size = 0
    with open(path, "wb") as fh:
        for piece in r.iter_encoded():
            fh.write(piece)
            size += len(piece)
    r.close()
    return size, time.perf_counter() - started


def import_from(client, bank: str, path: Path, **query) -> tuple[dict, float]:
    client.delete(f"/v1/default/banks/{bank}")
    started = time.perf_counter()
    with open(path, "rb") as fh:
        r = client.post(f"/banks/{bank}/import", query_string=query, input_stream=fh,
                        content_type="application/x-ndjson",
                        content_length=path.stat().st_size)
    seconds = time.perf_counter() - started
    assert r.status_code in (201, 202), r.get_json()
    return r.get_json(), seconds


def vector_drift(svc_a, svc_b, bank: str, target: str) -> dict:
    """How far B's re-made vectors of ``target`` are from A's of ``bank`` (ids mapped as the
    import mapped them): units compared, bit-identical, the largest absolute difference."""
    import numpy as np

    from rcll.transfer.importer import id_mapper

    m = id_mapper(target, "new", bank)
    sql = ("SELECT e.unit_id, e.embedding FROM memory_embeddings e WHERE e.bank_id = %s")
    with svc_a.pool.connection() as conn:
        va = {m(r["unit_id"]): r["embedding"].to_numpy() for r in conn.execute(sql, (bank,))}
    with svc_b.pool.connection() as conn:
        vb = {r["unit_id"]: r["embedding"].to_numpy() for r in conn.execute(sql, (target,))}
    d = [float(np.abs(va[k] - vb[k]).max()) for k in va if k in vb]
    return {"units": len(d), "identical": sum(1 for x in d if x == 0.0),
            "max_abs": max(d) if d else 0.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "transfer"))
    ap.add_argument("--port-a", type=int, default=56731)
    ap.add_argument("--port-b", type=int, default=56732)
    ap.add_argument("--reuse", action="store_true", help="stack A holds the banks already")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" /
                                         "transfer_roundtrip.txt"))
    args = ap.parse_args()
    logging.getLogger("rcll.cascade.invalidation").setLevel(logging.ERROR)
    ds = load_locomo(args.data)
    state = Path(args.state_dir)
    svc_a, api_a = stack(state / "a", args.port_a, "transfer_a", args.reuse)
    svc_b, api_b = stack(state / "b", args.port_b, "transfer_b", False, models=svc_a)
    say(f"stack A: PostgreSQL on port {args.port_a}; stack B: PostgreSQL on port "
        f"{args.port_b} (separate servers and databases); {len(ds.banks)} LoCoMo banks, "
        f"{len(ds.questions)} questions")
    if not args.reuse:
        started = time.perf_counter()
        ingest(svc_a, ds)
        say(f"ingest into A: {time.perf_counter() - started:.1f} s")
    work = Path(tempfile.mkdtemp(prefix="rcll-transfer-"))
    banks: dict[str, dict] = {}
    for bank in ds.banks:
        path = work / f"{bank}.jsonl"
        size, export_s = export_to(api_a, bank, path)
        gz = work / f"{bank}.jsonl.gz"
        gz_size, gz_s = export_to(api_a, bank, gz, gzip="true")
        with open(path, "rb") as fh:
            *_, last = fh
        answer, import_s = import_from(api_b, bank, path)
        banks[bank] = {"records": json.loads(last)["counts"], "export_bytes": size,
                       "export_seconds": round(export_s, 3), "export_gzip_bytes": gz_size,
                       "export_gzip_seconds": round(gz_s, 3), "import_seconds": round(import_s, 3),
                       "ids": answer["ids"], "vectors_reused": answer["vectors_reused"],
                       "units_to_embed": answer["units_to_embed"], "state": answer["state"]}
        b = banks[bank]
        say(f"{bank}: {b['records'].get('unit', 0)} units, {sum(b['records'].values())} "
            f"records; export {size:,} B in {export_s:.2f} s (gzip {gz_size:,} B in "
            f"{gz_s:.2f} s); import {import_s:.2f} s, ids {answer['ids']}, "
            f"{answer['vectors_reused']} vectors reused, {answer['units_to_embed']} to embed")

    ctx_a, ctx_b = svc_a.recall_context(), svc_b.recall_context()
    same_ids = same_texts = 0
    differ: list[dict] = []
    for i, q in enumerate(ds.questions):
        ta, tb = top10(ctx_a, q.bank_id, q), top10(ctx_b, q.bank_id, q)
        pb = banks[q.bank_id]
        pb["questions"] = pb.get("questions", 0) + 1
        if ta == tb:
            same_ids += 1
            pb["same_top10"] = pb.get("same_top10", 0) + 1
        if [t for _, t in ta] == [t for _, t in tb]:
            same_texts += 1
        elif len(differ) < 20:
            differ.append({"qid": q.qid, "bank": q.bank_id, "query": q.query, "a": ta, "b": tb})
        if i % 300 == 0:
            print(f"  asked {i}/{len(ds.questions)}", file=sys.stderr, flush=True)
    say(f"questions with the same top-10 unit ids in the same order on A and B: "
        f"{same_ids}/{len(ds.questions)}; the same top-10 texts: {same_texts}/"
        f"{len(ds.questions)}")
    for d in differ:
        say(f"  differs: {d['bank']} q{d['qid']} {d['query']!r}")

    largest = max(banks, key=lambda k: banks[k]["records"].get("unit", 0))
    lb = banks[largest]
    say(f"largest bank {largest}: {lb['records'].get('unit', 0)} units, export "
        f"{lb['export_bytes']:,} B ({lb['export_bytes'] / 1e6:.1f} MB) in "
        f"{lb['export_seconds']:.2f} s, gzip {lb['export_gzip_bytes']:,} B in "
        f"{lb['export_gzip_seconds']:.2f} s; import {lb['import_seconds']:.2f} s")

    # the largest bank again without vectors: B re-embeds it (new ids: the bank is there)
    from rcll.transfer.embed import run_import_embed

    novec = work / f"{largest}.novec.jsonl"
    nsize, nsecs = export_to(api_a, largest, novec, vectors="false")
    target = f"{largest}-reembedded"
    answer, isecs = import_from(api_b, target, novec)
    started = time.perf_counter()
    run_import_embed(svc_b.retain_context(), answer["operation_id"])
    esecs = time.perf_counter() - started
    qs = [q for q in ds.questions if q.bank_id == largest]
    same, moved = 0, []
    for q in qs:
        ta = [t for _, t in top10(ctx_a, largest, q)]
        tb = [t for _, t in top10(ctx_b, target, q)]
        if ta == tb:
            same += 1
        else:
            ranks = [i + 1 for i, (x, y) in enumerate(zip(ta, tb, strict=False)) if x != y]
            moved.append({"qid": q.qid, "query": q.query, "ranks_differ": ranks,
                          "same_set": sorted(ta) == sorted(tb)})
    say(f"{largest} without vectors: export {nsize:,} B in {nsecs:.2f} s; import into B as "
        f"{target} (ids {answer['ids']}) {isecs:.2f} s, re-embedding "
        f"{answer['units_to_embed']} units {esecs:.1f} s; the same top-10 texts for "
        f"{same}/{len(qs)} questions")
    for m in moved:
        say(f"  differs: q{m['qid']} {m['query']!r}: ranks {m['ranks_differ']}, the same ten "
            f"units: {m['same_set']}")
    diff = vector_drift(svc_a, svc_b, largest, target)
    say(f"  re-made vectors against the exported ones: {diff['identical']}/{diff['units']} "
        f"bit-identical, largest difference of a component {diff['max_abs']:.1e} (float32 "
        "rounding of the embedder's other batches)")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    LINES.append(f"machine: {platform.platform()}, {os.cpu_count()} cores shared with other "
                 "work; wall times")
    out.write_text("\n".join(LINES) + "\n")
    out.with_suffix(".json").write_text(json.dumps({
        "benchmark": "transfer_roundtrip", "questions": len(ds.questions),
        "same_top10_ids_and_order": same_ids, "same_top10_texts_and_order": same_texts,
        "differing": differ, "largest_bank": {"bank": largest, **lb},
        "reembedded": {"bank": target, "export_bytes": nsize, "import_seconds": round(isecs, 3),
                       "embed_seconds": round(esecs, 1), "questions": len(qs),
                       "same_top10_texts": same, "differing": moved, "vectors": diff},
        "banks": banks}, indent=1) + "\n")
    for p in (work.glob("*")):
        p.unlink()
    work.rmdir()
    svc_a.close()
    svc_b.close()


if __name__ == "__main__":
    main()
