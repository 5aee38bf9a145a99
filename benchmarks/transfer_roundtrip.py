"""Export → import round trip of the LoCoMo banks from one RCLL stack to a second one.

Both stacks run (two dev stacks with their own state folders and ports); stack A holds the
LoCoMo banks (``rcll eval locomo`` ingested them). For every bank: export it from A
(``GET /banks/{id}/export``, vectors on, streamed to a file; the wall time and bytes of the
export are recorded), delete it on B, import the file into B (``POST /banks/{id}/import``,
``ids=keep``) and wait for the import job. Then ask every LoCoMo question of its bank on A
and on B (``tiers=["cold"]``: the full pipeline, ``limit=10``, the question's timestamp)
and compare the top-10 unit ids and texts. ``--no-vectors-bank`` also imports one bank
exported without vectors into B under ``<bank>-reembedded`` (ids derived anew, vectors
re-made by B's embedder) and compares its top-10 texts.

    python benchmarks/transfer_roundtrip.py --a http://127.0.0.1:56603 \\
        --b http://127.0.0.1:56613 --data ../shared/data/locomo \\
        --out benchmarks/results/transfer_roundtrip.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from rcll.client import RCLLClient, RCLLHTTPError
from rcll.eval.datasets import load_locomo


def _top(client: RCLLClient, bank: str, q) -> list[tuple[str, str]]:
    ans = client.recall(bank, q.query, limit=10, max_tokens=200_000, tiers=["cold"],
                        query_timestamp=q.query_timestamp)
    return [(r["id"], r["text"]) for r in ans["results"][:10]]


def _import(client: RCLLClient, bank: str, path: Path, ids: str) -> tuple[dict, float]:
    try:
        client.delete_bank(bank)
    except RCLLHTTPError as exc:
        if exc.status != 404:
            raise
    started = time.perf_counter()
    with open(path, "rb") as fh:
        answer = client.import_bank(bank, fh, ids=ids)
    [op] = client.wait(bank, [answer["operation_id"]], poll_s=0.5, timeout_s=3600)
    seconds = time.perf_counter() - started
    if op["state"] != "succeeded":
        raise RuntimeError(f"import of {bank} {op['state']}: {op.get('error')}")
    return op, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--a", required=True, help="base URL of the stack holding the banks")
    ap.add_argument("--b", required=True, help="base URL of the second stack")
    ap.add_argument("--data", required=True, help="folder of locomo10.json")
    ap.add_argument("--prefix", default="eval-locomo-")
    ap.add_argument("--out", default="benchmarks/results/transfer_roundtrip.json")
    ap.add_argument("--no-vectors-bank", default=None,
                    help="also round-trip this bank without vectors (re-embedded on B)")
    args = ap.parse_args()

    ds = load_locomo(args.data, bank_prefix=args.prefix)
    a = RCLLClient(args.a, timeout=600)
    b = RCLLClient(args.b, timeout=600)
    work = Path(tempfile.mkdtemp(prefix="rcll-transfer-"))
    banks: dict[str, dict] = {}
    for bank in ds.banks:
        path = work / f"{bank}.jsonl"
        started = time.perf_counter()
        with open(path, "wb") as fh:
            size = a.export_bank(bank, fh, vectors=True)
        export_s = time.perf_counter() - started
        gz = work / f"{bank}.jsonl.gz"
        started = time.perf_counter()
        with open(gz, "wb") as fh:
            gz_size = a.export_bank(bank, fh, vectors=True, gzip=True)
        export_gz_s = time.perf_counter() - started
        with open(path, "rb") as fh:
            head = json.loads(fh.readline())
            last = b""
            for last in fh:  # noqa: B007 (the last line: the end record)
                pass
        end = json.loads(last)
        op, import_s = _import(b, bank, path, "keep")
        banks[bank] = {"records": end["counts"], "export_bytes": size,
                       "export_seconds": round(export_s, 3),
                       "export_gzip_bytes": gz_size, "export_gzip_seconds": round(export_gz_s, 3),
                       "import_seconds": round(import_s, 3),
                       "import_counts": (op.get("counts") or {}).get("counts"),
                       "vectors_imported": (op.get("counts") or {}).get("vectors_imported"),
                       "embedding": head["embedding"]}
        print(f"{bank}: {end['counts'].get('unit', 0)} units, export {size:,} B in "
              f"{export_s:.2f} s (gzip {gz_size:,} B in {export_gz_s:.2f} s), "
              f"import {import_s:.2f} s", flush=True)

    same_ids = same_texts = 0
    differ: list[dict] = []
    per_bank: dict[str, dict] = {}
    for q in ds.questions:
        ta, tb = _top(a, q.bank_id, q), _top(b, q.bank_id, q)
        pb = per_bank.setdefault(q.bank_id, {"questions": 0, "same_top10": 0})
        pb["questions"] += 1
        if ta == tb:
            same_ids += 1
            pb["same_top10"] += 1
        if [t for _, t in ta] == [t for _, t in tb]:
            same_texts += 1
        elif len(differ) < 20:
            differ.append({"qid": q.qid, "bank": q.bank_id, "a": ta, "b": tb})
    for bank, pb in per_bank.items():
        banks[bank].update(pb)

    reembedded = None
    if args.no_vectors_bank:
        bank = args.no_vectors_bank
        path = work / f"{bank}.novec.jsonl"
        with open(path, "wb") as fh:
            a.export_bank(bank, fh, vectors=False)
        target = f"{bank}-reembedded"
        op, secs = _import(b, target, path, "new")
        qs = [q for q in ds.questions if q.bank_id == bank]
        same = sum(1 for q in qs if [t for _, t in _top(a, bank, q)]
                   == [t for _, t in _top(b, target, q)])
        reembedded = {"bank": bank, "target": target, "questions": len(qs),
                      "same_top10_texts": same, "import_seconds": round(secs, 3),
                      "units_embedded": (op.get("counts") or {}).get("units_embedded")}
        print(f"re-embedded {bank}: {same}/{len(qs)} same top-10 texts, import {secs:.1f} s")

    largest = max(banks, key=lambda k: banks[k]["records"].get("unit", 0))
    out = {
        "benchmark": "transfer_roundtrip",
        "what": "LoCoMo banks exported from stack A and imported into stack B (ids kept, "
                "vectors carried); every question's top-10 (tiers cold, limit 10) compared",
        "stack_a": args.a, "stack_b": args.b, "data": str(args.data),
        "questions": len(ds.questions),
        "same_top10_ids_and_order": same_ids,
        "same_top10_texts_and_order": same_texts,
        "differing_examples": differ,
        "largest_bank": {"bank": largest, **banks[largest]},
        "totals": {"units": sum(v["records"].get("unit", 0) for v in banks.values()),
                   "export_bytes": sum(v["export_bytes"] for v in banks.values()),
                   "export_seconds": round(sum(v["export_seconds"] for v in banks.values()), 3),
                   "import_seconds": round(sum(v["import_seconds"] for v in banks.values()), 3)},
        "banks": banks,
        "reembedded": reembedded,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "note": "2 cores shared with other work; times are wall times"},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"{same_ids}/{len(ds.questions)} questions: same top-10 ids in the same order; "
          f"largest bank {largest}: {banks[largest]['export_bytes']:,} B in "
          f"{banks[largest]['export_seconds']} s; written {args.out}")


if __name__ == "__main__":
    main()
