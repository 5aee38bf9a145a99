"""Neighbour context in the lexical channel, the session step, and recipes over HTTP."""

from rcll.search.lexical import lexical_candidates
from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import RECIPES, Recipe, Step
from rcll.search.scope import CallerScope

TS = "2023-05-08T13:56:00Z"
# One conversation: the answer turn ("Yes, ... last Tuesday") never says "parade".
CONVERSATION = [
    ("Ana: Did you go to the pride parade downtown?", "general"),
    ("Ben: Yes, I went last Tuesday with my sister, it was amazing!", "general"),
    ("Ana: I love that. What else is new?", "general"),
    ("Ben: I started pottery classes, my first bowl cracked.", "general"),
    ("Ana: Pottery is hard, keep at it.", "general"),
    ("Ben: The weather was lovely all week.", "general"),
]

# Two meetings: A says "budget review" and "costs" in two turns, B says "costs" once.
MEETINGS = [
        {"content": "Cy: the quarterly budget review is on Friday", "context": "meeting A",
         "document_id": "a1", "timestamp": TS},
        {"content": "Cy: we will cut travel costs", "context": "meeting A",
         "document_id": "a2", "timestamp": TS},
        {"content": "Di: costs of the new office chairs", "context": "meeting B",
         "document_id": "b1", "timestamp": "2023-06-01T10:00:00Z"},
]


def _retain(client, bank, items):
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.status_code == 200, r.get_json()


def _conversation(bank_room=None):
    items = []
    for i, (text, room) in enumerate(CONVERSATION):
        items.append({"content": text, "timestamp": TS, "context": "session 1",
                      "document_id": f"t{i}", "room": bank_room or room})
    return items


def _ids(services, bank):
    with services.pool.connection() as conn:
        return {r["document_id"]: str(r["id"]) for r in conn.execute(
            "SELECT d.document_id, u.id FROM memory_units u JOIN documents d "
            "ON d.id = u.document_id WHERE u.bank_id = %s", (bank,)).fetchall()}


def test_a_turn_is_found_by_its_neighbours_words(client, worker, services):
    _retain(client, "ctx1", _conversation())
    ids = _ids(services, "ctx1")
    q = RecallQuery(query="parade")
    with services.pool.connection() as conn:
        plain, _ = lexical_candidates(conn, _scope("ctx1", q), q.query, limit=10, df_cutoff=0.15)
        ctx, info = lexical_candidates(conn, _scope("ctx1", q), q.query, limit=10, df_cutoff=0.15,
                                       context_weight=0.5)
    assert [c.unit_id for c in plain] == [ids["t0"]]  # only the turn that says it
    ranked = [c.unit_id for c in ctx]
    assert ranked[0] == ids["t0"]  # its own word still ranks first
    assert ids["t1"] in ranked and ids["t2"] in ranked  # the answer and the next turn
    assert ids["t5"] not in ranked  # four turns away: no link, no words
    assert info["context_weight"] == 0.5
    by_id = {c.unit_id: c.score for c in ctx}
    assert by_id[ids["t0"]] > by_id[ids["t1"]] > 0


def test_neighbours_outside_the_scope_lend_no_words(client, worker, services):
    items = _conversation()
    items[0]["room"] = "agent"  # the turn that says "parade" is in another room
    _retain(client, "ctx2", items)
    ids = _ids(services, "ctx2")
    with services.pool.connection() as conn:
        scoped, _ = lexical_candidates(conn, _scope("ctx2", RecallQuery(query="parade", room="general")),
                                       "parade", limit=10, df_cutoff=0.15, context_weight=0.5)
        anywhere, _ = lexical_candidates(conn, _scope("ctx2", RecallQuery(query="parade")),
                                         "parade", limit=10, df_cutoff=0.15, context_weight=0.5)
    assert scoped == []  # the only unit with the word is out of scope: nothing borrows it
    assert ids["t1"] in [c.unit_id for c in anywhere]


