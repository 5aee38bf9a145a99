"""The Hebbian co-recall weights are decayed and pruned by a beat-scheduled task on the
``maintenance`` queue, run here by the real worker."""

import time

import pytest

from rcll.cascade import hebbian
from workers.celery_app import make_celery
from workers.queues import HEBBIAN_DECAY_TASK, QueueNames


def test_beat_task_decays_and_prunes_co_recall_weights(services, settings, worker):
    app = make_celery(settings)
    entries = [e for e in app.conf.beat_schedule.values() if e["task"] == HEBBIAN_DECAY_TASK]
    assert entries and entries[0]["options"]["queue"] == QueueNames.MAINTENANCE
    assert entries[0]["schedule"] == settings.hebbian_decay_interval_s
    r, prefix, bank = services.redis, services.hot_tier.prefix, "heb-beat"
    hebbian.co_recall(r, prefix, bank, ["a", "b"])            # a–b: 1.0
    hebbian.co_recall(r, prefix, bank, [f"x{i}" for i in range(10)])  # x0–x9: 1/9 each
    # the previous run was one half-life ago: this run halves every weight
    r.set(f"{prefix}:heb_decayed_at", repr(time.time() - hebbian.HALF_LIFE_S))
    app.send_task(HEBBIAN_DECAY_TASK, queue=QueueNames.MAINTENANCE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        w = dict(hebbian.partners(r, prefix, bank, "a")).get("b")
        if w is not None and w < 0.9:
            break
        time.sleep(0.2)
    assert dict(hebbian.partners(r, prefix, bank, "a"))["b"] == pytest.approx(
        0.5, rel=1e-3)
    # 1/9 halved is 0.056, still above PRUNE_BELOW (0.05); another half-life prunes it
    assert len(hebbian.partners(r, prefix, bank, "x0")) == 9
    r.set(f"{prefix}:heb_decayed_at", repr(time.time() - hebbian.HALF_LIFE_S))
    app.send_task(HEBBIAN_DECAY_TASK, queue=QueueNames.MAINTENANCE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and hebbian.partners(r, prefix, bank, "x0"):
        time.sleep(0.2)
    assert hebbian.partners(r, prefix, bank, "x0") == []
    assert not r.sismember(services.hot_tier.key(bank, "hebk"), "x0")
    assert dict(hebbian.partners(r, prefix, bank, "a"))["b"] == pytest.approx(
        0.25, rel=1e-3)
