"""The screens. Each view takes the signed-in principal (:func:`api.web.session.caller`),
calls one or more ``rcll`` services exactly as the HTTP routes do (so a screen shows only
what the member may see: the services filter), and renders a template. Errors of the
services (:class:`rcll.errors.RCLLError`) render ``error.html`` with their status; a
missing sign-in redirects to ``/ui/signin``; a POST without its CSRF token is 403.

Writes are plain HTML forms posting back to ``/ui/...`` and redirecting (POST → redirect →
GET); destructive ones (forget, delete a document) go through a confirmation page first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flask import Blueprint, abort, flash, g, redirect, render_template, request, send_from_directory, url_for
from pydantic import ValidationError
from redis import RedisError

from api.auth import requires
from api.deps import consolidate_service, services
from api.schemas import check_bank_id
from api.web import session as web
from rcll.errors import InvalidInput, RCLLError
from rcll.search.models import RecallQuery
from rcll.search.recipes import RECIPES

HERE = Path(__file__).parent
bp = Blueprint("web", __name__, template_folder="templates")
PAGE = 50
STATIC = {"app.css", "app.js"}
OPEN_ENDPOINTS = {"web.index", "web.ui", "web.admin", "web.signin", "web.static_file"}


def screen(rule: str, methods=("GET",)):
    """Register a screen: role ``session`` (:mod:`api.auth`: no bearer key; the session
    authenticates it, :func:`_session`). Screens are not in the OpenAPI document: they
    answer HTML to browsers, not the API's JSON."""
    def deco(view):
        view = requires("session")(view)
        bp.add_url_rule(rule, view_func=view, methods=list(methods))
        return view
    return deco


@bp.before_request
def _session():
    who = web.load_caller()
    web.check_csrf()
    if who is None and request.endpoint not in OPEN_ENDPOINTS:
        raise web.SignInNeeded()


@bp.app_context_processor
def _globals():
    return {"csrf_token": web.csrf_token, "auth_on": web.auth_on(),
            "me": g.get("principal")}


@bp.errorhandler(web.SignInNeeded)
def _sign_in_needed(_exc):
    return redirect(url_for("web.signin", next=request.full_path.rstrip("?")))


@bp.errorhandler(web.CSRFRefused)
def _csrf(_exc):
    return render_template("error.html", status=403, code="csrf_refused",
                           message="This form was not sent with its CSRF token. Reload the "
                                   "page and try again."), 403


@bp.errorhandler(RCLLError)
def _rcll(exc: RCLLError):
    return render_template("error.html", status=exc.status, code=exc.code,
                           message=exc.message), exc.status


@bp.errorhandler(RedisError)
def _redis_down(_exc):
    return render_template("error.html", status=503, code="sessions_unavailable",
                           message="Sign-in sessions are kept in Redis, which cannot be "
                                   "reached; retry in a moment."), 503


@bp.errorhandler(ValidationError)
def _invalid(exc: ValidationError):
    msg = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                    for e in exc.errors(include_url=False, include_input=False))
    return render_template("error.html", status=400, code="invalid_request", message=msg), 400


def _bank(bank_id: str) -> str:
    check_bank_id(bank_id)
    return bank_id


def _page() -> int:
    try:
        return max(0, int(request.args.get("offset", 0)))
    except ValueError:
        return 0


@bp.app_template_filter("when")
def _when(value) -> str:
    """An ISO time (or datetime) as ``YYYY-MM-DD HH:MM`` UTC; ``—`` for none."""
    if not value:
        return "—"
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    return text[:16].replace("T", " ")


@bp.app_template_filter("kv")
def _kv(value) -> str:
    """A flat mapping as ``k=v · k=v`` (nested values as their text)."""
    if not isinstance(value, dict):
        return "" if value is None else str(value)
    return " · ".join(f"{k}={v}" for k, v in value.items())


@bp.app_template_filter("pager_args")
def _pager_args(args, offset: int) -> str:
    """The request's query string with ``offset`` replaced."""
    from urllib.parse import urlencode

    pairs = [(k, v) for k, v in args.items(multi=True) if k != "offset"]
    return urlencode([*pairs, ("offset", max(0, offset))])


