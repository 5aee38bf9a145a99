"""Fault 6: what a job says about its content (a file's name, size, type, SHA-256; the error
text; item errors; the idempotency key) is shown only to members who may see its units
(rcll.access.jobs) — through the operations list, the single operation (by id and by
Hindsight's operation_id), ``/jobs``, and the retain/files answers. Everyone else with read
on the bank gets the same redacted job on every route. Auth on, real PostgreSQL and Redis."""

from __future__ import annotations

import io
import json
import uuid

import pytest

from mcp_server import server as mcp
from rcll.access.jobs import job_json
from tests.access.conftest import bearer, make_member

BANK = "job-vis"
ALL = ["assist", "operate", "audit", "personal"]
FILE_NAME = "payroll-zq81-secret.md"
FILE_BODY = b"# Payroll\n\nZq81 salary bands for the board only.\n"


@pytest.fixture(scope="module")
def world(auth_app, auth_services):
    """A (write, every purpose) uploads a file private to A and retains a text item private
    to A under an idempotency key, a ``bank`` item (``assist``) and a ``bank`` item for
    ``audit`` only; C (write, every purpose) and Z (read, ``assist``) hold grants on BANK."""
    api = auth_app.test_client()
    tag = uuid.uuid4().hex[:6]
    a, c, z = f"jva{tag}", f"jvc{tag}", f"jvz{tag}"
    ka = make_member(api, a, BANK, "write", purposes=ALL, default_purposes=["assist"])
    kc = make_member(api, c, BANK, "write", purposes=ALL)
    kz = make_member(api, z, BANK, "read", purposes=["assist"])
    r = api.post(f"/v1/default/banks/{BANK}/files/retain", headers=bearer(ka),
                 data={"files": [(io.BytesIO(FILE_BODY), FILE_NAME)],
                       "request": json.dumps({"files_metadata": [{"audience": a}]})},
                 content_type="multipart/form-data")
    assert r.status_code == 200, r.get_json()
    file_op = r.get_json()["operations"][0]
    key = f"private-key-{tag}"

    def retain(body, key=None):
        headers = bearer(ka) | ({"Idempotency-Key": key} if key else {})
        r = api.post(f"/v1/default/banks/{BANK}/memories", json=body, headers=headers)
        assert r.status_code in (200, 202), r.get_json()
        return r.get_json()["operation"]

    private = retain({"items": [{"content": "Zq81 private note.", "audience": a,
                                 "document_id": f"doc-private-{tag}"}]}, key)
    public = retain({"items": [{"content": "The canteen opens at 8.",
                                "document_id": f"doc-public-{tag}"}]})
    audit_only = retain({"items": [{"content": "Audit trail moved.", "purposes": ["audit"],
                                    "document_id": f"doc-audit-{tag}"}]})
    return {"a": a, "c": c, "z": z, "ka": ka, "kc": kc, "kz": kz, "file": file_op,
            "private": private, "public": public, "audit": audit_only, "key": key, "api": api,
            "tag": tag}


def _views(world, key: str, op_id: str) -> list[dict]:
    """The job ``op_id`` as every route that lists or shows it answers ``key``'s member."""
    api, h = world["api"], bearer(key)
    out = []
    r = api.get(f"/v1/default/banks/{BANK}/operations/{op_id}", headers=h)
    assert r.status_code == 200, r.get_json()
    out.append(r.get_json())
    r = api.get(f"/v1/default/banks/{BANK}/operations?limit=200", headers=h)
    assert r.status_code == 200
    out += [o for o in r.get_json()["operations"] if o["id"] == op_id]
    r = api.get(f"/jobs?bank_id={BANK}&limit=200", headers=h)
    assert r.status_code == 200
    out += [o for o in r.get_json()["jobs"] if o["id"] == op_id]
    r = api.get("/jobs?limit=200", headers=h)
    assert r.status_code == 200
    out += [o for o in r.get_json()["jobs"] if o["id"] == op_id]
    assert len(out) == 4, out  # every route shows the job exists
    return out


def _assert_redacted(op: dict, world) -> None:
    text = json.dumps(op)
    assert op["redacted"] is True
    assert op["counts"] == {} and op["items_count"] == 0
    assert op["error"] is None and op["error_message"] is None
    assert op["idempotency_key"] is None and op["llm_usage"] is None
    assert op.get("item_errors", []) == [] and op.get("item_errors_total", 0) == 0
    assert op["state"] == "queued" and op["status"] == "pending" and op["kind"] == "retain"
    for secret in (FILE_NAME, "sha256", "text/markdown", world["key"], "doc-private", "Zq81",
                   world["a"]):
        assert secret not in text, (secret, op)
    # the file's size as a value (as a substring it may occur inside an id or a time)
    assert len(FILE_BODY) not in [v for v in op.values() if isinstance(v, int)], op


