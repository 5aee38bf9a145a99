"""Documents ranked as well as chat: RCLL's recipes on CISI beside plain BM25 and MiniLM.

    cd <checkout> && HF_HUB_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True \
        .venv/bin/python benchmarks/cisi.py [--data ../shared/data/cisi] [--reuse]

Protocol (``../shared/data/README.md`` "cisi/"): one bank; each of the 1,460 documents of
``CISI.ALL`` (Latin-1) one retain item, ``document_id`` its id, content = title + blank line
+ abstract; each of the 76 judged queries asked once; documents ranked by the first
appearance of any of their units; nDCG@10, recall@100 and MRR@10.

Starts its own PostgreSQL (``--state-dir``, ``--port``; no Redis, no API: the tier-1
invalidation after a write is best effort and fails quietly) and ingests through the retain
service in-process (``RetainService.retain(async_=False)``: chunk → extract (no-op in chunk
mode) → entities → embed → link, the worker's stages), then runs ``recall`` in-process — the
code the API runs — for every recipe named in ``--recipes``. The references are computed in
the same run: rank-bm25 Okapi over whole documents (lower-cased word tokens, scikit-learn's
English stop words removed), MiniLM cosine over whole documents (the bundled
all-MiniLM-L6-v2, its 256-token window) and naive RRF (k 60) of the two.

Writes ``benchmarks/results/cisi.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rcll.eval.metrics import mrr_at_k, ndcg_at_k, recall_at_k  # noqa: E402

BANK = "cisi"
FIELD = re.compile(r"^\.([A-Z])\s*(.*)$")


def parse(path: Path) -> dict[str, dict[str, str]]:
    """``{id: {field letter: text}}`` of a CISI file (records ``.I <id>``, fields ``.T``,
    ``.A``, ``.W``, ``.X``, ``.B`` over several lines)."""
    out: dict[str, dict[str, str]] = {}
    cur: dict[str, list[str]] | None = None
    key = None
    for line in path.read_text(encoding="latin-1").splitlines():
        m = FIELD.match(line)
        if m and m.group(1) == "I":
            cur = {}
            out[m.group(2).strip()] = cur  # type: ignore[assignment]
            key = None
            continue
        if m and len(line) >= 2 and line[:2] == f".{m.group(1)}" and (len(line) == 2 or line[2] in " \t"):
            key = m.group(1)
            cur.setdefault(key, [])  # type: ignore[union-attr]
            rest = m.group(2).strip()
            if rest:
                cur[key].append(rest)  # type: ignore[index]
            continue
        if cur is not None and key is not None:
            cur[key].append(line)  # type: ignore[index]
    return {i: {k: "\n".join(v).strip() for k, v in rec.items()} for i, rec in out.items()}


def load(data: Path) -> tuple[dict[str, dict], dict[str, str], dict[str, set[str]]]:
    """``(documents {id: {"title", "abstract"}}, queries {id: text}, qrels {qid: {doc ids}})``
    — only the judged queries."""
    docs = {i: {"title": " ".join(r.get("T", "").split()), "abstract": r.get("W", "")}
            for i, r in parse(data / "CISI.ALL").items()}
    queries = {i: " ".join(r.get("W", "").split()) for i, r in parse(data / "CISI.QRY").items()}
    qrels: dict[str, set[str]] = {}
    for line in (data / "CISI.REL").read_text(encoding="latin-1").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            qrels.setdefault(parts[0], set()).add(parts[1])
    return docs, {q: queries[q] for q in qrels}, qrels


def content(doc: dict) -> str:
    return f"{doc['title']}\n\n{doc['abstract']}"


def score(ranking: list[str], gold: set[str]) -> dict[str, float]:
    return {"ndcg@10": ndcg_at_k(ranking, gold, 10), "recall@100": recall_at_k(ranking, gold, 100),
            "mrr@10": mrr_at_k(ranking, gold, 10)}


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in rows[0]}


# -- references: whole documents -----------------------------------------------------------
def _tokens(text: str) -> list[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    return [t for t in re.findall(r"\w+", text.lower()) if t not in ENGLISH_STOP_WORDS]


def bm25_rankings(docs: dict[str, dict], queries: dict[str, str]) -> dict[str, list[str]]:
    from rank_bm25 import BM25Okapi
    ids = list(docs)
    bm = BM25Okapi([_tokens(content(docs[i])) for i in ids])
    out = {}
    for q, text in queries.items():
        s = bm.get_scores(_tokens(text))
        out[q] = [ids[j] for j in np.argsort(-s, kind="stable")]
    return out


def minilm_rankings(docs: dict[str, dict], queries: dict[str, str],
                    cache: Path) -> dict[str, list[str]]:
    from rcll.models.embedder import SentenceTransformerEmbedder
    ids = list(docs)
    emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2", batch_size=32)
    if cache.exists():
        dv = np.load(cache)
    else:
        dv = emb.embed([content(docs[i]) for i in ids])
        np.save(cache, dv)
    qv = emb.embed(list(queries.values()))
    out = {}
    for q, v in zip(queries, qv, strict=True):
        out[q] = [ids[j] for j in np.argsort(-(dv @ v), kind="stable")]
    return out


def rrf_rankings(*lists: dict[str, list[str]], k: int = 60) -> dict[str, list[str]]:
    out = {}
    for q in lists[0]:
        s: dict[str, float] = {}
        for ranking in lists:
            for r, d in enumerate(ranking[q], 1):
                s[d] = s.get(d, 0.0) + 1.0 / (k + r)
        out[q] = sorted(s, key=lambda d: -s[d])
    return out


# -- RCLL ----------------------------------------------------------------------------------
def services(state: Path, port: int, reuse: bool, name: str = "cisi_bench"):
    from rcll.bootstrap import bootstrap
    from rcll.dev import postgres
    from rcll.dev.scratch import scratch_database

    if reuse:
        from rcll.config import Settings
        s = Settings(state_dir=state, pg_port=port,
                     database_url=f"postgresql://rcll@127.0.0.1:{port}/{name}")
        postgres.start(s, log=lambda *_: None)
        from rcll.store import migrate
        migrate.upgrade(s)
    else:
        s = scratch_database(state, port, name)
    # no Redis: tier 1 is not used in-process; its invalidation after a write is best effort
    s = s.model_copy(update={"redis_url": "redis://127.0.0.1:1/0", "metrics_port": 0})
    import logging
    logging.getLogger("rcll.cascade.invalidation").setLevel(logging.ERROR)
    return bootstrap(s)


def ingest(svc, docs: dict[str, dict]) -> dict:
    from rcll.retain.models import RetainItem
    retain = svc.retain_service(lambda *_: None)
    ids = list(docs)
    t = time.perf_counter()
    for a in range(0, len(ids), 100):
        items = [RetainItem(content=content(docs[i]), document_id=i,
                            metadata={"title": docs[i]["title"]}) for i in ids[a:a + 100]]
        job, _ = retain.retain(BANK, items, async_=False)
        if job["state"] != "succeeded":
            raise SystemExit(f"retain ended {job['state']}: {job.get('error')}")
        print(f"  ingested {a + len(items)}/{len(ids)}", file=sys.stderr, flush=True)
    with svc.pool.connection() as conn:
        conn.execute("ANALYZE")
    return {"seconds": round(time.perf_counter() - t, 1)}


def bank_stats(svc) -> dict:
    with svc.pool.connection() as conn:
        r = conn.execute(
            """SELECT count(*) AS units, count(DISTINCT document_id) AS documents,
                      avg(token_count)::float AS mean_tokens, avg(tsv_len)::float AS avgdl,
                      count(*) FILTER (WHERE kind = 'chunk') AS chunks
               FROM memory_units WHERE bank_id = %s""", (BANK,)).fetchone()
    return {k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()}


def rcll_rankings(svc, queries: dict[str, str], recipes: dict, names: list[str]
                  ) -> tuple[dict[str, dict[str, list[str]]], dict[str, dict]]:
    from rcll.search.models import MAX_QUERY_CHARS, RecallQuery
    from rcll.search.recall import recall
    ctx = svc.recall_context()
    out: dict[str, dict[str, list[str]]] = {n: {} for n in names}
    info: dict[str, dict] = {n: {"ms": []} for n in names}
    for q, text in queries.items():
        for n in names:
            t = time.perf_counter()
            # RecallQuery holds at most MAX_QUERY_CHARS (2,000): query 86 (~2,300) is cut there
            req = RecallQuery(query=text[:MAX_QUERY_CHARS], limit=300, max_tokens=1_000_000)
            res = recall(ctx, BANK, req.model_copy(update={"recipe": n}), recipes=recipes)
            info[n]["ms"].append((time.perf_counter() - t) * 1000)
            info[n]["recipe"] = res.recipe
            if getattr(res, "documents", None) is not None:
                info[n]["aggregation"] = res.aggregation
            out[n][q] = list(dict.fromkeys(r["document_id"] for r in res.results
                                           if r.get("document_id")))
    for n in names:
        ms = sorted(info[n].pop("ms"))
        info[n]["p50_ms"] = round(ms[len(ms) // 2], 1)
    return out, info


def variants() -> dict:
    """The measurements behind the ``document`` recipe's values: each one part changed."""
    from dataclasses import replace

    from rcll.search.recipes import COVERAGE, DENSE, POST, RECIPES, SESSION, Step
    doc, full = RECIPES["document"], RECIPES["full"]
    agg = doc.steps[0]
    v = {
        **{f"document dense {w}": replace(doc, name=f"document dense {w}",
                                          weights={**doc.weights, "dense": w})
           for w in (0.3, 0.5, 0.7, 1.5)},
        "document sum top2": replace(doc, name="document sum top2", steps=(
            Step.of("documents", aggregation="sum", top=2), *POST)),
        "document sum top3": replace(doc, name="document sum top3", steps=(
            Step.of("documents", aggregation="sum", top=3), *POST)),
        "document - aggregation": replace(doc, name="document - aggregation", steps=POST),
        "document with dense floor 0.3": replace(
            doc, name="document with dense floor 0.3",
            params={**doc.params, "dense": {"floor": 0.3}}),
        "document with chat lexical": replace(
            doc, name="document with chat lexical", params={"dense": DENSE}),
        "document - query_tf": replace(
            doc, name="document - query_tf",
            params={**doc.params, "lexical": {"df_cutoff": 1.01}}),
        "document + session": replace(doc, name="document + session",
                                      steps=(SESSION, agg, *POST)),
        "document + coverage": replace(doc, name="document + coverage",
                                       steps=(agg, COVERAGE, *POST)),
        "document + chat steps": replace(doc, name="document + chat steps", steps=(
            agg, *[s for s in full.steps if s.name not in ("worth", "l0",
                                                          "collapse_duplicates")], *POST)),
        "document + temporal + graph": replace(
            doc, name="document + temporal + graph",
            channels=(*doc.channels, "temporal", "graph"),
            weights={**doc.weights, "temporal": 0.3, "graph": 0.1}),
        "full with document lexical": replace(
            full, name="full with document lexical",
            params={**full.params, "lexical": RECIPES["document"].params["lexical"]}),
    }
    return v


