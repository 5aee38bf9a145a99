"""Mental models (Hindsight's ``…/mental-models`` family): a named, stored reflect answer on
its ``source_query``, refreshed on demand through :mod:`rcll.reflect` (the one LLM client).

- **Refresh** runs recall on ``source_query`` (with the model's ``tags``, matched
  ``all_strict`` as Hindsight resolves them) **as the caller of the refresh** — recall
  filters by that principal's visibility — then reflect, and stores the answer, the ids of
  every unit given to the model (``seen_unit_ids``), the refresher and one history row, in
  one transaction with the audit entry ``mental_model.refresh``. It is synchronous.
- **Reading** a model shows its ``content`` only to a caller who may see every still-live
  unit of ``seen_unit_ids`` (:func:`rcll.access.visibility.unit_filter`); for anyone else
  ``content`` and ``reflect_response`` are ``None`` and ``content_withheld`` is true, so a
  member who may not see a unit never reads it through a model someone else refreshed.
- **Erasure**: when a unit the model was written from is forgotten, or deleted with its
  document or bank, the model's content and the contents its history kept are erased in
  that transaction (:func:`rcll.store.mental_models.erase_seen`; a history row ``forget``).
- **Clear** empties the content (a history row, audit ``mental_model.clear``); create,
  update and delete audit ``mental_model.create`` / ``.update`` / ``.delete``.

Roles: list, get, history ``read``; the rest ``write``. Without an LLM
(``RCLL_LLM_PROVIDER=none``) everything works except refresh: 400 ``llm_not_configured``.
Errors: 404 ``bank_not_found``, ``mental_model_not_found``; 409 ``mental_model_exists``.
"""

from __future__ import annotations

import re
import uuid
from typing import TYPE_CHECKING

from rcll.access.principal import Principal
from rcll.access.visibility import unit_filter
from rcll.db import read_only
from rcll.errors import NotFound, Rejected
from rcll.reflect import MAX_MEMORIES
from rcll.reflect import reflect as run_reflect
from rcll.store import audit, banks
from rcll.store import mental_models as store

if TYPE_CHECKING:
    from rcll.bootstrap import Services

MAX_ID_CHARS = 128
ID_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


class MentalModelNotFound(NotFound):
    code = "mental_model_not_found"


def check_model_id(model_id: object) -> str:
    """``model_id`` when it is 1-128 characters of letters, digits, ``_ . : -`` (starting
    with a letter or digit); else 400 ``invalid_mental_model_id``."""
    if (not isinstance(model_id, str) or len(model_id) > MAX_ID_CHARS
            or not ID_RULE.fullmatch(model_id)):
        raise Rejected(400, "invalid_mental_model_id",
                       f"a mental model id is 1-{MAX_ID_CHARS} letters, digits, '_', '.', "
                       "':' or '-', starting with a letter or digit", {"field": "id"})
    return model_id


def _iso(v) -> str | None:
    return v.isoformat() if v is not None else None


