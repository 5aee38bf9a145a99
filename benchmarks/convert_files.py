"""File conversion as the worker runs it (each file in a bounded child forked from the warm
fork server, :func:`rcll.files.sandbox.convert_bounded`), this checkout beside another
commit's code in the same run: wall ms per file by type.

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/convert_files.py \
        [--base 2eb3fc8] [--rounds 3] [--out benchmarks/results/convert_files.json]

Files: the PDF and HTML files of ``benchmarks/ingest_documents.py``'s ``/usr/share/doc``
folder (those present) and a DOCX, a PPTX and an XLSX written here with python-docx,
python-pptx and openpyxl (markitdown's own dependencies). Each variant runs in a process of
its own (``before``: ``--base``'s tree from ``git archive``; ``after``: this checkout), which
starts its fork server, converts one file to warm it, then every file ``--rounds`` times;
the variants alternate round by round. Both must give the same sections (printed: how many
files differ).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

CHILD = """
import json, sys, time
from pathlib import Path
from rcll.files import sandbox
from rcll.files.convert import DEFAULT_LIMITS

def main():
    files = json.loads(sys.argv[1])
    sandbox.convert_bounded(Path(files[0]).read_bytes(), Path(files[0]).name, None,
                            DEFAULT_LIMITS)  # the fork server up
    out = []
    for f in files:
        data = Path(f).read_bytes()
        t = time.perf_counter()
        sections = sandbox.convert_bounded(data, Path(f).name, None, DEFAULT_LIMITS)
        out.append({"file": f, "ms": (time.perf_counter() - t) * 1000,
                    "text": [s.text for s in sections]})
    print(json.dumps(out))

if __name__ == "__main__":
    main()
"""


def office_files(dest: Path) -> list[Path]:
    """A DOCX, a PPTX and an XLSX with a few headings, paragraphs, slides and cells."""
    import docx
    import openpyxl
    import pptx

    d = docx.Document()
    for i in range(1, 6):
        d.add_heading(f"Section {i}: installing the service", level=1)
        d.add_paragraph("Run the installer, then start the daemon & check its status. " * 8)
    d.save(dest / "guide.docx")
    p = pptx.Presentation()
    for i in range(1, 6):
        slide = p.slides.add_slide(p.slide_layouts[1])
        slide.shapes.title.text = f"Quarter {i} results"
        slide.placeholders[1].text = "Revenue grew; costs fell; the backlog shrank."
    p.save(dest / "deck.pptx")
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["team", "open", "closed", "owner"])
    for i in range(40):
        ws.append([f"team {i}", i * 3, i * 5, f"person {i}"])
    wb.save(dest / "sheet.xlsx")
    return [dest / "guide.docx", dest / "deck.pptx", dest / "sheet.xlsx"]


def main() -> None:
    from ingest_documents import DOC_FILES, DOC_ROOT
    from ingest_documents import _portable as portable
    from ingest_throughput import base_tree

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="2eb3fc8", help="the commit 'before' runs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "convert-files"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rcll-convert-"))
    files = [DOC_ROOT / p for p in DOC_FILES
             if p.endswith((".pdf", ".html")) and (DOC_ROOT / p).is_file()]
    files += office_files(tmp)
    trees = {"before": base_tree(Path(args.state_dir), args.base), "after": ROOT}
    ms: dict[str, dict[str, list[float]]] = {v: {} for v in trees}
    texts: dict[str, dict[str, list[str]]] = {v: {} for v in trees}
    for r in range(args.rounds):
        for v in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
            env = {**os.environ, "PYTHONPATH": str(trees[v])}
            proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps([str(f) for f in files])],
                                  cwd=trees[v], env=env, capture_output=True, text=True,
                                  check=True)
            for row in json.loads(proc.stdout.strip().splitlines()[-1]):
                name = Path(row["file"]).name  # the files' names are distinct
                ms[v].setdefault(name, []).append(row["ms"])
                texts[v][name] = row["text"]
    print(f"{len(files)} files, {args.rounds} rounds; wall ms per file (median), "
          f"before = {args.base}, after = this checkout")
    print("| type | files | before ms | after ms | after / before |")
    print("|---|---|---|---|---|")
    summary = {}
    for suffix in sorted({Path(f).suffix for f in ms["after"]}):
        def med(v, suffix=suffix):
            return statistics.median(x for f, xs in ms[v].items() if f.endswith(suffix)
                                     for x in xs)
        n = sum(1 for f in ms["after"] if f.endswith(suffix))
        summary[suffix] = {"files": n, "before_ms": med("before"), "after_ms": med("after")}
        print(f"| {suffix} | {n} | {med('before'):.0f} | {med('after'):.0f} | "
              f"{med('after') / med('before'):.2f} |")
    differ = [f for f in texts["after"] if texts["after"][f] != texts["before"].get(f)]
    print(f"files whose sections differ between before and after: {len(differ)}"
          + (f" ({', '.join(differ)})" if differ else ""))
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "differ": differ,
                                              "ms": ms, "args": portable(vars(args))},
                                             indent=2) + "\n")


if __name__ == "__main__":
    main()
