"""Hindsight's routes RCLL did not have (issue 10): bank create/update, profile, stats,
config; memories list and clear; tags; documents list, get, delete; reflect; ``/version``
and ``/health``. Shapes and field mapping: :mod:`api.hindsight`. Each declares its role
(:func:`api.auth.requires`); lists and counts hold only what the caller may see."""

from __future__ import annotations

import time
from uuid import UUID

from flask import Blueprint, jsonify, request
from werkzeug.routing import PathConverter

import rcll
from api import contracts as C
from api import hindsight as hs
from api.auth import principal, requires, uses_llm
from api.deps import json_body, services
from api.errors import APIError
from api.openapi import doc
from api.paging import limit_param, page_params, search_param
from api.schemas import check_bank_id
from rcll.reflect import reflect as run_reflect
from rcll.search.models import TAGS_MATCH, RecallQuery

bp = Blueprint("hindsight", __name__)


class AnyPath(PathConverter):
    """``<anypath:…>``: a path parameter that may hold any character, a newline too (the
    ``path`` converter's ``.`` stops at one, so a document id with a newline — which retain
    accepts — could not be read or deleted: a 404 ``not_found``, found by schemathesis)."""

    regex = "[^/](?s:.)*?"


# registered on the app before this blueprint's rules (deferred in the order recorded)
bp.record_once(lambda state: state.app.url_map.converters.setdefault("anypath", AnyPath))
BANK = "/v1/default/banks/<bank_id>"
STARTED = time.monotonic()


def _tags_args() -> tuple[list[str] | None, str]:
    tags = request.args.getlist("tags") or None
    match = request.args.get("tags_match") or "any"
    if match not in TAGS_MATCH:
        raise APIError(400, "invalid_request", f"tags_match must be one of {', '.join(TAGS_MATCH)}",
                       {"field": "tags_match"})
    return tags, match


# -- banks -------------------------------------------------------------------------------

@bp.put(BANK)
@bp.patch(BANK)
@requires("admin")
@doc({200: hs.BankProfileResponse}, body=C.BankUpdate)
def put_bank(bank_id: str):
    """Create the bank or update its name, mission, background and disposition
    (:data:`api.hindsight.BANK_FIELDS`) → 200 Hindsight's bank profile (``created`` says
    whether it is new)."""
    check_bank_id(bank_id)
    name, cfg = hs.bank_update(json_body())
    row, created = services().banks.put(principal(), bank_id, name, cfg)
    return jsonify({**hs.bank_profile(row), "created": created})


@bp.get(BANK + "/profile")
@requires("read")
@doc({200: hs.BankProfileResponse})
def profile(bank_id: str):
    """Hindsight's bank profile: name, disposition, mission, background."""
    check_bank_id(bank_id)
    return jsonify(hs.bank_profile(services().banks.get(principal(), bank_id)))


@bp.put(BANK + "/profile")
@requires("admin")
@doc({200: hs.BankProfileResponse}, body=C.BankUpdate)
def put_profile(bank_id: str):
    """Update the disposition (and name, mission, background) of an existing bank."""
    check_bank_id(bank_id)
    name, cfg = hs.bank_update(json_body())
    return jsonify(hs.bank_profile(services().banks.update_profile(principal(), bank_id, name,
                                                                   cfg)))


@bp.get(BANK + "/stats")
@requires("read")
@doc({200: hs.BankStatsResponse})
def stats(bank_id: str):
    """Counts of the bank as the caller sees it: live units (total and per Hindsight fact
    type and RCLL kind), links, documents, pending and failed operations."""
    check_bank_id(bank_id)
    s = services().banks.stats(principal(), bank_id)
    by_type: dict[str, int] = {}
    for kind, n in s["units_by_kind"].items():
        t = hs.KIND_TYPE.get(kind, "world")
        by_type[t] = by_type.get(t, 0) + n
    ops = s["operations_by_state"]
    return jsonify({
        "bank_id": bank_id, "total_nodes": s["units"], "total_links": s["links"],
        "total_documents": s["documents"], "nodes_by_fact_type": by_type,
        "links_by_link_type": s["links_by_type"], "links_by_fact_type": {},
        "links_breakdown": {}, "pending_operations": ops.get("queued", 0) + ops.get("running", 0),
        "failed_operations": ops.get("failed", 0),
        "operations_by_status": s["operations_by_status"],
        "operations_by_state": ops, "units_by_kind": s["units_by_kind"],
        "last_memory_write_at": s["last_write_at"]})


