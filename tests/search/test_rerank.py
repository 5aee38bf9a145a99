"""The rerank step: a cross-encoder without a trained scoring head is detected and not used;
one allowed (timing only) or with a head reorders the top N exactly by its scores; a model
that cannot load or fails while scoring degrades recall, never breaks it."""

from dataclasses import replace

import pytest
from sentence_transformers import CrossEncoder

from rcll.bootstrap import bootstrap
from rcll.models.embedder import resolve_model_path
from rcll.models.reranker import RerankerHandle
from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import DEFAULT_RECIPE, RECIPES, Recipe, Step

BANK = "rerank"
ITEMS = [{"content": c, "document_id": f"r{i}"} for i, c in enumerate([
    "Ana: I went hiking in the mountains last weekend with my dog.",
    "Ben: hiking boots need breaking in before a long trip.",
    "Cy: the mountains were covered in snow, so hiking was slow.",
    "Dee: my dog loves the lake more than hiking.",
    "Eve: we planned a hiking trip to the coast for next month.",
    "Fay: I bought a new tent for the mountains.",
    "Gus: the weekend market sells fresh bread and cheese.",
    "Hal: a hiking club meets on Sundays near the lake.",
])]
QUERY = "who went hiking in the mountains with a dog?"
TOP_N = 5


def _recipes(**params) -> dict:
    # hybrid's channels and weights, with the rerank step only (no post-processing)
    return {**RECIPES, DEFAULT_RECIPE: Recipe(DEFAULT_RECIPE, ("dense", "lexical"),
                                              {"dense": 0.3, "lexical": 1.0},
                                              steps=(Step.of("rerank", **params),))}


@pytest.fixture(scope="module")
def bank(app, worker):
    resp = app.test_client().post(f"/v1/default/banks/{BANK}/memories", json={"items": ITEMS, "async": False})
    assert resp.status_code == 200, resp.get_json()
    return BANK


def _run(services, reranker, **params):
    ctx = replace(services.recall_context(), reranker=reranker)
    return recall(ctx, BANK, RecallQuery(query=QUERY, limit=8),
                  recipes=_recipes(**params))


def test_untrained_head_is_detected_and_not_used(bank, services, settings):
    fused = _run(services, None)
    assert fused.reranked is False and fused.degraded == []
    handle = RerankerHandle("all-MiniLM-L6-v2")
    res = _run(services, handle)
    st = handle.status()
    assert st["configured"] and st["loaded"] and not st["usable"]
    assert "classifier.weight" in st["reason"] and "untrained" in st["reason"]
    assert res.reranked is False
    assert [r["id"] for r in res.results] == [r["id"] for r in fused.results]
    assert res.degraded == [f"rerank: {st['reason']}"]
    assert all("rerank" not in r["scores"] for r in res.results)

    # the service: /readyz reports it (and stays ready), recall with the full recipe answers
    svc = bootstrap(settings.model_copy(update={"reranker_model": "all-MiniLM-L6-v2"}))
    try:
        from api.app import create_app

        c = create_app(services=svc).test_client()
        ready = c.get("/readyz")
        assert ready.status_code == 200
        rr = ready.get_json()["checks"]["reranker"]
        assert rr["configured"] and rr["loaded"] and rr["usable"] is False and rr["ok"] is False
        assert "classifier.weight" in rr["reason"]
        body = c.post(f"/v1/default/banks/{BANK}/memories/recall",
                      json={"query": QUERY, "recipe": "full"})
        assert body.status_code == 200
        out = body.get_json()
        assert out["reranked"] is False and out["recipe"] == "full"
        assert any(d.startswith("rerank: untrained scoring head") for d in out["degraded"])
        assert out["results"]
    finally:
        svc.close()


def _expected(fused_ids, texts, scores, n):
    head = fused_ids[:n]
    order = sorted(range(len(head)), key=lambda i: -scores[i])
    return [head[i] for i in order] + fused_ids[n:]


