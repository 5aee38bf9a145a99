"""The real ``hindsight-client`` 1.1.0 (PyPI) runs its quick-start flow against RCLL: the app
served over HTTP on a free port (werkzeug, in a thread), the session's real PostgreSQL,
Redis and Celery worker. Each step asserts values; the flow's table (call, route, passes)
is printed at the end (``pytest -s``) and by ``scripts/hindsight_flow.py``.
"""

from __future__ import annotations

import warnings

import pytest

hindsight_client = pytest.importorskip("hindsight_client")
from hindsight_client import Hindsight  # noqa: E402
from hindsight_client.hindsight_client import _run_async  # noqa: E402
from hindsight_client_api.exceptions import ApiException  # noqa: E402

from tests.conftest import serving  # noqa: E402

BANK = "hs-quickstart"


@pytest.fixture(scope="module")
def base_url(app):
    with serving(app, "hs-http") as url:
        yield url


class Flow:
    """Records each step: (call, route, passes)."""

    def __init__(self):
        self.rows: list[tuple[str, str, bool]] = []

    def step(self, call: str, route: str, fn):
        try:
            out = fn()
        except Exception:
            self.rows.append((call, route, False))
            raise
        self.rows.append((call, route, True))
        return out

    def table(self) -> str:
        lines = ["| # | call | route | passes |", "|---|---|---|---|"]
        for i, (call, route, ok) in enumerate(self.rows, 1):
            lines.append(f"| {i} | `{call}` | `{route}` | {'yes' if ok else 'NO'} |")
        return "\n".join(lines)


