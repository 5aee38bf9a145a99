"""Builds the :class:`~rcll.cascade.cascade.Cascade` of a process from its services."""

from __future__ import annotations

from rcll.cascade.cascade import Cascade, CascadeSettings


def cascade_settings(settings) -> CascadeSettings:
    """The :class:`CascadeSettings` of ``RCLL_*`` settings (``hot_threshold``,
    ``warm_threshold``, ``cascade_min_hits``, ``hot_promote_top``,
    ``recall_overlap_max_in_flight``)."""
    return CascadeSettings(hot_threshold=settings.hot_threshold,
                           warm_threshold=settings.warm_threshold,
                           min_hits=settings.cascade_min_hits,
                           promote_top=settings.hot_promote_top,
                           overlap_max_in_flight=settings.recall_overlap_max_in_flight)


def build_cascade(svc, settings: CascadeSettings | None = None,
                  redis_url: str | None = None) -> Cascade:
    """The cascade over ``svc``'s read pool, embedder and Redis. ``settings`` overrides the
    thresholds; ``redis_url`` puts tier 1 in another Redis (benchmarks), with its own
    after-response worker."""
    hot, after = svc.hot_tier, svc.after_recall
    if redis_url is not None:
        from rcll.cascade.after import AfterRecall
        from rcll.cascade.hot import HotTier
        from rcll.cascade.redis_client import make_redis

        hot = HotTier(make_redis(redis_url), capacity=svc.settings.hot_capacity)
        after = AfterRecall(hot, svc.read_pool, svc.settings.embedder_stamp,
                            enabled=svc.settings.activation)
    return Cascade(svc.recall_context(), hot, after if svc.settings.activation else None,
                   settings=settings or cascade_settings(svc.settings),
                   route=svc.recall_pool if svc.replica is not None else None,
                   gate=svc.recall_gate)
