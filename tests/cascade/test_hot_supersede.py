"""A fact superseded by a later extraction (the LLM's ``supersedes``, written by the real
worker's extract stage) leaves tier 1 as soon as that stage commits."""

import numpy as np

from rcll.search.scope import CallerScope
from tests.llm.test_llm_extraction import (  # noqa: F401 (fixtures)
    llm_client,
    llm_settings,
    llm_svc,
    llm_worker,
    q,
    retain,
)


def test_superseded_fact_leaves_tier_1(llm_client, llm_svc):  # noqa: F811
    bank = "hot-superseded"
    assert retain(llm_client, bank, [{"content": "Dana: MARK-OLD"}])["state"] == "succeeded"
    old = q(llm_svc, """SELECT u.id, e.embedding FROM memory_units u JOIN memory_embeddings e
                        ON e.unit_id = u.id WHERE u.bank_id = %s AND u.text = %s""",
            bank, "Dana works at Acme.")[0]
    old_id, vec = str(old["id"]), np.asarray(old["embedding"].to_numpy(), np.float32)
    llm_svc.after_recall.run_one(bank, [old_id], vec, [old_id])
    hot = llm_svc.hot_tier
    assert [h.unit_id for h in hot.lookup(CallerScope(bank), vec, threshold=0.95, limit=5)] \
        == [old_id]
    assert retain(llm_client, bank, [{"content": "Dana: MARK-NEW"}])["state"] == "succeeded"
    row = q(llm_svc, "SELECT superseded_by_id FROM memory_units WHERE id = %s", old_id)[0]
    assert row["superseded_by_id"] is not None
    assert hot.lookup(CallerScope(bank), vec, threshold=0.95, limit=5) == []
    assert old_id not in hot.members(bank)
