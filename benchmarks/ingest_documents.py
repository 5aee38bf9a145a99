"""Documents end to end (``rcll ingest``'s HTTP path) beside the raw embedder on the same
chunks, in one run.

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ingest_documents.py \
        [--corpora cisi,docs] [--variants before,after] [--cisi-limit 0] \
        [--out benchmarks/results/ingest_documents.json]

Corpora (``--corpora``):

- ``cisi``: the CISI collection (``../shared/data/cisi/CISI.ALL``, Latin-1; records ``.I``
  id, ``.T`` title, ``.W`` abstract), one item per document (title, blank line, abstract),
  ``document_id`` ``cisi-<id>``, written as one JSONL file;
- ``docs``: a folder of real files copied from ``/usr/share/doc`` (:data:`DOC_FILES`: 2 PDF,
  11 HTML, 23 text and Markdown), text files sent as items and the rest as files
  (converted on the workers).

For each corpus and variant (``before``/``after``/``cPtT`` as in
``benchmarks/ingest_throughput.py``, and ``base-cPtT``: the branch point's code with ``P``
processes of ``T`` threads), the variant's worker is started and warmed (every pool process
has loaded its models and, for ``docs``, started its warm converter: :func:`warm_converters`),
then the corpus goes into a fresh bank through the ``rcll ingest`` command itself (a child
process, this checkout's client with its defaults: batches of 100 items and 64 KiB, polled
every 0.5 s), timed from its start to its exit (with ``--in-process``: sent and polled from this process
as before, :func:`rcll.cli.ingest.read_paths`, :func:`~rcll.cli.ingest.submit`,
:func:`~rcll.cli.ingest.submit_files`, polled every 0.25 s). The units the bank then holds
are the **same chunks** the raw embedder is timed on right after, on the runtime and
precision the variant's worker embeds with (``RCLL_EMBED_RUNTIME``, default onnx fp32): one
process of one thread per core, and with ``--raw-single`` one process at the runtime's
default threads; the better is the denominator. Torch's sentence-transformers on the same
chunks (one process of one thread per core) is printed beside it as a second reference.

Per run it prints units/s, raw texts/s and their ratio, the load average (other jobs on the
machine), the CPU seconds of the stack's process trees over the ingest (worker, PostgreSQL,
API: :func:`stack_cpu`) beside the raw embedder's, their **CPU ratio** (raw CPU per text over
the stack's CPU per unit: what the ratio would be on otherwise idle cores) and the worker's
task seconds per stage (:func:`stage_seconds`); then the median per variant. ``--out``
writes the runs as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import ingest_throughput as tp  # noqa: E402  (raw embedder children, variants, workers)

DOC_ROOT = Path("/usr/share/doc")
DOC_FILES = (
    "libtasn1-doc/libtasn1.pdf", "shared-mime-info/shared-mime-info-spec.pdf",
    *(f"libffi8/html/{n}.html" for n in (
        "Arrays-Unions-Enums", "Closure-Example", "Complex-Type-Example", "Complex", "Index",
        "Introduction", "Memory-Usage", "Primitive-Types", "The-Basics", "The-Closure-API",
        "Using-libffi")),
    "dpkg/spec/protected-field.txt", "dpkg/spec/rootless-builds.txt", "dpkg/spec/triggers.txt",
    "gpg-agent/examples/trustlist.txt", "libasound2/examples/asoundrc.txt",
    "libglib2.0-0/README.md", "libpango-1.0-0/README.md", "mosquitto/README.md",
    "procps/bugs.md", "publicsuffix/examples/test_psl.txt", "python3-httplib2/README.md",
    "systemd/DISTRO_PORTING.md", "systemd/TRANSLATORS.md", "yq/cli-doc.txt",
)


def doc_folder(dest: Path) -> Path:
    """Copy :data:`DOC_FILES` (those present) plus text files found under ``/usr/share/doc``
    up to 23 text files, into ``dest`` (flattened names); returns ``dest``."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    picked = [DOC_ROOT / p for p in DOC_FILES if (DOC_ROOT / p).is_file()]
    texts = [p for p in picked if p.suffix in (".txt", ".md")]
    if len(texts) < 23:
        extra = sorted(p for p in DOC_ROOT.rglob("*") if p.suffix in (".txt", ".md")
                       and p.is_file() and 2000 < p.stat().st_size < 40000 and p not in picked)
        picked += extra[:23 - len(texts)]
    for p in picked:
        shutil.copyfile(p, dest / str(p.relative_to(DOC_ROOT)).replace("/", "__"))
    return dest


