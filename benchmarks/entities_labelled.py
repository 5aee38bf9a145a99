"""Precision and recall of the deterministic entity extractor on the labelled sample
(``tests/data/entities_labelled.json``), per set — ``items`` (the rules were tuned on them),
``heldout`` (30 LoCoMo turns labelled after tuning), ``first_use`` (issue 26: names opening a
sentence or after a speaker label, and sentence-initial words that are not names) — for this
checkout's extractor and, with ``--against REV``, the extractor at git revision ``REV``
(read with ``git show``, imported from a temporary file), in one table.

An extracted entity counts as correct when its normalized form is a labelled one
(:func:`rcll.entities.extractor.normalize`), as in tests/entities/test_extractor_precision.py.

    PYTHONPATH=. python benchmarks/entities_labelled.py --against 6c33a57 \
        > benchmarks/results/entities_labelled.txt
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from rcll.eval.datasets import locomo_turn_text

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "data" / "entities_labelled.json"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10_memories.jsonl"


def _module(source: str, name: str):
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def score(mod, items: list[dict], turns: dict[str, str]) -> dict:
    tp = fp = fn = 0
    extras, misses = [], []
    for it in items:
        text = it.get("text") or turns[it["id"]]
        gold = {mod.normalize(e) for e in it["entities"]}
        got = {mod.normalize(m.surface) for m in mod.extract(text)}
        tp, fp, fn = tp + len(got & gold), fp + len(got - gold), fn + len(gold - got)
        extras += [f"{it['id']}:{g}" for g in sorted(got - gold)]
        misses += [f"{it['id']}:{g}" for g in sorted(gold - got)]
    return {"texts": len(items), "labelled": tp + fn, "tp": tp, "fp": fp, "fn": fn,
            "precision": tp / (tp + fp) if tp + fp else 1.0,
            "recall": tp / (tp + fn) if tp + fn else 1.0, "extras": extras, "misses": misses}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", default=None, help="git revision of the extractor to compare")
    args = ap.parse_args()
    sample = json.loads(SAMPLE.read_text())
    with LOCOMO.open() as f:
        turns = {t["memory_id"]: locomo_turn_text(t) for t in map(json.loads, f)}
    versions = {"this checkout": _module(
        (ROOT / "rcll/entities/extractor.py").read_text(), "extractor_new")}
    if args.against:
        old = subprocess.run(["git", "show", f"{args.against}:rcll/entities/extractor.py"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        versions = {f"at {args.against}": _module(old, "extractor_old"), **versions}
    print("| extractor | set | texts | labelled | precision | recall | FP | FN |")
    print("|---|---|---|---|---|---|---|---|")
    details = []
    for label, mod in versions.items():
        for key in ("items", "heldout", "first_use"):
            r = score(mod, sample.get(key, []), turns)
            print(f"| {label} | {key} | {r['texts']} | {r['labelled']} | {r['precision']:.3f} "
                  f"| {r['recall']:.3f} | {r['fp']} | {r['fn']} |")
            details.append(f"{label} / {key}: false positives {r['extras']}; missed {r['misses']}")
    print()
    print("\n".join(details))


if __name__ == "__main__":
    main()
