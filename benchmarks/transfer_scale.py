"""Import and export memory and time by bank size: the streaming claim, measured.

For each size N (default 10,000 and 100,000 units): a synthetic ``rcll-bank`` export of N
units (LoCoMo-like turns, each with its own 384-dim unit vector, a temporal link to the
previous unit and a mention of one of 50 entities) is written to a file, imported through
``POST /banks/{id}/import`` (the API app in-process, its WSGI test client streaming the
file), then exported back through ``GET /banks/{id}/export`` to a file. The process's peak
resident memory (``VmHWM``, reset before each phase through ``/proc/self/clear_refs``) is
read after each phase: if the import or the export held the bank, it would grow with N.

    cd <checkout> && PYTHONPATH=$PWD HF_HUB_OFFLINE=1 .venv/bin/python \\
        benchmarks/transfer_scale.py [--sizes 10000,100000]

Writes ``benchmarks/results/transfer_scale.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.transfer_roundtrip import export_to, import_from, stack  # noqa: E402

LINES: list[str] = []
NAMES = ["Caroline", "Melanie", "Dana", "Priya", "Okafor", "Lisbon", "Portland", "Tahoe",
         "Envoy", "Pixel"] * 5


def say(text: str) -> None:
    print(text, flush=True)
    LINES.append(text)


def peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def synthetic(path: Path, n: int, model: str, stamp: str, seed: int = 25) -> None:
    """An export of ``n`` units with vectors, links and mentions, written line by line."""
    rnd = random.Random(seed)
    start = datetime(2023, 5, 1, tzinfo=UTC)
    entities = [uuid.uuid4() for _ in NAMES]
    with open(path, "w") as f:
        def w(obj):
            f.write(json.dumps(obj, default=str, separators=(",", ":")) + "\n")

        w({"type": "header", "format": "rcll-bank", "version": 1,
           "bank": {"id": f"scale-src-{n}", "name": "scale", "config": {}},
           "embedding": {"model": model, "dim": 384, "input_stamp": stamp}, "vectors": True})
        for e, name in zip(entities, NAMES, strict=True):
            w({"type": "entity", "id": e, "name": name, "normalized": name.lower(),
               "created_at": start, "updated_at": start})
        ids = []
        for i in range(n):
            uid = uuid.UUID(int=(i + 1) << 64 | rnd.getrandbits(62) | 1 << 63)
            ids.append(uid)
            vec = [rnd.gauss(0, 1) for _ in range(384)]
            norm = sum(x * x for x in vec) ** 0.5
            at = start + timedelta(minutes=i)
            w({"type": "unit", "id": uid, "kind": "chunk", "purposes": ["assist"],
               "text": f"{NAMES[i % 50]}: turn {i} about {rnd.choice(NAMES)} and the "
                       f"{rnd.choice(['race', 'group', 'trip', 'gateway', 'shelter'])}.",
               "created_at": at, "mentioned_at": at,
               "vector": [round(x / norm, 7) for x in vec]})
        for i in range(1, n):
            w({"type": "link", "from_unit": ids[i - 1], "to_unit": ids[i],
               "link_type": "temporal", "weight": 0.5, "created_at": start})
        for i in range(n):
            w({"type": "mention", "unit_id": ids[i], "entity_id": entities[i % 50],
               "mention": NAMES[i % 50]})
        w({"type": "end", "counts": {"entity": len(entities), "unit": n, "link": n - 1,
                                     "mention": n}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "transfer-scale"))
    ap.add_argument("--port", type=int, default=56733)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "transfer_scale.txt"))
    args = ap.parse_args()
    from rcll.models.embedder import input_stamp

    svc, api = stack(Path(args.state_dir), args.port, "transfer_scale", False)
    model = svc.embedder.model_name
    svc.embedder.get()  # the models load once, before the first measured phase
    say(f"one PostgreSQL (port {args.port}); API in-process; peak RSS of this process "
        "(VmHWM), reset before each phase")
    work = Path(tempfile.mkdtemp(prefix="rcll-transfer-scale-"))
    for n in (int(x) for x in args.sizes.split(",")):
        src, back = work / f"in-{n}.jsonl", work / f"out-{n}.jsonl"
        synthetic(src, n, model, input_stamp(model))
        bank = f"scale-{n}"
        reset_peak()
        base = peak_kb()
        answer, secs = import_from(api, bank, src)
        imp_peak = peak_kb()
        reset_peak()
        base_e = peak_kb()
        size, esecs = export_to(api, bank, back)
        exp_peak = peak_kb()
        mib = 1024
        say(f"{n:,} units: file {src.stat().st_size / 1e6:.0f} MB; import {secs:.1f} s "
            f"({n / secs:,.0f} units/s), peak RSS {imp_peak / mib:.0f} MiB "
            f"({(imp_peak - base) / mib:+.0f} MiB over the {base / mib:.0f} MiB before); "
            f"export {size / 1e6:.0f} MB in {esecs:.1f} s, peak RSS {exp_peak / mib:.0f} MiB "
            f"({(exp_peak - base_e) / mib:+.0f} MiB); {answer['vectors_reused']:,} vectors "
            "reused")
        src.unlink()
        back.unlink()
        api.delete(f"/v1/default/banks/{bank}")
    work.rmdir()
    LINES.append(f"machine: {platform.platform()}, {os.cpu_count()} cores shared with other "
                 "work; wall times")
    Path(args.out).write_text("\n".join(LINES) + "\n")
    svc.close()


if __name__ == "__main__":
    main()
