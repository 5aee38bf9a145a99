"""The permission matrix (issue 9, claim 5 of spec §1: permissions before ranking).

3 members × 2 audiences (``bank``, a member) × 4 purposes × the verbs:

- ``recall`` × every channel alone (dense, lexical, graph, temporal), the full recipe, every
  cascade tier forced alone (hot, warm, cold) and tunnels (a recall in another bank whose
  units have one-way tunnels to each unit of the matrix bank);
- ``read`` (:meth:`rcll.lifecycle.service.Lifecycle.read` of each unit for the purpose);
- ``derive`` (a derivation from each unit of a bank laid out the same, narrowed to the
  purpose: a visible source carrying it → a unit with exactly the source's audience and that
  purpose; a visible source without it → 409 ``empty_intersection``; an invisible one →
  404 ``unit_not_found``, like a missing one).

Each row asserts EXACTLY which unit ids appear anywhere in the response — results,
collapsed duplicates, expansion sources, links, sources, counts and the trace — against the
units the principal may see for that purpose; a purpose the member is not granted is refused
(403 ``purpose_not_granted``) and shows nothing. Principals are built directly (engine
level); ``test_permission_matrix_http.py`` runs rows through the API with auth on and keys.
The size and the leak count are written to ``benchmarks/results/permission_matrix.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path

import pytest

from rcll.access.principal import Grant, Principal
from rcll.cascade.after import AfterRecall, live_hot_units
from rcll.cascade.cascade import Cascade, CascadeSettings
from rcll.cascade.hot import HotTier
from rcll.errors import Forbidden, NotFound, RCLLError, Rejected
from rcll.hierarchy.tunnels import TunnelRequest
from rcll.retain.models import RetainItem
from rcll.search.models import RecallQuery
from rcll.search.recall import recall
from rcll.search.recipes import POST, RECIPES, Recipe

BANK = "perm-matrix"
DERIVE_BANK = "perm-matrix-derive"  # the same layout; derivations do not touch BANK
TUNNEL_BANK = "perm-matrix-tunnel"  # one anchor per BANK unit, a one-way tunnel to it
PURPOSES = ("assist", "operate", "audit", "personal")
AUDIENCES = ("bank", "alice")  # the matrix's two audiences: every member, one member
VARIANTS = ["needs descaling", "was repaired by the technician", "leaks at the base",
            "boils far too slowly", "has a cracked lid", "got a new limescale filter",
            "was moved to the chemistry lab", "stopped working after the storm",
            "was cleaned with vinegar"]
Q_TIME = "What happened to the Zephyr kettle in March?"
Q_PLAIN = "What happened to the Zephyr kettle?"
REFERENCE = datetime(2024, 4, 15, tzinfo=UTC)

GRANTED = {"alice": PURPOSES, "bob": PURPOSES, "carol": ("assist", "operate")}
ROLES = {"alice": "write", "bob": "read", "carol": "read"}  # on BANK; write on DERIVE_BANK
MEMBERS = {m: Principal(m, {BANK: Grant(BANK, ROLES[m], GRANTED[m]),
                            DERIVE_BANK: Grant(DERIVE_BANK, "write", GRANTED[m]),
                            TUNNEL_BANK: Grant(TUNNEL_BANK, "read", PURPOSES)},
                        default_purposes=("assist",)) for m in ("alice", "bob", "carol")}
CHANNELS = ("dense", "lexical", "graph", "temporal")
ROUTES = (*[f"channel:{c}" for c in CHANNELS], "channel:full",
          "tier:hot", "tier:warm", "tier:cold", "tunnel:cold")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SEEN: dict[str, int] = {"rows": 0, "unit_checks": 0, "leaks": 0, "refused": 0,
                        "read_link_ids": 0, "derived": 0, "derive_409": 0, "derive_404": 0,
                        "pair_checks": 0}
REPORT = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "permission_matrix.json"


def populate(svc, bank: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Retain the matrix layout into ``bank``: for each audience (``bank``, ``alice``) ×
    purpose one unit holding only that purpose (written by alice), plus one unit private to
    ``bob`` (purpose ``assist``, written by an internal call naming bob) — 9 units, all about
    the Zephyr kettle in March 2024, so every channel finds every visible one. Returns
    ``{unit id: (audience, purposes)}``."""
    alice = Principal("alice", {bank: Grant(bank, "write", PURPOSES)},
                      default_purposes=("assist",))
    k = 0
    for aud in AUDIENCES:
        for p in PURPOSES:
            svc.retain(bank, [RetainItem(
                content=f"Ingrid said the Zephyr kettle {VARIANTS[k]} ({aud}, {p}).",
                timestamp=datetime(2024, 3, 1 + k, 10, tzinfo=UTC), document_id=f"u-{aud}-{p}",
                audience=aud, purposes=[p])], async_=False, principal=alice)
            k += 1
    svc.retain(bank, [RetainItem(content=f"Ingrid said the Zephyr kettle {VARIANTS[k]} "
                                 "(bob, assist).", timestamp=datetime(2024, 3, 20, tzinfo=UTC),
                                 document_id="u-bob-assist", audience="bob",
                                 purposes=["assist"])], async_=False, principal=None)
    return unit_map(svc.pool, bank)


