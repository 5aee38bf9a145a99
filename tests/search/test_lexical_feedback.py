"""Pseudo-relevance feedback in the lexical channel (RM3-style): the best units of a first
pass lend their distinctive words, so a unit that shares no query word but those words
becomes a candidate; query words, one-off words and common words are never added."""

from rcll.search.lexical import lexical_candidates
from rcll.search.models import RecallQuery
from rcll.search.scope import CallerScope

DOCS = {
    "f1": "We bought new furniture: a velvet sofa and an oak bookshelf.",
    "f2": "The furniture store delivered the velvet sofa on Monday.",
    "s1": "The velvet sofa needs a cushion cover, the cat scratched it.",  # no "furniture"
    "x1": "Weather notes: rain on Monday and Tuesday.",
}
FILLER = {f"n{i}": f"Plain note number {i} about errands." for i in range(8)}


def _scope(bank, q):
    return CallerScope.for_query(bank, q, None)


def _retain(client, bank):
    r = client.post(f"/v1/default/banks/{bank}/memories", json={
        "items": [{"content": t, "document_id": k} for k, t in {**DOCS, **FILLER}.items()],
        "async": False})
    assert r.status_code == 200, r.get_json()


def test_feedback_terms_find_a_unit_without_the_query_word(client, services):
    bank = "prf1"
    _retain(client, bank)
    q = RecallQuery(query="Which furniture did we buy?")
    with services.pool.connection() as conn:
        ids = {str(row["id"]): row["document_id"] for row in conn.execute(
            """SELECT u.id, d.document_id FROM memory_units u JOIN documents d
               ON d.id = u.document_id WHERE u.bank_id = %s""", (bank,)).fetchall()}
        plain, info0 = lexical_candidates(conn, _scope(bank, q), q.query, limit=10,
                                          df_cutoff=0.15)
        fed, info = lexical_candidates(conn, _scope(bank, q), q.query, limit=10, df_cutoff=0.15,
                                       prf_terms=5, prf_docs=2, prf_weight=0.5)
    assert [ids[c.unit_id] for c in plain][:2] in (["f1", "f2"], ["f2", "f1"])
    assert "s1" not in [ids[c.unit_id] for c in plain]
    ranked = [ids[c.unit_id] for c in fed]
    assert ranked[:2] in (["f1", "f2"], ["f2", "f1"])  # the query's own words still lead
    assert ranked[2] == "s1"  # found through "velvet" and "sofa"
    assert {"velvet", "sofa"} <= set(info["expansion_terms"])
    assert "furnitur" not in info["expansion_terms"]  # a query term
    assert "oak" not in info["expansion_terms"]  # in one unit only: nothing else to find
    assert "expansion_terms" not in info0


def test_a_separate_feedback_list_leaves_the_query_ranking_alone(client, services):
    bank = "prf2"
    _retain(client, bank)
    q = RecallQuery(query="Which furniture did we buy?")
    with services.pool.connection() as conn:
        plain, _ = lexical_candidates(conn, _scope(bank, q), q.query, limit=10, df_cutoff=0.15)
        fed, _ = lexical_candidates(conn, _scope(bank, q), q.query, limit=10, df_cutoff=0.15,
                                    prf_terms=5, prf_docs=2, prf_weight=0.5)
        own, info = lexical_candidates(conn, _scope(bank, q), q.query, limit=10,
                                       df_cutoff=0.15, prf_terms=5, prf_docs=2,
                                       prf_weight=0.5, prf_separate=True)
    assert own == plain  # the channel's own ranking is the first pass
    assert info["feedback"] == fed  # the expanded one comes as a second list


def test_the_feedback_list_is_fused_under_its_own_name(client, services):
    from dataclasses import replace

    from rcll.search.recall import recall
    from rcll.search.recipes import RECIPES
    bank = "prf3"
    _retain(client, bank)
    lex = RECIPES["lexical"]
    recipes = {"lex+fb": replace(lex, name="lex+fb", weights={"lexical": 1.0,
                                                              "lexical_feedback": 0.5},
                                 params={"lexical": {"prf_terms": 5, "prf_separate": True}})}
    q = RecallQuery(query="Which furniture did we buy?").model_copy(update={"recipe": "lex+fb"})
    res = recall(services.recall_context(), bank, q, recipes=recipes)
    texts = [x["text"] for x in res.results]
    assert texts[2] == DOCS["s1"]  # only the feedback list holds it
    s1 = res.results[2]
    assert s1["ranks"]["lexical"] is None and s1["ranks"]["lexical_feedback"] == 3
    assert {"velvet", "sofa"} <= set(res.counts["lexical_expansion_terms"])
    assert res.results[0]["ranks"]["lexical"] == 1 and res.results[0]["ranks"]["lexical_feedback"]
