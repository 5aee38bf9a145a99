"""The cascade through the API (issue 8): a re-asked question is answered by tier 1 with the
units the cold tier put first; the token-budget policy; tier 1 never serves what PostgreSQL
would not; Redis down → tiers 2–3 answer and say so."""

from api.app import create_app
from rcll.bootstrap import bootstrap

NOTES = [
    "Ana: the payroll export runs every Friday at 18:00 from the finance server.",
    "Ben: payroll exports are encrypted with the finance team's public key.",
    "Cy: the payroll export failed last Friday because the disk was full.",
    "Dee: lunch on Friday is at the Thai place near the station.",
    "Eve: the finance server is backed up nightly to the Frankfurt bucket.",
    "Fay: the marketing offsite is planned for the second week of June.",
]
MORE = [
    "Jo: the payroll export failed twice in March when the VPN dropped.",
    "Kai: a payroll export fails when the finance server runs out of disk space.",
    "Lu: we fixed the failing payroll export by rotating the old logs.",
]
Q = "why did the payroll export fail?"


def _retain(client, bank, texts):
    items = [{"content": t, "document_id": f"n{i}"} for i, t in enumerate(texts)]
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.status_code == 200 and r.get_json()["state"] == "succeeded", r.get_json()


def _recall(client, bank, **kw):
    r = client.post(f"/v1/default/banks/{bank}/memories/recall",
                    json={"query": Q, "trace": True, **kw})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def test_a_reasked_question_is_answered_by_tier_1(client, services):
    bank = "cascade-reask"
    _retain(client, bank, NOTES)
    cold = _recall(client, bank)
    assert cold["tiers"][-1] == "cold" and "hot" in cold["tiers"]
    assert "tier_cold" in cold["timings_ms"] and "tier_hot" in cold["timings_ms"]
    assert services.after_recall.flush(10)
    n = services.settings.hot_promote_top
    assert n == 5
    top = [r["id"] for r in cold["results"][:n]]
    assert len(top) >= 3
    assert sorted(services.hot_tier.members(bank)) == sorted(top)

    again = _recall(client, bank)
    assert again["tiers"] == ["hot"], again["tier_reason"]
    # the units the cold tier put first, in its order (cues keep the rank)
    assert [r["id"] for r in again["results"]] == top
    assert all(r["scores"]["via"] == "cue" for r in again["results"])
    sims = [r["scores"]["similarity"] for r in again["results"]]
    assert sims[0] > 0.999 and sims == sorted(sims, reverse=True)
    assert again["counts"]["hot_hits"] == len(top)
    # cold-only on request, whatever tier 1 holds
    only_cold = _recall(client, bank, tiers=["cold"])
    assert only_cold["tiers"] == ["cold"] and only_cold["recipe"] == "full"


def test_token_budget_policy(client, services):
    bank = "cascade-policy"
    _retain(client, bank, NOTES)
    skipped = _recall(client, bank, context_tokens_left=300)
    assert skipped["results"] == [] and skipped["tiers"] == []
    assert "skipped" in skipped["tier_reason"]
    # tier 1 is empty: hot-only answers with nothing rather than paying for the cold tier
    hot_only = _recall(client, bank, context_tokens_left=1_500)
    assert hot_only["tiers"] == ["hot"] and hot_only["results"] == []
    full = _recall(client, bank, context_tokens_left=20_000)
    assert full["tiers"][-1] == "cold" and len(full["results"]) <= 10
    assert services.after_recall.flush(10)
    compact = _recall(client, bank, context_tokens_left=1_500)
    assert compact["tiers"] == ["hot"] and 1 <= len(compact["results"]) <= 3
    # compact, plus Hindsight's ``type`` (api/hindsight.py) beside ``kind``
    assert set(compact["results"][0]) == {"id", "text", "kind", "type", "layer", "tokens",
                                          "scores"}
    assert client.post(f"/v1/default/banks/{bank}/memories/recall",
                       json={"query": Q, "context_tokens_left": -5}).status_code == 400
    r = client.get(f"/banks/{bank}/recall?query=payroll&tiers=hot,lukewarm")
    assert r.status_code == 400
    r = client.get(f"/banks/{bank}/recall?query=payroll&tiers=cold&context_tokens_left=9000")
    assert r.status_code == 200 and r.get_json()["tiers"] == ["cold"]


