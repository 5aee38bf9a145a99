"""Break9: bad input on every issue-9 route — wrong types, nulls, huge strings, NUL, lone
surrogates, unknown fields, bad UUIDs, negative revisions, unknown purposes — is a 4xx with
an error code, never a 5xx, and stores nothing. Auth on."""

from __future__ import annotations

import uuid

import pytest

from tests.access.conftest import ADMIN, bearer, counts, make_member

BANK = "brk-bad"
BAD = [None, 5, -1, 10**30, True, [], {}, "x" * 70_000, "a\x00b", "\ud83d", "gossip"]


@pytest.fixture(scope="module")
def world(auth_app):
    api = auth_app.test_client()
    m = f"bd{uuid.uuid4().hex[:6]}"
    k = make_member(api, m, BANK, "admin")
    r = api.post(f"/banks/{BANK}/units", json={"text": "Bad-input target unit."},
                 headers=bearer(k))
    assert r.status_code == 201
    return {"m": m, "k": k, "uid": r.get_json()["id"]}


def _check(r, fails, where):
    j = r.get_json(silent=True)
    if r.status_code >= 500 or (r.status_code >= 400 and not (
            isinstance(j, dict) and j.get("error", {}).get("code"))):
        fails.append((where, r.status_code, str(j)[:160]))


def test_bad_bodies(api, world, auth_services):
    h, uid = bearer(world["k"]), world["uid"]
    targets = [
        ("post", f"/banks/{BANK}/units", {"text": "ok"},
         ["text", "audience", "purposes", "kind", "layer", "metadata", "tags", "confidence",
          "occurred_start", "unknown_field"]),
        ("post", f"/banks/{BANK}/units/derive", {"text": "ok", "source_ids": [uid]},
         ["source_ids", "audience", "purposes", "text"]),
        ("patch", f"/banks/{BANK}/units/{uid}", {"revision": 999},
         ["revision", "text", "audience", "purposes", "metadata"]),
        ("post", f"/banks/{BANK}/units/{uid}/supersede", {"text": "ok", "revision": 999},
         ["revision", "audience", "purposes"]),
        ("post", "/tunnels", {"source_unit_id": uid, "target_unit_id": uid},
         ["source_unit_id", "target_unit_id", "relationship", "bidirectional"]),
        ("post", "/bridge", {"source_unit_id": uid, "target_unit_id": uid},
         ["source_unit_id", "source", "target", "purpose", "relationship"]),
        ("post", "/members", {"member_id": "zz-bad"},
         ["member_id", "name", "kind", "default_purposes", "is_admin"]),
        ("put", f"/banks/{BANK}/grants/{world['m']}", {"role": "nonsense"}, ["role", "purposes"]),
        ("post", f"/members/{world['m']}/keys", {"label": "x", "zz": 1}, ["label"]),
        ("post", f"/v1/default/banks/{BANK}/memories/recall", {"query": "q"},
         ["query", "purpose", "tiers", "follow_tunnels", "limit"]),
        ("post", f"/v1/default/banks/{BANK}/memories",
         {"items": [{"content": "x", "audience": "nobody-such"}]}, ["items", "async"]),
        ("delete", f"/banks/{BANK}/units/{uid}", {"reason": "x", "zz": 1}, ["reason"]),
    ]
    fails: list = []
    accepted: list = []
    for m, path, base, fields in targets:
        hdr = ADMIN if path.startswith(("/members", f"/banks/{BANK}/grants")) else h
        for f in fields:
            for v in BAD:
                before = counts(auth_services)
                r = getattr(api, m)(path, json={**base, f: v}, headers=hdr)
                _check(r, fails, (m, path, f, repr(v)[:30]))
                if r.status_code >= 400 and counts(auth_services) != before:
                    fails.append(("stored on refusal", m, path, f, repr(v)[:30]))
                if r.status_code < 300:
                    accepted.append((m, path.split("/")[-1], f, repr(v)[:20]))
    print("accepted:", accepted)
    # no coercion across JSON types on the verbs: a boolean is not a layer, a confidence or
    # a revision, a number is not a time
    coerced = [a for a in accepted if a[0] != "post" or a[1] not in ("recall", "members")]
    wrong = [a for a in coerced if a[3] in ("True", "5", "-1", "10**30") or
             (a[2] in ("occurred_start",) and a[3] != "None")]
    assert not wrong, wrong
    before = counts(auth_services)
    # 10k source ids, and a body that is not an object
    _check(api.post(f"/banks/{BANK}/units/derive",
                    json={"text": "ok", "source_ids": [str(uuid.uuid4()) for _ in range(10_000)]},
                    headers=h), fails, "10k source ids")
    for m, path, _, _ in targets:
        _check(getattr(api, m)(path, data=b"[1,2", headers={**h, "Content-Type":
                                                            "application/json"}),
               fails, (m, path, "malformed"))
    assert not fails, fails
    assert counts(auth_services) == before


def test_bad_paths(api, world):
    h = bearer(world["k"])
    fails: list = []
    for seg in ["not-a-uuid", "00000000-0000-0000-0000-000000000000", "%00", "%ED%A0%BD",
                "x" * 2000, "-1"]:
        for m, path in [("get", f"/banks/{BANK}/units/{seg}"),
                        ("patch", f"/banks/{BANK}/units/{seg}"),
                        ("delete", f"/banks/{BANK}/units/{seg}"),
                        ("post", f"/banks/{BANK}/units/{seg}/supersede"),
                        ("get", f"/v1/default/banks/{BANK}/memories/{seg}"),
                        ("get", f"/tunnels/{seg}"), ("delete", f"/tunnels/{seg}"),
                        ("get", f"/banks/{seg}/context"), ("get", f"/banks/{seg}/audit"),
                        ("get", f"/tunnels?bank_id={seg}"), ("delete", f"/keys/{seg}"),
                        ("get", f"/members/{seg}"), ("patch", f"/members/{seg}"),
                        ("get", f"/v1/default/banks/{BANK}/operations/{seg}"),
                        ("get", f"/v1/default/banks/{BANK}/entities/{seg}"),
                        ("post", f"/v1/default/banks/{BANK}/dedup-proposals/{seg}"),
                        ("get", f"/banks/{BANK}/audit?unit_id={seg}"),
                        ("get", f"/banks/{BANK}/units/{world['uid']}?purpose={seg}")]:
            body = {"revision": 1, "text": "t", "action": "keep"} if m in ("patch", "post") \
                else None
            hdr = ADMIN if "audit" in path or "members" in path else h
            _check(getattr(api, m)(path, json=body, headers=hdr), fails, (m, path[:70]))
    assert not fails, fails
