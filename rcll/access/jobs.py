"""Who may see what a job (an operation) says about its content — the one decision every
route that shows a job calls (operations, ``/jobs``, retain, files, closets, MCP).

A job's JSON describes its items: a file job's ``counts.file`` ``{name, size, type,
sha256}``, the ``error`` text, item errors (their unit ids, stages, raw LLM replies), the
caller-chosen ``idempotency_key`` (Hindsight's ``operation_id``), the LLM usage. That is as
private as the units the job writes, so it is shown (:func:`job_visible`) only to:

- the unrestricted principal (auth off, internal calls);
- the member who submitted the job (``jobs.submitted_by``), holding ``read`` on its bank;
- a member holding ``read`` on the bank to whom *every* item scope stored with the job
  (``jobs.item_scopes``: the distinct audience and purposes of its items, migration 0020)
  is visible by the unit rule, :func:`rcll.access.visibility.unit_visible` (audience
  ``'bank'`` or the member; a purpose granted on the bank). A job without member items
  (``closets``: scopes ``[]``) is visible to every reader; a job whose scopes are unknown
  (NULL: created before 0020 and not backfilled) to no member but its submitter.

Everyone else who may read the bank gets the job **redacted**, never a 404 or a 403: it is
listed and counted as any other job, and ``GET …/operations/{id}`` answers 200 with the same
redacted object — so no route tells a hidden job from a visible one by its status. A
redacted job keeps only :data:`SHOWN_REDACTED` (that it exists, its kind, its state and
stage, its times and attempt counters) and ``redacted: true``; every other field is
emptied: ``counts`` ``{}``, ``items_count`` 0, ``error``/``error_message``/
``idempotency_key``/``llm_usage`` null, and on the single operation ``item_errors`` ``[]``
and ``item_errors_total`` 0. A visible job carries ``redacted: false``.
"""

from __future__ import annotations

from rcll.access.principal import Principal
from rcll.access.visibility import unit_visible
from rcll.store import jobs

# fields a redacted job keeps (its existence, kind, state and timing — nothing about items)
SHOWN_REDACTED = ("id", "operation_id", "bank_id", "kind", "task_type", "state", "status",
                  "stage", "attempts", "resends", "lease_expiries", "created_at",
                  "updated_at", "started_at", "finished_at")
# what a redacted job shows instead of each other field
EMPTIED = {"counts": {}, "items_count": 0, "error": None, "error_message": None,
           "idempotency_key": None, "llm_usage": None}


def job_visible(principal: Principal, job: dict) -> bool:
    """Whether ``principal`` may see the content of ``job`` (a row of
    :data:`rcll.store.jobs.PUBLIC_COLUMNS`, with ``bank_id``, ``submitted_by`` and
    ``item_scopes``): the module rule."""
    if principal.all_audiences:
        return True
    bank_id = job["bank_id"]
    if not principal.can(bank_id, "read"):
        return False
    if principal.member_id is not None and job.get("submitted_by") == principal.member_id:
        return True
    scopes = job.get("item_scopes")
    if scopes is None:
        return False
    return all(unit_visible(principal, bank_id, s.get("audience"), s.get("purposes"))
               for s in scopes)


def job_json(principal: Principal, job: dict, item_errors: list[dict] | None = None,
             item_errors_total: int | None = None) -> dict:
    """``job`` as the API's operation object (:func:`rcll.store.jobs.to_json`) for
    ``principal``: whole with ``redacted: false`` when :func:`job_visible`, else redacted
    (module doc) with ``redacted: true``. ``item_errors`` (already rendered rows) and
    ``item_errors_total``: added for the single operation's answer when given — emptied
    (``[]``, 0) for a redacted job."""
    out = jobs.to_json(job)
    visible = job_visible(principal, job)
    if not visible:
        out = {k: out.get(k) for k in SHOWN_REDACTED} | EMPTIED
    out["redacted"] = not visible
    if item_errors is not None:
        out["item_errors"] = item_errors if visible else []
        out["item_errors_total"] = (item_errors_total or 0) if visible else 0
    return out