def cisi_items(path: Path, limit: int = 0) -> list[dict]:
    """CISI records as retain items: ``{"content": title + "\\n\\n" + abstract,
    "document_id": "cisi-<id>"}`` (a record without an abstract: its title)."""
    items, rec, field = [], None, None

    def flush() -> None:
        if rec is not None:
            title, abstract = " ".join(rec["T"]).strip(), "\n".join(rec["W"]).strip()
            content = f"{title}\n\n{abstract}" if abstract else title
            items.append({"content": content, "document_id": f"cisi-{rec['id']}"})

    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith(".I "):
            flush()
            rec, field = {"id": line[3:].strip(), "T": [], "W": []}, None
        elif line[:2] in (".T", ".W", ".A", ".X", ".B") and line[2:].strip() == "":
            field = line[1]
        elif rec is not None and field in ("T", "W"):
            rec[field].append(line.strip() if field == "T" else line)
    flush()
    return items[:limit or None]


def warm_converters(client, variant: dict, tag: str) -> None:
    """A few tiny HTML files at once, so every pool process has started its warm converter
    (the fork server that imports the converters, once per process) before timing, as
    :func:`ingest_throughput.warm_up` has every process load its models."""
    bank = f"warm-files-{tag}"
    client.delete_bank(bank)
    ops = []
    for j in range(3 * variant["concurrency"]):
        page = f"<html><body><h1>Warm up {j}</h1><p>The quick brown fox.</p></body></html>"
        ops += [(bank, o) for o in client.retain_files(
            bank, [(f"warm-{j}.html", page.encode())])["operation_ids"]]
    client.wait_many(ops, poll_s=0.25, timeout_s=600)
    client.delete_bank(bank)


def bank_texts(s, bank: str) -> list[str]:
    """What the service embedded for the bank's live units: each unit's
    :func:`rcll.models.embedder.embed_input` (its chunk context, then its text)."""
    import psycopg

    from rcll.models.embedder import embed_input

    with psycopg.connect(s.db_url) as conn:
        return [embed_input(text, heading) for text, heading in conn.execute(
            "SELECT text, heading FROM memory_units WHERE bank_id = %s "
            "AND invalidated_reason IS NULL", (bank,)).fetchall()]


def run_cli(s, inputs: list[str], bank: str) -> dict:
    """The ``rcll ingest`` command itself (``python -m rcll.cli.main ingest INPUTS --bank
    BANK``, this checkout's client, its default batch size and polling) on ``inputs`` into
    ``bank`` (deleted first), timed from its start to its exit; the stats, from the bank's
    jobs. ``summary``: the command's closing line."""
    import subprocess

    import psycopg

    from rcll.cli.ingest import read_paths
    from rcll.client import RCLLClient
    from rcll.dev import stack

    with RCLLClient(s.base_url, timeout=300) as client:
        client.delete_bank(bank)
    plan = read_paths(inputs)
    env = {**stack.child_env(s), "PYTHONPATH": str(ROOT), "RCLL_API_URL": s.base_url,
           "COLUMNS": "120"}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "rcll.cli.main", "ingest", *inputs,
                           "--bank", bank], env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    with psycopg.connect(s.db_url) as conn:
        jobs = conn.execute("SELECT id, state, counts, error FROM jobs WHERE bank_id = %s",
                            (bank,)).fetchall()
    counts = [j[2] or {} for j in jobs]
    lines = [x for x in done.stdout.splitlines() if " new units, " in x and x[:1].isdigit()]
    return {"seconds": seconds, "jobs": len(jobs), "items": len(plan.items),
            "files": len(plan.files), "exit_status": done.returncode,
            "units": sum(c.get("units_created", 0) for c in counts),
            "units_skipped": sum(c.get("units_skipped", 0) for c in counts),
            "convert_s": sum(c.get("convert_ms", 0) for c in counts) / 1000,
            "not_succeeded": [f"{j[0]} {j[1]}: {j[3]}" for j in jobs if j[1] != "succeeded"],
            "summary": lines[-1].strip() if lines else done.stdout[-500:] + done.stderr[-500:]}