@bp.get(BANK + "/config")
@requires("read")
@doc({200: hs.BankConfigResponse})
def get_config(bank_id: str):
    """``{bank_id, config, overrides}``: ``config`` is what applies (the deployment's
    recall and retain settings, the bank's profile), ``overrides`` what the bank stores."""
    check_bank_id(bank_id)
    return jsonify(_config(services().banks.get(principal(), bank_id)))


@bp.patch(BANK + "/config")
@requires("admin")
@doc({200: hs.BankConfigResponse}, body=C.ConfigPatch)
def patch_config(bank_id: str):
    """``{"updates": {...}}``: the bank fields of :data:`api.hindsight.BANK_FIELDS`."""
    check_bank_id(bank_id)
    body = json_body()
    updates = body.get("updates")
    if set(body) != {"updates"} or not isinstance(updates, dict):
        raise APIError(400, "invalid_request", 'body must be {"updates": {...}}')
    name, cfg = hs.bank_update(updates)
    return jsonify(_config(services().banks.update_config(principal(), bank_id, name, cfg)))


@bp.delete(BANK + "/config")
@requires("admin")
@doc({200: hs.BankConfigResponse})
def reset_config(bank_id: str):
    """Drop the bank's stored overrides (mission, background, disposition, Hindsight
    settings); the name stays."""
    check_bank_id(bank_id)
    return jsonify(_config(services().banks.reset_config(principal(), bank_id)))


def _config(row: dict) -> dict:
    s = services().settings
    cfg = row.get("config") or {}
    applied = {"recall_recipe": s.recall_recipe, "llm_provider": s.llm_provider,
               "purposes": list(s.purposes), "mission": cfg.get("mission"),
               "background": cfg.get("background"), "disposition": hs.disposition(cfg)}
    return {"bank_id": row["id"], "config": applied, "overrides": cfg}


# -- memories ----------------------------------------------------------------------------

@bp.get(BANK + "/memories/list")
@requires("read")
@doc({200: hs.ListMemoryUnitsResponse}, query=C.MemoriesListQuery, paged=True,
    errors={400: ['unsupported_hindsight_value']})