def unit_map(pool, bank: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """``{unit id: (audience, purposes)}`` of every unit of ``bank``."""
    with pool.connection() as conn:
        rows = conn.execute("SELECT id::text AS id, audience, purposes FROM memory_units "
                            "WHERE bank_id = %s", (bank,)).fetchall()
    return {r["id"]: (r["audience"], tuple(r["purposes"])) for r in rows}


@pytest.fixture(scope="module")
def world(services):
    """The matrix bank and its two companions (module constants), built once."""
    with services.pool.connection() as conn:
        conn.execute("INSERT INTO members (id, name) VALUES ('alice', 'Alice'), ('bob', 'Bob'), "
                     "('carol', 'Carol') ON CONFLICT DO NOTHING")
        conn.execute("DELETE FROM memory_banks WHERE id = ANY(%s)",
                     ([BANK, DERIVE_BANK, TUNNEL_BANK],))
    svc = services.retain_service(lambda *_: None)
    units = populate(svc, BANK)
    assert len(units) == 9, units
    derive_units = populate(svc, DERIVE_BANK)
    assert len(derive_units) == 9, derive_units
    # tunnels: one anchor unit (audience bank, every purpose) per BANK unit, a one-way tunnel
    # anchor → unit (a bidirectional one would change BANK's own recall rows)
    for k in range(len(units)):
        svc.retain(TUNNEL_BANK, [RetainItem(
            content=f"Logbook: the technician confirmed the Zephyr kettle {VARIANTS[k]}.",
            timestamp=datetime(2024, 3, 1 + k, 12, tzinfo=UTC), document_id=f"anchor-{k}",
            purposes=list(PURPOSES))], async_=False, principal=None)
    anchors = sorted(unit_map(services.pool, TUNNEL_BANK))
    assert len(anchors) == len(units)
    tunnel_to = {}
    for anchor, uid in zip(anchors, sorted(units), strict=True):
        t, created = services.tunnels.create(Principal.unrestricted(), TunnelRequest(
            source_unit_id=anchor, target_unit_id=uid, relationship="logbook",
            bidirectional=False))
        assert created
        tunnel_to[uid] = {"id": t["id"], "from": anchor}
    hot = HotTier(services.hot_tier.r, prefix="rcll:permtest")
    hot.drop_bank(BANK)
    model = services.settings.embedder_stamp
    with services.read_pool.connection() as conn:
        hot_units = live_hot_units(conn, BANK, list(units), model)
    assert len(hot_units) == 9
    hot.promote(BANK, hot_units, read_at=1e12)  # read "after" any invalidation: accepted
    assert sorted(hot.members(BANK)) == sorted(units)
    ctx = services.recall_context()
    cascade = Cascade(ctx, hot, None, settings=CascadeSettings(
        hot_threshold=0.0, warm_threshold=0.0, min_hits=1, promote_top=5))
    return {"units": units, "ctx": ctx, "cascade": cascade, "hot": hot, "svc": svc,
            "model": model, "derive_units": derive_units, "tunnel_to": tunnel_to,
            "lifecycle": services.lifecycle}


def expected(units: dict, member: str, purpose: str) -> set[str]:
    """The units ``member`` may see when recalling for ``purpose`` (spec §7)."""
    return {uid for uid, (aud, purposes) in units.items()
            if aud in ("bank", member) and purpose in purposes}


def expected_any(units: dict, member: str) -> set[str]:
    """The units ``member`` may see without naming a purpose: its audience, and one of the
    purposes granted to it (:data:`GRANTED`)."""
    return {uid for uid, (aud, purposes) in units.items()
            if aud in ("bank", member) and set(purposes) & set(GRANTED[member])}


def ids_in(payload: dict, units: dict) -> set[str]:
    """Every unit id of the bank that appears anywhere in ``payload`` (results, collapsed,
    expanded_from, counts, trace)."""
    return {u for u in UUID.findall(json.dumps(payload, default=str)) if u in units}


def _recall_visible(world, principal: Principal, purpose: str, route: str) -> tuple[set, dict]:
    """Ids a recall by ``principal`` for ``purpose`` over ``route`` shows, and the response."""
    kind, name = route.split(":")
    query = Q_PLAIN if name in ("hot", "warm") else Q_TIME  # time-relative → cold only
    if kind == "tunnel":  # recall in TUNNEL_BANK; BANK's units come only through tunnels
        q = RecallQuery(query=Q_PLAIN, purpose=purpose, trace=True, tiers=[name],
                        query_timestamp=REFERENCE)
        res = world["cascade"].recall(TUNNEL_BANK, q, principal)
        payload = res.to_json()
        got = ids_in(payload, world["units"])
        for r in payload["results"]:
            if r["id"] in world["units"]:  # brought by its own tunnel, from its anchor
                t = world["tunnel_to"][r["id"]]
                assert r["bank_id"] == BANK and r["tunnel"]["id"] == t["id"]
                assert r["tunnel"]["from_unit_id"] == t["from"]
        hidden = {world["tunnel_to"][u]["id"] for u in set(world["units"]) - got}
        assert not hidden & set(UUID.findall(json.dumps(payload, default=str)))  # no trace
        assert payload["counts"]["tunnels_followed"] == len(got)
        return got, payload
    if kind == "tier":
        q = RecallQuery(query=query, purpose=purpose, trace=True, tiers=[name],
                        query_timestamp=REFERENCE)
        res = world["cascade"].recall(BANK, q, principal)
        assert res.tiers == [name], (route, res.tiers, res.degraded)
    else:
        recipe = RECIPES["full"] if name == "full" else Recipe(f"{name}_only", (name,),
                                                                steps=POST)
        ctx = replace(world["ctx"], default_recipe=recipe.name)
        q = RecallQuery(query=query, purpose=purpose, trace=True, query_timestamp=REFERENCE)
        res = recall(ctx, BANK, q, recipes={recipe.name: recipe},
                     scope=ctx.scope(BANK, q, principal))
        assert name == "full" or res.channels == [name], (route, res.channels, res.degraded)
    payload = res.to_json()
    return ids_in(payload, world["units"]), payload


def _read_visible(world, principal: Principal, purpose: str, route: str) -> tuple[set, dict]:
    """Read each unit of BANK for ``purpose``: the ids returned (200) plus every unit id in
    the bodies (links, sources); an invisible unit must be 404 ``unit_not_found`` with the
    same message as a missing one."""
    lc = world["lifecycle"]
    units = world["units"]
    if purpose not in principal.purposes(BANK):  # refused before any unit is looked at
        lc.read(principal, BANK, next(iter(units)), purpose=purpose)
    got, bodies = set(), {}
    for uid in units:
        try:
            body = lc.read(principal, BANK, uid, purpose=purpose)
        except NotFound as err:
            assert err.code == "unit_not_found" and str(err) == (
                f"unit {uid} does not exist in bank {BANK!r}")
            continue
        assert body["id"] == uid
        got.add(uid)
        bodies[uid] = body
        linked = ids_in({"links": body["links"], "sources": body["sources"]}, units)
        SEEN["read_link_ids"] += len(linked)
        got |= linked
    return got, {"bodies": bodies}


def derive_expect(units: dict, member: str, purpose: str, uid: str) -> int:
    """HTTP status of deriving from ``uid`` narrowed to ``purpose`` by ``member``."""
    aud, purposes = units[uid]
    if aud not in ("bank", member) or not set(purposes) & set(GRANTED[member]):
        return 404
    return 201 if purpose in purposes else 409


def _derive_visible(world, principal: Principal, purpose: str, route: str) -> tuple[set, dict]:
    """Derive from each unit of DERIVE_BANK narrowed to ``purpose``: the sources that were
    not answered 404 (a 201 or a 409 shows the source exists and is visible), plus every
    unit id in the derived units' bodies. Each outcome must be the one
    :func:`derive_expect` gives; a derived unit has exactly the source's audience and
    ``[purpose]``."""
    lc = world["lifecycle"]
    units = world["derive_units"]
    member = principal.member_id
    got, out = set(), {}
    for uid in units:
        want = derive_expect(units, member, purpose, uid)
        try:
            body = lc.derive(principal, DERIVE_BANK, [uid], {
                "text": f"Derived for {purpose}: the Zephyr kettle note {uid[:8]}.",
                "purposes": [purpose]})
            status = 201
        except RCLLError as err:
            status, body = err.status, {"code": err.code, "message": str(err),
                                        "details": err.details}
        assert status == want, (uid, units[uid], status, body)
        out[uid] = status
        if status == 404:
            assert body["code"] == "unit_not_found"
            assert body["message"] == f"unit {uid} does not exist in bank {DERIVE_BANK!r}"
            SEEN["derive_404"] += 1
            continue
        got.add(uid)
        if status == 409:
            assert body["code"] == "empty_intersection"
            SEEN["derive_409"] += 1
            continue
        SEEN["derived"] += 1
        assert (body["audience"], body["purposes"], body["origin"]) == (
            units[uid][0], [purpose], "derived")
        assert [s["id"] for s in body["sources"]] == [uid]
        got |= ids_in({"links": body["links"], "sources": body["sources"]}, units)
    return got, {"status": out}


# verb → function(world, principal, purpose, route) -> (visible ids, response); route "-"
# for the verbs that have no channels
VISIBLE = {"recall": _recall_visible, "read": _read_visible, "derive": _derive_visible}
VERB_ROUTES = {"recall": ROUTES, "read": ("-",), "derive": ("-",)}
MATRIX = [(verb, route, member, purpose) for verb, routes in VERB_ROUTES.items()
          for route in routes for member in MEMBERS for purpose in PURPOSES]


@pytest.mark.parametrize("verb,route,member,purpose", MATRIX,
                         ids=["-".join(r) for r in MATRIX])
def test_matrix_row(world, verb, route, member, purpose):
    principal = MEMBERS[member]
    units = world["derive_units" if verb == "derive" else "units"]
    want = expected(units, member, purpose)
    if verb == "derive":  # 201 or 409: the source is visible whatever the narrowing
        want = {u for u in units if derive_expect(units, member, purpose, u) != 404}
    elif route.startswith("tunnel:") and purpose not in GRANTED[member]:
        want = set()  # allowed in TUNNEL_BANK, not granted on BANK: no tunnel brings a unit
    SEEN["rows"] += 1
    SEEN["unit_checks"] += len(units)
    if verb != "derive" and purpose not in principal.purposes(
            TUNNEL_BANK if route.startswith("tunnel:") else BANK):
        with pytest.raises(Rejected) as err:
            VISIBLE[verb](world, principal, purpose, route)
        assert (err.value.status, err.value.code) == (403, "purpose_not_granted")
        SEEN["refused"] += 1
        return
    got, payload = VISIBLE[verb](world, principal, purpose, route)
    SEEN["leaks"] += len(got - want)
    assert got == want, {"leaked": got - want, "missing": want - got}
    if verb != "recall":
        return
    assert payload["counts"]["returned"] == len(payload["results"])
    if route.startswith("tunnel:"):  # the channels' counts are TUNNEL_BANK's own units
        return
    # the channels' own counts never exceed what the caller may see
    for ch in CHANNELS:
        if ch in payload["counts"]:
            assert payload["counts"][ch] <= len(want), (ch, payload["counts"])
    if route.startswith("tier:") and route != "tier:cold":
        assert payload["counts"][f"{route[5:]}_hits"] == len(want)


def test_derive_intersections(world):
    """Every pair of DERIVE_BANK units, derived by each member and by the unrestricted
    principal: 404 if a source is invisible to the caller, else the intersection of the two
    audiences and purposes — and 409 ``empty_intersection`` with the reason when it is
    empty (two members' private units; no shared purpose)."""
    units = world["derive_units"]
    lc = world["lifecycle"]
    pairs = list(combinations(sorted(units), 2))
    callers = [*MEMBERS.items(), ("unrestricted", Principal.unrestricted())]
    outcomes = {201: 0, 404: 0, 409: 0}
    for name, who in callers:
        for a, b in pairs:
            (aud_a, p_a), (aud_b, p_b) = units[a], units[b]
            sees = set(units) if name == "unrestricted" else expected_any(units, name)
            common = [p for p in PURPOSES if p in p_a and p in p_b]
            members = {aud_a, aud_b} - {"bank"}
            if not {a, b} <= sees:
                want, reason = 404, None
            elif len(members) > 1:
                want, reason = 409, "the sources are private to different members (alice, bob)"
            elif not common:
                want, reason = 409, "the sources share no purpose"
            else:
                want, reason = 201, None
            try:
                body = lc.derive(who, DERIVE_BANK, [a, b], {"text": "Zephyr kettle summary."})
                status = 201
            except RCLLError as err:
                status, body = err.status, {"code": err.code, "details": err.details}
            assert status == want, (name, units[a], units[b], body)
            outcomes[status] += 1
            SEEN["pair_checks"] += 1
            if status == 409:
                assert body["code"] == "empty_intersection"
                assert body["details"]["reason"] == reason
            elif status == 201:
                assert body["audience"] == (members.pop() if members else "bank")
                assert body["purposes"] == common
                assert {s["id"] for s in body["sources"]} == {a, b}
    assert all(outcomes.values()), outcomes  # every outcome occurs


def test_read_without_purpose(world):
    """Read by id naming no purpose: the unit must carry one of the purposes granted to the
    caller (carol, granted assist and operate, does not read an audit-only unit), and links
    and sources show only such units."""
    lc = world["lifecycle"]
    units = world["units"]
    for member, who in MEMBERS.items():
        got = set()
        for uid in units:
            try:
                body = lc.read(who, BANK, uid)
            except NotFound:
                continue
            got.add(uid)
            got |= ids_in({"links": body["links"], "sources": body["sources"]}, units)
        want = expected_any(units, member)
        SEEN["leaks"] += len(got - want)
        assert got == want, (member, {"leaked": got - want, "missing": want - got})
    # auth off: every unit, every link
    assert {lc.read(Principal.unrestricted(), BANK, u)["id"] for u in units} == set(units)


def test_matrix_size_and_no_leaks():
    """Runs after the rows (file order): the matrix's size, and 0 leaks; writes the figures
    to :data:`REPORT` (key ``engine``) when the whole matrix ran."""
    if SEEN["rows"] == 0:
        pytest.skip("matrix rows not run in this session")
    per_verb = {v: len(r) * len(MEMBERS) * len(PURPOSES) for v, r in VERB_ROUTES.items()}
    print(f"\npermission matrix (engine): {SEEN['rows']} rows — {len(MEMBERS)} members × "
          f"{len(PURPOSES)} purposes × (recall over {len(ROUTES)} channels/tiers/tunnels "
          f"+ read + derive), units of {len(AUDIENCES)} audiences × {len(PURPOSES)} purposes "
          f"+ 1 private to bob; {SEEN['unit_checks']} unit visibility checks, "
          f"{SEEN['refused']} refused rows, {SEEN['pair_checks']} derive pair checks, "
          f"{SEEN['leaks']} leaks")
    assert SEEN["rows"] == len(MATRIX)
    assert SEEN["leaks"] == 0
    assert SEEN["read_link_ids"] > 0  # the link filter had links to filter
    assert SEEN["derived"] and SEEN["derive_409"] and SEEN["derive_404"]
    write_report("engine", {
        "rows": SEEN["rows"], "rows_per_verb": per_verb, "members": len(MEMBERS),
        "audiences": len(AUDIENCES), "purposes": len(PURPOSES), "recall_routes": list(ROUTES),
        "units_per_bank": 9, "unit_checks": SEEN["unit_checks"],
        "refused_rows": SEEN["refused"], "derive_outcomes": {
            "201": SEEN["derived"], "409": SEEN["derive_409"], "404": SEEN["derive_404"]},
        "derive_pair_checks": SEEN["pair_checks"], "leaks": SEEN["leaks"]})


def write_report(key: str, figures: dict) -> None:
    """Merge ``{key: figures}`` into :data:`REPORT` (the other key is the other module's)."""
    data = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    data[key] = figures
    data["total_rows"] = sum(v["rows"] for k, v in data.items() if isinstance(v, dict))
    data["total_leaks"] = sum(v["leaks"] for k, v in data.items() if isinstance(v, dict))
    REPORT.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def test_unrestricted_sees_every_unit(world):
    q = RecallQuery(query=Q_TIME, trace=True, tiers=["cold"], query_timestamp=REFERENCE)
    res = world["cascade"].recall(BANK, q, None)
    assert ids_in(res.to_json(), world["units"]) == set(world["units"])


def test_hot_promotion_of_one_caller_serves_no_other_caller(world, services):
    """Alice's cold answer (her private units included) is promoted into tier 1 with her
    query as cue; bob re-asking on tier 1 gets only what he may see, and alice's units stay
    in tier 1 (an invisible hit is filtered, not mistaken for a stale one)."""
    hot = HotTier(services.hot_tier.r, prefix="rcll:permtest-promo")
    hot.drop_bank(BANK)
    after = AfterRecall(hot, services.read_pool, world["model"])
    cascade = Cascade(world["ctx"], hot, None, settings=CascadeSettings(
        hot_threshold=0.0, warm_threshold=0.0, min_hits=1, promote_top=9))
    alice = MEMBERS["alice"]
    q = RecallQuery(query=Q_PLAIN, purpose="assist", tiers=["cold"], trace=True)
    res = cascade.recall(BANK, q, alice)
    got = [r["id"] for r in res.results]
    assert set(got) == expected(world["units"], "alice", "assist")
    private = [u for u in got if world["units"][u][0] == "alice"]
    assert private
    after.run_one(BANK, got, world["ctx"].embedder.get().embed([Q_PLAIN])[0], got)
    assert hot.missing(BANK, got) == []
    for member in ("bob", "carol"):
        q = RecallQuery(query=Q_PLAIN, purpose="assist", tiers=["hot"], trace=True)
        res = cascade.recall(BANK, q, MEMBERS[member])
        seen = ids_in(res.to_json(), world["units"])
        assert seen == expected(world["units"], member, "assist") & set(got)
        assert res.counts["hot_hits"] == len(seen)
        assert not seen & set(private)
    assert hot.missing(BANK, private) == []  # not dropped as stale by bob's recalls
    hot.drop_bank(BANK)


def test_recall_refusals(world):
    cascade = world["cascade"]
    with pytest.raises(Rejected) as err:
        cascade.recall(BANK, RecallQuery(query=Q_PLAIN, purpose="gossip"), MEMBERS["bob"])
    assert (err.value.status, err.value.code) == (400, "unknown_purpose")
    with pytest.raises(Rejected) as err:
        cascade.recall(BANK, RecallQuery(query=Q_PLAIN, purpose="audit"), MEMBERS["carol"])
    assert (err.value.status, err.value.code) == (403, "purpose_not_granted")
    stranger = Principal("dave", {"other-bank": Grant("other-bank", "admin", PURPOSES)})
    with pytest.raises(Forbidden):
        cascade.recall(BANK, RecallQuery(query=Q_PLAIN), stranger)
    # no purpose named: a member recalls for the default purpose (assist)
    res = cascade.recall(BANK, RecallQuery(query=Q_PLAIN, tiers=["cold"], trace=True),
                         MEMBERS["carol"])
    assert ids_in(res.to_json(), world["units"]) == expected(world["units"], "carol", "assist")


def test_retain_access_rules(world, services):
    svc = world["svc"]
    item = RetainItem(content="Zephyr note", document_id="rules")

    def refused(principal, **fields):
        with pytest.raises((Rejected, Forbidden)) as err:
            svc.retain(BANK, [item.model_copy(update=fields)], async_=False,
                       principal=principal)
        return err.value.status, err.value.code

    assert refused(MEMBERS["alice"], audience="bob") == (403, "audience_not_allowed")
    assert refused(MEMBERS["alice"], purposes=["gossip"]) == (400, "unknown_purpose")
    assert refused(MEMBERS["alice"], purposes=[]) == (400, "invalid_purposes")
    assert refused(MEMBERS["alice"], audience="Not A Member!") == (400, "invalid_audience")
    assert refused(None, audience="zed") == (400, "unknown_member")
    assert refused(MEMBERS["bob"]) == (403, "forbidden")  # read grant: no retain
    with services.pool.connection() as conn:
        n = conn.execute("SELECT count(*) AS n FROM memory_units WHERE bank_id = %s",
                         (BANK,)).fetchone()["n"]
    assert n == len(world["units"])  # nothing written by a refused retain
    # defaults: audience bank, the writer's default purposes
    job, _ = svc.retain(BANK, [item.model_copy(update={"document_id": "defaults"})],
                        async_=False, principal=MEMBERS["alice"])
    with services.pool.connection() as conn:
        row = conn.execute("SELECT audience, purposes FROM memory_units WHERE job_id = %s",
                           (job["id"],)).fetchone()
        conn.execute("DELETE FROM memory_units WHERE job_id = %s", (job["id"],))
    assert (row["audience"], row["purposes"]) == ("bank", ["assist"])


def test_idempotency_hash_includes_access_fields(world):
    svc = world["svc"]
    bank = "perm-idem"
    alice = Principal("alice", {bank: Grant(bank, "write", PURPOSES)})
    item = RetainItem(content="Zephyr idempotent note", document_id="idem")
    job1, created1 = svc.retain(bank, [item], async_=True, idempotency_key="k1",
                                principal=alice)
    job2, created2 = svc.retain(bank, [item], async_=True, idempotency_key="k1",
                                principal=alice)
    assert created1 and not created2 and job1["id"] == job2["id"]
    with pytest.raises(Rejected) as err:
        svc.retain(bank, [item.model_copy(update={"audience": "alice"})], async_=True,
                   idempotency_key="k1", principal=alice)
    assert (err.value.status, err.value.code) == (409, "idempotency_key_reused")


def test_http_purpose_and_retain_fields(world, client, services):
    """Auth off (the unrestricted principal): the routes take ``purpose`` and the retain
    fields and pass them to the same services."""
    r = client.post(f"/v1/default/banks/{BANK}/memories/recall",
                    json={"query": Q_PLAIN, "purpose": "gossip"})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "unknown_purpose"
    r = client.post(f"/v1/default/banks/{BANK}/memories/recall",
                    json={"query": Q_TIME, "purpose": "audit", "tiers": ["cold"], "trace": True,
                          "query_timestamp": REFERENCE.isoformat()})
    assert r.status_code == 200, r.get_json()
    want = {u for u, (_, p) in world["units"].items() if "audit" in p}
    assert ids_in(r.get_json(), world["units"]) == want
    bank = "perm-http"
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"async": False, "items": [
        {"content": "Zephyr private note", "audience": "bob", "purposes": ["audit"]}]})
    assert r.status_code == 200, r.get_json()
    with services.pool.connection() as conn:
        row = conn.execute("SELECT audience, purposes FROM memory_units WHERE bank_id = %s",
                           (bank,)).fetchone()
    assert (row["audience"], row["purposes"]) == ("bob", ["audit"])
    r = client.post(f"/v1/default/banks/{bank}/memories", json={"async": False, "items": [
        {"content": "x", "purposes": ["gossip"]}]})
    assert r.status_code == 400 and r.get_json()["error"]["code"] == "unknown_purpose"
