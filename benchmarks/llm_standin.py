"""One LoCoMo conversation retained in ``litellm`` mode end to end, through the replay
stand-in (``rcll-replay``, echo mode: one fact per sentence), on its own stack (PostgreSQL,
Redis, a real Celery worker started with the LLM settings by environment).

Prints: turns, chunk units, facts (per turn), links by type, the most frequent entity names
extraction gave, LLM usage of the job, seconds; then a closet made through the API (stored,
embedded, listed, recalled as ``kind = summary``); then a turn whose reply stays invalid:
the job's reason and the raw reply in the operation JSON.

    HF_HUB_OFFLINE=1 python benchmarks/llm_standin.py [--conversation conv-30]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo"  # beside the checkout
sys.path.insert(0, str(ROOT))

from rcll.config import Settings  # noqa: E402
from rcll.dev import postgres, processes, stack  # noqa: E402
from rcll.dev import redis as dev_redis  # noqa: E402
from rcll.eval.datasets import load_locomo  # noqa: E402
from rcll.store import migrate  # noqa: E402

BAD_MARK = "MARK-BENCH-BAD"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait(client, bank: str, op_id: str, timeout_s: float = 900) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        op = client.get(f"/v1/default/banks/{bank}/operations/{op_id}").get_json()
        if op["state"] in ("succeeded", "failed", "partial"):
            return op
        time.sleep(0.5)
    raise TimeoutError(op_id)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversation", default="conv-30")
    ap.add_argument("--data", default=str(LOCOMO))
    args = ap.parse_args()

    base = ROOT / ".rcll-bench"
    base.mkdir(exist_ok=True)
    state = Path(tempfile.mkdtemp(prefix="llm-", dir=base))
    os.chmod(state, 0o755)
    replay = state / "replay.json"
    replay.write_text(json.dumps({"default": "echo", "scripts": [
        {"match": BAD_MARK, "replies": [{"content": "I'm sorry, I can't produce JSON today."}]}]}))
    port = free_port()
    s = Settings(state_dir=state, pg_port=port,
                 database_url=f"postgresql://rcll@127.0.0.1:{port}/rcll_bench",
                 redis_url=f"redis://127.0.0.1:{free_port()}/0", api_port=free_port(),
                 llm_provider="litellm", llm_model="rcll-replay/echo", llm_replay_path=replay,
                 llm_backoff_s=0.05, closet_check_interval_s=3600)
    log = lambda *_: None  # noqa: E731
    postgres.start(s, log=log)
    try:
        postgres.create_database(s, "rcll_bench", drop=True)
        migrate.upgrade(s)
        stack.grant_reader(s)
        dev_redis.ensure(s, log=log)
        stack.start_worker(s, name="worker", log=log)
        run(s, args)
    finally:
        processes.stop(s.run_dir.resolve(), "worker")
        dev_redis.stop(s)
        postgres.stop(s, log=log)
        shutil.rmtree(state, ignore_errors=True)


def run(s: Settings, args) -> None:
    from api.app import create_app
    from rcll.bootstrap import bootstrap

    svc = bootstrap(s)
    svc.embedder.get()
    client = create_app(services=svc).test_client()
    ds = load_locomo(args.data)
    bank = f"eval-locomo-{args.conversation}"
    items = ds.banks[bank]
    print(f"LoCoMo {args.conversation}: {len(items)} turns; provider litellm, model "
          f"{s.llm_model} (replay stand-in, echo mode); worker processes {s.worker_processes}")
    t0 = time.monotonic()
    resp = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items})
    op = wait(client, bank, resp.get_json()["operation_id"])
    dt = time.monotonic() - t0
    with svc.pool.connection() as conn:
        kinds = conn.execute("""SELECT origin, kind, count(*) AS n FROM memory_units
                                WHERE bank_id = %s GROUP BY 1, 2 ORDER BY 1, 2""",
                             (bank,)).fetchall()
        links = conn.execute("""SELECT type, count(*) AS n FROM memory_links WHERE bank_id = %s
                                GROUP BY 1 ORDER BY 1""", (bank,)).fetchall()
        names = conn.execute("""SELECT unnest(entity_names) AS name FROM memory_units
                                WHERE bank_id = %s""", (bank,)).fetchall()
        emb = conn.execute("SELECT count(*) AS n FROM memory_embeddings WHERE bank_id = %s",
                           (bank,)).fetchone()["n"]
        sample = conn.execute("""SELECT text, entity_names FROM memory_units WHERE bank_id = %s
                                 AND origin = 'derived' ORDER BY created_at LIMIT 3""",
                              (bank,)).fetchall()
    facts = sum(r["n"] for r in kinds if r["origin"] == "derived")
    shown = ("units_created", "facts_created", "chunks_extracted", "chunks_failed",
             "units_embedded")
    print(f"retain job: {op['status']} in {dt:.1f} s ({dt / len(items):.3f} s/turn), "
          f"counts {json.dumps({k: op['counts'].get(k) for k in shown})}")
    print("units by origin/kind:", {f"{r['origin']}/{r['kind']}": r["n"] for r in kinds},
          f"embedded {emb}")
    print(f"facts {facts} = {facts / len(items):.2f} facts/turn; extraction version "
          f"{op['counts'].get('facts_created') and 'extract_facts/1'}")
    print("links by type:", {r["type"]: r["n"] for r in links})
    top = collections.Counter(r["name"] for r in names).most_common(8)
    print("top entity names from extraction:", top)
    print("llm usage of the job:", op["llm_usage"])
    for r in sample:
        print("  fact:", r["text"][:100], r["entity_names"])
    ents = client.get(f"/v1/default/banks/{bank}/entities?limit=5").get_json()
    print(f"GET entities: total {ents['total']}; top:",
          [(e["name"], e["mention_count"]) for e in ents["entities"]])
    with svc.pool.connection() as conn:
        fid = conn.execute("""SELECT id FROM memory_units WHERE bank_id = %s AND origin = 'derived'
                              AND kind <> 'summary' ORDER BY created_at LIMIT 1 OFFSET 40""",
                           (bank,)).fetchone()["id"]
    fact = client.get(f"/v1/default/banks/{bank}/memories/{fid}").get_json()
    print(f"GET memories/{{fact}}: {fact['kind']} {fact['origin']} {fact['text'][:70]!r}; "
          f"links {collections.Counter((x['direction'], x['type']) for x in fact['links'])}; "
          f"entities {[e['name'] for e in fact['entities']]}; "
          f"sources {[x['text'][:40] for x in fact['sources']]}")

    t0 = time.monotonic()
    resp = client.post(f"/v1/default/banks/{bank}/closets", json={})
    cop = wait(client, bank, resp.get_json()["operation_id"])
    listed = client.get(f"/v1/default/banks/{bank}/closets?limit=100").get_json()
    print(f"closets job: {cop['status']} in {time.monotonic() - t0:.1f} s, counts {cop['counts']}, "
          f"usage {cop['llm_usage']}")
    print(f"GET closets: total {listed['total']}")
    for c in listed["closets"][:3]:
        print(f"  {c['room']}/{c['hall']}: {len(c['source_unit_ids'])} sources, embedded "
              f"{c['embedded']}, unit {c['unit_id']}: {c['summary'][:90]!r}")
    if listed["closets"]:
        c = listed["closets"][0]
        rec = client.post(f"/v1/default/banks/{bank}/memories/recall",
                          json={"query": c["summary"][:100], "limit": 20}).get_json()
        hit = [i for i, r in enumerate(rec["results"]) if r["kind"] == "summary"]
        print(f"recall of the closet's text: summary results at ranks {hit[:5]}")

    bad = {"content": f"Caroline: this turn gets a reply that is never JSON {BAD_MARK}",
           "document_id": f"{args.conversation}/bad", "timestamp": items[-1].get("timestamp")}
    good = {**items[0], "document_id": f"{args.conversation}/again",
            "content": items[0]["content"] + " (again)"}
    resp = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [bad, good]})
    fop = wait(client, bank, resp.get_json()["operation_id"])
    print(f"failing reply job: {fop['status']}; reason: {fop['error'][:300]}")
    print(f"  item_errors[0]: {json.dumps(fop['item_errors'][0])[:400]}")
    svc.close()


if __name__ == "__main__":
    main()