class MentalModelService:
    """The family's use cases over the process's pools, the cascade and the LLM client."""

    def __init__(self, services: Services) -> None:
        self._s = services

    def _shape(self, conn, principal: Principal, row: dict, detail: str) -> dict:
        sql, params = unit_filter(principal, row["bank_id"])
        withheld = (row["content"] is not None and sql != "TRUE"
                    and store.hidden_count(conn, row["bank_id"], row["seen_unit_ids"],
                                           sql, params) > 0)
        out = {"id": row["id"], "bank_id": row["bank_id"], "name": row["name"],
               "source_query": row["source_query"], "tags": list(row["tags"]),
               "max_tokens": row["max_tokens"],
               "last_refreshed_at": _iso(row["last_refreshed_at"]),
               "created_at": _iso(row["created_at"]), "is_knowledge_page": False,
               "content_withheld": withheld}
        if detail in ("content", "full"):
            out["content"] = None if withheld else row["content"]
        if detail == "full":
            out["reflect_response"] = None if withheld else row["reflect_response"]
        return out

    def _load(self, conn, bank_id: str, model_id: str, lock: bool = False) -> dict:
        banks.get(conn, bank_id)
        row = store.get(conn, bank_id, check_model_id(model_id), lock=lock)
        if row is None:
            raise MentalModelNotFound(f"bank {bank_id!r} has no mental model {model_id!r}",
                                      {"bank_id": bank_id, "mental_model_id": model_id})
        return row

    def list(self, principal: Principal, bank_id: str, *, tags: list[str] | None = None,
             tags_match: str = "any", detail: str = "metadata", limit: int = 100,
             offset: int = 0) -> dict:
        """``{items, total, limit, offset}`` (``read``); ``tags_match`` ``any``, ``all`` or
        ``exact`` (else 400 ``invalid_request``)."""
        principal.require(bank_id, "read")
        if tags_match not in ("any", "all", "exact"):
            raise Rejected(400, "invalid_request", "tags_match must be any, all or exact",
                           {"field": "tags_match"})
        with read_only(self._s.read_pool) as conn:
            banks.get(conn, bank_id)
            rows, total = store.list_for(conn, bank_id, tags, tags_match, limit, offset)
            items = [self._shape(conn, principal, r, detail) for r in rows]
        return {"items": items, "total": total, "limit": limit, "offset": offset}

    def get(self, principal: Principal, bank_id: str, model_id: str,
            detail: str = "full") -> dict:
        """One model (``read``); 404 ``mental_model_not_found``."""
        principal.require(bank_id, "read")
        with read_only(self._s.read_pool) as conn:
            return self._shape(conn, principal, self._load(conn, bank_id, model_id), detail)

    def create(self, principal: Principal, bank_id: str, *, name: str, source_query: str,
               model_id: str | None = None, tags: list[str] | None = None,
               max_tokens: int = 2048) -> dict:
        """Store a model without content (``write``); its id (a new UUID when none is
        given). 409 ``mental_model_exists``."""
        principal.require(bank_id, "write")
        model_id = check_model_id(model_id) if model_id is not None else str(uuid.uuid4())
        with self._s.pool.connection() as conn, conn.transaction():
            banks.get(conn, bank_id)
            if not store.insert(conn, bank_id, model_id, name, source_query, tags or [],
                                max_tokens, principal.member_id):
                raise Rejected(409, "mental_model_exists",
                               f"bank {bank_id!r} has a mental model {model_id!r} already",
                               {"mental_model_id": model_id})
            audit.record(conn, principal.member_id, "mental_model.create", bank_id,
                         details={"mental_model_id": model_id, "name": name})
            return self._shape(conn, principal, store.get(conn, bank_id, model_id), "full")

    def update(self, principal: Principal, bank_id: str, model_id: str, fields: dict) -> dict:
        """Change name, source_query, tags, max_tokens (``write``); the model after it."""
        principal.require(bank_id, "write")
        with self._s.pool.connection() as conn, conn.transaction():
            self._load(conn, bank_id, model_id, lock=True)
            if fields:
                store.update(conn, bank_id, model_id, fields)
            audit.record(conn, principal.member_id, "mental_model.update", bank_id,
                         details={"mental_model_id": model_id, "fields": sorted(fields)})
            return self._shape(conn, principal, store.get(conn, bank_id, model_id), "full")

    def delete(self, principal: Principal, bank_id: str, model_id: str) -> None:
        principal.require(bank_id, "write")
        with self._s.pool.connection() as conn, conn.transaction():
            self._load(conn, bank_id, model_id, lock=True)
            store.delete(conn, bank_id, model_id)
            audit.record(conn, principal.member_id, "mental_model.delete", bank_id,
                         details={"mental_model_id": model_id})

    def clear(self, principal: Principal, bank_id: str, model_id: str) -> dict:
        """Empty the content (``write``); the model after it."""
        principal.require(bank_id, "write")
        with self._s.pool.connection() as conn, conn.transaction():
            row = self._load(conn, bank_id, model_id, lock=True)
            store.set_content(conn, bank_id, model_id, None, None, [], principal.member_id)
            store.add_history(conn, bank_id, model_id, "clear", row["content"], None,
                              row["source_query"], principal.member_id)
            audit.record(conn, principal.member_id, "mental_model.clear", bank_id,
                         details={"mental_model_id": model_id})
            return self._shape(conn, principal, store.get(conn, bank_id, model_id), "full")

    def history(self, principal: Principal, bank_id: str, model_id: str) -> list[dict]:
        """The refreshes and clears, newest first (``read``): ``[{action, previous_content,
        content, source_query, actor, at}]``; the contents are ``None`` for a caller from
        whom the model's current content is withheld."""
        principal.require(bank_id, "read")
        with read_only(self._s.read_pool) as conn:
            row = self._load(conn, bank_id, model_id)
            hide = self._shape(conn, principal, row, "metadata")["content_withheld"]
            return [{**h, "at": _iso(h["at"]),
                     **({"previous_content": None, "content": None} if hide else {})}
                    for h in store.history(conn, bank_id, model_id)]

    def refresh(self, principal: Principal, bank_id: str, model_id: str) -> dict:
        """Run reflect on the model's query as ``principal`` and store the answer
        (``write``); the model after it. 400 ``llm_not_configured`` (checked first), the
        errors of :func:`rcll.reflect.reflect`."""
        from rcll.search.models import RecallQuery

        principal.require(bank_id, "write")
        llm = self._s.llm
        if llm is None:
            run_reflect(None, "", [])  # raises the 400 llm_not_configured
        with read_only(self._s.read_pool) as conn:
            row = self._load(conn, bank_id, model_id)
            mission = (banks.get(conn, bank_id)["config"] or {}).get("mission")
        params: dict = {"query": row["source_query"]}
        if row["tags"]:
            params.update(tags=list(row["tags"]), tags_match="all_strict")
        found = self._s.cascade.recall(bank_id, RecallQuery.model_validate(params),
                                       principal).to_json()["results"]
        ans = run_reflect(llm, row["source_query"], found, mission=mission,
                          max_tokens=row["max_tokens"])
        seen = [str(r["id"]) for r in found[:MAX_MEMORIES] if r.get("id")]
        response = {"text": ans.text, "model": ans.model, "prompt_version": ans.prompt_version,
                    "usage": ans.usage, "recalled": len(found),
                    "based_on": [str(r.get("id")) for r in ans.based_on]}
        with self._s.pool.connection() as conn, conn.transaction():
            now = self._load(conn, bank_id, model_id, lock=True)
            store.set_content(conn, bank_id, model_id, ans.text, response, seen,
                              principal.member_id)
            store.add_history(conn, bank_id, model_id, "refresh", now["content"], ans.text,
                              row["source_query"], principal.member_id, seen)
            audit.record(conn, principal.member_id, "mental_model.refresh", bank_id,
                         details={"mental_model_id": model_id, "units_seen": len(seen),
                                  "usage": ans.usage})
            return self._shape(conn, principal, store.get(conn, bank_id, model_id), "full")
