"""Hindsight compatibility: the one place where Hindsight's request fields are mapped onto
RCLL's and RCLL's answers are given the fields Hindsight's client models require.

The rule (docs/guides/hindsight.md): each route that Hindsight's client calls has an
explicit allow-list of the Hindsight field names RCLL's own model lacks — the tables below,
each field with what RCLL does with it (``honoured``: mapped onto an RCLL field;
``ignored``: accepted and dropped, named back in the answer's ``ignored_fields``;
``refused``: a value RCLL cannot honour is a 400 ``unsupported_hindsight_value``). The
normaliser removes those fields (and every explicit ``null``: null means absent), and what
is left goes to RCLL's own strict model (``extra="forbid"``), so a typo in an RCLL field —
or a field neither RCLL nor Hindsight knows — is still a 400 ``invalid_request``.

Responses keep RCLL's fields and add Hindsight's beside them; where both name one field,
the value has Hindsight's type (recall ``entities`` are names; RCLL's ``{id, name}``
objects move to ``entity_refs``; operation ``status`` is Hindsight's status name and RCLL's
state is ``state``, :data:`rcll.store.jobs.HINDSIGHT_STATUS`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.errors import APIError
from rcll.search.models import KINDS

# -- Hindsight fact types <-> RCLL unit kinds ----------------------------------------------
# Hindsight's types: world (facts about the world), experience (the agent's own), observation
# (consolidated), and opinion — a type Hindsight removed and still accepts, matching nothing
# ("silently ignore for backwards compat", its memory_engine.recall): llamaindex and autogen
# still send it. RCLL's kinds (memory_units.kind) map onto them as below; every RCLL kind
# has exactly one Hindsight type (KIND_TYPE), and opinion none.
TYPE_KINDS: dict[str, tuple[str, ...]] = {
    "world": ("chunk", "fact", "note", "event"),
    "experience": ("decision", "preference"),
    "observation": ("summary",),
    "opinion": (),
}
KIND_TYPE = {k: t for t, ks in TYPE_KINDS.items() for k in ks}
NO_KINDS: list[str] = []  # the marker of recall_body for types that name no kind

# -- recall budget -------------------------------------------------------------------------
# Hindsight's ``budget`` (how much search effort) onto RCLL's recipes and result counts; an
# explicit RCLL ``recipe``/``channels``/``limit`` in the same request wins.
BUDGET = {
    "low": {"recipe": "hybrid", "limit": 20},   # dense + lexical, fusion only
    "mid": {},                                  # the deployment's default recipe, limit 50
    "high": {"recipe": "full", "limit": 100},   # all four channels and every step, cold tier
}

# -- the allow-lists: Hindsight field -> what RCLL does with it -----------------------------
RETAIN_REQUEST_FIELDS = {
    "document_tags": "honoured: added to every item's tags",
    "operation_id": "honoured: the idempotency key (the same id again returns that operation; "
                    "GET …/operations/{operation_id} finds it)",
}
RETAIN_ITEM_FIELDS = {
    "entities": "ignored: RCLL finds entities itself (deterministic extractor, LLM names)",
    "resolve_entities": "ignored: entity resolution always runs",
    "observation_scopes": "ignored: RCLL has no observations (closets summarise instead)",
    "strategy": "ignored: one extraction pipeline per deployment",
    "update_mode": "honoured: 'replace' is RCLL's document versioning (the default); "
                   "'append' is refused (400 unsupported_hindsight_value)",
}
RECALL_FIELDS = {
    "types": "honoured: kinds (world: chunk, fact, note, event; experience: decision, "
             "preference; observation: summary; opinion, Hindsight's removed type: none, so "
             "types naming only opinion answer no results); RCLL kind names are accepted too",
    "budget": "honoured: low = recipe hybrid, limit 20; mid = the default; "
              "high = recipe full, limit 100",
    "min_scores": "honoured for 'final' (results scoring below it are dropped); 'semantic', "
                  "'keyword' and 'reranker' ignored",
    "include": "ignored: entities, chunks and source facts are not attached (each result "
               "carries its entities and chunk_id)",
    "prefer_observations": "ignored: RCLL has no observations",
    "temporal_window": "ignored: the temporal channel takes its window from the query's "
                       "time expressions and query_timestamp",
    "tag_groups": "refused when non-empty: boolean tag groups are not supported (use tags "
                  "with tags_match)",
}
REFLECT_FIELDS = {
    "budget": "honoured: the recall behind the answer (as recall's budget)",
    "context": "honoured: given to the model beside the question",
    "max_tokens": "honoured: the answer's token limit",
    "tags": "honoured: the recall's tags filter, and which tagged directives apply",
    "tags_match": "honoured: as recall, for the memories and the directives",
    "fact_types": "honoured: as recall's types",
    "include": "honoured for 'facts' (based_on lists the memories used); 'tool_calls' ignored",
    "response_schema": "refused when given: no structured output",
    "tag_groups": "refused when non-empty (as recall)",
    "apply_all_directives": "honoured: every active directive applies, tags aside "
                            "(default: the global ones and the tagged ones the request's "
                            "tags match by tags_match)",
    "exclude_mental_models": "ignored: no mental models",
    "exclude_mental_model_ids": "ignored: no mental models",
    "reflect_search_observations_max_tokens": "ignored: no observations",
    "reflect_search_observations_include_entities": "ignored: no observations",
}
BANK_FIELDS = {
    "name": "honoured: the bank's display name",
    "mission": "honoured: stored; given to reflect's model",
    "reflect_mission": "honoured: the same as mission",
    "background": "honoured: stored and returned by /profile",
    "disposition": "honoured: stored and returned (skepticism, literalism, empathy 1-5)",
    "disposition_skepticism": "honoured: stored", "disposition_literalism": "honoured: stored",
    "disposition_empathy": "honoured: stored",
    # Hindsight's per-bank engine settings: stored under config.hindsight and returned by
    # /config, not applied (RCLL's retain and recall are configured per deployment)
    **{f: "ignored: stored in config.hindsight, not applied" for f in (
        "retain_mission", "retain_extraction_mode", "retain_custom_instructions",
        "retain_chunk_size", "retain_structured_chunk_size", "retain_max_attachments_per_chunk",
        "enable_observations", "observations_mission", "enable_text_search",
        "enable_temporal_retrieval", "enable_graph_retrieval", "enable_reranking")},
}
DEFAULT_DISPOSITION = {"skepticism": 3, "literalism": 3, "empathy": 3}


def unsupported(field: str, value: Any, why: str) -> APIError:
    """The 400 for a Hindsight value RCLL cannot honour."""
    return APIError(400, "unsupported_hindsight_value", f"{field}: {why}",
                    {"field": field, "value": value if isinstance(value, (str, int, bool))
                     else type(value).__name__})


def _drop_nulls(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if v is not None}


def kinds_for(types: list, field: str = "types") -> list[str]:
    """RCLL kinds for Hindsight ``types`` (or RCLL kind names); ``[]`` when they name no
    kind (``["opinion"]``: the caller must then match nothing, as Hindsight does, never
    everything). 400 ``invalid_request`` for an unknown name."""
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise APIError(400, "invalid_request", f"{field} must be a list of strings",
                       {"field": field})
    out: set[str] = set()
    for t in types:
        if t in TYPE_KINDS:
            out.update(TYPE_KINDS[t])
        elif t in KINDS:
            out.add(t)
        else:
            raise APIError(400, "invalid_request",
                           f"unknown type {t[:40]!r}; known: {', '.join([*TYPE_KINDS, *KINDS])}",
                           {"field": field})
    return sorted(out)


# -- requests ----------------------------------------------------------------------------

def retain_body(body: dict) -> tuple[dict, list[str], str | None]:
    """Map a retain body (Hindsight's or RCLL's) onto RCLL's :class:`api.schemas.RetainRequest`
    input. Returns ``(body, ignored field names, operation_id)``; ``operation_id`` (if any)
    is to be used as the idempotency key. Raises 400 ``unsupported_hindsight_value``."""
    body = _drop_nulls(body)
    ignored: list[str] = []
    doc_tags = body.pop("document_tags", None)
    op_id = body.pop("operation_id", None)
    if op_id is not None and not isinstance(op_id, str):
        raise APIError(400, "invalid_request", "operation_id must be a string",
                       {"field": "operation_id"})
    items = body.get("items")
    if isinstance(items, list):
        body["items"] = [_retain_item(it, doc_tags, ignored) if isinstance(it, dict) else it
                         for it in items]
    return body, sorted(set(ignored)), op_id


def _retain_item(item: dict, doc_tags, ignored: list[str]) -> dict:
    item = _drop_nulls(item)
    for name in ("entities", "resolve_entities", "observation_scopes", "strategy"):
        if name in item:
            item.pop(name)
            ignored.append(f"items.{name}")
    mode = item.pop("update_mode", None)
    if mode is not None and mode != "replace":
        raise unsupported("update_mode", mode, "only 'replace' (RCLL keeps document versions)")
    if item.get("timestamp") == "unset":  # Hindsight: timeless content
        item.pop("timestamp")
    if isinstance(item.get("content"), list):
        raise unsupported("content", item["content"], "content blocks (images, files) are "
                          "not accepted here; send text, or files to rcll ingest")
    if doc_tags:
        tags = item.get("tags") or []
        if not isinstance(tags, list) or not isinstance(doc_tags, list):
            raise APIError(400, "invalid_request", "tags and document_tags must be lists",
                           {"field": "document_tags"})
        item["tags"] = list(dict.fromkeys([*tags, *doc_tags]))
    return item


def recall_body(body: dict) -> tuple[dict, list[str], float | None]:
    """Map a recall body onto :class:`rcll.search.models.RecallQuery` input. Returns
    ``(body, ignored field names, final score floor or None)``."""
    body = _drop_nulls(body)
    ignored: list[str] = []
    if "types" in body:
        types = body.pop("types")
        if types:
            kinds = kinds_for(types)
            if kinds:
                body.setdefault("kinds", kinds)
            elif "kinds" not in body:  # only "opinion": Hindsight answers no results
                ignored.append("types")
                body["kinds"] = NO_KINDS
    budget = body.pop("budget", None)
    if budget is not None:
        if not isinstance(budget, str) or budget not in BUDGET:  # a list was a 500
            raise APIError(400, "invalid_request", "budget must be low, mid or high",
                           {"field": "budget"})
        for k, v in BUDGET[budget].items():
            if k == "recipe" and ("recipe" in body or "channels" in body):
                continue
            body.setdefault(k, v)
    floor = None
    scores = body.pop("min_scores", None)
    if scores is not None:
        if not isinstance(scores, dict):
            raise APIError(400, "invalid_request", "min_scores must be an object",
                           {"field": "min_scores"})
        final = scores.get("final")
        if final is not None:
            if isinstance(final, bool) or not isinstance(final, (int, float)):
                raise APIError(400, "invalid_request", "min_scores.final must be a number",
                               {"field": "min_scores.final"})
            floor = float(final)
        if any(v is not None for k, v in scores.items() if k != "final"):
            ignored.append("min_scores")
    groups = body.pop("tag_groups", None)
    if groups:
        raise unsupported("tag_groups", groups, "boolean tag groups are not supported; use "
                          "tags with tags_match")
    for name in ("include", "prefer_observations", "temporal_window"):
        if name in body:
            value = body.pop(name)
            if value not in (False, {}, []) and not (
                    isinstance(value, dict) and not any(v is not None for v in value.values())):
                ignored.append(name)
    return body, sorted(set(ignored)), floor


# -- responses ---------------------------------------------------------------------------

PROVENANCE_KEYS = ("file",)  # RCLL's structured metadata keys (rcll.files.stage: the file)


def hindsight_metadata(meta: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """``(metadata, provenance)`` of a unit's stored metadata for Hindsight's paths, where
    ``metadata`` is a map of strings (Hindsight's ``RecallResult.metadata`` and
    ``ReflectFact.metadata`` are ``Dict[str, str]``): string values as they are, RCLL's
    structured keys (:data:`PROVENANCE_KEYS`: ``file``, an uploaded file's name, type, size,
    sha256, page or section) moved to ``provenance`` as objects, and any other non-string
    value as its JSON text (``{"n": 3}`` → ``{"n": "3"}``)."""
    out: dict[str, str] = {}
    prov: dict[str, Any] = {}
    for k, v in (meta or {}).items() if isinstance(meta, dict) else ():
        if k in PROVENANCE_KEYS and not isinstance(v, str):
            prov[k] = v
        elif isinstance(v, str):
            out[str(k)] = v
        else:
            out[str(k)] = json.dumps(v, ensure_ascii=False, separators=(",", ":"),
                                     sort_keys=True, default=str)
    return out, prov


def with_hindsight_metadata(unit: dict) -> dict:
    """``unit`` with :func:`hindsight_metadata` applied: ``metadata`` (strings) and
    ``provenance`` (present whenever ``metadata`` is, ``{}`` when the unit has none), whichever tier or route
    produced it. A compact result (no ``metadata`` field: ``context_tokens_left``) stays as
    it is."""
    if "metadata" not in unit:
        return unit
    meta, prov = hindsight_metadata(unit.get("metadata"))
    return {**unit, "metadata": meta, "provenance": prov}


def recall_result(r: dict) -> dict:
    """A recall result with Hindsight's fields beside RCLL's: ``type`` (from ``kind``),
    ``entities`` as names (RCLL's ``{id, name}`` objects in ``entity_refs``),
    ``scores.semantic`` / ``keyword`` / ``reranker`` (RCLL's dense, lexical, rerank), and
    ``metadata`` as strings with RCLL's structured provenance in ``provenance``
    (:func:`with_hindsight_metadata`)."""
    out = with_hindsight_metadata(r)
    out["type"] = KIND_TYPE.get(r.get("kind"), "world")
    refs = [e for e in (r.get("entities") or []) if isinstance(e, dict)]
    if refs or "entities" in r:
        out["entity_refs"] = refs
        out["entities"] = [e["name"] for e in refs] + [e for e in r.get("entities") or []
                                                       if isinstance(e, str)]
    scores = dict(r.get("scores") or {})
    scores.setdefault("final", 0.0)
    for hs, ours in (("semantic", "dense"), ("keyword", "lexical"), ("reranker", "rerank")):
        if hs not in scores and isinstance(scores.get(ours), (int, float)):
            scores[hs] = scores[ours]
    out["scores"] = scores
    return out


def matches_nothing(body: dict) -> bool:
    """Whether a :func:`recall_body` result asks for no kind at all (pop the marker: the
    caller runs the recall with every kind, for its access checks, and answers no result)."""
    if body.get("kinds") is NO_KINDS:
        body.pop("kinds")
        return True
    return False


def recall_response(answer: dict, ignored: list[str], floor: float | None) -> dict:
    """RCLL's recall answer for Hindsight's client (:func:`recall_result` on each result;
    ``min_scores.final`` applied; ``trace`` = RCLL's ``timings_ms`` and ``query`` when
    traced; ``ignored_fields``)."""
    results = [recall_result(r) for r in answer.get("results", [])]
    if floor is not None:
        results = [r for r in results if float(r["scores"].get("final") or 0.0) >= floor]
        answer.setdefault("counts", {})["min_score_dropped"] = (
            len(answer.get("results", [])) - len(results))
    answer["results"] = results
    if "timings_ms" in answer:
        answer["trace"] = {"timings_ms": answer["timings_ms"], "query": answer.get("query")}
    answer["ignored_fields"] = ignored
    return answer


def disposition(config: dict) -> dict:
    """The bank's disposition traits (Hindsight's 1-5 scales; 3 when never set)."""
    return {**DEFAULT_DISPOSITION, **(config.get("disposition") or {})}


def bank_profile(row: dict) -> dict:
    """Hindsight's bank profile from a ``memory_banks`` row."""
    cfg = row.get("config") or {}
    return {"bank_id": row["id"], "name": row["name"], "disposition": disposition(cfg),
            "mission": cfg.get("mission") or "", "background": cfg.get("background"),
            "created_at": row["created_at"].isoformat() if row.get("created_at") else None}


def bank_update(body: dict) -> tuple[str | None, dict]:
    """Map a PUT/PATCH bank body (:data:`BANK_FIELDS`) to ``(name, config updates)``. Any
    other field is a 400 ``invalid_request``."""
    body = _drop_nulls(body)
    unknown = sorted(set(body) - set(BANK_FIELDS))
    if unknown:
        raise APIError(400, "invalid_request", f"unknown field(s): {', '.join(unknown)}",
                       {"unknown": unknown, "known": sorted(BANK_FIELDS)})
    name = body.pop("name", None)
    if name is not None and (not isinstance(name, str) or not 1 <= len(name) <= 200):
        raise APIError(400, "invalid_request", "name must be 1-200 characters", {"field": "name"})
    cfg: dict = {}
    mission = body.pop("mission", None) or body.pop("reflect_mission", None)
    body.pop("reflect_mission", None)
    for key, value in (("mission", mission), ("background", body.pop("background", None))):
        if value is not None:
            if not isinstance(value, str) or len(value) > 10_000:
                raise APIError(400, "invalid_request", f"{key} must be text (≤ 10,000 chars)",
                               {"field": key})
            cfg[key] = value
    traits = body.pop("disposition", None) or {}
    if not isinstance(traits, dict):  # a list or a string here was a 500 (schemathesis)
        raise APIError(400, "invalid_request", "disposition must be an object of traits",
                       {"field": "disposition"})
    traits = dict(traits)
    for t in DEFAULT_DISPOSITION:
        if f"disposition_{t}" in body:
            traits[t] = body.pop(f"disposition_{t}")
    for t, v in traits.items():
        if t not in DEFAULT_DISPOSITION or isinstance(v, bool) or not isinstance(v, int) \
                or not 1 <= v <= 5:
            raise APIError(400, "invalid_request", "disposition traits are skepticism, "
                           "literalism and empathy, integers 1-5", {"field": f"disposition.{t}"})
    if traits:
        cfg["disposition"] = traits
    if body:  # Hindsight's engine settings: kept, not applied
        cfg["hindsight"] = body
    return name, cfg


# -- response models (for the OpenAPI document; RCLL's extra fields sit beside these) -------

class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class DispositionTraits(_Open):
    skepticism: int = Field(ge=1, le=5)
    literalism: int = Field(ge=1, le=5)
    empathy: int = Field(ge=1, le=5)


class BankProfileResponse(_Open):
    bank_id: str
    name: str
    disposition: DispositionTraits
    mission: str
    background: str | None = None


class BankListItem(_Open):
    bank_id: str
    name: str | None = None
    disposition: DispositionTraits
    mission: str | None = None
    created_at: str | None = None
    fact_count: int | None = None


class BankListResponse(_Open):
    banks: list[BankListItem]
    total: int
    limit: int
    offset: int


class BankStatsResponse(_Open):
    bank_id: str
    total_nodes: int
    total_links: int
    total_documents: int
    nodes_by_fact_type: dict[str, int]
    links_by_link_type: dict[str, int]
    links_by_fact_type: dict[str, int]
    links_breakdown: dict[str, dict[str, int]]
    pending_operations: int
    failed_operations: int
    operations_by_status: dict[str, int] | None = None
    last_memory_write_at: str | None = None


class BankConfigResponse(_Open):
    bank_id: str
    config: dict[str, Any]
    overrides: dict[str, Any]


# retain's and recall's answers: rcll.api_types (RetainAnswer, RecallAnswer; the client
# returns them too)


class OperationResponse(_Open):
    id: str
    operation_id: str
    task_type: str
    items_count: int
    status: str
    state: str
    created_at: str
    updated_at: str | None = None
    error_message: str | None = None


class OperationsListResponse(_Open):
    bank_id: str
    total: int
    limit: int
    offset: int
    operations: list[OperationResponse]


class DocumentListItem(_Open):
    id: str
    bank_id: str | None = None
    content_hash: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    text_length: int | None = None
    memory_unit_count: int | None = None
    document_metadata: dict[str, Any] | None = None
    tags: list[str] | None = None
    revision: int | None = Field(None, description="RCLL: versions applied to this lineage")
    audience: str | None = Field(None, description="RCLL: the lineage's audience ('bank' or a "
                                 "member id; a document is one lineage per audience and "
                                 "purpose set; docs/concepts/retain.md)")
    purposes: list[str] | None = Field(None, description="RCLL: the lineage's purposes (sorted)")


class ListDocumentsResponse(_Open):
    items: list[DocumentListItem]
    total: int
    limit: int
    offset: int


class DocumentResponse(DocumentListItem):
    bank_id: str
    original_text: str | None
    content_hash: str | None
    created_at: str
    updated_at: str
    memory_unit_count: int
    nodes_by_fact_type: dict[str, int] | None = None
    lineages: int | None = Field(None, description="RCLL: how many lineages of this id the "
                                 "caller sees (this answer is its own first, then the newest)")


class DeleteDocumentResponse(_Open):
    success: bool
    message: str
    document_id: str
    memory_units_deleted: int


class MemoryUnitListItem(_Open):
    id: str
    text: str | None = None
    context: str | None = None
    date: str | None = None
    fact_type: str | None = None
    document_id: str | None = None
    mentioned_at: str | None = None
    occurred_start: str | None = None
    occurred_end: str | None = None
    entities: str | None = None
    chunk_id: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    state: str | None = None


class ListMemoryUnitsResponse(_Open):
    items: list[MemoryUnitListItem]
    total: int
    limit: int
    offset: int


class MemoryGraphResponse(_Open):
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    table_rows: list[dict[str, Any]]
    total_units: int
    limit: int


class EntityGraphResponse(_Open):
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    total_entities: int
    total_edges: int
    limit: int


class MemoriesTimeseriesResponse(_Open):
    bank_id: str
    period: str
    trunc: str
    time_field: str
    buckets: list[dict[str, Any]]


class TagItem(_Open):
    tag: str
    count: int


class ListTagsResponse(_Open):
    items: list[TagItem]
    total: int
    limit: int
    offset: int


class EntityListItem(_Open):
    id: str
    canonical_name: str
    mention_count: int


class EntityListResponse(_Open):
    items: list[EntityListItem]
    total: int
    limit: int
    offset: int


class DeleteResponse(_Open):
    success: bool
    message: str | None = None
    deleted_count: int | None = None


class FeaturesInfo(_Open):
    observations: bool
    mcp: bool
    worker: bool
    bank_config_api: bool
    bank_llm_health: bool
    file_upload_api: bool
    document_export_api: bool
    document_import_api: bool
    audit_log: bool
    llm_trace: bool
    store_document_text: bool


class VersionResponse(_Open):
    api_version: str
    features: FeaturesInfo


class ReflectFact(_Open):
    id: str | None = None
    text: str
    type: str | None = None


class ReflectDirective(_Open):
    id: str
    name: str
    content: str


class ReflectBasedOn(_Open):
    memories: list[ReflectFact] | None = None
    directives: list[ReflectDirective] | None = None


class TokenUsage(_Open):
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None


class ReflectResponse(_Open):
    text: str
    based_on: ReflectBasedOn | None = None
    usage: TokenUsage | None = None


class ReflectRequest(BaseModel):
    """Hindsight's reflect body (:data:`REFLECT_FIELDS` says what each field does)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=2_000)
    budget: str | None = None
    context: str | None = Field(None, max_length=10_000)
    max_tokens: int | None = Field(None, ge=1, le=32_000)
    response_schema: dict[str, Any] | None = None
    tags: list[str] | None = None
    tags_match: str | None = None
    include: dict[str, Any] | None = None
    tag_groups: list[Any] | None = None
    apply_all_directives: bool | None = None
    fact_types: list[str] | None = None
    exclude_mental_models: bool | None = None
    exclude_mental_model_ids: list[str] | None = None
    reflect_search_observations_max_tokens: int | None = None
    reflect_search_observations_include_entities: bool | None = None
    # RCLL's own: what the recall behind the answer is for (RCLL_PURPOSES)
    purpose: str | None = Field(None, min_length=1, max_length=64)
