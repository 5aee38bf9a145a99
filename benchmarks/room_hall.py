"""Accuracy of the room/hall regex classifier (``rcll/hierarchy/patterns.toml``) on 100
hand-labelled document and chat units (``benchmarks/data/room_hall_labelled.json``): room,
hall and both right, by source, the confusions, for this checkout's patterns and, with
``--against REV``, the patterns at git revision ``REV``.

Texts are rebuilt from ``../shared/data`` (LoCoMo turns, CISI abstracts) and ``/usr/share/doc``
exactly as they were sampled (see the file's description); written lines are in the file.

    PYTHONPATH=. python benchmarks/room_hall.py --against 6c33a57 > benchmarks/results/room_hall.txt
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from rcll.eval.datasets import locomo_turn_text
from rcll.hierarchy import classifier

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
SAMPLE = ROOT / "benchmarks" / "data" / "room_hall_labelled.json"
DOCS = ["/usr/share/doc/openssl/HOWTO/keys.txt", "/usr/share/doc/util-linux/howto-debug.txt",
        "/usr/share/doc/util-linux/howto-tests.txt", "/usr/share/doc/util-linux/howto-build-sys.txt"]


def texts() -> dict[str, str]:
    """Every sampled text by id (the sampling of the labelled file, rebuilt)."""
    rng = random.Random(26)
    with (DATA / "locomo" / "locomo10_memories.jsonl").open() as f:
        turns = [json.loads(line) for line in f]
    out = {t["memory_id"]: locomo_turn_text(t) for t in rng.sample(turns, 50)}
    docs = re.split(r"^\.I ", (DATA / "cisi" / "CISI.ALL").read_text(), flags=re.M)[1:]
    for d in rng.sample(docs, 25):
        w = re.search(r"^\.W\s*\n(.*?)(?=^\.[A-Z]\s*$|\Z)", d, re.S | re.M)
        out[f"cisi-{d.split()[0]}"] = re.sub(r"\s+", " ", w.group(1)).strip()[:600] if w else ""
    for p in DOCS:
        if not Path(p).exists():
            continue
        paras = [re.sub(r"\s+", " ", x).strip()
                 for x in Path(p).read_text(errors="ignore").split("\n\n")]
        for i, x in enumerate([x for x in paras if len(x) > 120][:4]):
            out[f"doc-{Path(p).stem}-{i}"] = x[:700]
    return out


def evaluate(clf, items: list[dict], by_id: dict[str, str]) -> dict:
    rows = []
    for it in items:
        text = it.get("text") or by_id.get(it["id"])
        if text is None:
            continue
        room, hall = clf.classify(text)
        rows.append((it, room, hall))
    n = len(rows)
    acc = lambda ok: sum(ok(r) for r in rows) / n  # noqa: E731
    by_source = Counter()
    right = Counter()
    for it, room, hall in rows:
        src = it["source"] if it["source"] in ("locomo", "cisi", "written") else "docs"
        by_source[src] += 1
        right[src] += (room == it["room"] and hall == it["hall"])
    return {"n": n, "room": acc(lambda r: r[1] == r[0]["room"]),
            "hall": acc(lambda r: r[2] == r[0]["hall"]),
            "both": acc(lambda r: r[1] == r[0]["room"] and r[2] == r[0]["hall"]),
            "by_source": {s: f"{right[s]}/{by_source[s]}" for s in sorted(by_source)},
            "room_confusions": Counter(f"{r[0]['room']}→{r[1]}" for r in rows
                                       if r[1] != r[0]["room"]).most_common(),
            "hall_confusions": Counter(f"{r[0]['hall']}→{r[2]}" for r in rows
                                       if r[2] != r[0]["hall"]).most_common(),
            "wrong": [f"{r[0]['id']}: {r[0]['room']}/{r[0]['hall']} → {r[1]}/{r[2]}"
                      for r in rows if (r[1], r[2]) != (r[0]["room"], r[0]["hall"])]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", default=None, help="git revision of patterns.toml to compare")
    args = ap.parse_args()
    items = json.loads(SAMPLE.read_text())["items"]
    by_id = texts()
    versions = {"this checkout": classifier.load()}
    if args.against:
        old = subprocess.run(["git", "show", f"{args.against}:rcll/hierarchy/patterns.toml"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        path = Path(tempfile.mkdtemp()) / "patterns.toml"
        path.write_text(old)
        versions = {f"at {args.against}": classifier.load(path), **versions}
    print("| patterns | units | room | hall | both | both right by source |")
    print("|---|---|---|---|---|---|")
    results = {k: evaluate(v, items, by_id) for k, v in versions.items()}
    for k, r in results.items():
        print(f"| {k} | {r['n']} | {r['room']:.2f} | {r['hall']:.2f} | {r['both']:.2f} "
              f"| {', '.join(f'{s} {v}' for s, v in r['by_source'].items())} |")
    for k, r in results.items():
        print(f"\n{k}: room confusions {r['room_confusions']}\n{k}: hall confusions "
              f"{r['hall_confusions']}\n{k}: wrong units:\n  " + "\n  ".join(r["wrong"]))


if __name__ == "__main__":
    main()