# --- entry, static, sign-in -----------------------------------------------------------------
ENTRY_LINKS = {"ui": "/ui", "api_docs": "/docs", "openapi": "/openapi.json",
               "health": "/healthz",
               "documentation": "docs/index.md in the repository (mkdocs build: the site)"}


@screen("/")
def index():
    """The entry point. A client that prefers JSON gets ``{service, version, links}``: the
    web UI, the API docs page (Swagger UI), the OpenAPI document, the documentation. Anyone
    else (a browser) is redirected to the web UI, with the same links in ``Link`` headers
    (RFC 8631 ``service-doc``, ``service-desc``) and a plain-text body."""
    import rcll

    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    if best == "application/json" and request.accept_mimetypes[best] > \
            request.accept_mimetypes["text/html"]:
        return {"service": "rcll", "version": rcll.__version__, "links": ENTRY_LINKS}
    resp = redirect(url_for("web.ui"))
    resp.headers["Link"] = ('</docs>; rel="service-doc", </openapi.json>; rel="service-desc", '
                            '</ui>; rel="alternate"; type="text/html"')
    resp.mimetype = "text/plain"
    resp.set_data("RCLL: the web UI is at /ui, the API docs (Swagger UI) at /docs, the OpenAPI "
                  "document at /openapi.json; the documentation is docs/ in the repository.\n")
    return resp


@screen("/ui")
def ui():
    """The web screens' home: the banks list (or the sign-in screen)."""
    return redirect(url_for("web.banks"))


@screen("/admin")
def admin():
    """The admins' entry: redirect to ``/ui/access``."""
    return redirect(url_for("web.access"))


@screen("/ui/static/<name>")
def static_file(name: str):
    """The screens' stylesheet and script (served by the app itself)."""
    if name not in STATIC:
        abort(404)
    return send_from_directory(HERE / "static", name, max_age=3600)


@screen("/ui/signin", methods=("GET", "POST"))
def signin():
    """Sign in with an API key into a server-side session."""
    error = None
    nxt = request.values.get("next") or ""
    if not nxt.startswith("/ui") or nxt.startswith("//"):
        nxt = url_for("web.banks")
    if request.method == "POST":
        try:
            web.sign_in(request.form.get("api_key", "").strip())
            return redirect(nxt)
        except RCLLError as exc:
            error = exc.message
    return render_template("signin.html", error=error, next=nxt), 401 if error else 200


@screen("/ui/signout", methods=("POST",))
def signout():
    """End the session."""
    web.sign_out()
    return redirect(url_for("web.signin"))


# --- banks ----------------------------------------------------------------------------------
@screen("/ui/banks")
def banks():
    """The banks the member holds a grant on, with the units it may see."""
    offset = _page()
    rows, total = services().banks.list(web.caller(), PAGE, offset)
    return render_template("banks.html", banks=rows, total=total, offset=offset, page=PAGE)


@screen("/ui/banks/<bank_id>")
def bank(bank_id: str):
    """One bank: counts and the rooms × halls grid of the units the member sees."""
    who, svc = web.caller(), services()
    bank_row = svc.banks.get(who, _bank(bank_id))
    stats = svc.banks.stats(who, bank_id)
    grid = svc.documents.room_hall_grid(who, bank_id)
    _, n_entities = svc.entities.list(who, bank_id, 1, 0)
    _, n_open = consolidate_service().dedup_proposals(who, bank_id, "open", 1, 0)
    _, n_running = svc.operations.list_bank(who, bank_id, "running", 1, 0)
    _, n_queued = svc.operations.list_bank(who, bank_id, "queued", 1, 0)
    return render_template("bank.html", bank=bank_row, bank_id=bank_id, stats=stats, grid=grid,
                           n_entities=n_entities, n_open=n_open, n_running=n_running,
                           n_queued=n_queued, is_admin=who.can(bank_id, "admin"))


@screen("/ui/banks/<bank_id>/units")
def units(bank_id: str):
    """The member's live units of a bank, newest first: ``?room=&hall=&q=``."""
    offset = _page()
    filters = {k: request.args.get(k) or None for k in ("room", "hall", "q")}
    rows, total = services().documents.list_memories(web.caller(), _bank(bank_id), PAGE,
                                                     offset, **filters)
    return render_template("units.html", bank_id=bank_id, units=rows, total=total,
                           offset=offset, page=PAGE, filters=filters)