def test_tier_1_never_serves_a_replaced_unit(client, services):
    bank = "cascade-stale"
    _retain(client, bank, NOTES)
    first = _recall(client, bank)
    assert services.after_recall.flush(10)
    hot = set(services.hot_tier.members(bank))
    # every hot unit's document gets a new text: the hot units are invalidated in PostgreSQL
    docs = {r["document_id"] for r in first["results"] if r["id"] in hot}
    items = [{"content": f"Zed: note {d} was withdrawn.", "document_id": d} for d in docs]
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": items, "async": False})
    assert r.status_code == 200
    again = _recall(client, bank)
    assert again["tiers"][-1] != "hot"
    assert not hot & {r["id"] for r in again["results"]}


def test_redis_down_tiers_2_and_3_answer(settings, client):
    bank = "cascade-no-redis"
    _retain(client, bank, NOTES)
    dead = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    svc = bootstrap(dead)
    c = create_app(services=svc, enqueue=lambda *_: None).test_client()
    try:
        out = _recall(c, bank)
        assert out["results"] and out["tiers"][-1] == "cold" and "hot" not in out["tiers"]
        assert any(d.startswith("hot: Redis unavailable") for d in out["degraded"])
        out2 = _recall(c, bank)  # the breaker is open: no second wait on the dead socket
        assert any("retrying in" in d for d in out2["degraded"])
        assert [r["id"] for r in out2["results"]] == [r["id"] for r in out["results"]]
    finally:
        svc.close()


def test_pgvector_unusable_answers_lexically(settings, client):
    """Recall as a role that may not read the vectors: dense, the warm tier and the
    duplicate check fail in SQL; the cold tier answers in mode A and says why."""
    import psycopg

    bank = "cascade-no-vectors"
    _retain(client, bank, NOTES)
    with psycopg.connect(settings.db_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS rcll_test_no_vectors")
        conn.execute("CREATE ROLE rcll_test_no_vectors LOGIN")
        conn.execute("GRANT USAGE ON SCHEMA public TO rcll_test_no_vectors")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO rcll_test_no_vectors")
        conn.execute("REVOKE SELECT ON memory_embeddings FROM rcll_test_no_vectors")
    url = settings.db_url.replace("postgresql://rcll@", "postgresql://rcll_test_no_vectors@")
    svc = bootstrap(settings.model_copy(update={"readonly_database_url": url}))
    c = create_app(services=svc, enqueue=lambda *_: None).test_client()
    try:
        out = _recall(c, bank, tiers=["warm", "cold"])
        assert out["tiers"] == ["cold"] and out["mode"] == "A" and "dense" not in out["channels"]
        assert any(d.startswith("warm:") for d in out["degraded"])
        assert any(d.startswith("dense:") for d in out["degraded"])
        assert "export failed" in out["results"][0]["text"]
    finally:
        svc.close()


def test_readyz_reports_tier_1_down_without_going_unready(settings):
    dead = settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"})
    svc = bootstrap(dead)
    # the broker check would fail too with this URL: keep it on the live broker
    svc.settings = svc.settings.model_copy(update={"broker_url": settings.broker})
    c = create_app(services=svc, enqueue=lambda *_: None).test_client()
    try:
        body = c.get("/readyz").get_json()
        assert body["checks"]["hot_tier"]["ok"] is False
        assert body["checks"]["hot_tier"]["error"] == "unreachable"
        assert body["ready"] is True and body["mode"] == "C"
    finally:
        svc.close()


def _cached(client, services, bank):
    """Ask Q once (cold) and let tier 1 take its answer; returns that answer."""
    first = _recall(client, bank)
    assert services.after_recall.flush(10)
    again = _recall(client, bank)
    assert again["tiers"] == ["hot"], again["tier_reason"]
    return first


def test_tier_1_answers_get_the_post_processing(client, services):
    """Memory Worth and L0 apply to tier-1 answers as to the cold tier's (break-it #1)."""
    bank = "cascade-post"
    _retain(client, bank, NOTES + MORE)
    first = _cached(client, services, bank)
    bad = first["results"][1]["id"]
    for _ in range(25):
        r = client.post(f"/v1/default/banks/{bank}/memories/{bad}/feedback",
                        json={"outcome": "failure"})
        assert r.status_code == 200
    out = _recall(client, bank)
    assert out["tiers"] == ["hot"], out["tier_reason"]
    assert bad not in [r["id"] for r in out["results"]]
    assert out["counts"].get("worth_dropped") == 1
    # an L0 note of the bank heads every answer, tier 1's included
    _retain_l0 = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": "Policy: payroll data never leaves the finance VPC.", "layer": 0,
         "document_id": "policy"}], "async": False})
    assert _retain_l0.status_code == 200
    assert services.after_recall.flush(10)
    _recall(client, bank)  # new units: the cold tier answers once, tier 1 takes it again
    assert services.after_recall.flush(10)
    out = _recall(client, bank)
    assert out["tiers"] == ["hot"] and out["results"][0]["text"].startswith("Policy:")


