"""The coverage step (xQuAD over query terms): a unit holding a query term nothing above it
holds moves up; with one term, or λ = 0, the order is the fused order."""

from dataclasses import replace

from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import RECIPES, Step

# Five Hawaii turns hold "hawaii" and "day"; one long turn holds "york" once. Fused on
# BM25 alone the Hawaii turns fill the top five, the York turn comes sixth.
HAWAII = ["We spent four days in Hawaii on the beach.",
          "Hawaii was sunny every day we were there.",
          "Our days in Hawaii ended with a luau.",
          "In Hawaii we hiked for two days straight.",
          "The best day in Hawaii was the snorkeling trip."]
YORK = ("Then we flew on to York, where the museums, the old walls, the narrow lanes and "
        "the tea rooms kept us busy from morning to night for the rest of the holiday.")
FILLER = [f"Small talk about the weather number {i}." for i in range(20)]


def _retain(client, bank, texts):
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": t, "document_id": f"t{i}", "context": f"session {i}"}
        for i, t in enumerate(texts)], "async": False})
    assert r.status_code == 200, r.get_json()


def _recipes(weight):
    lex = RECIPES["lexical"]
    return {"lex": replace(lex, name="lex"),
            "lex+cov": replace(lex, name="lex+cov",
                               steps=(Step.of("coverage", weight=weight), *lex.steps))}


def _ask(ctx, bank, query, recipe, recipes):
    q = RecallQuery(query=query, trace=True).model_copy(update={"recipe": recipe})
    res = recall(ctx, bank, q, recipes=recipes)
    return [r["text"] for r in res.results], res


def test_a_unit_covering_an_uncovered_term_moves_up(client, worker, services):
    _retain(client, "cov1", [*HAWAII, YORK, *FILLER])
    ctx = services.recall_context()
    recipes = _recipes(0.3)
    query = "How many days did I spend in Hawaii and in York?"
    plain, _ = _ask(ctx, "cov1", query, "lex", recipes)
    covered, res = _ask(ctx, "cov1", query, "lex+cov", recipes)
    assert plain.index(YORK) == 5  # after all five Hawaii turns
    assert covered.index(YORK) == 1  # right after the best Hawaii turn
    assert covered[0] == plain[0]
    assert sorted(covered) == sorted(plain)  # reordered, nothing added or lost
    assert res.counts["coverage_moved"] == 5  # York up, four Hawaii turns one down
    york = next(r for r in res.results if r["text"] == YORK)
    assert york["scores"]["coverage"] > 0
    scores = [r["scores"]["final"] for r in res.results]
    assert scores == sorted(scores, reverse=True)


def test_no_change_with_one_term_or_no_weight(client, worker, services):
    _retain(client, "cov2", [*HAWAII, YORK, *FILLER])
    ctx = services.recall_context()
    for query, weight in (("Hawaii", 0.3), ("How many days in Hawaii and in York?", 0.0)):
        recipes = _recipes(weight)
        plain, _ = _ask(ctx, "cov2", query, "lex", recipes)
        covered, res = _ask(ctx, "cov2", query, "lex+cov", recipes)
        assert covered == plain
        assert "coverage_moved" not in res.counts


# -- the time-window prior (rcll.search.window): measured, not in the default recipes ------
HIKES = [("I hiked in the Alps, a long hike with friends.", "2022-05-15T08:00:00Z"),
         ("I hiked the Blue Ridge trail with my dog.", "2023-05-20T09:00:00Z")]


def test_the_window_step_lifts_the_units_inside_the_window(client, worker, services):
    r = client.post("/v1/default/banks/win1/memories", json={"items": [
        {"content": t, "timestamp": ts, "document_id": f"h{i}"}
        for i, (t, ts) in enumerate(HIKES)] + [
        {"content": f"Filler note {i} about groceries.", "timestamp": "2023-01-02T08:00:00Z",
         "document_id": f"f{i}"} for i in range(6)], "async": False})
    assert r.status_code == 200, r.get_json()
    ctx = services.recall_context()
    lex = RECIPES["lexical"]
    recipes = {"lex": replace(lex, name="lex"),
               "lex+win": replace(lex, name="lex+win",
                                  steps=(Step.of("window", boost=1.0), *lex.steps))}

    def ask(recipe, query):
        q = RecallQuery(query=query, query_timestamp="2023-06-10T12:00:00Z",
                        trace=True).model_copy(update={"recipe": recipe})
        res = recall(ctx, "win1", q, recipes=recipes)
        return [r["text"] for r in res.results], res.counts

    plain, _ = ask("lex", "Where did I hike last May?")
    assert plain[0] == HIKES[0][0]  # "hike" twice: the 2022 unit wins on BM25
    # the lexical recipe resolves no window (no temporal channel): the step does nothing
    same, counts = ask("lex+win", "Where did I hike last May?")
    assert same == plain and "window_boosted" not in counts
    recipes["lex+win"] = replace(recipes["lex+win"], channels=("lexical", "temporal"),
                                 weights={"lexical": 1.0, "temporal": 0.0})
    lifted, counts = ask("lex+win", "Where did I hike last May?")
    assert lifted[0] == HIKES[1][0] and counts["window_boosted"] == 1
    assert sorted(lifted) == sorted(plain)


# -- a failing channel (rcll.search.recall._run_channels) -----------------------------------
def test_a_failing_channel_is_named_and_the_rest_answer(client, worker, services, monkeypatch):
    _retain(client, "par2", [*HAWAII, YORK, *FILLER])
    from rcll.search.channels import CHANNELS

    def boom(*a, **k):
        raise RuntimeError("graph down")

    monkeypatch.setattr(CHANNELS["graph"], "candidates", boom)
    res = recall(services.recall_context(), "par2",
                 RecallQuery(query="Hawaii days", recipe="full"))
    assert "graph: RuntimeError" in res.degraded
    assert res.channels == ["dense", "lexical", "temporal"] and res.results


def test_the_lexical_channel_reports_the_terms_each_unit_holds(client, worker, services):
    """The coverage step reads the query terms a unit's own text holds from the lexical
    channel: the same sets as the units' vectors give, neighbour words not included, and
    ``held_complete`` only when every unit holding a term was returned."""
    from types import SimpleNamespace

    from rcll.search.coverage import _terms_held
    from rcll.search.lexical import lexical_candidates
    from rcll.search.scope import CallerScope

    texts = HAWAII + [YORK] + FILLER
    r = client.post("/v1/default/banks/cov-held/memories", json={"items": [
        {"content": t, "document_id": f"t{i}", "context": "trip",
         "timestamp": f"2023-05-08T13:{i:02d}:00Z"} for i, t in enumerate(texts)],
        "async": False})
    assert r.status_code == 200, r.get_json()
    scope = CallerScope(bank_id="cov-held")
    query = "how many days in Hawaii and in York"
    with services.pool.connection() as conn:
        for gamma in (0.0, 0.5):
            cands, info = lexical_candidates(conn, scope, query, limit=300, df_cutoff=0.15,
                                             context_weight=gamma)
            ids = [c.unit_id for c in cands]
            from_vectors = _terms_held(SimpleNamespace(conn=conn), ids, info["terms"])
            assert {u: set(t) for u, t in info["held"].items()} == from_vectors
            assert info["held_complete"] is True
            if gamma:  # neighbours borrowed words: ranked, but holding none themselves
                assert any(not t for t in info["held"].values())
            assert {t for held in info["held"].values() for t in held} >= {"hawaii", "york"}
        _, info = lexical_candidates(conn, scope, query, limit=2, df_cutoff=0.15)
        assert info["held_complete"] is False and len(info["held"]) == 2