# --- one memory ------------------------------------------------------------------------------
@screen("/ui/banks/<bank_id>/units/<unit_id>")
def unit(bank_id: str, unit_id: str):
    """One memory: its fields, provenance, links, entities, and the lifecycle actions."""
    who = web.caller()
    u = services().lifecycle.read(who, _bank(bank_id), unit_id)
    past = services().lifecycle.history(who, bank_id, u["id"])
    history = []
    if who.can(bank_id, "admin"):
        history, _ = services().access.audit(who, bank_id, unit_id=u["id"], limit=20)
    return render_template("unit.html", bank_id=bank_id, u=u, history=history, past=past,
                           can_write=who.can(bank_id, "write"))


def _revision() -> int:
    try:
        return int(request.form.get("revision", ""))
    except ValueError:
        raise InvalidInput("revision must be a whole number")


@screen("/ui/banks/<bank_id>/units/<unit_id>/correct", methods=("POST",))
def correct(bank_id: str, unit_id: str):
    """Correct the text at the revision the form was rendered with (409 if it moved on)."""
    from rcll.lifecycle.models import UnitFields

    changes = UnitFields.model_validate({"text": request.form.get("text", "")})
    services().lifecycle.correct(web.caller(), _bank(bank_id), unit_id, _revision(), changes)
    flash("Corrected.")
    return redirect(url_for("web.unit", bank_id=bank_id, unit_id=unit_id))


@screen("/ui/banks/<bank_id>/units/<unit_id>/supersede", methods=("POST",))
def supersede(bank_id: str, unit_id: str):
    """Replace the memory with a new one (revision-checked); opens the new one."""
    from rcll.lifecycle.models import NewUnit

    new = NewUnit.model_validate({"text": request.form.get("text", "")})
    out = services().lifecycle.supersede(web.caller(), _bank(bank_id), unit_id, _revision(), new)
    flash("Superseded: this is the new memory.")
    return redirect(url_for("web.unit", bank_id=bank_id, unit_id=out["unit"]["id"]))


@screen("/ui/banks/<bank_id>/units/<unit_id>/forget", methods=("GET", "POST"))
def forget(bank_id: str, unit_id: str):
    """GET: the confirmation step; POST (``confirm=yes``): forget the memory."""
    who = web.caller()
    if request.method == "GET" or request.form.get("confirm") != "yes":
        u = services().lifecycle.read(who, _bank(bank_id), unit_id)
        return render_template("forget.html", bank_id=bank_id, u=u)
    services().lifecycle.forget(who, _bank(bank_id), unit_id,
                                request.form.get("reason") or None)
    flash("Forgotten.")
    return redirect(url_for("web.bank", bank_id=bank_id))


@screen("/ui/banks/<bank_id>/units/<unit_id>/feedback", methods=("POST",))
def feedback(bank_id: str, unit_id: str):
    """Record a success or failure of the memory (Memory Worth)."""
    services().feedback.record(web.caller(), _bank(bank_id), unit_id,
                               request.form.get("outcome", ""))
    flash("Feedback recorded.")
    return redirect(url_for("web.unit", bank_id=bank_id, unit_id=unit_id))


# --- documents --------------------------------------------------------------------------------
@screen("/ui/banks/<bank_id>/documents")
def documents(bank_id: str):
    """The documents of a bank the member sees."""
    offset = _page()
    rows, total = services().documents.list_documents(web.caller(), _bank(bank_id), PAGE,
                                                      offset, q=request.args.get("q") or None)
    return render_template("documents.html", bank_id=bank_id, docs=rows, total=total,
                           offset=offset, page=PAGE, q=request.args.get("q", ""))


@screen("/ui/banks/<bank_id>/documents/<path:document_id>")
def document(bank_id: str, document_id: str):
    """One document as its units in order (oldest first), with delete."""
    who, svc = web.caller(), services()
    d = svc.documents.get_document(who, _bank(bank_id), document_id)
    rows, total = svc.documents.list_memories(who, bank_id, 500, 0, document_id=document_id)
    return render_template("document.html", bank_id=bank_id, d=d, units=list(reversed(rows)),
                           total=total, document_id=document_id,
                           can_write=who.can(bank_id, "write"),
                           confirm=request.args.get("delete") == "1")