def test_scoped_and_time_relative_requests_are_not_served_from_cache(client, services):
    """A cached answer is of the default scope at no particular time (break-it #2)."""
    bank = "cascade-scope"
    _retain(client, bank, NOTES)
    _cached(client, services, bank)
    scoped = _recall(client, bank, max_layer=3)
    assert scoped["tiers"] == ["cold"] and "scoped request (max_layer)" in scoped["tier_reason"]
    r = client.post(f"/v1/default/banks/{bank}/memories/recall",
                    json={"query": "why did the payroll export fail last Friday?"}).get_json()
    assert r["tiers"] == ["cold"] and "time-relative query" in r["tier_reason"]
    hot_only = _recall(client, bank, max_layer=3, context_tokens_left=1_000)
    assert hot_only["tiers"] == [] and hot_only["results"] == []
    assert "not served by the hot or warm tier" in hot_only["tier_reason"]


def test_a_missed_invalidation_heals_and_new_units_reach_a_reask(client, services):
    """A cached unit PostgreSQL no longer serves sends the re-ask to the cold tier and
    leaves tier 1 (break-it #4); a retain that creates units makes tier 1 forget the
    bank's cues, so a re-ask sees them (break-it #3)."""
    bank = "cascade-heal"
    _retain(client, bank, NOTES + MORE)
    first = _cached(client, services, bank)
    gone = first["results"][0]["id"]
    with services.pool.connection() as conn:  # behind tier 1's back: no invalidation hook
        conn.execute("UPDATE memory_units SET invalidated_reason = 'test' WHERE id = %s",
                     (gone,))
    healed = _recall(client, bank)
    assert healed["tiers"][-1] == "cold" and gone not in [r["id"] for r in healed["results"]]
    assert gone not in services.hot_tier.members(bank)
    assert services.after_recall.flush(10)
    assert _recall(client, bank)["tiers"] == ["hot"]
    _retain(client, bank, ["Ivy: the payroll export failed on Friday because the disk "
                           "filled up with old payroll export logs."])
    fresh = _recall(client, bank)
    assert fresh["tiers"][-1] == "cold"
    assert any(r["text"].startswith("Ivy:") for r in fresh["results"][:5])


def test_a_plan_without_cold_never_runs_it(settings, client):
    """Redis down and a hot-only plan: nothing, not the cold pipeline (break-it #7)."""
    bank = "cascade-hot-only"
    _retain(client, bank, NOTES)
    svc = bootstrap(settings.model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}))
    c = create_app(services=svc, enqueue=lambda *_: None).test_client()
    try:
        out = _recall(c, bank, tiers=["hot"])
        assert out["results"] == [] and out["tiers"] == []
        assert any(d.startswith("hot: Redis unavailable") for d in out["degraded"])
    finally:
        svc.close()