def test_allowed_untrained_model_reorders_exactly_by_its_scores(bank, services):
    fused = _run(services, None)
    fused_ids = [r["id"] for r in fused.results]
    handle = RerankerHandle("all-MiniLM-L6-v2", allow_untrained=True)
    res = _run(services, handle, top_n=TOP_N, batch_size=2)
    assert handle.status()["usable"] and "timing only" in handle.status()["reason"]
    assert res.reranked is True and res.degraded == [] and res.counts["reranked"] == TOP_N
    text = {r["id"]: r["text"] for r in fused.results}
    # the same loaded CrossEncoder (its head is random per load), called directly
    ce = handle.get()._model
    direct = [float(s) for s in ce.predict([(QUERY, text[u]) for u in fused_ids[:TOP_N]])]
    want = _expected(fused_ids, text, direct, TOP_N)
    assert want != fused_ids  # the test can fail: the scores do change the order
    assert [r["id"] for r in res.results] == want
    got = {r["id"]: r["scores"]["rerank"] for r in res.results[:TOP_N]}
    assert got == pytest.approx(dict(zip(fused_ids[:TOP_N], direct, strict=True)), abs=1e-5)
    finals = [r["scores"]["final"] for r in res.results]
    assert finals == sorted(finals, reverse=True)  # scores stay sorted after the reorder
    assert all("rerank" not in r["scores"] for r in res.results[TOP_N:])


def test_model_with_a_saved_head_is_usable_and_matches_crossencoder(bank, services, tmp_path):
    # a checkpoint that carries its classifier weights counts as trained (nothing to detect)
    CrossEncoder(resolve_model_path("all-MiniLM-L6-v2"), device="cpu").save_pretrained(
        str(tmp_path / "ce"))
    handle = RerankerHandle(str(tmp_path / "ce"))
    ctx = replace(services.recall_context(), reranker=handle, rerank_top_n=6)
    fused = _run(services, None)
    fused_ids = [r["id"] for r in fused.results]
    res = recall(ctx, BANK, RecallQuery(query=QUERY, limit=8), recipes=_recipes())
    assert handle.status() == {"configured": True, "loaded": True, "usable": True,
                               "model": str(tmp_path / "ce"), "runtime": "torch",
                               "reason": None}
    text = {r["id"]: r["text"] for r in fused.results}
    direct = CrossEncoder(str(tmp_path / "ce"), device="cpu").predict(
        [(QUERY, text[u]) for u in fused_ids[:6]])
    assert res.reranked is True and res.counts["reranked"] == 6  # N from the context
    assert [r["id"] for r in res.results] == _expected(fused_ids, text, list(direct), 6)


def test_unknown_path_is_unusable_and_recall_still_answers(bank, services, client):
    handle = RerankerHandle("/nonexistent/cross-encoder")
    res = _run(services, handle)
    st = handle.status()
    assert st == {"configured": True, "loaded": False, "usable": False,
                  "model": "/nonexistent/cross-encoder", "runtime": None, "reason": st["reason"]}
    assert "not found" in st["reason"].lower() or "no such" in st["reason"].lower()
    assert res.reranked is False and res.results
    assert res.results[0]["text"].startswith("Ana:")
    assert res.degraded == [f"rerank: {st['reason']}"]
    # not configured at all: nothing to report, and /readyz says so without failing
    ready = client.get("/readyz").get_json()["checks"]["reranker"]
    assert ready == {"ok": True, "configured": False, "loaded": False, "usable": False,
                     "model": None, "runtime": None,
                     "reason": "no reranker configured (RCLL_RERANKER_MODEL)"}


class _Broken:
    configured = True

    def get(self):
        return self

    def score(self, query, texts, batch_size=16):
        raise RuntimeError("out of memory")


def test_failure_while_scoring_degrades(bank, services):
    fused = _run(services, None)
    res = _run(services, _Broken())
    assert res.reranked is False and res.degraded == ["rerank: RuntimeError"]
    assert [r["id"] for r in res.results] == [r["id"] for r in fused.results]
