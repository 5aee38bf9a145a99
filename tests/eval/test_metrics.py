"""Retrieval metrics on hand-computed cases, and the runner's scoring on fabricated answers."""

import math

import pytest

from rcll.eval.datasets import (
    EvalQuestion,
    lme_timestamp,
    lme_unit_ids,
    locomo_turn_text,
    locomo_unit_ids,
)
from rcll.eval.metrics import (
    ALL_METRICS,
    LOCOMO_KS,
    aggregate,
    latency_summary,
    merge_ks,
    ndcg_at_k,
    percentile,
    recall_all_at_k,
    recall_any_at_k,
    recall_at_k,
    score_ranking,
    session_ranking,
)
from rcll.eval.report import markdown_table
from rcll.eval.runner import rankings, score_question

RANKED = ["a", "b", "c", "d", "e"]


def test_recall_is_fraction_of_gold_in_top_k():
    assert recall_at_k(RANKED, {"b", "z"}, 1) == 0.0
    assert recall_at_k(RANKED, {"b", "z"}, 2) == 0.5
    assert recall_at_k(RANKED, {"a", "e"}, 5) == 1.0
    assert recall_at_k(RANKED, {"a", "d", "e"}, 4) == pytest.approx(2 / 3)


def test_recall_any_and_all():
    assert recall_any_at_k(RANKED, {"c", "z"}, 3) == 1.0
    assert recall_any_at_k(RANKED, {"c", "z"}, 2) == 0.0
    # one of two gold found -> all = 0
    assert recall_all_at_k(RANKED, {"b", "z"}, 5) == 0.0
    assert recall_all_at_k(RANKED, {"a", "c"}, 3) == 1.0
    assert recall_all_at_k(RANKED, {"a", "c"}, 2) == 0.0


def test_ndcg_hand_computed():
    # single gold at rank 2: DCG = 1/log2(3), IDCG = 1/log2(2) = 1
    assert ndcg_at_k(RANKED, {"b"}, 5) == pytest.approx(1 / math.log2(3))
    assert ndcg_at_k(RANKED, {"a"}, 1) == 1.0
    assert ndcg_at_k(RANKED, {"b"}, 1) == 0.0
    # gold {a, c}: DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3)
    assert ndcg_at_k(RANKED, {"a", "c"}, 5) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    # IDCG is cut at k: three gold, k = 2, both top-2 relevant -> 1.0
    assert ndcg_at_k(RANKED, {"a", "b", "z"}, 2) == 1.0


def test_duplicates_in_ranking_count_once():
    assert ndcg_at_k(["a", "a", "b"], {"b"}, 2) == pytest.approx(1 / math.log2(3))
    assert recall_at_k(["a", "a", "b"], {"b"}, 2) == 1.0


def test_empty_gold_is_not_scorable():
    with pytest.raises(ValueError):
        recall_at_k(RANKED, set(), 5)
    with pytest.raises(ValueError):
        ndcg_at_k(RANKED, {"a"}, 0)


def test_session_ranking_by_first_appearance():
    turns = ["D3:1", "D1:4", "D3:2", "D2:7", "D1:1", "X"]
    of = {"D3:1": "3", "D1:4": "1", "D3:2": "3", "D2:7": "2", "D1:1": "1"}
    assert session_ranking(turns, of) == ["3", "1", "2"]
    assert session_ranking(turns, lambda t: of.get(t)) == ["3", "1", "2"]


def test_score_ranking_keys_and_merge_ks():
    assert merge_ks((5, 10, 50), (1, 20, 5)) == (1, 5, 10, 20, 50)
    scores = score_ranking(RANKED, {"b"}, (1, 5), ALL_METRICS)
    assert scores == {
        "recall@1": 0.0, "recall@5": 1.0,
        "recall_any@1": 0.0, "recall_any@5": 1.0,
        "recall_all@1": 0.0, "recall_all@5": 1.0,
        "ndcg@1": 0.0, "ndcg@5": pytest.approx(1 / math.log2(3)),
    }


def test_percentile_and_latency():
    assert percentile([10, 20, 30, 40], 50) == 25.0
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], 95) == pytest.approx(10.5)
    assert latency_summary([100.0, 300.0]) == {"p50": 200.0, "p95": 290.0, "mean": 200.0}


def _locomo_result(dia_id, session):
    return {"id": f"u-{dia_id}", "text": "x", "metadata": {"dia_id": dia_id, "session": session}}


def test_runner_scoring_on_fabricated_locomo_answer():
    q = EvalQuestion("conv-1/q0", "eval-locomo-conv-1", "q?", "temporal",
                     frozenset({"D2:5", "D1:1"}), frozenset({"2", "1"}))
    results = [
        _locomo_result("D3:1", 3),
        _locomo_result("D2:5", 2),
        _locomo_result("D2:5", 2),          # second unit of the same turn collapses
        {"id": "summary", "text": "s", "kind": "summary", "metadata": {}},  # untraceable
        _locomo_result("D1:1", 1),
    ]
    turns, sessions = rankings(results, locomo_unit_ids)
    assert turns == ["D3:1", "D2:5", "D1:1"]
    assert sessions == ["3", "2", "1"]
    rec = score_question(q, results, locomo_unit_ids, LOCOMO_KS)
    assert rec["turn"]["recall@1"] == 0.0
    assert rec["turn"]["recall@5"] == 1.0
    assert rec["turn"]["recall_all@1"] == 0.0
    idcg = 1 + 1 / math.log2(3)
    assert rec["turn"]["ndcg@5"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / idcg)
    assert rec["session"]["recall@1"] == 0.0
    assert rec["session"]["recall_all@5"] == 1.0


def test_runner_aggregation_by_category_and_skipped_levels():
    q1 = EvalQuestion("a", "b1", "?", "single-session-user", frozenset({"s000/1"}),
                      frozenset({"s000"}))
    q2 = EvalQuestion("b", "b2", "?", "multi-session", frozenset(), frozenset({"s001"}))
    r1 = [{"metadata": {"session_id": "s000", "turn_index": 1}}]
    r2 = [{"document_id": "b/s002/0"}, {"document_id": "b/s001/4"}]  # document-id fallback
    rec1 = score_question(q1, r1, lme_unit_ids, (1, 5), ALL_METRICS)
    rec2 = score_question(q2, r2, lme_unit_ids, (1, 5), ALL_METRICS)
    assert rec2["turn"] is None
    assert rec2["session"]["recall_any@1"] == 0.0
    assert rec2["session"]["ndcg@5"] == pytest.approx(1 / math.log2(3))
    out = aggregate([rec1, rec2])
    assert out["n_questions"] == 2
    assert out["n_scored"] == {"turn": 1, "session": 2}
    assert out["turn"]["recall@1"] == 1.0
    assert out["session"]["recall@1"] == 0.5
    assert out["session"]["ndcg@5"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert out["by_category"]["multi-session"]["n"] == 1
    assert out["by_category"]["multi-session"]["turn"] == {}
    table = markdown_table({**out, "dataset": "t", "ingest": {}, "recall_latency_ms": {}})
    assert "| turn | 1.000 |" in table


def test_loader_helpers():
    assert lme_timestamp("2023/05/30 (Tue) 23:40") == "2023-05-30T23:40:00"
    assert locomo_turn_text({"speaker": "Mel", "text": "hi", "blip_caption": "a cat"}) == (
        "Mel: hi [shares image: a cat]")
    assert locomo_turn_text({"speaker": "Mel", "text": "hi", "blip_caption": None}) == "Mel: hi"