VARIANTS = variants


def headings(svc, docs: dict[str, dict]) -> dict[str, str]:
    """``{unit id: heading}`` the chunk context gives the bank's chunks
    (:func:`rcll.retain.chunking.chunk_headings` of each document, title = its .T field)."""
    from rcll.retain.chunking import chunk_headings
    with svc.pool.connection() as conn:
        rows = conn.execute(
            """SELECT u.id::text AS id, u.text, d.document_id AS doc FROM memory_units u
               JOIN documents d ON d.id = u.document_id JOIN chunks c ON c.id = u.chunk_id
               WHERE u.bank_id = %s ORDER BY d.document_id, c.index""", (BANK,)).fetchall()
    by_doc: dict[str, list] = {}
    for r in rows:
        by_doc.setdefault(r["doc"], []).append(r)
    out = {}
    for d, units in by_doc.items():
        for u, h in zip(units, chunk_headings(content(docs[d]), [u["text"] for u in units],
                                              docs[d]["title"]), strict=True):
            if h:
                out[u["id"]] = h
    return out


def set_chunk_context(svc, on: bool, saved: dict) -> dict:
    """Chunk context on (the ``saved`` ``{unit id: heading}`` written, those units
    re-embedded with it) or off (cleared, re-embedded from their text alone) — the same
    bank measured both ways."""
    from rcll.retain.pipeline import embed_missing
    with svc.pool.connection() as conn, conn.transaction():
        ids = list(saved)
        conn.execute("""UPDATE memory_units u SET heading = x.h
                        FROM unnest(%s::uuid[], %s::text[]) AS x(id, h) WHERE u.id = x.id""",
                     (ids, [saved[i] if on else None for i in ids]))
        conn.execute("DELETE FROM memory_embeddings WHERE unit_id = ANY(%s::uuid[])", (ids,))
    embed_missing(svc.retain_context(), bank_id=BANK)
    with svc.pool.connection() as conn:
        conn.execute("ANALYZE memory_units")
    return saved