def run_ingest(s, inputs: list[str], bank: str) -> dict:
    """``rcll ingest``'s path on ``inputs`` into ``bank`` (deleted first), in this process
    (``--in-process``: :func:`rcll.cli.ingest.read_paths`, ``submit``, ``submit_files``,
    polled every 0.25 s); the stats."""
    from rcll.cli.ingest import read_paths, submit, submit_files
    from rcll.client import RCLLClient

    with RCLLClient(s.base_url, timeout=300) as client:
        client.delete_bank(bank)
        t0 = time.perf_counter()
        plan = read_paths(inputs)
        ops, refused = submit(client, bank, plan, 100)
        file_ops, file_refused = submit_files(client, bank, plan.files)
        sent = time.perf_counter() - t0
        final = client.wait(bank, ops + file_ops, poll_s=0.25, timeout_s=3600)
        seconds = time.perf_counter() - t0
    counts = [o.get("counts") or {} for o in final]
    return {"seconds": seconds, "submit_s": sent, "jobs": len(final),
            "items": len(plan.items), "files": len(plan.files),
            "units": sum(c.get("units_created", 0) for c in counts),
            "units_skipped": sum(c.get("units_skipped", 0) for c in counts),
            "convert_s": sum(c.get("convert_ms", 0) for c in counts) / 1000,
            "not_succeeded": [f"{o['id']} {o['state']}: {o.get('error')}" for o in final
                              if o["state"] != "succeeded"],
            "refused": [f"{x.source}: {x.reason}" for x in refused + file_refused]}


def tree_cpu(root: int | None) -> float:
    """CPU seconds (user + system) of process ``root`` and its descendants, the children
    they reaped included (``/proc/<pid>/stat`` fields 14-17); 0.0 without a root."""
    if not root:
        return 0.0
    stats: dict[int, tuple[int, float]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                f = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(d.name)] = (int(f[1]), sum(int(x) for x in f[11:15]))
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        kids.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0))[1]
        todo += kids.get(pid, [])
    return total / os.sysconf("SC_CLK_TCK")


_TASK_DONE = re.compile(rb"Task (?:retain|files)\.(\w+)\[[^\]]*\] succeeded in ([\d.]+)s"
                        rb".* bank=([^\]\s]+)\]")


def stage_seconds(log_path: Path, bank: str, since: int = 0) -> dict[str, float]:
    """Seconds the worker's tasks spent per stage for ``bank`` (Celery's ``succeeded in``
    lines of the worker log from byte ``since``), summed over pool processes."""
    out: dict[str, float] = {}
    with open(log_path, "rb") as f:
        f.seek(since)
        for line in f:
            m = _TASK_DONE.search(line)
            if m and m[3].decode() == bank:
                out[m[1].decode()] = round(out.get(m[1].decode(), 0.0) + float(m[2]), 2)
    return out