def run_flow(client: Hindsight, bank: str, wait_s: float = 120) -> Flow:
    """The quick-start flow of issue 10, each step asserting what came back."""
    import time

    f = Flow()
    B = f"/v1/default/banks/{bank}"

    v = f.step("get_version()", "GET /version", client.get_version)
    assert v.api_version and v.features.mcp is True and v.features.observations is False
    h = f.step("monitoring.health_endpoint_health_get()", "GET /health",
               lambda: _run_async(client.monitoring.health_endpoint_health_get()))
    assert h["status"] == "healthy"

    prof = f.step("create_bank(name, mission)", f"PUT {B}",
                  lambda: client.create_bank(bank, name="Quick start", mission="Remember Alice"))
    assert prof.bank_id == bank and prof.name == "Quick start" and prof.mission == "Remember Alice"
    assert prof.disposition.skepticism == 3

    r = f.step("retain(content, sync)", f"POST {B}/memories",
               lambda: client.retain(bank, "Alice works at Google as a software engineer.",
                                     context="career", document_id="doc-alice",
                                     metadata={"source": "chat"}, tags=["work"],
                                     timestamp="2024-01-15T10:00:00Z"))
    assert r.success is True and r.items_count == 1 and r.var_async is False

    items = [{"content": "Bob loves hiking in the Alps every summer.", "tags": ["hobby"],
              "document_id": "doc-bob"},
             {"content": "Carol prefers tea over coffee in the morning.", "tags": ["food"],
              "document_id": "doc-carol", "timestamp": "unset"},
             {"content": "The team decided to ship version 2 in March.", "context": "planning"}]
    rb = f.step("retain_batch(items, retain_async=True)", f"POST {B}/memories",
                lambda: client.retain_batch(bank, items, document_tags=["batch"],
                                            retain_async=True))
    assert rb is not None and rb.var_async is True and rb.items_count == 3 and rb.operation_id

    def poll(op_id: str):
        deadline = time.monotonic() + wait_s
        while True:
            st = _run_async(client.operations.get_operation_status(bank, op_id))
            if st.status in ("completed", "failed") or time.monotonic() > deadline:
                return st
            time.sleep(0.2)

    st = f.step("operations.get_operation_status(op) until completed",
                f"GET {B}/operations/{{id}}", lambda: poll(rb.operation_id))
    assert st.status == "completed" and st.operation_id == rb.operation_id

    op_id = "3f0c2f0e-1b7a-4c55-9a51-6c0d8e9e0a11"
    one = {"content": "Dana moved to Lisbon in 2021.", "document_id": "doc-dana"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r1 = f.step("retain_batch(operation_id=X) #1", f"POST {B}/memories",
                    lambda: client.retain_batch(bank, [one], retain_async=True, operation_id=op_id))
        r2 = f.step("retain_batch(operation_id=X) #2", f"POST {B}/memories",
                    lambda: client.retain_batch(bank, [one], retain_async=True, operation_id=op_id))
    assert r1.operation_id == r2.operation_id
    st2 = f.step("get_operation_status(X) (caller's id)", f"GET {B}/operations/{{X}}",
                 lambda: poll(op_id))
    assert st2.status == "completed" and st2.operation_id == r1.operation_id

    rec = f.step("recall(query) defaults", f"POST {B}/memories/recall",
                 lambda: client.recall(bank, "Where does Alice work?"))
    assert rec.results and "Google" in rec.results[0].text
    assert rec.results[0].type == "world" and rec.results[0].scores.final > 0
    assert rec.results[0].document_id == "doc-alice" and rec.results[0].tags == ["work"]

    hi = f.step("recall(budget='high', max_tokens=2048)", f"POST {B}/memories/recall",
                lambda: client.recall(bank, "Who likes hiking?", budget="high", max_tokens=2048))
    assert "Bob" in hi.results[0].text
    lo = f.step("recall(budget='low', max_tokens=20)", f"POST {B}/memories/recall",
                lambda: client.recall(bank, "Who likes hiking?", budget="low", max_tokens=20))
    assert 1 <= len(lo.results) <= 2 and "Bob" in lo.results[0].text  # 20 tokens hold 1-2 units

    ty = f.step("recall(types=['world'])", f"POST {B}/memories/recall",
                lambda: client.recall(bank, "tea coffee", types=["world"]))
    assert ty.results and all(x.type == "world" for x in ty.results)
    none = f.step("recall(types=['observation'])", f"POST {B}/memories/recall",
                  lambda: client.recall(bank, "tea coffee", types=["observation"]))
    assert none.results == []

    both = client.recall(bank, "hiking tea coffee Alps morning").results  # unfiltered: both
    assert {"Bob", "Carol"} <= {x.text.split()[0] for x in both}
    tg = f.step("recall(tags=['hobby'], tags_match='any_strict')", f"POST {B}/memories/recall",
                lambda: client.recall(bank, "hiking tea coffee Alps morning", tags=["hobby"],
                                      tags_match="any_strict"))
    assert [x.text for x in tg.results] == ["Bob loves hiking in the Alps every summer."]
    tga = f.step("recall(tags=['batch','food'], tags_match='all_strict')",
                 f"POST {B}/memories/recall",
                 lambda: client.recall(bank, "hiking tea coffee Alps morning", tags=["batch", "food"],
                                       tags_match="all_strict"))
    assert [x.text for x in tga.results] == ["Carol prefers tea over coffee in the morning."]

    ar = f.step("arecall(query) + to_prompt_string()", f"POST {B}/memories/recall",
                lambda: _run_async(client.arecall(bank, "Who moved to Lisbon?")))
    prompt = ar.to_prompt_string()
    assert prompt.startswith("FACTS:") and "Lisbon" in prompt

    bl = f.step("banks.list_banks()", "GET /v1/default/banks",
                lambda: _run_async(client.banks.list_banks()))
    mine = [b for b in bl.banks if b.bank_id == bank]
    assert bl.total >= 1 and mine and mine[0].disposition.empathy == 3
    assert mine[0].name == "Quick start"

    ml = f.step("list_memories(limit=2)", f"GET {B}/memories/list",
                lambda: client.list_memories(bank, limit=2))
    assert ml.total == 5 and len(ml.items) == 2 and ml.limit == 2
    mt = f.step("list_memories(search_query='coffee')", f"GET {B}/memories/list",
                lambda: client.list_memories(bank, search_query="coffee"))
    assert mt.total == 1 and mt.items[0].fact_type == "world"
    uid = mt.items[0].id

    got = f.step("memory.get_memory(id)", f"GET {B}/memories/{{id}}",
                 lambda: _run_async(client.memory.get_memory(bank, uid)))
    assert got["id"] == uid and "tea" in got["text"]

    pr = f.step("banks.get_bank_profile()", f"GET {B}/profile",
                lambda: _run_async(client.banks.get_bank_profile(bank)))
    assert pr.mission == "Remember Alice"
    sts = f.step("banks.get_agent_stats()", f"GET {B}/stats",
                 lambda: _run_async(client.banks.get_agent_stats(bank)))
    assert sts.total_nodes == 5 and sts.total_documents == 5 and sts.pending_operations == 0
    assert sts.failed_operations == 0 and sts.nodes_by_fact_type == {"world": 5}
    cfg = f.step("get_bank_config()", f"GET {B}/config", lambda: client.get_bank_config(bank))
    assert cfg["bank_id"] == bank and cfg["overrides"]["mission"] == "Remember Alice"

    dl = f.step("documents.list_documents()", f"GET {B}/documents",
                lambda: _run_async(client.documents.list_documents(bank)))
    assert dl.total == 5 and {d.id for d in dl.items} >= {"doc-alice", "doc-bob", "doc-dana"}
    dg = f.step("documents.get_document('doc-bob')", f"GET {B}/documents/{{id}}",
                lambda: _run_async(client.documents.get_document(bank, "doc-bob")))
    assert dg.memory_unit_count == 1 and "hiking" in dg.original_text
    dd = f.step("documents.delete_document('doc-bob')", f"DELETE {B}/documents/{{id}}",
                lambda: _run_async(client.documents.delete_document(bank, "doc-bob")))
    assert dd.success and dd.memory_units_deleted == 1
    gone = client.recall(bank, "Who likes hiking?", budget="high")
    assert all("hiking" not in x.text for x in gone.results)

    ol = f.step("operations.list_operations()", f"GET {B}/operations",
                lambda: _run_async(client.operations.list_operations(bank)))
    assert ol.total == 3 and all(o.status == "completed" for o in ol.operations)
    assert {o.task_type for o in ol.operations} == {"retain"}
    assert sorted(o.items_count for o in ol.operations) == [1, 1, 3]

    tl = f.step("memory.list_tags()", f"GET {B}/tags",
                lambda: _run_async(client.memory.list_tags(bank)))
    assert {t.tag: t.count for t in tl.items} == {"batch": 2, "food": 1, "work": 1}
    el = f.step("entities.list_entities()", f"GET {B}/entities",
                lambda: _run_async(client.entities.list_entities(bank)))
    # the deterministic extractor (no LLM here); doc-bob's deletion took the Alps' mention
    assert {e.canonical_name: e.mention_count for e in el.items} == {
        "Google": 1, "Lisbon": 1, "Alps": 0} and el.total == 3

    rf = f.step("reflect(query) without an LLM → 400", f"POST {B}/reflect",
                lambda: _expect_status(lambda: client.reflect(bank, "Where does Alice work?"), 400))
    assert "llm_not_configured" in rf

    cl = f.step("memory.clear_bank_memories()", f"DELETE {B}/memories",
                lambda: _run_async(client.memory.clear_bank_memories(bank)))
    assert cl.success and cl.deleted_count == 4
    assert client.list_memories(bank).total == 0
    db = f.step("delete_bank()", f"DELETE {B}", lambda: client.delete_bank(bank))
    assert db.success
    after = _run_async(client.banks.list_banks())
    assert bank not in {b.bank_id for b in after.banks}
    return f


def _expect_status(fn, status: int) -> str:
    try:
        fn()
    except ApiException as exc:
        assert exc.status == status, (exc.status, exc.body)
        return exc.body or ""
    raise AssertionError(f"expected HTTP {status}")


def test_hindsight_client_quick_start(base_url, worker):
    client = Hindsight(base_url=base_url, timeout=60)
    try:
        flow = run_flow(client, BANK)
    finally:
        client.close()
    print("\n" + flow.table())
    assert len(flow.rows) >= 31 and all(ok for _, _, ok in flow.rows)
