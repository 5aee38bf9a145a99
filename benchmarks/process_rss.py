"""Memory and CPU of each RCLL process during an ingest and a recall run: the numbers behind
the resource requests and limits in ``deploy/k8s/`` and the compose file.

Starts its own stack (state under ``--state-dir``, its own PostgreSQL, Redis and API ports):
the embedded PostgreSQL, Redis, one Celery worker per queue (as the compose file and the
Kubernetes manifests run them), beat and the API; ingests LoCoMo conversations through the
API in chunk mode, then asks their questions through the API, sampling every process tree
(a gunicorn master and its workers, a Celery worker and its pool child) every 0.5 s.

Prints, per role: peak and median PSS (MiB; proportional set size, so shared pages are not
counted twice across a tree), peak RSS (MiB), CPU seconds used per phase and the peak CPU
(cores, over 2 s windows). Stops everything it started.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/process_rss.py \
        --data ../shared/data/locomo --conversations 2 --questions 200
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import threading
import time
from pathlib import Path

import psutil

PHASES = ("idle", "ingest", "recall")


class Sampler(threading.Thread):
    """Samples PSS/RSS and CPU time of named process trees every ``interval_s`` seconds."""

    def __init__(self, roots: dict[str, int], interval_s: float = 0.5):
        super().__init__(daemon=True)
        self.roots = roots
        self.interval_s = interval_s
        self.phase = "idle"
        self.samples: list[tuple[float, str, str, float, float, float]] = []
        self._halt = threading.Event()

    @staticmethod
    def _tree(pid: int) -> list[psutil.Process]:
        try:
            root = psutil.Process(pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def run(self) -> None:
        while not self._halt.is_set():
            now = time.monotonic()
            for role, pid in self.roots.items():
                pss = rss = cpu = 0.0
                for p in self._tree(pid):
                    try:
                        info = p.memory_full_info()
                        pss += info.pss
                        rss += info.rss
                        t = p.cpu_times()
                        cpu += t.user + t.system + t.children_user + t.children_system
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        continue
                self.samples.append((now, self.phase, role, pss / 2**20, rss / 2**20, cpu))
            self._halt.wait(self.interval_s)

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def report(self) -> str:
        """A plain-text table: one row per role."""
        rows = ["role         | PSS peak MiB | PSS median MiB | RSS peak MiB | "
                + " | ".join(f"CPU s {p}" for p in PHASES) + " | CPU peak cores (2 s)"]
        for role in self.roots:
            mine = [s for s in self.samples if s[2] == role]
            if not mine:
                continue
            pss = [s[3] for s in mine]
            cpu_by_phase = []
            for phase in PHASES:
                ph = [s for s in mine if s[1] == phase]
                cpu_by_phase.append(f"{ph[-1][5] - ph[0][5]:.1f}" if len(ph) > 1 else "-")
            peak_cores = 0.0
            for i, s in enumerate(mine):
                j = i
                while j < len(mine) and mine[j][0] - s[0] < 2.0:
                    j += 1
                if j < len(mine):
                    peak_cores = max(peak_cores, (mine[j][5] - s[5]) / (mine[j][0] - s[0]))
            rows.append(f"{role:<12} | {max(pss):12.0f} | {statistics.median(pss):14.0f} | "
                        f"{max(s[4] for s in mine):12.0f} | "
                        + " | ".join(f"{c:>9}" for c in cpu_by_phase)
                        + f" | {peak_cores:.2f}")
        return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="LoCoMo folder (locomo10.json)")
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--state-dir", default=".rcll-bench/process-rss")
    ap.add_argument("--pg-port", type=int, default=55491)
    ap.add_argument("--redis-port", type=int, default=55492)
    ap.add_argument("--api-port", type=int, default=55493)
    ap.add_argument("--out", default=None, help="Also write the table here.")
    args = ap.parse_args()

    state = Path(args.state_dir).resolve()
    shutil.rmtree(state, ignore_errors=True)
    os.environ.update({
        "RCLL_STATE_DIR": str(state), "RCLL_PG_PORT": str(args.pg_port),
        "RCLL_REDIS_URL": f"redis://127.0.0.1:{args.redis_port}/0",
        "RCLL_API_PORT": str(args.api_port), "RCLL_AUTH": "off",
        "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})

    from rcll.client import RCLLClient
    from rcll.config import Settings
    from rcll.dev import processes, stack
    from rcll.eval.datasets import load_locomo
    from rcll.eval.runner import ingest
    from workers.queues import QueueNames

    settings = Settings()
    run_dir = settings.run_dir.resolve()
    names = [f"worker-{q}" for q in QueueNames.all()]
    try:
        stack.up(settings, api=False, worker=False)
        env = stack.child_env(settings)
        for q, name in zip(QueueNames.all(), names, strict=True):
            stack._start_logged(settings, name, stack.worker_cmd(settings, q, 1, name=name),
                                env, b" ready.", 180, print)
        stack.start_beat(settings, env)
        stack.up(settings, worker=False)  # the API (database and Redis already up)
        roots = {n.removeprefix("worker-"): processes.running_pid(run_dir, n) for n in names}
        roots |= {"beat": processes.running_pid(run_dir, "beat"),
                  "api": processes.running_pid(run_dir, "api")}
        pg_pid_file = state / "pgdata" / "postmaster.pid"
        if pg_pid_file.exists():
            roots["postgres"] = int(pg_pid_file.read_text().split()[0])
        redis_pid = processes.running_pid(run_dir, "redis")
        if redis_pid:
            roots["redis"] = redis_pid
        sampler = Sampler(roots)
        sampler.start()
        time.sleep(3)

        data = load_locomo(args.data)
        keep = list(data.banks)[: args.conversations]
        data.banks = {b: data.banks[b] for b in keep}
        questions = [q for q in data.questions if q.bank_id in keep][: args.questions]
        client = RCLLClient(settings.base_url, timeout=300)
        sampler.phase = "ingest"
        stats = ingest(client, data, progress=False)
        sampler.phase = "recall"
        t0 = time.perf_counter()
        for q in questions:
            client.recall(q.bank_id, q.query, limit=50, max_tokens=4096)
        recall_s = time.perf_counter() - t0
        time.sleep(1)
        sampler.stop()
        head = (f"LoCoMo {len(keep)} conversations: {stats['units']} units ingested in "
                f"{stats['seconds']:.1f} s ({stats['units_per_s']:.1f} units/s, chunk mode); "
                f"{len(questions)} recalls in {recall_s:.1f} s; {os.cpu_count()} cores, "
                f"load average {os.getloadavg()[0]:.1f}")
        table = f"{head}\n{sampler.report()}"
        print(table)
        if args.out:
            Path(args.out).write_text(table + "\n")
    finally:
        for name in names:
            processes.stop(run_dir, name)
        stack.down(settings)


if __name__ == "__main__":
    main()