def stack_cpu(s) -> dict[str, float]:
    """CPU seconds so far of the stack's worker, API and PostgreSQL process trees."""
    from rcll.dev import processes

    run_dir = s.run_dir.resolve()
    try:
        pg = int((s.state_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pg = None
    return {"worker": tree_cpu(processes.running_pid(run_dir, "worker")),
            "api": tree_cpu(processes.running_pid(run_dir, "api")),
            "postgres": tree_cpu(pg)}


def _portable(args: dict) -> dict:
    """``args`` with paths inside or beside the checkout written relative to it, so a
    committed result names no machine's folders."""
    out = {}
    for k, v in args.items():
        if isinstance(v, Path):
            v = str(v)
        if isinstance(v, str) and v.startswith("/"):
            try:
                v = os.path.relpath(v, ROOT)
            except ValueError:
                pass
        out[k] = v
    return out


def main() -> None:
    from rcll.config import Settings
    from rcll.dev import processes, stack

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default="cisi,docs")
    ap.add_argument("--cisi", default=str(ROOT.parent / "shared" / "data" / "cisi" / "CISI.ALL"))
    ap.add_argument("--cisi-limit", type=int, default=0, help="first N records (0 = all)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--variants", default="after")
    ap.add_argument("--base", default=None,
                    help="the commit 'before' runs (default: git merge-base HEAD main)")
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "documents"))
    ap.add_argument("--pg-port", type=int, default=54373)
    ap.add_argument("--redis-port", type=int, default=6413)
    ap.add_argument("--api-port", type=int, default=8823)
    ap.add_argument("--raw-single", action="store_true",
                    help="also time the raw embedder as one process at torch's default "
                         "threads (slower than one process per core on a busy machine)")
    ap.add_argument("--in-process", action="store_true",
                    help="send and poll from this process (rcll.cli.ingest's functions, polled "
                         "every 0.25 s) instead of running the rcll ingest command")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import subprocess

    defaults = Settings()
    state = Path(args.state_dir).resolve()
    s = Settings(state_dir=state, pg_port=args.pg_port,
                 redis_url=f"redis://127.0.0.1:{args.redis_port}/0", api_port=args.api_port,
                 max_items_per_request=1000, auth=False)
    s.run_dir.mkdir(parents=True, exist_ok=True)
    base = args.base or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT,
                                       check=True, text=True, capture_output=True).stdout.strip()
    tree = tp.base_tree(state, base)

    def variant(name: str) -> dict:  # base-cPtT: the branch point's code with P x T
        if name.startswith("base-"):
            return {**tp.parse_variant(name[5:], tree, defaults), "name": name, "tree": tree}
        return tp.parse_variant(name, tree, defaults)

    variants = [variant(v.strip()) for v in args.variants.split(",")]
    corpora: dict[str, list[str]] = {}
    for name in args.corpora.split(","):
        if name == "cisi":
            f = state / "cisi.jsonl"
            f.write_text("".join(json.dumps(i) + "\n"
                                 for i in cisi_items(Path(args.cisi), args.cisi_limit)))
            corpora["cisi"] = [str(f)]
        elif name == "docs":
            corpora["docs"] = [str(doc_folder(state / "docs"))]
        else:
            raise SystemExit(f"unknown corpus {name!r}: cisi or docs")
    cores = os.cpu_count() or 1
    runs: list[dict] = []
    try:
        stack.up(s, worker=False, log=lambda *_: None)
        print(f"documents ingest through rcll ingest's HTTP path, {cores} cores, "
              f"stack on {s.base_url}; corpora {', '.join(corpora)}", flush=True)
        for r in range(1, args.rounds + 1):
            for v in (variants if r % 2 else variants[::-1]):
                tp.start_worker(s, v)
                from rcll.client import RCLLClient

                with RCLLClient(s.base_url, timeout=300) as client:
                    tp.warm_up(client, v, f"{v['name']}-{r}")
                    if "docs" in corpora:
                        warm_converters(client, v, f"{v['name']}-{r}")
                for corpus, inputs in corpora.items():
                    bank = f"docs-{corpus}-{v['name']}-{r}"
                    cpu0 = stack_cpu(s)
                    log_path = s.run_dir.resolve() / "worker.log"
                    since = log_path.stat().st_size
                    st = (run_ingest(s, inputs, bank) if args.in_process
                          else run_cli(s, inputs, bank))
                    cpu = {k: round(x - cpu0[k], 1) for k, x in stack_cpu(s).items()}
                    texts = bank_texts(s, bank)
                    stage_s = stage_seconds(log_path, bank, since)
                    runtime = v.get("runtime", defaults.embed_runtime)
                    precision = v.get("precision", defaults.embed_precision)
                    raw1 = (tp.raw_embedder(texts, 1, 0, defaults.embed_batch_size, state,
                                            runtime=runtime, precision=precision)
                            if args.raw_single else 0.0)
                    raw_cpu: list[float] = []
                    rawp = tp.raw_embedder(texts, cores, 1, defaults.embed_batch_size, state,
                                           raw_cpu, runtime=runtime, precision=precision)
                    raw = max(raw1, rawp)
                    raw_torch = (rawp if runtime == "torch" else
                                 tp.raw_embedder(texts, cores, 1, defaults.embed_batch_size,
                                                 state))
                    run = {"corpus": corpus, "variant": v["name"], "round": r,
                           "concurrency": v["concurrency"], "torch_threads": v["threads"],
                           **st, "units_per_s": st["units"] / st["seconds"],
                           "files_per_s": st["files"] / st["seconds"],
                           "raw_1proc_default_threads": raw1,
                           f"raw_{cores}proc_1thread": rawp, "raw_best": raw,
                           "raw_runtime": f"{runtime}-{precision}",
                           f"raw_torch_{cores}proc_1thread": raw_torch,
                           "ratio_to_torch": st["units"] / st["seconds"] / raw_torch,
                           "load_avg": os.getloadavg()[0], "cpu_s": cpu,
                           "raw_cpu_s": round(raw_cpu[0], 1),
                           "stage_s": stage_s}
                    run["ratio"] = run["units_per_s"] / raw
                    # CPU per unit: the raw embedder's over the stack's (worker + postgres + api)
                    run["cpu_ratio"] = (raw_cpu[0] / sum(cpu.values())
                                        * st["units"] / max(len(texts), 1)) if sum(cpu.values()) else 0.0
                    runs.append(run)
                    print(f"  {corpus:4s} round {r} {v['name']:7s} (c{v['concurrency']} "
                          f"t{v['threads']}): {st['items']} items + {st['files']} files "
                          f"-> {st['units']:,} units in {st['seconds']:.1f} s "
                          f"({st['jobs']} jobs) = {run['units_per_s']:.1f} units/s; raw "
                          f"embedder 1 proc {raw1:.1f}, {cores} procs x 1 thread "
                          f"{rawp:.1f} texts/s ({run['raw_runtime']}; torch {raw_torch:.1f}); "
                          f"ratio {run['ratio']:.2f} (to torch {run['ratio_to_torch']:.2f}) "
                          f"(load {run['load_avg']:.1f})\n"
                          f"      CPU s: worker {cpu['worker']}, postgres {cpu['postgres']}, "
                          f"api {cpu['api']}; raw embedder {raw_cpu[0]:.1f}; CPU ratio "
                          f"{run['cpu_ratio']:.2f}\n"
                          f"      worker task seconds by stage: "
                          f"{', '.join(f'{k} {x:.1f}' for k, x in stage_s.items())}"
                          + (f"; NOT SUCCEEDED {st['not_succeeded']}"
                             if st["not_succeeded"] else "")
                          + (f"\n      rcll ingest: {st['summary']}" if "summary" in st else ""),
                          flush=True)
                    with RCLLClient(s.base_url, timeout=300) as client:
                        client.delete_bank(bank)
                    if args.out:  # the runs so far, in case the run is cut short
                        Path(args.out).write_text(json.dumps(
                            {"runs": runs, "partial": True, "cores": cores,
                             "args": _portable(vars(args)), "base": base}, indent=2, default=str) + "\n")
    finally:
        processes.stop(s.run_dir.resolve(), "worker")
        stack.down(s, log=lambda *_: None)
    summary: dict = {}
    for corpus in corpora:
        for v in variants:
            mine = [x for x in runs if x["corpus"] == corpus and x["variant"] == v["name"]]
            m = summary.setdefault(corpus, {})[v["name"]] = {
                "units_per_s": statistics.median(x["units_per_s"] for x in mine),
                "seconds": statistics.median(x["seconds"] for x in mine),
                "raw_best": statistics.median(x["raw_best"] for x in mine),
                "ratio": statistics.median(x["ratio"] for x in mine),
                "ratio_to_torch": statistics.median(x["ratio_to_torch"] for x in mine),
                "cpu_ratio": statistics.median(x["cpu_ratio"] for x in mine)}
            print(f"median {corpus:4s} {v['name']:7s}: {m['units_per_s']:.1f} units/s in "
                  f"{m['seconds']:.1f} s, raw {m['raw_best']:.1f} texts/s, "
                  f"ratio {m['ratio']:.2f} (to torch {m['ratio_to_torch']:.2f}), CPU ratio {m['cpu_ratio']:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"runs": runs, "summary": summary, "cores": cores, "args": _portable(vars(args)),
             "base": base, "when": time.strftime("%Y-%m-%d %H:%M:%S")},
            indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
