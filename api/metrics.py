"""``GET /metrics`` (Prometheus text format) and the request-latency hook.

The page sums every process of the API (gunicorn workers, multiprocess mode:
:mod:`rcll.telemetry.exposition`) and adds what is sampled on each scrape: queue depth per
queue and jobs by state (:class:`rcll.telemetry.collectors.ScrapeCollector`). The route is
declared ``public`` — its labels hold no bank ids, member ids or text — and a deployment
that wants it guarded sets ``RCLL_METRICS_PUBLIC=off``: then only a deployment admin key may
scrape it (401/403 like any admin route).
"""

from __future__ import annotations

import time

from flask import Blueprint, Flask, Response, current_app, g, request

from api.auth import bearer_key, requires
from api.deps import services
from api.openapi import doc
from rcll.errors import Forbidden
from rcll.telemetry import exposition
from rcll.telemetry.collectors import ScrapeCollector
from rcll.telemetry.metrics import HTTP_REQUEST_SECONDS

bp = Blueprint("metrics", __name__)
UNMATCHED = "<unmatched>"  # 404/405: one series, whatever the path


def register(app: Flask) -> None:
    """Time every request: ``rcll_http_request_duration_seconds{endpoint, method, status}``,
    ``endpoint`` the route template (``/v1/default/banks/<bank_id>/memories/recall``)."""

    @app.before_request
    def _start_timer():
        g.rcll_t0 = time.perf_counter()

    @app.after_request
    def _observe(resp):
        t0 = g.pop("rcll_t0", None)
        if t0 is not None:
            rule = request.url_rule.rule if request.url_rule is not None else UNMATCHED
            HTTP_REQUEST_SECONDS.labels(rule, request.method, str(resp.status_code)).observe(
                time.perf_counter() - t0)
        return resp


def _collector() -> ScrapeCollector:
    """The scrape-time sampler of this app (one per app, created on first scrape)."""
    c = current_app.extensions.get("rcll_scrape")
    if c is None:
        from workers.queues import QueueNames

        svc = services()
        c = ScrapeCollector(svc.settings.broker, QueueNames.all(), lambda: svc.read_pool,
                            svc.settings.metrics_scrape_timeout_s)
        current_app.extensions["rcll_scrape"] = c
    return c


@bp.get("/metrics")
@requires("public")
@doc({200: None}, content_type="text/plain", errors={401: ["missing_api_key", "invalid_api_key"],
    403: ["forbidden"]})
def metrics():
    """Prometheus text exposition of every API process and the scrape-time samples."""
    svc = services()
    if not svc.settings.metrics_public and svc.settings.auth:
        key = bearer_key()
        who = svc.access.authenticate(key if key != "" else "invalid")
        if not who.is_admin:
            raise Forbidden("/metrics needs a deployment admin key (RCLL_METRICS_PUBLIC=off)",
                            {"needed": "deployment admin", "have": who.member_id})
    body, content_type = exposition.render([_collector()])
    return Response(body, content_type=content_type)