def test_the_session_step_lifts_the_turns_of_the_strongest_episode(client, worker, services):
    _retain(client, "ctx3", MEETINGS)
    ids = _ids(services, "ctx3")
    lex = Recipe("lex", ("lexical",))
    boosted = Recipe("lexb", ("lexical",), steps=(Step.of("context", session=1.0),))
    recipes = {**RECIPES, "lex": lex, "lexb": boosted}
    ctx = services.recall_context()
    q = "budget review costs"
    # recipes outside the registry are asked for in-process (the API accepts known ones)
    ask = lambda name: RecallQuery(query=q).model_copy(update={"recipe": name})  # noqa: E731
    plain = recall(ctx, "ctx3", ask("lex"), recipes=recipes)
    lifted = recall(ctx, "ctx3", ask("lexb"), recipes=recipes)
    plain_scores = {r["id"]: r["scores"]["final"] for r in plain.results}
    lifted_scores = {r["id"]: r["scores"]["final"] for r in lifted.results}
    best = max(plain_scores.values())
    assert [r["id"] for r in plain.results][0] == ids["a1"]
    # a2 shares a1's episode: + 1.0 × a1's score; b1 is its own episode: + its own score
    assert abs(lifted_scores[ids["a2"]] - (plain_scores[ids["a2"]] + best)) < 1e-5
    assert abs(lifted_scores[ids["b1"]] - 2 * plain_scores[ids["b1"]]) < 1e-5
    assert lifted.results[0]["scores"]["session"] == lifted_scores[ids["a1"]]


def test_the_session_step_adds_the_episodes_query_term_coverage(client, worker, services):
    """With ``terms`` τ, each unit gains τ × the head's best fused score × the idf share of
    the query terms its episode holds: meeting A holds all three query terms across its two
    turns, meeting B one."""
    _retain(client, "ctx7", [*MEETINGS, {
        "content": "Di: lunch was late again", "context": "meeting B", "document_id": "b2",
        "timestamp": "2023-06-01T10:01:00Z"}])
    ids = _ids(services, "ctx7")
    recipes = {**RECIPES,
               "s": Recipe("s", ("lexical",), steps=(Step.of("context", session=1.0),)),
               "st": Recipe("st", ("lexical",),
                            steps=(Step.of("context", session=1.0, terms=0.5),))}
    ctx = services.recall_context()
    ask = lambda name: RecallQuery(query="budget review costs", trace=True).model_copy(  # noqa: E731
        update={"recipe": name})
    base = recall(ctx, "ctx7", ask("s"), recipes=recipes)
    with_terms = recall(ctx, "ctx7", ask("st"), recipes=recipes)
    idf = base.counts["lexical_idf"]
    assert set(idf) == {"budget", "review", "cost"}
    top = max(r["scores"]["rrf"] for r in base.results)
    before = {r["id"]: r["scores"]["final"] for r in base.results}
    after = {r["id"]: r["scores"]["final"] for r in with_terms.results}
    share_b = idf["cost"] / sum(idf.values())
    assert abs(after[ids["a2"]] - (before[ids["a2"]] + 0.5 * top)) < 1e-5  # all three terms
    assert abs(after[ids["b1"]] - (before[ids["b1"]] + 0.5 * top * share_b)) < 1e-5


def test_episode_evidence_fuses_each_channels_episode_ranking(client, worker, services):
    """With ``episodes={"dense": w}`` every unit gains w / (k + r), r the rank of its
    episode by the mean of that episode's best ``episode_top`` dense scores — the order of
    episodes can change, which the β boost alone never does."""
    turns = [("f1", "s1", "Eve: I watched three films at the film festival"),
             ("f2", "s1", "Eve: the festival screened documentaries and dramas"),
             ("m1", "s2", "Eve: movie night at home with popcorn"),
             ("m2", "s2", "Eve: my tax forms are due next month")]
    items = [{"content": text, "context": session, "document_id": doc, "timestamp": TS}
             for doc, session, text in turns]
    _retain(client, "ctx8", items)
    every_unit = {"dense": {"floor": -1.0}}  # no cosine floor: all four units are candidates
    recipes = {**RECIPES,
               "d": Recipe("d", ("dense",), steps=(Step.of("context", session=0.0),),
                           params=every_unit),
               "de": Recipe("de", ("dense",), steps=(Step.of(
                   "context", session=0.0, episodes={"dense": 0.5}, episode_top=2),),
                            params=every_unit),
               "dl": Recipe("dl", ("dense",), steps=(Step.of(
                   "context", session=0.0, episodes={"lexical": 1.0}),), params=every_unit)}
    ctx = services.recall_context()
    ask = lambda name: RecallQuery(query="movie festivals I attended").model_copy(  # noqa: E731
        update={"recipe": name})
    base = recall(ctx, "ctx8", ask("d"), recipes=recipes)
    fused = recall(ctx, "ctx8", ask("de"), recipes=recipes)
    assert base.results and len(fused.results) == len(base.results) == 4
    cos = {r["id"]: r["scores"]["dense"] for r in base.results}
    episode = {r["id"]: r["context"] for r in base.results}
    mean = {e: sum(v) / len(v) for e in ("s1", "s2")
            for v in [[cos[u] for u in cos if episode[u] == e]]}
    order = sorted(mean, key=lambda e: -mean[e])
    before = {r["id"]: r["scores"]["final"] for r in base.results}
    after = {r["id"]: r["scores"]["final"] for r in fused.results}
    for uid, score in before.items():
        rank = order.index(episode[uid]) + 1
        assert abs(after[uid] - (score + 0.5 / (ctx.rrf_k + rank))) < 1e-5, uid
    # without the option the step is a no-op at β = 0: the dense channel's own order
    assert [r["id"] for r in base.results] == sorted(cos, key=lambda u: -cos[u])
    # a channel the recipe did not run adds nothing
    none = recall(ctx, "ctx8", ask("dl"), recipes=recipes)
    assert {r["id"]: r["scores"]["final"] for r in none.results} == before


