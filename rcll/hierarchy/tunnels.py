"""Tunnels between banks (spec §6, issue 9 item 4): the service behind ``POST/GET/DELETE
/tunnels`` and ``POST /bridge``, the CLI and the Python client.

Rules (docs/concepts/lifecycle.md "Tunnels"):

- A tunnel joins two units of **different** banks (400 ``same_bank`` otherwise).
- A unit the caller cannot see — absent, forgotten, in a bank it may not read, or whose
  audience is another member — is 404 ``unit_not_found`` (no oracle: the same answer).
- Creating needs ``write`` on **both** banks (a bidirectional tunnel changes what recall
  returns in each); deleting needs ``write`` on **either** bank (each side may withdraw an
  association into its bank); both 403 ``forbidden`` otherwise.
- Duplicates: a tunnel joining the same two units with the same relationship that already
  covers the request (same direction and flag, or both bidirectional) is returned as it is
  (``created: false``, HTTP 200); one that overlaps it differently (the same direction with
  the other ``bidirectional`` flag, or a bidirectional one against a one-way one) is 409
  ``tunnel_exists`` naming it. Two one-way tunnels in opposite directions may coexist.
- Listing a bank's tunnels needs ``read`` on it and shows only tunnels whose other bank the
  caller may read and whose two ends it sees; a tunnel outside that is 404
  ``tunnel_not_found`` to :meth:`TunnelService.get` and :meth:`TunnelService.delete`.
- Every create and delete writes one audit entry per bank it touches (``tunnel.create``,
  ``tunnel.delete``; ``unit_id`` = that bank's end).
- ``bridge`` from a query in each bank takes the top hit of a cold recall of each query
  under the caller's scope (purpose ``purpose`` or the default), ignoring L0 units no
  channel found; no hit → 404 ``no_match`` naming the side.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from psycopg import Connection
from psycopg_pool import ConnectionPool
from pydantic import ConfigDict, Field, field_validator, model_validator

from rcll.access.principal import Principal
from rcll.access.visibility import grants_filter, unit_visible
from rcll.errors import Forbidden, InvalidInput, NotFound, Rejected
from rcll.search.models import MAX_QUERY_CHARS, RecallQuery
from rcll.store import audit, banks
from rcll.store import tunnels as repo
from rcll.store.memories import UnitNotFound, parse_unit_id
from rcll.text import is_blank
from rcll.validation import TextModel, clean_text

DEFAULT_RELATIONSHIP = "related"
MAX_RELATIONSHIP_CHARS = 64
BRIDGE_LOOKAHEAD = 5  # cold-recall results looked at for a side's top channel hit


class TunnelNotFound(NotFound):
    code = "tunnel_not_found"


def _relationship(v: str) -> str:
    v = clean_text(v).strip()
    if not v or is_blank(v):
        raise ValueError("relationship must not be blank")
    return v


class TunnelRequest(TextModel):
    """``POST /tunnels``: ``source_unit_id``, ``target_unit_id`` (UUIDs), ``relationship``
    (1–64 visible characters, trimmed; default ``related``), ``bidirectional`` (default
    true: recall follows it both ways)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    source_unit_id: str = Field(max_length=64)
    target_unit_id: str = Field(max_length=64)
    relationship: str = Field(DEFAULT_RELATIONSHIP, min_length=1,
                              max_length=MAX_RELATIONSHIP_CHARS)
    bidirectional: bool = True

    @field_validator("relationship")
    @classmethod
    def _rel(cls, v: str) -> str:
        return _relationship(v)


class BridgeSide(TextModel):
    """One side of a bridge by query: the bank and the query whose top hit is that end."""

    model_config = ConfigDict(extra="forbid", strict=True)

    bank_id: str = Field(min_length=1, max_length=128)
    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)

    @field_validator("query")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if is_blank(v):
            raise ValueError("query must not be blank")
        return v


