"""Lexical channel at scale: p50/p95 of the old and the new query, and overlap@10 vs exact BM25.

Builds its own database on the dev PostgreSQL (``rcll dev up``; same RCLL_* environment):
a bank of 300k units, one of 100k and twenty of 500, all REAL sentences — LoCoMo and
LongMemEval turns, repeated and recombined (a unit past the first pass over the pool is two
turns joined) — inserted with ``INSERT … SELECT`` (no vectors: the lexical channel needs
none). The 500-unit bank ``small-00`` holds LoCoMo conversation conv-26 (padded with other
turns) and is asked conv-26's questions; the big banks are asked questions from all ten
conversations.

Phase ``before``: the previous schema's one GIN index over all banks (``gin (tsv)``) and the
previous query (per-query df counts, the average length — the token count since migration
0015 — every match's tsvector unnested): exact BM25, kept here as the baseline. Phase
``after``: the bank-leading index of migration 0006 and
``rcll.search.lexical.lexical_candidates``. Times are client-side around one call on the
same machine (PostgreSQL on loopback), after one warm-up pass::

    PYTHONPATH=. python benchmarks/lexical_scale.py --scale 0.1   # ~50k units, a minute or two
    PYTHONPATH=. python benchmarks/lexical_scale.py               # 410k units, ~15 min

(``PYTHONPATH=.``: this checkout's ``rcll``, not an installed one.) Both phases run on the
schema of migration 0006 (``tsv`` with n-grams, the covering ``memory_units_bank_live``
index); only the full-text index and the query differ. ``--reuse`` skips the build.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from rcll.config import get_settings
from rcll.dev import postgres
from rcll.eval.datasets import load_locomo, load_longmemeval
from rcll.search.lexical import K1, B, _tsquery, lexical_candidates, query_terms
from rcll.search.models import RecallQuery
from rcll.search.scope import CallerScope
from rcll.store import migrate

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def old_lexical(conn, q: RecallQuery, bank_id: str, *, limit: int, df_cutoff: float):
    """The lexical query before migration 0006 (exact BM25), verbatim but for the terms and
    BM25's length: the token count of migration 0015, computed per query as the old query
    computed its lexeme count, so the overlap with the new query measures pruning only."""
    terms = query_terms(conn, q.query)
    if not terms:
        return []
    where, params = CallerScope.for_query(bank_id, q, None).where("u")
    stats = conn.execute(
        f"""SELECT count(*) AS n, coalesce(avg(rcll_tsv_token_count(u.tsv)), 0) AS avgdl
            FROM memory_units u WHERE {where}""", params).fetchone()
    n, avgdl = int(stats["n"]), float(stats["avgdl"]) or 1.0
    if n == 0:
        return []
    dfs = conn.execute(
        f"""SELECT t.term, (SELECT count(*) FROM memory_units u
                            WHERE {where} AND u.tsv @@ t.q::tsquery) AS df
            FROM unnest(%(terms)s::text[], %(tqs)s::text[]) AS t(term, q)""",
        {**params, "terms": terms, "tqs": [_tsquery([t]) for t in terms]},
    ).fetchall()
    df = {r["term"]: int(r["df"]) for r in dfs if r["df"]}
    kept = [t for t in terms if t in df]
    if len(terms) >= 3:
        # the NEW pruning rule, so that both phases score the same terms
        common = [t for t in kept if df[t] / n >= df_cutoff and df[t] >= 10]
        kept = [t for t in kept if t not in common] or sorted(kept, key=df.get)[:1]
    if not kept:
        return []
    idf = [math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in kept]
    rows = conn.execute(
        f"""WITH qt AS (SELECT * FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS qt(term, idf)),
                 cand AS (SELECT u.id, u.tsv, rcll_tsv_token_count(u.tsv)::float8 AS dl FROM memory_units u
                          WHERE {where} AND u.tsv @@ %(tsq)s::tsquery)
            SELECT c.id, sum(qt.idf * (tf.v * %(k1p1)s)
                         / (tf.v + %(k1)s * (1 - %(b)s + %(b)s * c.dl / %(avgdl)s))) AS score
            FROM cand c
            CROSS JOIN LATERAL unnest(c.tsv) AS t(lexeme, positions, weights)
            JOIN qt ON qt.term = t.lexeme
            CROSS JOIN LATERAL (SELECT coalesce(array_length(t.positions, 1), 1)::float8 AS v) tf
            GROUP BY c.id
            ORDER BY score DESC, c.id
            LIMIT %(limit)s""",
        {**params, "terms": kept, "idf": idf, "tsq": _tsquery(kept), "k1": K1, "k1p1": K1 + 1,
         "b": B, "avgdl": avgdl, "limit": limit},
    ).fetchall()
    return [(str(r["id"]), float(r["score"])) for r in rows]


def new_lexical(conn, q, bank_id, *, limit, df_cutoff):
    cands, _ = lexical_candidates(conn, CallerScope.for_query(bank_id, q, None), q.query,
                                  limit=limit, df_cutoff=df_cutoff)
    return [(c.unit_id, c.score) for c in cands]


def build(conn, scale: float, log) -> dict[str, int]:
    locomo = load_locomo(DATA / "locomo")
    lme = load_longmemeval(DATA / "longmemeval" / "longmemeval_s_dev60.json.gz")
    conv26 = [it["content"] for it in locomo.banks["eval-locomo-conv-26"]]
    seen, pool = set(), []
    for ds in (locomo, lme):
        for items in ds.banks.values():
            for it in items:
                t = it["content"][:1200]
                if t not in seen:
                    seen.add(t)
                    pool.append(t)
    random.Random(7).shuffle(pool)
    log(f"pool: {len(pool)} distinct turns")
    sizes = {"big-300k": int(300_000 * scale), "big-100k": int(100_000 * scale)}
    sizes.update({f"small-{i:02d}": 500 for i in range(20)})
    conn.execute("CREATE TEMP TABLE pool (i int PRIMARY KEY, t text NOT NULL)")
    with conn.cursor().copy("COPY pool (i, t) FROM STDIN") as cp:
        for i, t in enumerate(pool):
            cp.write_row((i, t))
    p = len(pool)
    for bank, n in sizes.items():
        conn.execute("INSERT INTO memory_banks (id, name) VALUES (%s, %s)", (bank, bank))
        if bank == "small-00":
            conn.execute("INSERT INTO memory_units (bank_id, text) SELECT %s, unnest(%s::text[])",
                         (bank, conv26))
            n -= len(conv26)
        salt = sum(map(ord, bank))
        t0 = time.perf_counter()
        for lo in range(0, n, 50_000):
            conn.execute(
                """INSERT INTO memory_units (bank_id, text)
                   SELECT %(bank)s, CASE WHEN g < %(p)s THEN a.t ELSE a.t || ' ' || b.t END
                   FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g
                   JOIN pool a ON a.i = (g::bigint * 7919 + %(salt)s) %% %(p)s
                   JOIN pool b ON b.i = (g::bigint * 104729 + 13) %% %(p)s""",
                {"bank": bank, "p": p, "lo": lo, "hi": min(n, lo + 50_000) - 1, "salt": salt})
            conn.commit()
        if n > 1000:
            log(f"{bank}: {sizes[bank]} units in {time.perf_counter() - t0:.0f} s")
    conn.commit()
    return sizes


def timed(conn, fn, queries, bank):
    """Per-query ms and ``[(unit id, score)]`` (one warm-up call per query first)."""
    ms, out = [], []
    for q in queries:
        fn(conn, q, bank, limit=300, df_cutoff=0.15)
    for q in queries:
        t = time.perf_counter()
        ids = fn(conn, q, bank, limit=300, df_cutoff=0.15)
        ms.append((time.perf_counter() - t) * 1000)
        out.append(ids)
    return ms, out


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="big banks = 300k·scale, 100k·scale")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--db", default="rcll_lexbench")
    ap.add_argument("--reuse", action="store_true", help="keep the database an earlier run built")
    args = ap.parse_args()
    settings = get_settings()
    url = f"postgresql://rcll@127.0.0.1:{settings.pg_port}/{args.db}"
    log = lambda m: print(m, flush=True)  # noqa: E731
    if not args.reuse:
        postgres.create_database(settings, args.db, drop=True)
        migrate.upgrade(settings, url)
    conn = psycopg.connect(url, row_factory=dict_row)
    conn.execute("SET maintenance_work_mem = '512MB'")
    if not args.reuse:
        build(conn, args.scale, log)
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE memory_units")
        conn.autocommit = False
    total = conn.execute("SELECT count(*) AS n FROM memory_units").fetchone()["n"]
    log(f"{total} units in the database")

    locomo = [json.loads(line) for line in
              (DATA / "locomo" / "locomo10_queries.jsonl").read_text().splitlines()]
    rng = random.Random(11)
    small_q = [RecallQuery(query=r["question"], channels="lexical") for r in rng.sample(
        [r for r in locomo if r["sample_id"] == "conv-26"], args.queries)]
    big_q = [RecallQuery(query=r["question"], channels="lexical")
             for r in rng.sample(locomo, args.queries)]
    size = {r["bank_id"]: r["n"] for r in conn.execute(
        "SELECT bank_id, count(*) AS n FROM memory_units GROUP BY 1").fetchall()}
    cases = [(f"{size[b]}-unit bank", b, qs) for b, qs in
             (("small-00", small_q), ("big-100k", big_q), ("big-300k", big_q))]

    def index(kind: str) -> None:
        t = time.perf_counter()
        conn.execute("DROP INDEX IF EXISTS memory_units_tsv")
        conn.execute("DROP INDEX IF EXISTS memory_units_bank_tsv")
        if kind == "old":
            conn.execute("CREATE INDEX memory_units_tsv ON memory_units USING gin (tsv)")
        else:
            conn.execute("CREATE INDEX memory_units_bank_tsv ON memory_units "
                         "USING gin (bank_id, tsv)")
        conn.execute("ANALYZE memory_units")
        conn.commit()
        log(f"index {kind}: built in {time.perf_counter() - t:.0f} s")

    res: dict = {}
    for phase, kind, fn in (("before", "old", old_lexical), ("after", "new", new_lexical)):
        index(kind)
        for label, bank, qs in cases:
            ms, ids = timed(conn, fn, qs, bank)
            conn.rollback()
            res[(phase, label)] = (ms, ids)
            log(f"{phase:6} {label:18} p50 {statistics.median(ms):8.1f} ms  "
                f"p95 {pct(ms, 95):8.1f} ms")
    print(f"\nlexical channel, {total} units in the database, {args.queries} LoCoMo questions "
          "per bank, limit 300")
    print("| bank | before p50 / p95 ms | after p50 / p95 ms | overlap@10 vs exact "
          "| exact BM25 score of the top 10 |")
    print("|---|---|---|---|---|")
    for label, _, _ in cases:
        (bm, bres), (am, ares) = res[("before", label)], res[("after", label)]
        ov, mass = [], []
        for a, b in zip(ares, bres, strict=True):
            if not b:
                continue
            top = {u for u, _ in b[:10]}
            ov.append(len({u for u, _ in a[:10]} & top) / len(top))
            exact = dict(b)
            mass.append(sum(exact.get(u, 0.0) for u, _ in a[:10]) / sum(s for _, s in b[:10]))
        print(f"| {label} | {statistics.median(bm):.1f} / {pct(bm, 95):.1f} | "
              f"{statistics.median(am):.1f} / {pct(am, 95):.1f} | "
              f"{statistics.mean(ov) if ov else float('nan'):.3f} | "
              f"{statistics.mean(mass) if mass else float('nan'):.3f} |")

if __name__ == "__main__":
    main()
