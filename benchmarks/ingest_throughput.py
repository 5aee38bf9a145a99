"""Chunk-mode ingest end to end beside the raw embedder on the same texts, in one run.

    cd <checkout> && HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/ingest_throughput.py \
        --data ../shared/data/locomo [--conversations 0] [--rounds 2] \
        [--variants before,after] [--out benchmarks/results/ingest_throughput.json]

Starts its own stack (PostgreSQL on ``--pg-port``, Redis on ``--redis-port``, the API on
``--api-port``; state in ``--state-dir``) and, per round, for each variant in turn
(the order alternates between rounds):

1. the **raw embedder** on the very texts the service will embed (the items' contents, one
   unit per LoCoMo turn), in fresh processes: one process at torch's default threads (one
   per core: the embedder "alone on the machine") and ``P`` processes of one thread each
   (``P`` = the cores), each timed from a common start after the model loaded and warmed;
   the better of the two is the denominator;
2. the **service**: a Celery worker (all queues) of the variant is started, warmed (a few
   small jobs, so every pool process has loaded its models), then the texts are retained
   through the HTTP API (``rcll.eval.runner.ingest``: async requests of 200 items, polled
   to the end) into fresh banks; units/s = units created / seconds from the first POST to
   the last job's end.

Variants (``--variants``, comma-separated):

- ``before``: the branch point's code (``git archive`` of ``--base`` into
  ``<state-dir>/base-tree``) with its settings: 1 pool process, torch's default threads;
- ``after``: this checkout with its defaults (``RCLL_WORKER_CONCURRENCY``,
  ``RCLL_TORCH_THREADS``);
- ``cPtT`` (e.g. ``c1t1``, ``c3t1``, ``c1t2``): this checkout with ``P`` pool processes of
  ``T`` torch threads; ``cPtTbN`` (e.g. ``c2t1b4096``) the same with ``N`` padded tokens per
  write-path embed pass (``RCLL_EMBED_BATCH_TOKENS``; the raw embedder keeps the checkout's);
- ``torch``, ``onnx-fp32``, ``onnx-int8``: this checkout with its defaults and that
  embedder (``RCLL_EMBED_RUNTIME``, ``RCLL_EMBED_PRECISION``; the ONNX export is made in
  ``<state-dir>`` by the warm-up, before timing).

The raw embedder (the ratio's denominator) is torch's in every variant.

The API (this checkout) only stores jobs and is the same for every variant. Every stage
runs (chunk, extract — a no-op in chunk mode —, entities, embed, link). Prints one line per
run and the median units/s, raw texts/s and ratio service/raw per variant.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def _raw_child(threads: int, batch: int, texts_file: str, runtime: str = "torch",
               precision: str = "fp32") -> None:
    """Child: load the embedder on ``runtime`` (``torch``: sentence-transformers with
    ``threads`` torch threads, 0 = default; ``onnx``: :class:`rcll.models.onnx_runtime.
    OnnxEmbedder` at ``precision`` with ``threads`` intra-op threads, 0 = one per core, and
    the configured token batching), warm it, print ``ready``, wait for a line on stdin, embed
    its texts, print the seconds."""
    texts = json.loads(Path(texts_file).read_text())
    if runtime == "onnx":
        from rcll.config import Settings
        from rcll.models.onnx_runtime import OnnxEmbedder

        s = Settings()
        emb = OnnxEmbedder(s.embedder_model, s.state_dir, precision, threads, batch,
                           s.embed_batch_tokens)
    else:
        import torch

        if threads > 0:
            torch.set_num_threads(threads)
        from rcll.models.embedder import SentenceTransformerEmbedder

        emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2", batch)
    emb.embed(texts[:32])
    print("ready", flush=True)
    sys.stdin.readline()
    t0, c0 = time.perf_counter(), time.process_time()
    emb.embed(texts)
    print(f"done {time.perf_counter() - t0:.4f} {time.process_time() - c0:.4f}", flush=True)


def raw_embedder(texts: list[str], procs: int, threads: int, batch: int, tmp: Path,
                 cpu: list[float] | None = None, runtime: str = "torch",
                 precision: str = "fp32") -> float:
    """Texts/s of ``procs`` processes of ``threads`` threads (0 = the runtime's default)
    embedding ``texts`` split evenly on ``runtime`` at ``precision`` (:func:`_raw_child`),
    timed from a common start to the last one's end. ``cpu``: a list that receives the CPU
    seconds the processes spent embedding (summed)."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    children = []
    for i in range(procs):
        shard = tmp / f"raw-texts-{i}.json"
        shard.write_text(json.dumps(texts[i::procs]))
        children.append(subprocess.Popen(
            [sys.executable, __file__, "--raw-child", str(threads), str(batch), str(shard),
             runtime, precision],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env, cwd=ROOT))
    for c in children:
        line = c.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"raw embedder child failed: {line!r}")
    t0 = time.perf_counter()
    for c in children:
        c.stdin.write("go\n")
        c.stdin.flush()
    spent = 0.0
    for c in children:
        done = c.stdout.readline().split()
        spent += float(done[2]) if len(done) > 2 else 0.0
        c.wait()
    elapsed = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(spent)
    return len(texts) / elapsed