def list_memories(bank_id: str):
    """One page of the bank's units the caller sees, newest first: ``?type=`` (Hindsight
    type or RCLL kind), ``q``, ``document_id``, ``entity_id``, ``tags`` (repeated),
    ``tags_match``, ``state=valid|invalidated``, ``limit``, ``offset``."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    kinds = hs.kinds_for([request.args["type"]], "type") if request.args.get("type") else None
    if kinds == []:  # ?type=opinion: a type of no kind lists nothing (the bank must exist)
        services().banks.get(principal(), bank_id)
        return jsonify({"items": [], "total": 0, "limit": limit, "offset": offset})
    state = request.args.get("state")
    if state not in (None, "valid", "invalidated"):
        raise APIError(400, "invalid_request", "state must be valid or invalidated",
                       {"field": "state"})
    for unsupported in ("time_field", "start_date", "end_date"):
        if request.args.get(unsupported):
            raise hs.unsupported(unsupported, request.args[unsupported],
                                 "time windows are not supported on this list")
    entity_id = request.args.get("entity_id") or None
    if entity_id is not None:
        try:
            entity_id = str(UUID(entity_id))
        except ValueError:
            raise APIError(400, "invalid_request", "entity_id must be a UUID",
                           {"field": "entity_id"})
    tags, match = _tags_args()
    rows, total = services().documents.list_memories(
        principal(), bank_id, limit, offset, kinds=kinds, q=search_param(),
        document_id=request.args.get("document_id") or None, tags=tags, tags_match=match,
        entity_id=entity_id, state=state)
    items = [{**hs.with_hindsight_metadata(r), "fact_type": hs.KIND_TYPE.get(r["kind"], "world"),
              "date": r["occurred_start"] or r["mentioned_at"] or r["created_at"],
              "entities": ", ".join(r["entities"]) or None,
              "state": "invalidated" if r["invalidated_reason"] or r["superseded_by_id"]
              else "valid", "invalidation_reason": r["invalidated_reason"]} for r in rows]
    return jsonify({"items": items, "total": total, "limit": limit, "offset": offset})


_TYPE_COLOR = {"world": "#1f77b4", "experience": "#ff7f0e", "observation": "#2ca02c"}
_LINK_COLOR = {"entity": "#9467bd", "semantic": "#17becf", "temporal": "#7f7f7f"}


@bp.get(BANK + "/graph")
@requires("read")
@doc({200: hs.MemoryGraphResponse}, query=C.MemoryGraphQuery,
     errors={400: ['unsupported_hindsight_value', 'invalid_paging']})
def memory_graph(bank_id: str):
    """Hindsight's memory graph: the caller's newest units (``?limit=``, default 1000, and
    the filters of ``memories/list``: ``type``, ``q``, ``tags``, ``tags_match``,
    ``document_id``, ``chunk_id``) as Cytoscape nodes, the links among them as edges, and
    the same units as table rows."""
    check_bank_id(bank_id)
    limit = limit_param(1000)
    kinds = hs.kinds_for([request.args["type"]], "type") if request.args.get("type") else None
    chunk_id = request.args.get("chunk_id") or None
    if chunk_id is not None:
        try:
            chunk_id = str(UUID(chunk_id))
        except ValueError:
            raise APIError(400, "invalid_request", "chunk_id must be a UUID", {"field": "chunk_id"})
    tags, match = _tags_args()
    if limit == 0 or kinds == []:
        services().banks.get(principal(), bank_id)
        out = {"units": [], "links": [], "total": 0}
    else:
        out = services().documents.memory_graph(
            principal(), bank_id, limit, kinds=kinds, q=search_param(), tags=tags,
            tags_match=match, document_id=request.args.get("document_id") or None,
            chunk_id=chunk_id)
    nodes, rows = [], []
    for u in out["units"]:
        ftype = hs.KIND_TYPE.get(u["kind"], "world")
        date = u["occurred_start"] or u["mentioned_at"] or u["created_at"]
        names = ", ".join(u["entities"]) or "None"
        text = u["text"] or ""
        nodes.append({"data": {"id": u["id"], "label": text[:40] + ("…" if len(text) > 40 else ""),
                               "text": text, "date": date or "", "context": u["context"] or "",
                               "entities": names, "color": _TYPE_COLOR[ftype]}})
        rows.append({"id": u["id"], "text": text, "context": u["context"] or "N/A",
                     "occurred_start": u["occurred_start"], "occurred_end": u["occurred_end"],
                     "mentioned_at": u["mentioned_at"], "date": date, "entities": names,
                     "document_id": u["document_id"], "chunk_id": u["chunk_id"],
                     "fact_type": ftype, "tags": u["tags"], "created_at": u["created_at"],
                     "proof_count": None})
    edges = [{"data": {"id": f"{l['from_unit']}-{l['to_unit']}-{l['type']}",
                       "source": l["from_unit"], "target": l["to_unit"], "linkType": l["type"],
                       "weight": l["weight"], "entityName": l["entity_name"] or "",
                       "color": _LINK_COLOR.get(l["type"], "#bcbd22"),
                       "lineStyle": "dashed" if l["type"] == "temporal" else "solid"}}
             for l in out["links"]]
    return jsonify({"nodes": nodes, "edges": edges, "table_rows": rows,
                    "total_units": out["total"], "limit": limit})


@bp.get(BANK + "/stats/memories-timeseries")
@requires("read")
@doc({200: hs.MemoriesTimeseriesResponse}, query=C.TimeseriesQuery,
     errors={400: ['invalid_request']})
def memories_timeseries(bank_id: str):
    """Hindsight's ingest time series: the caller's live units per bucket over ``?period=``
    (1h, 12h, 1d, 7d (default), 30d, 90d), counted per Hindsight type, on ``time_field``
    (``created_at`` default; ``mentioned_at``, ``occurred_start`` fall back to it per
    unit)."""
    check_bank_id(bank_id)
    out = services().documents.timeseries(principal(), bank_id,
                                          request.args.get("period") or "7d",
                                          request.args.get("time_field") or "created_at")
    buckets = []
    for b in out["buckets"]:
        counts = {"world": 0, "experience": 0, "observation": 0}
        for (when, kind), n in out["counts"].items():
            if when == b and hs.KIND_TYPE.get(kind) in counts:
                counts[hs.KIND_TYPE[kind]] += n
        buckets.append({"time": b.isoformat(), **counts})
    return jsonify({"bank_id": bank_id, "period": out["period"], "trunc": out["trunc"],
                    "time_field": out["time_field"], "buckets": buckets})


@bp.delete(BANK + "/memories")
@requires("admin")
@doc({200: hs.DeleteResponse}, query=C.TypeQuery)
def clear_memories(bank_id: str):
    """Delete every memory of the bank (``?type=``: only that Hindsight type or RCLL kind),
    with their vectors, links and cached tiers; the bank and its settings stay."""
    check_bank_id(bank_id)
    kinds = hs.kinds_for([request.args["type"]], "type") if request.args.get("type") else None
    if kinds == []:  # ?type=opinion: a type of no kind deletes nothing, never everything
        services().banks.get(principal(), bank_id)
        ids = []
    else:
        ids = services().documents.clear(principal(), bank_id, kinds)
    return jsonify({"success": True, "deleted_count": len(ids),
                    "message": f"deleted {len(ids)} memories of bank {bank_id}"})


@bp.get(BANK + "/tags")
@requires("read")
@doc({200: hs.ListTagsResponse}, query=C.SearchQuery, paged=True)
def list_tags(bank_id: str):
    """The tags of the bank's live units the caller sees, most used first: ``?q=`` (prefix,
    ``*`` wildcard), ``limit``, ``offset``."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    rows, total = services().documents.tags(principal(), bank_id, limit, offset,
                                            q=search_param())
    return jsonify({"items": rows, "total": total, "limit": limit, "offset": offset})


