"""Ingest a folder of mixed real documents with ``rcll ingest`` against a running stack and
print: files/s, units, per-file conversion (pages/sections, convert ms, units), failures with
reasons, and one recall whose answer comes from a PDF page, with its provenance.

    rcll dev up   # own RCLL_STATE_DIR and ports
    python benchmarks/ingest_files.py FOLDER --bank debian-docs --query "..."
    (--no-ingest: summarise a bank ingested already)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from rcll.client import RCLLClient
from rcll.config import get_settings


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--bank", default="debian-docs")
    ap.add_argument("--query", default="How do I recover data from a damaged bzip2 file?")
    ap.add_argument("--no-ingest", action="store_true")
    a = ap.parse_args()
    s = get_settings()
    url = os.environ.get("RCLL_API_URL", f"http://{s.api_host}:{s.api_port}")
    if not a.no_ingest:
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-c", "from rcll.cli.main import cli; cli()",
                              "ingest", a.folder, "--bank", a.bank], capture_output=True, text=True,
                             env={**os.environ, "COLUMNS": "200"})
        print(f"$ rcll ingest {a.folder} --bank {a.bank}   ({time.monotonic() - t0:.0f} s, "
              f"exit {out.returncode})")
        print("\n".join(ln for ln in out.stdout.splitlines() if "━" not in ln))
    c = RCLLClient(url, timeout=120)
    ops = c.jobs(a.bank, limit=1000)
    ops = [o for o in ops if o.get("counts", {}).get("file")]
    ops.sort(key=lambda o: o["counts"]["file"]["name"])
    print(f"\n{'file':44} {'type':5} {'KiB':>6} {'pages':>5} {'sect':>5} {'conv ms':>8} "
          f"{'units':>6}  status")
    tot = {"conv": 0, "units": 0, "bytes": 0}
    for o in ops:
        k = o["counts"]
        f = k["file"]
        tot["conv"] += k.get("convert_ms", 0)
        tot["units"] += k.get("units_created", 0)
        tot["bytes"] += f["size"]
        print(f"{f['name'][:44]:44} {f['name'].rsplit('.', 1)[-1]:5} {f['size'] / 1024:6.0f} "
              f"{k.get('pages', '-')!s:>5} {k.get('sections', '-')!s:>5} "
              f"{k.get('convert_ms', '-')!s:>8} {k.get('units_created', 0):>6}  {o['status']}"
              + (f": {o['error']}" if o.get("error") else ""))
    print(f"\n{len(ops)} files, {tot['bytes'] / 1024 / 1024:.1f} MiB, {tot['units']} units; "
          f"conversion alone {tot['conv'] / 1000:.1f} s on the workers "
          f"({len(ops) / max(tot['conv'] / 1000, 1e-9):.1f} files/s), failures "
          f"{sum(o['status'] == 'failed' for o in ops)}")
    res = c.recall(a.bank, a.query, limit=3)
    print(f"\nrecall {a.query!r} (bank {a.bank}):")
    for i, r in enumerate(res["results"], 1):
        f = (r.get("metadata") or {}).get("file", {})
        where = f"page {f['page']}/{f['pages']}" if "page" in f else f"section {f.get('section')!r}"
        print(f"{i}. [{f.get('name')} {where}, {f.get('type')}, {f.get('size')} bytes, "
              f"document {r.get('document_id') or f.get('document_id')}]")
        print("   " + r["text"][:400].replace("\n", " "))


if __name__ == "__main__":
    main()