def test_private_file_job_is_redacted_for_other_members(world):
    op_id = world["file"]["id"]
    mine = _views(world, world["ka"], op_id)
    for op in mine:
        assert op["redacted"] is False
        assert op["counts"]["file"] == {"name": FILE_NAME, "size": len(FILE_BODY),
                                        "type": "text/markdown", "sha256": op["counts"]["file"]["sha256"]}
        assert len(op["counts"]["file"]["sha256"]) == 64
    assert world["file"]["redacted"] is False and world["file"]["counts"]["file"]["name"] == FILE_NAME
    for key in (world["kc"], world["kz"]):
        views = _views(world, key, op_id)
        for op in views:
            _assert_redacted(op, world)
        # one shape on every route: the single operation is the listed job plus item errors
        single, *listed = views
        for op in listed:
            assert op == {k: v for k, v in single.items()
                          if k not in ("item_errors", "item_errors_total")}


def test_private_text_job_hidden_by_id_and_by_its_key(world):
    api, op_id, key = world["api"], world["private"]["id"], world["key"]
    for k in (world["kc"], world["kz"]):
        for op in _views(world, k, op_id):
            _assert_redacted(op, world)
        # Hindsight's operation_id (the idempotency key) of a hidden job: as an unused key
        r = api.get(f"/v1/default/banks/{BANK}/operations/{key}", headers=bearer(k))
        assert r.status_code == 404 and r.get_json()["error"]["code"] == "operation_not_found"
        r2 = api.get(f"/v1/default/banks/{BANK}/operations/never-used-{world['tag']}",
                     headers=bearer(k))
        assert (r2.status_code, r2.get_json()["error"]) == (r.status_code, r.get_json()["error"]
                                                             | {"message": r2.get_json()["error"]["message"],
                                                                "details": r2.get_json()["error"]["details"]})
    r = api.get(f"/v1/default/banks/{BANK}/operations/{key}", headers=bearer(world["ka"]))
    assert r.status_code == 200 and r.get_json()["id"] == op_id
    assert r.get_json()["idempotency_key"] == key and r.get_json()["redacted"] is False


def test_bank_job_visible_only_with_a_granted_purpose(world):
    for k in (world["ka"], world["kc"], world["kz"]):  # audience bank, purpose assist
        for op in _views(world, k, world["public"]["id"]):
            assert op["redacted"] is False and op["counts"] == {"items": 1}
            assert op["items_count"] == 1
    for k in (world["ka"], world["kc"]):  # audit granted
        for op in _views(world, k, world["audit"]["id"]):
            assert op["redacted"] is False and op["items_count"] == 1
    for op in _views(world, world["kz"], world["audit"]["id"]):  # Z: assist only
        _assert_redacted(op, world)


def test_totals_count_hidden_jobs_alike(world):
    """A hidden job is listed and counted like any other (no total tells it apart)."""
    api = world["api"]
    totals = {api.get(f"/v1/default/banks/{BANK}/operations", headers=bearer(k)).get_json()["total"]
              for k in (world["ka"], world["kc"], world["kz"])}
    assert len(totals) == 1 and totals.pop() >= 4


def test_mcp_retain_and_job_json_use_the_rule(world, auth_services):
    """The MCP retain tool answers its operation through the same rule; another member
    reading that job through the rule's one function gets it redacted."""
    acc = auth_services.access
    pa = acc.authenticate(world["ka"])
    pc = acc.authenticate(world["kc"])
    rt = mcp.Runtime(services=auth_services, retain=auth_services.retain_service(lambda *_: None))
    answer = mcp.retain(rt, pa, BANK, [{"content": "Zq81 via MCP.", "audience": world["a"]}],
                        sync=False, idempotency_key=None)
    op = answer["operation"]
    assert op["redacted"] is False and op["items_count"] == 1
    with auth_services.pool.connection() as conn:
        from rcll.store import jobs

        row = jobs.get(conn, op["id"], BANK)
    assert row["submitted_by"] == world["a"]
    assert row["item_scopes"] == [{"audience": world["a"], "purposes": ["assist"]}]
    _assert_redacted(job_json(pc, row), world)
    assert job_json(pa, row)["counts"] == {"items": 1}