def parse_variant(name: str, base_tree: Path, defaults) -> dict:
    """``{"name", "tree", "concurrency", "threads"[, "runtime", "precision"]}`` for a variant
    name (see above)."""
    if name in ("torch", "onnx-fp32", "onnx-int8"):
        runtime, _, precision = name.partition("-")
        return {"name": name, "tree": ROOT, "concurrency": defaults.worker_processes,
                "threads": defaults.torch_threads, "runtime": runtime,
                "precision": precision or "fp32"}
    if name == "before":
        return {"name": name, "tree": base_tree, "concurrency": 1, "threads": 0}
    if name == "after":
        return {"name": name, "tree": ROOT, "concurrency": defaults.worker_processes,
                "threads": defaults.torch_threads}
    m = re.fullmatch(r"c(\d+)t(\d+)(?:b(\d+))?", name)
    if not m:
        raise SystemExit(f"unknown variant {name!r}: before, after, cPtT, cPtTbN, torch, "
                         "onnx-fp32 or onnx-int8")
    out = {"name": name, "tree": ROOT, "concurrency": int(m[1]), "threads": int(m[2])}
    if m[3] is not None:
        out["batch_tokens"] = int(m[3])
    return out


def base_tree(state_dir: Path, base: str) -> Path:
    """A clean copy of commit ``base`` (``git archive``), made once."""
    sha = subprocess.run(["git", "rev-parse", base], cwd=ROOT, check=True, text=True,
                         capture_output=True).stdout.strip()
    tree = state_dir / f"base-{sha[:10]}"
    if not (tree / "rcll").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def variant_env(s, tree: Path) -> dict:
    """The environment of a variant's child process running the code in ``tree``: the
    stack's settings (:func:`rcll.dev.stack.child_env`; for another checkout only the
    explicit ones, so it keeps its own defaults), no thread-count variables, ``PYTHONPATH``
    the tree."""
    from rcll.dev import stack

    env = {k: v for k, v in stack.child_env(s, only_set=tree != ROOT).items()
           if k not in THREAD_VARS}
    env["PYTHONPATH"] = str(tree)
    return env


def start_worker(s, variant: dict) -> None:
    """Start the variant's Celery worker (all queues) and wait until it is ready."""
    from rcll.dev import processes, stack

    run_dir = s.run_dir.resolve()
    processes.stop(run_dir, "worker")
    env = variant_env(s, variant["tree"])
    env["RCLL_WORKER_CONCURRENCY"] = str(variant["concurrency"])
    env["RCLL_TORCH_THREADS"] = str(variant["threads"])
    for key in ("runtime", "precision", "batch_tokens"):
        if key in variant:
            env[f"RCLL_EMBED_{key.upper()}"] = str(variant[key])
    cmd = [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
           "--loglevel", "INFO", "--concurrency", str(variant["concurrency"]),
           "--hostname", f"bench-{variant['name']}@%h"]
    log_path = run_dir / "worker.log"
    since = log_path.stat().st_size if log_path.exists() else 0
    processes.start(run_dir, "worker", cmd, env=env, cwd=variant["tree"])
    stack.wait_log(log_path, since, b" ready.", 180,
                   lambda: processes.running_pid(run_dir, "worker") is not None)


def warm_up(client, variant: dict, tag: str) -> None:
    """A few small jobs at once, so every pool process loads its models before timing."""
    bank = f"warm-{tag}"
    client.delete_bank(bank)
    ops = []
    for j in range(3 * variant["concurrency"]):
        items = [{"content": f"warm up {tag} job {j} item {i}: the quick brown fox"}
                 for i in range(8)]
        ops.append((bank, str(client.retain(bank, items, async_=True)["operation_id"])))
    client.wait_many(ops, poll_s=0.25, timeout_s=600)
    client.delete_bank(bank)