def test_recall_names_its_recipe_and_rejects_unknown_ones(client, worker, services):
    _retain(client, "ctx4", _conversation())
    r = client.post("/v1/default/banks/ctx4/memories/recall",
                    json={"query": "pottery bowl", "recipe": "full", "trace": True})
    body = r.get_json()
    assert r.status_code == 200, body
    assert body["recipe"] == "full" and body["mode"] == "C"
    assert body["results"][0]["text"].startswith("Ben: I started pottery")
    assert set(body["results"][0]["ranks"]) == {"dense", "lexical", "graph", "temporal"}
    for phase in ("prepare", "dense", "lexical", "graph", "temporal", "fuse",
                  "rerank", "trust", "expand", "collapse_duplicates", "worth", "l0", "total"):
        assert phase in body["timings_ms"], phase
    assert "time_window" in body["query"]
    r = client.post("/v1/default/banks/ctx4/memories/recall", json={"query": "pottery"})
    assert r.get_json()["recipe"] == services.recall_context().default_recipe
    r = client.post("/v1/default/banks/ctx4/memories/recall",
                    json={"query": "pottery", "recipe": "fastest"})
    err = r.get_json()["error"]
    assert r.status_code == 400 and err["code"] == "unknown_recipe"
    assert "full" in err["details"]["known"]
    r = client.post("/v1/default/banks/ctx4/memories/recall",
                    json={"query": "pottery", "recipe": "full", "channels": "hybrid"})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "invalid_request"
    r = client.get("/banks/ctx4/recall", query_string={"query": "pottery", "recipe": "nope"})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "unknown_recipe"
    r = client.get("/banks/ctx4/recall", query_string={"query": "pottery", "recipe": "lexical"})
    assert r.status_code == 200 and r.get_json()["recipe"] == "lexical"


def test_neighbour_context_applies_only_in_banks_of_short_units(client, worker, services):
    _retain(client, "ctx5", _conversation())  # chat turns: ~5 tokens each
    filler = ("the quarterly planning document lists budgets, hiring targets, vendor contracts, "
              "office moves, security reviews, training schedules and travel policies, with "
              "laptops, monitors, parking permits, catering menus, printer toner, insurance "
              "renewals, audit findings, pension statements, holiday calendars, desk bookings, "
              "bicycle racks, shower lockers, visitor badges, coffee machines and plant care")
    long_items = [{"content": f"Ana: {filler} item {i}", "timestamp": TS, "context": "doc",
                   "document_id": f"l{i}"} for i in range(4)]  # ~40 tokens
    _retain(client, "ctx6", long_items)
    ctx = services.recall_context()
    short = recall(ctx, "ctx5", RecallQuery(query="parade", recipe="full"))
    long_ = recall(ctx, "ctx6", RecallQuery(query="budgets", recipe="full"))
    assert short.counts["lexical_context"] == 0.5
    assert long_.counts["lexical_context"] == 0.0  # average length above the gate
    with services.pool.connection() as conn:
        avgdl = conn.execute("SELECT avg(tsv_len) AS a FROM memory_units WHERE bank_id = 'ctx6'"
                             ).fetchone()["a"]
    assert avgdl > RECIPES["full"].params["lexical"]["context_max_avgdl"]


def _scope(bank, q):
    return CallerScope.for_query(bank, q, None)