def main() -> None:
    from rcll.search.recipes import RECIPES

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "cisi"))
    ap.add_argument("--state-dir", default=str(ROOT / ".rcll-bench" / "cisi"))
    ap.add_argument("--port", type=int, default=55471)
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the bank a previous run ingested (same --state-dir)")
    ap.add_argument("--recipes",
                    default="default,full,hybrid,dense,lexical,document,document_lexical,"
                            "document_dense",
                    help="RCLL recipes to run ('default': what the bank gets with none named)")
    ap.add_argument("--variants", default="",
                    help="module:attr of a {name: Recipe} dict to run too (measurements)")
    ap.add_argument("--context-ablation", default="document,document_lexical,document_dense",
                    help="recipes also run with the chunk context set (then cleared: the "
                         "write path leaves it off, rcll.search.recipes.CHUNK_CONTEXT)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cisi.json"))
    args = ap.parse_args()
    docs, queries, qrels = load(Path(args.data))
    print(f"CISI: {len(docs)} documents, {len(queries)} judged queries", file=sys.stderr)
    state = Path(args.state_dir)
    svc = services(state, args.port, args.reuse)
    with svc.pool.connection() as conn:
        have = conn.execute("SELECT count(*) AS n FROM documents WHERE bank_id = %s",
                            (BANK,)).fetchone()["n"]
    ingest_info = {"reused": True} if have == len(docs) else ingest(svc, docs)
    recipes = dict(RECIPES)
    names = [n for n in args.recipes.split(",") if n]
    if args.variants:
        mod, attr = args.variants.split(":")
        extra = getattr(__import__(mod, fromlist=[attr]), attr)
        extra = extra() if callable(extra) else extra
        recipes.update(extra)
        names += [n for n in extra if n not in names]
    # "default": no recipe named, so the bank's own rule picks it (None → per-bank default)
    lookup = {**recipes}
    rankings: dict[str, dict[str, list[str]]] = {}
    t = time.perf_counter()
    rankings["rank-bm25 (whole doc)"] = bm25_rankings(docs, queries)
    rankings["MiniLM cosine (whole doc)"] = minilm_rankings(docs, queries,
                                                            state / "minilm_docs.npy")
    rankings["RRF k60 (bm25 + MiniLM)"] = rrf_rankings(rankings["rank-bm25 (whole doc)"],
                                                      rankings["MiniLM cosine (whole doc)"])
    print(f"references in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    ran, info = rcll_rankings(svc, queries, lookup, [None if n == "default" else n
                                                     for n in names])
    for n in names:
        key = None if n == "default" else n
        label = f"rcll default ({info[key]['recipe']})" if n == "default" else f"rcll {n}"
        rankings[label] = ran[key]
        info[label] = info.pop(key)
    if args.context_ablation:
        abl = [n for n in args.context_ablation.split(",") if n]
        saved = headings(svc, docs)
        set_chunk_context(svc, True, saved)
        try:
            ran_off, info_off = rcll_rankings(svc, queries, lookup, abl)
        finally:
            set_chunk_context(svc, False, saved)
        for n in abl:
            label = f"rcll {n} (with chunk context)"
            rankings[label], info[label] = ran_off[n], info_off[n]
        info["chunk context"] = {"units_with_heading": len(saved)}
    table = {}
    for label, r in rankings.items():
        table[label] = {**mean([score(r[q], qrels[q]) for q in queries]), **info.get(label, {})}
    print(f"\n### CISI: {len(docs)} documents, {len(queries)} judged queries, "
          f"bank {bank_stats(svc)}\n")
    print("| ranking | nDCG@10 | recall@100 | MRR@10 | notes |")
    print("|---|---|---|---|---|")
    for label, m in table.items():
        notes = ", ".join(f"{k} {v}" for k, v in m.items() if k not in ("ndcg@10", "recall@100",
                                                                          "mrr@10"))
        print(f"| {label} | {m['ndcg@10']:.3f} | {m['recall@100']:.3f} | {m['mrr@10']:.3f} | "
              f"{notes} |")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"dataset": "cisi", "documents": len(docs), "queries": len(queries),
             "bank": bank_stats(svc), "ingest": ingest_info,
             "recipes": {n: recipes[n].describe() for n in names if n in recipes},
             "results": table, "when": time.strftime("%Y-%m-%d %H:%M:%S")},
            indent=1) + "\n")
    svc.close()


if __name__ == "__main__":
    main()