@screen("/ui/banks/<bank_id>/documents/<path:document_id>/delete", methods=("POST",))
def delete_document(bank_id: str, document_id: str):
    """Delete what the member may read of a document (confirmation on the document page)."""
    if request.form.get("confirm") != "yes":
        return redirect(url_for("web.document", bank_id=bank_id, document_id=document_id,
                                delete=1))
    ids = services().documents.delete_document(web.caller(), _bank(bank_id), document_id)
    flash(f"Document deleted ({len(ids)} units).")
    return redirect(url_for("web.documents", bank_id=bank_id))


# --- dedup review -------------------------------------------------------------------------------
def _latest_decided(page: Callable[[str], tuple[list[dict], int]], states: tuple[str, ...],
                    n: int = 20) -> list[dict]:
    """The ``n`` most recently decided proposals over ``states``; ``page(state)`` returns a
    service's ``(rows, total)`` for one state (dedup and entity-merge proposals alike)."""
    rows = [p for state in states for p in page(state)[0]]
    rows.sort(key=lambda p: str(p.get("decided_at") or ""), reverse=True)
    return rows[:n]


def word_diff(a: str | None, b: str | None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Two texts' differences, word by word (:class:`difflib.SequenceMatcher` over
    whitespace-separated words): ``(segments_a, segments_b)``, each a list of ``(kind, text)``
    with ``kind`` ``same`` or ``diff`` (a word only this side has). The template marks
    ``diff`` with ``<del>`` / ``<ins>``; the texts stay escaped."""
    from difflib import SequenceMatcher

    wa, wb = (a or "").split(), (b or "").split()
    out_a: list[tuple[str, str]] = []
    out_b: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        kind = "same" if op == "equal" else "diff"
        if i2 > i1:
            out_a.append((kind, " ".join(wa[i1:i2])))
        if j2 > j1:
            out_b.append((kind, " ".join(wb[j1:j2])))
    return out_a, out_b


bp.add_app_template_global(word_diff, "word_diff")


@screen("/ui/banks/<bank_id>/dedup")
def dedup(bank_id: str):
    """Open dedup proposals, highest cosine first: one decision per proposal (a pair, or a
    cluster of near-identical units), the texts side by side with their differences marked,
    merge / keep (keys m / k on the first), bulk decisions on the ticked ones, the count left,
    and the latest decided proposals with who decided."""
    who, cons = web.caller(), consolidate_service()
    rows, total = cons.dedup_proposals(who, _bank(bank_id), "open", PAGE, 0)
    decided = _latest_decided(lambda state: cons.dedup_proposals(who, bank_id, state, 20, 0),
                              ("merged", "kept"))
    return render_template("dedup.html", bank_id=bank_id, proposals=rows, total=total,
                           decided=decided, can_decide=who.can(bank_id, "admin"))


@screen("/ui/banks/<bank_id>/dedup/bulk", methods=("POST",))
def decide_bulk(bank_id: str):
    """Decide every ticked proposal (``proposal_ids``) the same way: ``action`` merge | keep.
    Each is one decision of the consolidate service (its own transaction and audit entry);
    one decided meanwhile by someone else is skipped and counted."""
    action = request.form.get("action", "")
    if action not in ("merge", "keep"):
        raise InvalidInput("action must be merge or keep")
    ids = request.form.getlist("proposal_ids")
    if not ids:
        raise InvalidInput("tick at least one proposal")
    who, cons = web.caller(), consolidate_service()
    done = skipped = 0
    for pid in ids[:PAGE]:
        try:
            cons.decide_dedup(who, _bank(bank_id), pid, action, decided_by=who.member_id)
            done += 1
        except RCLLError as exc:
            if exc.status != 409:
                raise
            skipped += 1
    flash(f"{done} proposal{'' if done == 1 else 's'} "
          f"{'merged' if action == 'merge' else 'kept apart'}"
          + (f"; {skipped} already decided" if skipped else "") + ".")
    return redirect(url_for("web.dedup", bank_id=bank_id))


@screen("/ui/banks/<bank_id>/dedup/<proposal_id>", methods=("POST",))
def decide(bank_id: str, proposal_id: str):
    """Decide one proposal: ``action`` merge | keep."""
    action = request.form.get("action", "")
    if action not in ("merge", "keep"):
        raise InvalidInput("action must be merge or keep")
    who = web.caller()
    consolidate_service().decide_dedup(who, _bank(bank_id), proposal_id, action,
                                       decided_by=who.member_id)
    flash(f"Proposal {'merged' if action == 'merge' else 'kept apart'}.")
    return redirect(url_for("web.dedup", bank_id=bank_id))


# --- jobs -----------------------------------------------------------------------------------------
@screen("/ui/jobs")
def jobs():
    """The jobs of every bank the member may read, newest first: ``?bank_id=&state=``."""
    bank_id = request.args.get("bank_id") or None
    state = request.args.get("state") or None
    if state not in (None, "queued", "running", "succeeded", "failed", "partial", "cancelled"):
        state = None
    rows, total = services().operations.list_all(
        web.caller(), _bank(bank_id) if bank_id else None, state, PAGE, _page())
    return render_template("jobs.html", jobs=rows, total=total, bank_id=bank_id or "",
                           state=state or "")


@screen("/ui/banks/<bank_id>/jobs/<job_id>")
def job(bank_id: str, job_id: str):
    """One job: state, stage, counts, its failure reason and item errors."""
    j = services().operations.get(web.caller(), _bank(bank_id), job_id)
    return render_template("job.html", bank_id=bank_id, j=j)


# --- recall ---------------------------------------------------------------------------------------
TIERS = ("hot", "warm", "cold")


@screen("/ui/banks/<bank_id>/recall")
def recall(bank_id: str):
    """Recall as the member: query, recipe, tiers; results with per-channel ranks and
    scores, and the trace's per-phase timings."""
    _bank(bank_id)
    query = request.args.get("query", "")
    recipe = request.args.get("recipe") or None
    tiers = [t for t in request.args.getlist("tiers") if t in TIERS]
    answer = None
    if query.strip():
        if recipe is not None and recipe not in RECIPES:
            raise InvalidInput(f"unknown recipe {recipe!r}")
        params = {"query": query, "trace": True, "limit": 20}
        if recipe:
            params["recipe"] = recipe
        if tiers:
            params["tiers"] = tiers
        answer = services().cascade.recall(bank_id, RecallQuery.model_validate(params),
                                           web.caller()).to_json()
    return render_template("recall.html", bank_id=bank_id, query=query, recipe=recipe or "",
                           recipes=sorted(RECIPES), tiers=tiers, all_tiers=TIERS,
                           answer=answer)


