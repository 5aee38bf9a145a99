"""Flask app factory: wires the engine services, the enqueuer and the blueprints."""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable

from flask import Flask

from api import auth, errors, openapi, web
from api import metrics as api_metrics
from api.hindsight_routes import HINDSIGHT_ROUTES
from api.json_provider import OrjsonProvider
from api.routes import (
    access,
    aliases,
    audit_logs,
    banks,
    closets,
    dedup,
    directives,
    feedback,
    health,
    hindsight_unserved,
    llm_requests,
    memories,
    mental_models,
    operations,
    recall,
    retain,
    transfer,
    webhooks,
)
from api.routes import context as context_routes
from api.routes import documents as document_routes
from api.routes import entities as entity_routes
from api.routes import files as file_routes
from api.routes import hindsight as hindsight_routes
from api.routes import tunnels as tunnel_routes
from api.routes import units as unit_routes
from rcll.access import deployment
from rcll.bootstrap import Services, bootstrap
from rcll.config import Settings
from rcll.telemetry import logs

log = logging.getLogger(__name__)


def celery_enqueuer(settings: Settings) -> Callable[[str, str], None]:
    """Send a task by name with a job id (the API never imports task code)."""
    from workers.celery_app import make_celery
    from workers.queues import ROUTES

    app = make_celery(settings)

    def enqueue(task_name: str, job_id: str) -> None:
        app.send_task(task_name, args=[job_id], queue=ROUTES[task_name]["queue"])

    return enqueue


def create_app(settings: Settings | None = None, services: Services | None = None,
               enqueue: Callable[[str, str], None] | None = None) -> Flask:
    """Build the API. ``services`` and ``enqueue`` default to the configured real ones.
    Raises :class:`rcll.access.deployment.DeploymentError` for a configuration that must not
    serve (auth off beyond loopback, read-only without its SELECT-only role, …)."""
    svc = services or bootstrap(settings)
    if not logs.configured():  # gunicorn configured it already (api/gunicorn_conf.py)
        logs.configure(svc.settings.log_format)
    for warning in deployment.check(svc.settings):
        log.warning("%s", warning)
    app = Flask("rcll", static_folder=None)  # the screens serve their own (api/web)
    app.config["MAX_CONTENT_LENGTH"] = svc.settings.max_request_bytes
    app.json = OrjsonProvider(app)  # keys in insertion order, as Flask's with sort_keys off
    app.extensions["rcll"] = svc
    app.extensions["rcll_enqueue"] = enqueue or celery_enqueuer(svc.settings)
    app.extensions["rcll_retain"] = svc.retain_service(app.extensions["rcll_enqueue"])
    app.extensions["rcll_consolidate"] = svc.consolidate_service(app.extensions["rcll_enqueue"])
    api_metrics.register(app)  # before auth: times every request, refused ones too
    auth.register(app)  # first: nothing runs for a caller it refuses
    errors.register(app)
    for bp in (retain.bp, recall.bp, operations.bp, banks.bp, health.bp, memories.bp, dedup.bp,
               closets.bp, feedback.bp, access.bp, api_metrics.bp):
        app.register_blueprint(bp)
    app.register_blueprint(entity_routes.bp)
    app.register_blueprint(context_routes.bp)
    app.register_blueprint(unit_routes.bp)
    app.register_blueprint(tunnel_routes.bp)
    app.register_blueprint(hindsight_routes.bp)
    app.register_blueprint(document_routes.bp)
    app.register_blueprint(audit_logs.bp)
    app.register_blueprint(directives.bp)
    app.register_blueprint(llm_requests.bp)
    app.register_blueprint(file_routes.bp)
    app.register_blueprint(webhooks.bp)
    app.register_blueprint(aliases.bp)
    app.register_blueprint(transfer.bp)  # bank export, import and clone (api/routes/transfer)
    app.register_blueprint(mental_models.bp)
    # /openapi.json and /docs (docs/reference/http-conventions.md "OpenAPI")
    app.register_blueprint(openapi.bp)
    web.register(app)  # /, /ui/... : the web screens (docs/reference/web-screens.md)
    # last: Hindsight's routes no view above serves answer 400/501 with a reason, not 404
    hindsight_unserved.register(app, HINDSIGHT_ROUTES)
    # Load the embedder, then the reranker (checking its scoring head), in the background so
    # the first recall does not pay for them and /readyz reports the reranker from start-up.
    threading.Thread(target=_warm_up, args=(svc,), name="models-warmup", daemon=True).start()
    return app


def _warm_up(svc: Services) -> None:
    """Load the models, then move every object made so far (modules, the app, the models'
    Python objects) out of the garbage collector's generations (``gc.freeze``, Python docs
    of the ``gc`` module). A full collection walks every tracked object: with the model
    libraries loaded that paused every thread of the process, recalls included, each time
    one ran (docs/decisions/0028-recall-round-trips.md). Later objects are collected as
    before; the freeze happens even when a model fails to load."""
    try:
        svc.embedder.get()
        svc.reranker.load()
    finally:
        gc.freeze()
