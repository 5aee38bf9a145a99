from rcll.search.fusion import rrf
from rcll.search.models import Candidate


def test_rrf_sums_reciprocal_ranks():
    fused = dict(rrf({"dense": [Candidate("a", 1, .9), Candidate("b", 2, .8)],
                      "lexical": [Candidate("b", 1, 5.0), Candidate("c", 2, 3.0)]}, k=60))
    assert fused["b"] == 1 / 62 + 1 / 61
    assert fused["a"] == 1 / 61
    assert fused["c"] == 1 / 62


def test_rrf_weights_and_order():
    out = rrf({"dense": [Candidate("a", 1, .9)], "lexical": [Candidate("b", 1, 1.0)]},
              k=60, weights={"dense": 0.5, "lexical": 1.0})
    assert [uid for uid, _ in out] == ["b", "a"]
