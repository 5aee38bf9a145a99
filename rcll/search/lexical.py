"""Lexical channel: PostgreSQL full text with OR semantics, ranked by Okapi BM25.

Terms: the English lexemes of the query plus character bigrams of its Han/kana/Hangul/Thai
runs (``rcll_lex_query_tsvector``, migration 0006); units are indexed the same way
(``memory_units.tsv``, one GIN index led by ``bank_id`` so a bank reads only its postings).

``ts_rank`` has no inverse document frequency, so ranking is BM25 computed in SQL from the
stored ``tsvector`` (term frequency = positions per lexeme; document length = the unit's
token count, Σ tf over all its lexemes, stored as ``tsv_len`` by migration 0015 — before it,
the number of distinct lexemes, which under-penalised long units repeating their words):
score = Σ_t idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)), idf(t) = ln(1 + (N − df + ½)/(df + ½))
(Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25 and Beyond";
k1 = 1.2, b = 0.75).

Pruning (spec §5): from three query terms up, a term is *common* — and dropped — when it is
in ≥ ``df_cutoff`` of the bank's units **and** in at least ``MIN_COMMON_DF`` units; the
rarest term is always kept. The absolute floor keeps small banks' distinctive words: in a
6-unit bank a word in one unit is 17 % of the bank but is the best evidence there is.

Bounded scoring: the kept terms are taken rarest first while their document frequencies add
up to at most ``score_budget`` postings; only units holding one of those terms are scored
(with every kept term). When all kept terms fit — always in banks under ~1,000 units (a
kept term is in < 15 % of them), and for most queries in bigger ones — this is exact BM25;
otherwise units that only hold the
commonest terms are not candidates (a max-score/WAND-style bound: Turtle & Flood 1995,
"Query evaluation: strategies and optimizations"), which keeps a 300k-unit bank's cost at
a few thousand rows instead of every match.

Statistics: exact (N, avgdl, df counted per term) in banks up to ``EXACT_STATS_MAX`` units;
above that, estimated from a uniform sample of the bank read from an index (``_sampled_stats``),
so no step of the channel reads every unit of a big bank.
"""

from __future__ import annotations

import math

from psycopg import Connection

from rcll.search.dense import _scope
from rcll.search.models import Candidate
from rcll.search.scope import CallerScope, ScopeSizes

K1, B = 1.2, 0.75
# A term in fewer units than this is never "common" whatever its share of the bank: pruning
# is for words that flood the candidates (spec §5), and below 10 postings a term neither
# floods nor costs anything. 10 / 0.15 ≈ 67 units: in banks above that (LoCoMo's are
# 300–700) the 15 % rule alone decides, as before.
MIN_COMMON_DF = 10
# Most postings scored per query (sum of the document frequencies of the scored terms).
SCORE_BUDGET = 5_000
# Banks up to this many (filtered) units get exact N, avgdl and df; above, the statistics
# come from a uniform sample of STATS_SAMPLE units (see ``_sampled_stats``), and the terms the
# sample puts under EXACT_DF_CAP units — those that can be scored — are counted exactly
# (up to that cap). Measured on a 300k-unit bank (benchmarks/lexical_scale.py): cap 2,000
# → overlap@10 with exact BM25 0.86, cap 5,000 → 0.90, at +10 ms.
EXACT_STATS_MAX = 10_000
STATS_SAMPLE = 2_500
EXACT_DF_CAP = SCORE_BUDGET
# Most neighbours a unit lends words to / borrows words from in the context score: the
# temporal links are 2 per unit each way (rcll.retain.entity_stage), so 4 in a conversation;
# the cap bounds the fan-out should a bank hold more (the first by neighbour id, so the
# stored length of migration 0018 and the words agree on which).
CONTEXT_FANOUT = 8
# SQL for a unit's BM25 document length, ``{u}`` being the unit's table alias: the stored
# token count (migration 0015). benchmarks/bm25_length.py substitutes inline definitions to
# compare length notions side by side on one database.
DOC_LEN = "{u}.tsv_len"
# The stored neighbour length Σ w · tsv_len (migration 0018), trusted only for a unit with
# no row in ``nb_len_stale`` (a write since the last refresh) and only with the stored token
# count as DOC_LEN; otherwise (NULL) the sum is computed at query time.
NEIGHBOUR_LEN = ("CASE WHEN NOT EXISTS (SELECT 1 FROM nb_len_stale st WHERE st.unit_id = {u}.id)"
                 " THEN {u}.nb_len END")