# -- documents ---------------------------------------------------------------------------

@bp.get(BANK + "/documents")
@requires("read")
@doc({200: hs.ListDocumentsResponse}, query=C.DocumentsQuery, paged=True)
def list_documents(bank_id: str):
    """One page of the bank's documents, newest first: ``?q=`` (id contains), ``tags``,
    ``limit``, ``offset``."""
    check_bank_id(bank_id)
    limit, offset = page_params(default_limit=100)
    tags, _ = _tags_args()
    rows, total = services().documents.list_documents(
        principal(), bank_id, limit, offset, q=request.args.get("q") or None, tags=tags)
    return jsonify({"items": rows, "total": total, "limit": limit, "offset": offset})


@bp.get(BANK + "/documents/<anypath:document_id>")
@requires("read")
@doc({200: hs.DocumentResponse}, errors={404: ['document_not_found']})
def get_document(bank_id: str, document_id: str):
    """One document: its live text, unit count and units per kind; 404
    ``document_not_found``."""
    check_bank_id(bank_id)
    return jsonify(services().documents.get_document(principal(), bank_id, document_id))


@bp.delete(BANK + "/documents/<anypath:document_id>")
@requires("write")
@doc({200: hs.DeleteDocumentResponse}, errors={404: ['document_not_found']})
def delete_document(bank_id: str, document_id: str):
    """Delete a document and every unit of it (vectors, links, mentions, tunnels, tier 1);
    → ``{success, document_id, memory_units_deleted, unit_ids}``."""
    check_bank_id(bank_id)
    ids = services().documents.delete_document(principal(), bank_id, document_id)
    return jsonify({"success": True, "document_id": document_id,
                    "memory_units_deleted": len(ids), "unit_ids": ids,
                    "message": f"document {document_id} deleted with {len(ids)} memory units"})


# -- reflect -----------------------------------------------------------------------------

@bp.post(BANK + "/reflect")
@requires("read")
@uses_llm
@doc({200: hs.ReflectResponse}, body=hs.ReflectRequest,
    errors={400: ['llm_not_configured', 'unsupported_hindsight_value', 'unknown_recipe', 'unknown_purpose'],
    502: ['llm_error', 'llm_reply_invalid']})