# --- entities -------------------------------------------------------------------------------------
@screen("/ui/banks/<bank_id>/entities")
def entities(bank_id: str):
    """The entities of a bank mentioned by units the member sees, most mentioned first, with
    the open merge proposals (merge or reject) and a merge of the entities ticked."""
    who, svc = web.caller(), services().entities
    offset = _page()
    q = request.args.get("q") or None
    rows, total = svc.list(who, _bank(bank_id), PAGE, offset, q)
    proposals, n_open = svc.proposals(who, bank_id, "open", PAGE, 0)
    decided = _latest_decided(lambda state: svc.proposals(who, bank_id, state, 20, 0),
                              ("merged", "rejected"))
    return render_template("entities.html", bank_id=bank_id, entities=rows, total=total,
                           q=q or "", offset=offset, page=PAGE, proposals=proposals,
                           n_open=n_open, decided=decided,
                           can_edit=who.can(bank_id, "admin"))


@screen("/ui/banks/<bank_id>/entities/merge", methods=("POST",))
def merge_entities(bank_id: str):
    """Merge the ticked entities (``entity_ids``) into the one chosen to keep (``keep``,
    default the first ticked); opens the kept entity."""
    ids = request.form.getlist("entity_ids")
    keep = request.form.get("keep") or (ids[0] if ids else "")
    if keep and keep not in ids:
        ids.insert(0, keep)
    who = web.caller()  # the service checks the role, then the ids (400 with fewer than 2)
    out = services().entities.merge(who, _bank(bank_id), {
        "entity_ids": [keep] + [i for i in ids if i != keep] if keep else [],
        "actor": who.member_id})
    flash(f"Merged {len(ids)} entities into {out['entity']['name']}.")
    return redirect(url_for("web.entity", bank_id=bank_id, entity_id=out["entity"]["id"]))


