"""Lexical channel: PostgreSQL full text with OR semantics, ranked by Okapi BM25.

``ts_rank`` has no inverse document frequency, so ranking is BM25 computed in SQL from the
stored ``tsvector`` (term frequency = positions per lexeme, length = lexemes per unit):
score = Σ_t idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)), idf(t) = ln(1 + (N − df + ½)/(df + ½))
(Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and Beyond";
k1 = 1.2, b = 0.75). From three query terms up, terms in ≥ ``df_cutoff`` of the bank's
units are dropped (spec §5); the rarest term is always kept.
"""

from __future__ import annotations

import math

from psycopg import Connection

from rcll.search.filters import unit_filter
from rcll.search.models import Candidate, RecallQuery

K1, B = 1.2, 0.75


def query_terms(conn: Connection, text: str) -> list[str]:
    """Distinct English lexemes of ``text`` (stemmed, stop words removed), in query order."""
    rows = conn.execute(
        "SELECT lexeme, positions[1] AS p FROM unnest(to_tsvector('english', %s)) ORDER BY 2",
        (text,),
    ).fetchall()
    return [r["lexeme"] for r in rows]


def _tsquery(terms: list[str]) -> str:
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


def lexical_candidates(conn: Connection, q: RecallQuery, bank_id: str, *, limit: int,
                       df_cutoff: float) -> tuple[list[Candidate], dict]:
    """Up to ``limit`` units by BM25; also ``{"terms", "dropped_terms", "n_units"}``."""
    info: dict = {"terms": [], "dropped_terms": [], "n_units": 0}
    terms = query_terms(conn, q.query)
    if not terms:
        return [], info
    where, params = unit_filter(q, bank_id)
    stats = conn.execute(
        f"""SELECT count(*) AS n, coalesce(avg(length(u.tsv)), 0) AS avgdl
            FROM memory_units u WHERE {where}""", params).fetchone()
    n, avgdl = int(stats["n"]), float(stats["avgdl"]) or 1.0
    info["n_units"] = n
    if n == 0:
        return [], info
    dfs = conn.execute(
        f"""SELECT t.term, (SELECT count(*) FROM memory_units u
                            WHERE {where} AND u.tsv @@ t.q::tsquery) AS df
            FROM unnest(%(terms)s::text[], %(tqs)s::text[]) AS t(term, q)""",
        {**params, "terms": terms, "tqs": [_tsquery([t]) for t in terms]},
    ).fetchall()
    df = {r["term"]: int(r["df"]) for r in dfs if r["df"]}
    kept = [t for t in terms if t in df]
    if len(terms) >= 3:
        common = [t for t in kept if df[t] / n >= df_cutoff]
        kept = [t for t in kept if t not in common] or sorted(kept, key=df.get)[:1]
        info["dropped_terms"] = [t for t in common if t not in kept]
    info["terms"] = kept
    if not kept:
        return [], info
    idf = [math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in kept]
    rows = conn.execute(
        f"""WITH qt AS (SELECT * FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS qt(term, idf)),
                 cand AS (SELECT u.id, u.tsv, length(u.tsv)::float8 AS dl FROM memory_units u
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
    return [Candidate(str(r["id"]), i, float(r["score"])) for i, r in enumerate(rows, 1)], info
