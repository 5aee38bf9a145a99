"""The token-budget-adaptive policy (spec §5) and the request fields that drive it."""

import pytest
from pydantic import ValidationError

from rcll.cascade.policy import plan
from rcll.search.models import RecallQuery


def q(**kw) -> RecallQuery:
    return RecallQuery(query="what did Caroline research?", **kw)


@pytest.mark.parametrize("left, tiers, limit, compact", [
    (0, (), 0, True),
    (499, (), 0, True),
    (500, ("hot",), 3, True),
    (1_999, ("hot",), 3, True),
    (2_000, ("hot", "warm"), 5, False),
    (7_999, ("hot", "warm"), 5, False),
    (8_000, ("hot", "warm", "cold"), 10, False),
    (1_000_000, ("hot", "warm", "cold"), 10, False),
])
def test_context_left_picks_tiers_top_and_rendering(left, tiers, limit, compact):
    p = plan(q(context_tokens_left=left))
    assert (p.tiers, p.limit, p.compact) == (tiers, limit, compact)
    # never more than the caller has left (nothing at all when recall is skipped)
    assert p.max_tokens == (min(4_096, left) if tiers else 0)
    assert str(left) in p.reason


def test_without_context_left_the_whole_cascade_runs_with_the_request_limit():
    p = plan(q(limit=7, max_tokens=900))
    assert (p.tiers, p.limit, p.max_tokens, p.compact) == (("hot", "warm", "cold"), 7, 900, False)


def test_a_smaller_request_limit_wins_over_the_policy_top():
    assert plan(q(context_tokens_left=5_000, limit=2)).limit == 2
    assert plan(q(context_tokens_left=5_000)).limit == 5  # default limit 50 is not "asked"


def test_tiers_are_restricted_and_reordered_by_the_request():
    assert plan(q(tiers=["cold", "hot"])).tiers == ("hot", "cold")
    # none of the asked tiers is in the policy's row: they run, with its top N and rendering
    p = plan(q(tiers=["cold"], context_tokens_left=1_000))
    assert (p.tiers, p.limit, p.compact) == (("cold",), 3, True)
    assert plan(q(tiers=["warm"], context_tokens_left=3_000)).tiers == ("warm",)


def test_a_named_recipe_or_history_runs_the_cold_tier_only():
    assert plan(q(recipe="hybrid")).tiers == ("cold",)
    assert plan(q(include_superseded=True)).tiers == ("cold",)
    p = plan(q(include_superseded=True, context_tokens_left=3_000))
    assert (p.tiers, p.limit) == (("cold",), 5)
    p = plan(q(recipe="lexical", context_tokens_left=9_000))
    assert (p.tiers, p.limit) == (("cold",), 10) and "recipe named" in p.reason


@pytest.mark.parametrize("bad", [
    {"tiers": []}, {"tiers": ["hot", "hot"]}, {"tiers": ["lukewarm"]}, {"tiers": "hot"},
    {"context_tokens_left": -1}, {"context_tokens_left": "500"},
])
def test_bad_cascade_fields_are_refused(bad):
    with pytest.raises(ValidationError):
        q(**bad)