def run_service(s, variant: dict, banks: dict, tag: str) -> dict:
    """Ingest ``banks`` through the API with the variant's worker; the ingest stats."""
    from rcll.client import RCLLClient
    from rcll.eval.datasets import EvalDataset
    from rcll.eval.runner import ingest

    start_worker(s, variant)
    renamed = {f"tp-{tag}-{b}": items for b, items in banks.items()}
    ds = EvalDataset(name="locomo", source="", banks=renamed, questions=[],
                     unit_ids=lambda _r: None)
    with RCLLClient(s.base_url, timeout=300) as client:
        warm_up(client, variant, tag)
        for bank in renamed:
            client.delete_bank(bank)
        stats = ingest(client, ds, progress=False)
        for bank in renamed:  # keep the database the same size for every run
            client.delete_bank(bank)
    return stats


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--raw-child":
        _raw_child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], *sys.argv[5:7])
        return
    from rcll.config import Settings
    from rcll.dev import stack
    from rcll.eval.datasets import load_locomo, load_longmemeval

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--conversations", type=int, default=0,
                    help="first N conversations (LongMemEval: questions' haystacks; 0 = all)")
    ap.add_argument("--longmemeval", default=None, metavar="FILE",
                    help="ingest LongMemEval haystacks (e.g. longmemeval_s_dev60.json.gz) "
                         "instead of LoCoMo; also prints turns/s")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default="before,after")
    ap.add_argument("--base", default=None,
                    help="the commit 'before' runs (default: git merge-base HEAD main)")
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "throughput"))
    ap.add_argument("--pg-port", type=int, default=54371)
    ap.add_argument("--redis-port", type=int, default=6411)
    ap.add_argument("--api-port", type=int, default=8821)
    ap.add_argument("--out", default=None, help="write the runs and the summary as JSON")
    args = ap.parse_args()

    defaults = Settings()
    s = Settings(state_dir=Path(args.state_dir), pg_port=args.pg_port,
                 redis_url=f"redis://127.0.0.1:{args.redis_port}/0", api_port=args.api_port,
                 max_items_per_request=1000, auth=False)
    s.run_dir.mkdir(parents=True, exist_ok=True)
    base = args.base or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT,
                                       check=True, text=True, capture_output=True).stdout.strip()
    tree = base_tree(Path(args.state_dir), base)
    variants = [parse_variant(v.strip(), tree, defaults) for v in args.variants.split(",")]
    ds = (load_longmemeval(Path(args.longmemeval)) if args.longmemeval
          else load_locomo(Path(args.data)))
    banks = dict(list(ds.banks.items())[:args.conversations or None])
    texts = [it["content"] for items in banks.values() for it in items]
    cores = os.cpu_count() or 1
    runs: list[dict] = []
    try:
        stack.up(s, worker=False, log=lambda *_: None)
        print(f"{ds.name} chunk-mode ingest, {len(banks)} bank(s), {len(texts):,} items, "
              f"{args.rounds} round(s), {cores} cores; stack on {s.base_url}", flush=True)
        for r in range(1, args.rounds + 1):
            order = variants if r % 2 else variants[::-1]
            for v in order:
                raw1 = raw_embedder(texts, 1, 0, defaults.embed_batch_size, Path(args.state_dir))
                rawp = raw_embedder(texts, cores, 1, defaults.embed_batch_size,
                                    Path(args.state_dir))
                stats = run_service(s, v, banks, f"{v['name']}-{r}")
                raw = max(raw1, rawp)
                run = {"variant": v["name"], "round": r, "concurrency": v["concurrency"],
                       "torch_threads": v["threads"], "raw_1proc_default_threads": raw1,
                       f"raw_{cores}proc_1thread": rawp, "raw_best": raw, **stats,
                       "ratio": stats["units_per_s"] / raw,
                       "items_per_s": len(texts) / stats["seconds"],
                       "load_avg": os.getloadavg()[0]}
                runs.append(run)
                print(f"  round {r} {v['name']:7s} (c{v['concurrency']} t{v['threads']}): "
                      f"{stats['units']:,} units in {stats['seconds']:.1f} s = "
                      f"{stats['units_per_s']:.1f} units/s ({run['items_per_s']:.1f} items/s); "
                      f"raw embedder 1 proc x default "
                      f"threads {raw1:.1f}, {cores} procs x 1 thread {rawp:.1f} texts/s; "
                      f"ratio {run['ratio']:.2f} (load {run['load_avg']:.1f})", flush=True)
    finally:
        from rcll.dev import processes

        processes.stop(s.run_dir.resolve(), "worker")
        stack.down(s, log=lambda *_: None)
    summary = {}
    for v in variants:
        mine = [x for x in runs if x["variant"] == v["name"]]
        summary[v["name"]] = {
            "units_per_s": statistics.median(x["units_per_s"] for x in mine),
            "items_per_s": statistics.median(x["items_per_s"] for x in mine),
            "raw_best": statistics.median(x["raw_best"] for x in mine),
            "ratio": statistics.median(x["ratio"] for x in mine),
            "ratio_min": min(x["ratio"] for x in mine), "ratio_max": max(x["ratio"] for x in mine)}
        m = summary[v["name"]]
        print(f"median {v['name']:7s}: {m['units_per_s']:.1f} units/s "
              f"({m['items_per_s']:.1f} items/s), raw {m['raw_best']:.1f} "
              f"texts/s, ratio {m['ratio']:.2f} (range {m['ratio_min']:.2f}-"
              f"{m['ratio_max']:.2f})")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"runs": runs, "summary": summary, "items": len(texts), "cores": cores,
             "args": {k: os.path.relpath(v, ROOT) if isinstance(v, str) and os.path.isabs(v)
                      else v for k, v in vars(args).items()},  # no absolute paths in results
             "when": time.strftime("%Y-%m-%d %H:%M:%S")},
            indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