# A unit's temporal neighbours (``nb``, ``weight``), either direction, the first
# CONTEXT_FANOUT by id (the order migration 0018's stored length uses).
_NEIGHBOURS = """SELECT nb, weight FROM (
                 SELECT to_unit AS nb, weight FROM memory_links
                 WHERE from_unit = {unit} AND type = 'temporal'
                 UNION ALL
                 SELECT from_unit, weight FROM memory_links
                 WHERE to_unit = {unit} AND type = 'temporal') a
             ORDER BY nb LIMIT %(fanout)s"""


def _dl(alias: str) -> str:
    return DOC_LEN.format(u=alias)


def _nb_len(alias: str) -> str:
    return NEIGHBOUR_LEN.format(u=alias) if DOC_LEN == "{u}.tsv_len" else "NULL::real"


# tf from the unit's tsvector reduced to the query's lexemes (setweight marks them,
# ts_filter keeps them): 6x cheaper than unnesting every lexeme of every candidate.
_PLAIN_SQL = """
WITH qt AS (SELECT * FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS qt(term, idf)),
     cand AS (SELECT u.id, ({dl_u})::float8 AS dl,
                     ts_filter(setweight(u.tsv, 'A', %(terms)s::text[]), '{{a}}') AS qv
              FROM memory_units u
              WHERE {where} AND u.tsv @@ %(tsq)s::tsquery)
SELECT c.id::text AS id, sum(qt.idf * (tf.v * %(k1p1)s)
             / (tf.v + %(k1)s * (1 - %(b)s + %(b)s * c.dl / %(avgdl)s))) AS score,
       array_agg(t.lexeme) AS held
FROM cand c
CROSS JOIN LATERAL unnest(c.qv) AS t(lexeme, positions, weights)
JOIN qt ON qt.term = t.lexeme
CROSS JOIN LATERAL (SELECT coalesce(array_length(t.positions, 1), 1)::float8 AS v) tf
GROUP BY c.id
ORDER BY score DESC, c.id
LIMIT %(limit)s"""

# BM25 with the neighbours' words as a second field (BM25F-style: Robertson, Zaragoza &
# Taylor 2004, "Simple BM25 extension to multiple weighted fields"): a unit's term frequency
# is its own tf plus γ · w · tf of each neighbour, its length likewise, where the neighbours
# are the units joined to it by ``temporal`` links (either direction, weight w: the turns
# just before and after it in a conversation, or the adjacent chunks of a document — see
# rcll.store.entity_links.temporal). A turn that answers "yes, last Tuesday!" to a question
# about the parade is found by "parade". Only units in scope contribute words and only units
# in scope are ranked. The average length is the candidates' mean augmented length scaled
# to the bank: avgdl · mean(dl_aug / dl). The returned text stays the unit's own. The
# neighbours' length Σ w · dl is read from ``memory_units.nb_len`` (migration 0018); where it
# is NULL (a neighbour with another audience or purposes, whose visibility depends on the
# caller) or marked stale (written since the last refresh) it is summed here over the
# neighbours the caller sees.
_CONTEXT_SQL = """
WITH qt AS (SELECT * FROM unnest(%(terms)s::text[], %(idf)s::float8[]) AS qt(term, idf)),
     m AS MATERIALIZED (
         SELECT u.id, ts_filter(setweight(u.tsv, 'A', %(terms)s::text[]), '{{a}}') AS qv
         FROM memory_units u
         WHERE {where} AND u.tsv @@ %(tsq)s::tsquery),
     mt AS MATERIALIZED (
         SELECT m.id, t.lexeme AS term, coalesce(array_length(t.positions, 1), 1)::float8 AS tf
         FROM m CROSS JOIN LATERAL unnest(m.qv) AS t(lexeme, positions, weights)),
     mn AS MATERIALIZED (
         SELECT m.id, l.nb, l.weight FROM m CROSS JOIN LATERAL ({neighbours_m}) l),
     agg AS MATERIALIZED (
         SELECT target, term, sum(tf) AS tf, bool_or(own) AS own FROM (
             SELECT id AS target, term, tf, TRUE AS own FROM mt
             UNION ALL
             SELECT mn.nb, mt.term, %(gamma)s * mn.weight * mt.tf, FALSE
             FROM mn JOIN mt ON mt.id = mn.id) c
         GROUP BY 1, 2),
     tgt AS MATERIALIZED (
         SELECT u.id, u.dl, u.dl + %(gamma)s * coalesce(u.nb_len, (
             SELECT sum(l.weight * ({dl_o})) FROM ({neighbours_u}) l
             JOIN memory_units o ON o.id = l.nb AND {vis_o}), 0) AS dl_aug
         FROM (SELECT DISTINCT target FROM agg) a
         CROSS JOIN LATERAL (SELECT u.id, ({dl_u})::float8 AS dl, {nb_u} AS nb_len
                             FROM memory_units u
                             WHERE u.id = a.target AND {where} LIMIT 1) u),
     norm AS MATERIALIZED (
         SELECT %(avgdl)s * coalesce(avg(dl_aug / greatest(dl, 1)), 1) AS avgdl FROM tgt)
SELECT g.id::text AS id, sum(qt.idf * (a.tf * %(k1p1)s)
             / (a.tf + %(k1)s * (1 - %(b)s + %(b)s * g.dl_aug / norm.avgdl))) AS score,
       array_agg(a.term) FILTER (WHERE a.own) AS held
FROM tgt g CROSS JOIN norm
JOIN agg a ON a.target = g.id
JOIN qt ON qt.term = a.term
GROUP BY g.id
ORDER BY score DESC, g.id
LIMIT %(limit)s"""