def reflect(bank_id: str):
    """Answer a question from recall's results through the configured LLM (litellm;
    :mod:`rcll.reflect`), under the bank's directives in scope (highest priority first;
    ``based_on.directives`` lists them, ``directives_applied`` their ids; ``llm_trace_id``
    is the call's run in the LLM request log). Fields:
    :data:`api.hindsight.REFLECT_FIELDS`. 400
    ``llm_not_configured`` when no LLM is configured (checked before recall runs); a
    read-only deployment refuses it (:func:`api.auth.uses_llm`)."""
    check_bank_id(bank_id)
    req = hs.ReflectRequest.model_validate({k: v for k, v in json_body().items() if v is not None})
    if req.response_schema:
        raise hs.unsupported("response_schema", "object", "structured output is not supported")
    svc = services()
    if svc.settings.llm_provider == "none":
        run_reflect(None, req.query, [])  # raises the 400 llm_not_configured
    params: dict = {"query": req.query}
    if req.budget is not None:
        params["budget"] = req.budget
    if req.tags:
        params["tags"] = req.tags
    if req.tags_match:
        params["tags_match"] = req.tags_match
    if req.fact_types:
        params["types"] = req.fact_types
    if req.tag_groups:
        params["tag_groups"] = req.tag_groups
    if req.purpose:
        params["purpose"] = req.purpose
    params, _, _ = hs.recall_body(params)
    nothing = hs.matches_nothing(params)
    q = RecallQuery.model_validate(params)
    found = [] if nothing else svc.cascade.recall(bank_id, q, principal()).to_json()["results"]
    mission = (svc.banks.get(principal(), bank_id)["config"] or {}).get("mission")
    rules = svc.directives.for_reflect(principal(), bank_id, q.tags, q.tags_match,
                                       apply_all=bool(req.apply_all_directives))
    ans = run_reflect(svc.llm, req.query, found, context=req.context, mission=mission,
                      max_tokens=req.max_tokens, directives=rules, bank_id=bank_id)
    u = ans.usage
    body = {"text": ans.text,
            "usage": {"input_tokens": u.get("prompt_tokens", 0),
                      "output_tokens": u.get("completion_tokens", 0),
                      "total_tokens": u.get("prompt_tokens", 0) + u.get("completion_tokens", 0),
                      "cost_usd": u.get("cost_usd", 0.0)},
            "model": ans.model, "prompt_version": ans.prompt_version,
            "recalled": len(found), "llm_trace_id": ans.trace_id,
            "directives_applied": [d["id"] for d in ans.directives]}
    if (req.include or {}).get("facts") is not None:
        body["based_on"] = {"memories": [
            {**hs.recall_result(r), "type": hs.KIND_TYPE.get(r.get("kind"), "world")}
            for r in ans.based_on], "mental_models": [],
            "directives": [{"id": d["id"], "name": d["name"], "content": d["content"]}
                           for d in ans.directives]}
    return jsonify(body)


# -- service -----------------------------------------------------------------------------

@bp.get("/version")
@requires("public")
@doc({200: hs.VersionResponse})
def version():
    """The API version and the feature flags Hindsight's client reads (what RCLL has)."""
    s = services().settings
    return jsonify({"api_version": rcll.__version__, "server": "rcll", "features": {
        "observations": False, "mcp": True, "worker": True, "bank_config_api": True,
        "bank_llm_health": False, "file_upload_api": False, "document_export_api": False,
        "document_import_api": False, "audit_log": True,
        "llm_trace": s.llm_request_log and not s.read_only,
        "store_document_text": True, "reflect": s.llm_provider != "none",
        "read_only": s.read_only, "auth": s.auth}})


@bp.get("/health")
@requires("public")
@doc({200: C.Status})
def health():
    """Hindsight's liveness shape: ``{status, version, uptime_seconds}`` (``/readyz`` checks
    each part)."""
    return jsonify({"status": "healthy", "version": rcll.__version__,
                    "uptime_seconds": round(time.monotonic() - STARTED, 3)})