class BridgeRequest(TextModel):
    """``POST /bridge``: either ``source_unit_id`` + ``target_unit_id``, or ``source`` +
    ``target`` (:class:`BridgeSide`), plus ``relationship``, ``bidirectional`` (as
    :class:`TunnelRequest`) and ``purpose`` (the recall purpose of the query form; default
    the deployment's)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    source_unit_id: str | None = Field(None, max_length=64)
    target_unit_id: str | None = Field(None, max_length=64)
    source: BridgeSide | None = None
    target: BridgeSide | None = None
    relationship: str = Field(DEFAULT_RELATIONSHIP, min_length=1,
                              max_length=MAX_RELATIONSHIP_CHARS)
    bidirectional: bool = True
    purpose: str | None = Field(None, min_length=1, max_length=64)

    @field_validator("relationship")
    @classmethod
    def _rel(cls, v: str) -> str:
        return _relationship(v)

    @model_validator(mode="after")
    def _one_form(self) -> BridgeRequest:
        by_ids = self.source_unit_id is not None or self.target_unit_id is not None
        by_query = self.source is not None or self.target is not None
        if by_ids == by_query:
            raise ValueError("give either source_unit_id and target_unit_id, or source and "
                             "target ({bank_id, query}), not both forms")
        if by_ids and (self.source_unit_id is None or self.target_unit_id is None):
            raise ValueError("both source_unit_id and target_unit_id are required")
        if by_query and (self.source is None or self.target is None):
            raise ValueError("both source and target ({bank_id, query}) are required")
        return self


RecallFn = Callable[[str, RecallQuery, Principal], object]


class TunnelService:
    """Tunnels over ``pool`` (read-write). ``read_pool`` serves the listing (default
    ``pool``). ``recall(bank_id, query, principal) -> RecallResult`` runs the bridge's
    searches (the cascade's ``recall``); ``recipe`` is the recipe they name (a named recipe
    runs the cold tier and leaves nothing in tier 1)."""

    def __init__(self, pool: ConnectionPool, read_pool: ConnectionPool | None = None,
                 recall: RecallFn | None = None, recipe: str | None = None):
        self.pool, self.read_pool = pool, read_pool or pool
        self.recall, self.recipe = recall, recipe

    # -- create ------------------------------------------------------------------------------
    def create(self, principal: Principal, req: TunnelRequest) -> tuple[dict, bool]:
        """Create the tunnel of ``req`` (module rules). ``(tunnel, created)``: ``created``
        is false when an equal tunnel existed (it is returned). Raises ``InvalidInput``
        (``invalid_unit_id``), ``UnitNotFound``, ``Rejected`` 400 ``same_bank`` / 409
        ``tunnel_exists``, ``Forbidden``."""
        src_id, dst_id = parse_unit_id(req.source_unit_id), parse_unit_id(req.target_unit_id)
        with self.pool.connection() as conn, conn.transaction():
            src = _visible_unit(conn, principal, src_id)
            dst = _visible_unit(conn, principal, dst_id)
            if src["bank_id"] == dst["bank_id"]:
                raise Rejected(400, "same_bank", "a tunnel joins units of two different banks",
                               {"bank_id": src["bank_id"], "source_unit_id": src_id,
                                "target_unit_id": dst_id})
            for bank in (src["bank_id"], dst["bank_id"]):
                principal.require(bank, "write")
            # one creator at a time per unit pair: the unique key sees one direction only
            lo, hi = sorted((src_id, dst_id))
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                         (f"tunnel:{lo}:{hi}",))
            for t in repo.between(conn, src_id, dst_id, req.relationship):
                same_way = t["source_unit_id"] == src_id
                if (same_way and t["bidirectional"] == req.bidirectional) or (
                        t["bidirectional"] and req.bidirectional):
                    return t, False
                if same_way or t["bidirectional"] or req.bidirectional:
                    raise Rejected(409, "tunnel_exists",
                                   "a tunnel with this relationship already joins these units "
                                   "with another direction; delete it to change it",
                                   {"tunnel_id": t["id"], "source_unit_id": t["source_unit_id"],
                                    "target_unit_id": t["target_unit_id"],
                                    "bidirectional": t["bidirectional"]})
            tunnel = repo.insert(conn, source_unit_id=src_id, target_unit_id=dst_id,
                                 source_bank_id=src["bank_id"], target_bank_id=dst["bank_id"],
                                 relationship=req.relationship,
                                 bidirectional=req.bidirectional,
                                 created_by=principal.member_id)
            _audit(conn, principal, "tunnel.create", tunnel)
            return tunnel, True

    # -- read --------------------------------------------------------------------------------
    def list(self, principal: Principal, bank_id: str, limit: int = 50,
             offset: int = 0) -> tuple[list[dict], int]:
        """Tunnels touching ``bank_id`` that the caller may see (module rules), oldest
        first; ``(rows, total)``, each row a tunnel plus ``source_text`` / ``target_text``.
        Raises ``Forbidden`` (no ``read`` on the bank), ``BankNotFound``."""
        principal.require(bank_id, "read")
        with self.read_pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            banks.get(conn, bank_id)
            return repo.list_for_bank(conn, bank_id, readable_banks=_readable(principal),
                                      visible=(grants_filter(principal, "s", "vs"),
                                               grants_filter(principal, "d", "vd")),
                                      limit=limit, offset=offset)

    def get(self, principal: Principal, tunnel_id: str) -> dict:
        """The tunnel, if the caller may see it (module rules). Raises ``InvalidInput``
        (``invalid_tunnel_id``), ``TunnelNotFound``."""
        tid = _parse_tunnel_id(tunnel_id)
        with self.read_pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            return _visible_tunnel(conn, principal, tid)

    # -- delete ------------------------------------------------------------------------------
    def delete(self, principal: Principal, tunnel_id: str) -> dict:
        """Delete a tunnel the caller sees and may write on either end's bank; returns it.
        Raises ``InvalidInput`` (``invalid_tunnel_id``), ``TunnelNotFound``,
        ``Forbidden`` (details name both banks)."""
        tid = _parse_tunnel_id(tunnel_id)
        with self.pool.connection() as conn, conn.transaction():
            t = _visible_tunnel(conn, principal, tid, lock=True)
            if not (principal.can(t["source_bank_id"], "write")
                    or principal.can(t["target_bank_id"], "write")):
                raise Forbidden("deleting a tunnel needs write access to one of its banks",
                                {"bank_ids": [t["source_bank_id"], t["target_bank_id"]],
                                 "needed": "write"})
            repo.delete(conn, tid)
            _audit(conn, principal, "tunnel.delete", t)
            return t

    # -- bridge ------------------------------------------------------------------------------
    def bridge(self, principal: Principal, req: BridgeRequest) -> dict:
        """Create a tunnel from two unit ids or from a query in each bank (module rules).
        Returns ``{"tunnel", "created", "matched"}``; ``matched`` is ``null`` for the id
        form, else ``{"source"|"target": {"unit_id", "bank_id", "text", "score"}}``.
        Raises what :meth:`create` raises, ``BankNotFound``, and ``Rejected`` 404
        ``no_match`` (details: ``side``, ``bank_id``, ``query``)."""
        if req.source is None:
            tunnel, created = self.create(principal, TunnelRequest(
                source_unit_id=req.source_unit_id, target_unit_id=req.target_unit_id,
                relationship=req.relationship, bidirectional=req.bidirectional))
            return {"tunnel": tunnel, "created": created, "matched": None}
        if req.source.bank_id == req.target.bank_id:
            raise Rejected(400, "same_bank", "a tunnel joins units of two different banks",
                           {"bank_id": req.source.bank_id})
        for side in (req.source, req.target):  # no search on banks the caller cannot link
            principal.require(side.bank_id, "write")
        if self.recall is None:
            raise RuntimeError("TunnelService.bridge by query needs a recall function")
        matched = {"source": self._top_hit(principal, "source", req.source, req.purpose),
                   "target": self._top_hit(principal, "target", req.target, req.purpose)}
        tunnel, created = self.create(principal, TunnelRequest(
            source_unit_id=matched["source"]["unit_id"],
            target_unit_id=matched["target"]["unit_id"],
            relationship=req.relationship, bidirectional=req.bidirectional))
        return {"tunnel": tunnel, "created": created, "matched": matched}

    def _top_hit(self, principal: Principal, name: str, side: BridgeSide,
                 purpose: str | None) -> dict:
        fields = {"query": side.query, "limit": BRIDGE_LOOKAHEAD, "tiers": ["cold"],
                  "recipe": self.recipe, "follow_tunnels": False}
        if purpose is not None:
            fields["purpose"] = purpose
        res = self.recall(side.bank_id, RecallQuery.model_validate(fields), principal)
        for r in res.results:
            if "rrf" in (r.get("scores") or {}):  # found by a channel, not only an L0 unit
                return {"unit_id": r["id"], "bank_id": side.bank_id, "text": r["text"],
                        "score": r["scores"].get("final")}
        raise Rejected(404, "no_match", f"the {name} query found no unit in bank "
                       f"{side.bank_id!r}", {"side": name, "bank_id": side.bank_id,
                                             "query": side.query})


def _readable(principal: Principal) -> list[str] | None:
    """Banks the caller may read, or ``None`` for every bank (a deployment admin)."""
    if principal.is_admin:
        return None
    return sorted(b for b in principal.grants if principal.can(b, "read"))


def _visible_unit(conn: Connection, principal: Principal, unit_id: str) -> dict:
    """``{"id", "bank_id"}`` of a unit the caller may see; else :class:`UnitNotFound` (the
    same answer for absent, forgotten, unreadable bank and another member's audience)."""
    row = conn.execute(
        """SELECT id::text AS id, bank_id, audience, purposes, forgotten_at FROM memory_units
           WHERE id = %s""", (unit_id,)).fetchone()
    if (row is None or row["forgotten_at"] is not None
            or not principal.can(row["bank_id"], "read")
            or not unit_visible(principal, row["bank_id"], row["audience"], row["purposes"])):
        raise UnitNotFound(f"unit {unit_id} does not exist or is not visible to this caller",
                           {"unit_id": unit_id})
    return {"id": row["id"], "bank_id": row["bank_id"]}


def _visible_tunnel(conn: Connection, principal: Principal, tunnel_id: str,
                    lock: bool = False) -> dict:
    t = repo.get(conn, tunnel_id, lock=lock)
    if t is not None:
        try:
            _visible_unit(conn, principal, t["source_unit_id"])
            _visible_unit(conn, principal, t["target_unit_id"])
            return t
        except UnitNotFound:
            pass
    raise TunnelNotFound(f"tunnel {tunnel_id} does not exist or is not visible to this caller",
                         {"tunnel_id": tunnel_id})


def _parse_tunnel_id(tunnel_id: str) -> str:
    try:
        return str(UUID(tunnel_id))
    except (ValueError, TypeError):
        err = InvalidInput("tunnel id must be a UUID", {"tunnel_id": tunnel_id})
        err.code = "invalid_tunnel_id"
        raise err


def _audit(conn: Connection, principal: Principal, action: str, t: dict) -> None:
    """One entry per bank the tunnel touches, ``unit_id`` = that bank's end."""
    details = {k: t[k] for k in ("source_unit_id", "target_unit_id", "source_bank_id",
                                 "target_bank_id", "relationship", "bidirectional")}
    details["tunnel_id"] = t["id"]
    for bank, unit in ((t["source_bank_id"], t["source_unit_id"]),
                       (t["target_bank_id"], t["target_unit_id"])):
        audit.record(conn, principal.member_id, action, bank_id=bank, unit_id=unit,
                     details=details)