def query_terms(conn: Connection, text: str) -> list[str]:
    """Distinct lexical terms of ``text`` in query order: English lexemes (stemmed, stop words
    removed), then bigrams of unsegmented-script runs (a one-character run: that character)."""
    return list(_terms_and_size(conn, text)[0])


def _tsquery(terms: list[str]) -> str:
    return " | ".join("'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms)


def _doc_freqs(conn: Connection, where: str, params: dict, terms: list[str],
               cap: int | None) -> dict[str, int]:
    """Units of the bank (after ``where``) holding each term; counting stops at ``cap``."""
    inner = f"SELECT 1 FROM memory_units u WHERE {where} AND u.tsv @@ t.q::tsquery"
    if cap is not None:
        inner += " LIMIT %(cap)s"
    rows = conn.execute(
        f"""SELECT t.term, (SELECT count(*) FROM ({inner}) s) AS df
            FROM unnest(%(terms)s::text[], %(tqs)s::text[]) AS t(term, q)""",
        {**params, "terms": terms, "tqs": [_tsquery([t]) for t in terms], "cap": cap},
    ).fetchall()
    return {r["term"]: int(r["df"]) for r in rows if r["df"]}


def _terms_and_size(conn: Connection, text: str, where: str = "", params: dict | None = None,
                    cap: int | None = None
                    ) -> tuple[dict[str, int], int | None, float | None]:
    """``(term counts, n, avgdl)`` in one statement: the lexical terms of ``text`` as
    :func:`query_terms` gives them, each with how often ``text`` says it (its positions in the
    query's tsvector: what ``query_tf`` weighs its idf by), and, with ``cap``, how many
    units ``where`` selects counted up to ``cap`` and their mean
    BM25 length (``None, None`` without ``cap``)."""
    size = (f""", (SELECT count(*) AS n, coalesce(avg(s.dl), 0) AS avgdl
                   FROM (SELECT {_dl("u")} AS dl FROM memory_units u WHERE {where}
                         LIMIT %(cap)s) s) z""" if cap is not None else "")
    row = conn.execute(
        f"""SELECT q.terms, q.tfs{", z.n, z.avgdl" if cap is not None else ""}
            FROM (SELECT coalesce(array_agg(t.lexeme ORDER BY t.positions[1]), '{{}}') AS terms,
                         coalesce(array_agg(coalesce(array_length(t.positions, 1), 1)
                                            ORDER BY t.positions[1]), '{{}}') AS tfs
                  FROM unnest(rcll_lex_query_tsvector(%(lex_query)s)) AS t) q{size}""",
        {**(params or {}), "lex_query": text, "cap": cap}).fetchone()
    counts = {t: int(c) for t, c in zip(row["terms"], row["tfs"], strict=True)}
    if cap is None:
        return counts, None, None
    return counts, int(row["n"]), float(row["avgdl"])


def _sampled_stats(conn: Connection, where: str, params: dict, terms: list[str],
                   sample: int) -> tuple[int, float, dict[str, float]]:
    """``(N, avgdl, sampled_df)`` of the units ``where`` selects, for a scope above the
    exact-statistics size: estimates from a uniform sample — the ``sample`` units with the
    smallest ``sample_key`` (a 64-bit hash of the unit id, read in order from
    ``memory_units_bank_live``): N by the k-minimum-values estimator N ≈ (k − 1) / U_k with
    U_k the k-th smallest key as a fraction of the key space (Beyer et al. 2007, "On
    synopses for distinct-value estimation under multiset operations"; relative error ≈
    1/√k), avgdl as the sample mean, and each term's df as its share of the sample times N.
    """
    # one pass over the sample: each unit's vector reduced to the query's lexemes, unnested
    row = conn.execute(
        f"""WITH s AS MATERIALIZED (
                 SELECT u.sample_key, {_dl("u")} AS dl,
                        ts_filter(setweight(u.tsv, 'A', %(terms)s::text[]), '{{a}}') AS qv
                 FROM memory_units u WHERE {where} ORDER BY u.sample_key LIMIT %(k)s)
            SELECT (SELECT max(sample_key) FROM s) AS kth,
                   (SELECT count(*) FROM s) AS k, (SELECT avg(dl) FROM s) AS avgdl,
                   (SELECT coalesce(jsonb_object_agg(h.term, h.hits), '{{}}') FROM (
                        SELECT t.lexeme AS term, count(*) AS hits
                        FROM s CROSS JOIN LATERAL unnest(s.qv) AS t GROUP BY 1) h) AS hits""",
        {**params, "k": sample, "terms": terms},
    ).fetchone()
    k, hits = int(row["k"]), row["hits"]
    u_k = (int(row["kth"]) + 2 ** 63 + 1) / 2 ** 64  # signed 64-bit key → (0, 1]
    n = max(k, round((k - 1) / u_k))
    return n, float(row["avgdl"]), {t: hits.get(t, 0) / k * n for t in terms}


def lexical_candidates(conn: Connection, scope: CallerScope, query: str, *, limit: int,
                       df_cutoff: float, score_budget: int = SCORE_BUDGET,
                       min_common_df: int = MIN_COMMON_DF, exact_stats_max: int = EXACT_STATS_MAX,
                       stats_sample: int = STATS_SAMPLE,
                       context_weight: float = 0.0,
                       context_max_avgdl: float | None = None,
                       prf_terms: int = 0, prf_docs: int = 10,
                       prf_weight: float = 0.3,
                       prf_separate: bool = False,
                       query_tf: bool = False,
                       sizes: ScopeSizes | None = None) -> tuple[list[Candidate], dict]:
    """Up to ``limit`` units of ``scope`` (bank, hierarchy filters, audience and purpose)
    by BM25 of ``query``, best first. N, avgdl and the document frequencies are counted
    over the scope's units only, so an invisible unit changes no score.

    ``context_weight`` γ > 0 scores each unit with its neighbours' words as a second field
    (see :data:`_CONTEXT_SQL`); 0 is plain BM25 over the unit's own text. With
    ``context_max_avgdl`` the context applies only in banks whose units average at most that
    many tokens (BM25's avgdl: short chat turns; ``info["context_weight"]`` says what was applied).

    ``query_tf``: each term's score is weighed by how often the query says it (BM25's
    query-term frequency, as rank-bm25 and Lucene sum a repeated query word once per
    occurrence); off, a term counts once however often the query repeats it.

    N and avgdl: exact up to ``exact_stats_max`` units in scope, counted in the statement that
    reads the query's terms, or taken from ``sizes`` (the recall's counts, shared with the
    graph channel) when it holds them; above, estimated from a sample (:func:`_sampled_stats`).

    ``prf_terms`` > 0: pseudo-relevance feedback — the ``prf_docs`` best units of a first
    pass lend up to ``prf_terms`` expansion terms (:func:`_feedback_terms`), scored in a
    second pass with the weight ``prf_weight`` × the query terms' mean idf × the term's
    relevance-model weight (best term 1); ``info["expansion_terms"]`` names them. With
    ``prf_separate`` the first pass stays the answer and the second is returned as
    ``info["feedback"]`` (candidates, best first; the first pass when no term was found).

    Also returns ``{"terms", "dropped_terms", "n_units", "scored_terms", "exact", "idf"}``:
    the kept terms, the common terms dropped, the bank's live unit count N (estimated above
    ``exact_stats_max`` units), the terms whose units were scored, and whether the ranking
    is exact BM25 (exact statistics, every unit holding a kept term scored), and each kept
    term's BM25 idf (``{term: idf}``); ``"held"``: ``{unit_id: the query terms its own text
    holds}`` for every returned unit (neighbour words not included), and ``"held_complete"``:
    whether a unit not returned holds none of the kept terms (fewer than ``limit`` units
    matched and every kept term was scored) — the coverage step reads these instead of the
    units' vectors.
    """
    info: dict = {"terms": [], "dropped_terms": [], "n_units": 0, "scored_terms": [],
                  "exact": True}
    where, params = _scope(scope).where("u")
    cap = exact_stats_max + 1  # a count that reaches it: estimate from the sample instead
    known = sizes.get(where, params, cap, avgdl=True) if sizes is not None else None
    qtf, n, avgdl = _terms_and_size(conn, query, where, params, None if known else cap)
    if known is not None:
        n, avgdl = known
    elif sizes is not None:
        sizes.put(where, params, cap, n, avgdl)
    terms = list(qtf)
    if not query_tf:
        qtf = None
    if not terms:
        return [], info
    sampled = None
    if n > exact_stats_max:
        n, avgdl, sampled = _sampled_stats(conn, where, params, terms, stats_sample)
    avgdl = avgdl or 1.0
    info["n_units"] = n
    if n == 0:
        return [], info
    prune = len(terms) >= 3
    # With pruning on, a count that reaches the threshold has decided the term is common.
    common_at = max(math.ceil(df_cutoff * n), min_common_df)
    if sampled is None:
        df = _doc_freqs(conn, where, params, terms, common_at if prune else None)
    else:
        # Big bank: count exactly the terms the sample finds rare (where idf is most
        # sensitive), up to EXACT_DF_CAP; the rest keep the sample's estimate.
        rare = [t for t in terms if sampled[t] < EXACT_DF_CAP]
        df = _doc_freqs(conn, where, params, rare, EXACT_DF_CAP) if rare else {}
        df.update({t: max(sampled[t], EXACT_DF_CAP) for t in terms
                   if t not in rare or df.get(t, 0) >= EXACT_DF_CAP})
    kept = [t for t in terms if t in df]
    if prune:
        common = [t for t in kept if df[t] >= common_at]
        kept = [t for t in kept if t not in common]
        if not kept and common:  # all common: keep the rarest, counted exactly
            if sampled is None:
                df.update(_doc_freqs(conn, where, params, common, None))
            rarest = min(common, key=lambda t: (df[t], common.index(t)))
            kept = [rarest]
        info["dropped_terms"] = [t for t in common if t not in kept]
    info["terms"] = kept
    if not kept:
        return [], info
    # Rarest first while the postings to score stay within the budget (at least one term).
    scored, total = [], 0
    for t in sorted(kept, key=lambda t: (df[t], kept.index(t))):
        if scored and total + df[t] > score_budget:
            break
        scored.append(t)
        total += df[t]
    info["scored_terms"] = scored
    info["exact"] = len(scored) == len(kept) and sampled is None
    idf = [_idf(n, df[t]) for t in kept]
    info["idf"] = {t: round(w, 4) for t, w in zip(kept, idf, strict=True)}
    if qtf is not None:
        idf = [w * qtf[t] for t, w in zip(kept, idf, strict=True)]
    qparams = {**params, "terms": kept, "idf": idf, "tsq": _tsquery(scored), "k1": K1,
               "k1p1": K1 + 1, "b": B, "avgdl": avgdl, "limit": limit}
    if context_max_avgdl is not None and avgdl > context_max_avgdl:
        context_weight = 0.0
    info["context_weight"] = context_weight
    def run(qp: dict) -> list:
        if context_weight > 0:
            vis_o, vparams = scope.visibility("o")  # same parameter names as ``where``'s
            return conn.execute(_CONTEXT_SQL.format(where=where, dl_u=_dl("u"), dl_o=_dl("o"),
                                                    nb_u=_nb_len("u"), vis_o=vis_o,
                                                    neighbours_m=_NEIGHBOURS.format(unit="m.id"),
                                                    neighbours_u=_NEIGHBOURS.format(unit="u.id")),
                                {**qp, **vparams, "gamma": context_weight,
                                 "fanout": CONTEXT_FANOUT}).fetchall()
        return conn.execute(_PLAIN_SQL.format(where=where, dl_u=_dl("u")), qp).fetchall()

    rows = run(qparams)
    if prf_terms > 0 and rows:
        mean_idf = sum(idf) / len(idf)
        expansion = _feedback_terms(conn, where, params, rows[:prf_docs], kept, n, common_at,
                                    prf_terms)
        info["expansion_terms"] = [t for t, _ in expansion]
        fed = run({**qparams, "terms": kept + [t for t, _ in expansion],
                   "idf": idf + [prf_weight * mean_idf * w for _, w in expansion],
                   "tsq": _tsquery(scored + [t for t, _ in expansion])}) if expansion else rows
        if prf_separate:
            info["feedback"] = _candidates(fed)
        else:
            rows = fed
    info["held"] = {r["id"]: tuple(r["held"] or ()) for r in rows}
    info["held_complete"] = len(rows) < limit and len(scored) == len(kept)
    return _candidates(rows), info


def _idf(n: int, df: float) -> float:
    """BM25's idf of a term in ``df`` of ``n`` units: ln(1 + (N − df + ½) / (df + ½))."""
    return math.log(1 + (max(n - df, 0) + 0.5) / (df + 0.5))


def _candidates(rows: list) -> list[Candidate]:
    return [Candidate(r["id"], i, float(r["score"])) for i, r in enumerate(rows, 1)]


def _feedback_terms(conn: Connection, where: str, params: dict, top: list, terms: list[str],
                    n: int, common_at: int, m: int) -> list[tuple[str, float]]:
    """Up to ``m`` expansion terms from the feedback units ``top`` (rows with ``id`` and
    ``score``, best first), RM3-style (Lavrenko & Croft 2001, "Relevance-based language
    models"; Abdul-Jaleel et al. 2004, "UMass at TREC 2004"): each term's relevance-model
    weight Σ_d P(t|d) · P(d|q), P(t|d) = tf / |d|, P(d|q) = the unit's BM25 score over the
    feedback units' sum, times the term's BM25 idf in the scope. Terms of the query, terms
    in fewer than 2 units (no other unit to find) and common terms (≥ ``common_at`` units,
    the channel's pruning rule) are left out. Returns ``[(term, weight)]``, best first, the
    weights scaled so the best is 1."""
    total = sum(float(r["score"]) for r in top) or 1.0
    cand = conn.execute(
        f"""SELECT t.lexeme, sum(coalesce(array_length(t.positions, 1), 1)::float8
                                 / greatest({_dl("u")}, 1) * f.w) AS rm
            FROM unnest(%(ids)s::uuid[], %(ws)s::float8[]) AS f(id, w)
            JOIN memory_units u ON u.id = f.id
            CROSS JOIN LATERAL unnest(u.tsv) AS t
            WHERE NOT (t.lexeme = ANY(%(terms)s::text[])) AND length(t.lexeme) >= 3
              AND t.lexeme !~ '^[0-9]+$'
            GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT %(k)s""",
        {"ids": [r["id"] for r in top], "ws": [float(r["score"]) / total for r in top],
         "terms": terms, "k": 3 * m}).fetchall()
    if not cand:
        return []
    df = _doc_freqs(conn, where, params, [r["lexeme"] for r in cand], common_at)
    scored = []
    for r in cand:
        d = df.get(r["lexeme"], 0)
        if 2 <= d < common_at:
            scored.append((r["lexeme"], float(r["rm"]) * _idf(n, d)))
    scored.sort(key=lambda p: -p[1])
    best = scored[0][1] if scored else 1.0
    return [(t, w / best) for t, w in scored[:m]]
