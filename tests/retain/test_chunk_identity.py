"""Issue 21 fault 8: a document reads back whole and in order when chunks repeat — a chunk's
occurrence among equal texts is part of its identity (:func:`rcll.identity.chunk_keys`) —
and an item whose text chunking would drop is not stored as ``succeeded``."""

from __future__ import annotations

import pytest

from rcll.identity import chunk_keys
from rcll.retain import pipeline
from rcll.retain.models import RetainItem
from tests.retain.test_document_versions import PARA

SECTIONS = [PARA["A"], PARA["E"], PARA["B"], PARA["E"], PARA["C"]]


def _retain(client, bank, content, doc):
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"items": [
        {"content": content, "document_id": doc}], "async": False})
    assert r.status_code == 200, r.get_json()
    return r.get_json()["operation"]


def _text(client, bank, doc):
    r = client.get(f"/v1/default/banks/{bank}/documents/{doc}")
    assert r.status_code == 200, r.get_json()
    return r.get_json()["original_text"]


def test_repeated_sections_read_back_whole_in_order(client):
    content = "\n\n".join(SECTIONS)
    op = _retain(client, "chunk-identity", content, "handbook")
    assert op["state"] == "succeeded" and op["counts"]["units_created"] == 5
    assert _text(client, "chunk-identity", "handbook") == content


def test_repeated_hard_splits_are_all_stored(client):
    content = "ab " * 1600  # six equal chunks and a shorter one
    op = _retain(client, "chunk-identity", content, "ab-run")
    assert op["counts"]["units_created"] >= 7
    assert _text(client, "chunk-identity", "ab-run").split() == content.split()


def test_new_version_keeps_unchanged_and_repeated_chunks(client, services):
    """Version 2 inserts a section before the repeats and drops the last: four units of
    version 1 stay (``skipped``, the second ``E`` among them), one is new, and the text
    reads back in the new order."""
    bank = "chunk-identity-v"
    _retain(client, bank, "\n\n".join(SECTIONS), "handbook")
    v2 = [PARA["D"], *SECTIONS[:4]]
    op = _retain(client, bank, "\n\n".join(v2), "handbook")
    assert (op["counts"]["units_created"], op["counts"]["units_skipped"]) == (1, 4)
    assert _text(client, bank, "handbook") == "\n\n".join(v2)


def test_chunk_keys_distinguish_repeats():
    keys = chunk_keys(["n", "a", "n", "n"])
    assert len(set(keys)) == 4 and keys[0] == chunk_keys(["n"])[0]
    assert chunk_keys(["a", "n", "n"])[1:] == [keys[0], keys[2]]


def test_dropped_text_fails_the_item(services, monkeypatch):
    """If chunking ever keeps fewer characters than the item holds, the item raises
    instead of being stored in part."""
    ctx = services.retain_context()
    monkeypatch.setattr(pipeline, "chunk_text", lambda text, n, count: [text[: len(text) // 2]])
    with pytest.raises(pipeline.TextDropped):
        pipeline.drafts_for(RetainItem(content="one two three four five six"), ctx)