@screen("/ui/banks/<bank_id>/entities/proposals/<proposal_id>", methods=("POST",))
def decide_entity_proposal(bank_id: str, proposal_id: str):
    """Decide an entity-merge proposal: ``action`` merge (keeping ``keep_id`` if given)
    or reject."""
    action = request.form.get("action", "")
    if action not in ("merge", "reject"):
        raise InvalidInput("action must be merge or reject")
    who = web.caller()
    body = {"proposal_id": proposal_id, "actor": who.member_id}
    if action == "reject":
        body["decision"] = "reject"
    elif request.form.get("keep_id"):
        body["keep_id"] = request.form["keep_id"]
    out = services().entities.merge(who, _bank(bank_id), body)
    flash("Proposal rejected: the two stay apart." if action == "reject"
          else f"Merged into {out['entity']['name']}.")
    return redirect(url_for("web.entities", bank_id=bank_id))


@screen("/ui/banks/<bank_id>/entities/<entity_id>")
def entity(bank_id: str, entity_id: str):
    """One entity with the member's units mentioning it, its co-mentioned entities, its
    history (merges, splits) and, for admins, the split form."""
    who = web.caller()
    e = services().entities.get(who, _bank(bank_id), entity_id, PAGE, _page())
    return render_template("entity.html", bank_id=bank_id, e=e,
                           can_edit=who.can(bank_id, "admin"))


@screen("/ui/banks/<bank_id>/entities/<entity_id>/split", methods=("POST",))
def split_entity(bank_id: str, entity_id: str):
    """Split a new entity off: the ticked ``aliases`` or the ticked mentions (``unit_ids``),
    optional ``name``; opens the new entity."""
    who = web.caller()
    body: dict = {"actor": who.member_id}
    for field in ("aliases", "unit_ids"):
        if request.form.getlist(field):
            body[field] = request.form.getlist(field)
    if request.form.get("name", "").strip():
        body["name"] = request.form["name"].strip()
    out = services().entities.split(who, _bank(bank_id), entity_id, body)
    flash(f"Split off as {out['entity']['name']}.")
    return redirect(url_for("web.entity", bank_id=bank_id, entity_id=out["entity"]["id"]))


# --- access (admins) -----------------------------------------------------------------------------
@screen("/ui/access", methods=("GET", "POST"))
def access():
    """Deployment admins: members and their keys; create a member, issue a key (shown
    once), revoke a key."""
    who, acc = web.caller(), services().access
    new_key = None
    if request.method == "POST":
        op = request.form.get("op")
        if op == "member":
            acc.create_member(who, request.form.get("member_id", "").strip(),
                              name=request.form.get("name") or None,
                              kind=request.form.get("kind") or "agent")
            flash("Member created.")
        elif op == "key":
            new_key = acc.issue_key(who, request.form.get("member_id", ""),
                                    request.form.get("label") or None)
        elif op == "revoke":
            acc.revoke_key(who, request.form.get("key_id", ""))
            flash("Key revoked.")
        if new_key is None:
            return redirect(url_for("web.access"))
    members, total = acc.list_members(who, 200, 0)
    keys = {m["member_id"]: acc.list_keys(who, m["member_id"]) for m in members}
    return render_template("access.html", members=members, total=total, keys=keys,
                           new_key=new_key)


@screen("/ui/banks/<bank_id>/access", methods=("GET", "POST"))
def bank_access(bank_id: str):
    """A bank's admins: its grants (set, revoke) and its audit log."""
    who, acc = web.caller(), services().access
    _bank(bank_id)
    if request.method == "POST":
        if request.form.get("op") == "revoke":
            acc.revoke_grant(who, bank_id, request.form.get("member_id", ""))
            flash("Grant revoked.")
        else:
            purposes = request.form.getlist("purposes") or None
            acc.set_grant(who, bank_id, request.form.get("member_id", "").strip(),
                          request.form.get("role", ""), purposes)
            flash("Grant set.")
        return redirect(url_for("web.bank_access", bank_id=bank_id))
    grants = acc.list_grants(who, bank_id)
    log, log_total = acc.audit(who, bank_id, limit=PAGE, offset=_page())
    return render_template("bank_access.html", bank_id=bank_id, grants=grants, log=log,
                           log_total=log_total, purposes=acc.purposes)
