"""The stage table: order, skipping, and the skip setting's validation (pure, no services)."""

import pytest

from rcll.bootstrap import skip_stages
from rcll.retain import stages


def test_stage_order_and_queues():
    assert [(s.name, s.queue) for s in stages.STAGES] == [
        ("chunk", "extract"), ("extract", "extract"), ("entities", "extract"),
        ("embed", "embed"), ("link", "embed")]


def test_after_passes_over_skipped_stages_but_never_chunk_or_embed():
    skip = frozenset({"extract", "entities", "link", "embed"})
    assert stages.after("chunk", skip).name == "embed"
    assert stages.after("embed", skip) is None
    assert stages.after("chunk").name == "extract"
    assert stages.after("embed").name == "link"
    assert stages.after("link") is None


def test_skip_setting_is_parsed_and_checked():
    assert skip_stages(" extract, link ,") == {"extract", "link"}
    assert skip_stages("") == frozenset()
    with pytest.raises(ValueError, match="cannot skip embed"):
        skip_stages("embed")
    with pytest.raises(ValueError, match="cannot skip nonsense"):
        skip_stages("nonsense")
