"""RabbitMQ as the broker (``RCLL_BROKER_URL=amqp://…``): the same retain → worker → recall
round trip as with Redis (tests/api/test_round_trip.py, its test functions run as they are),
and queue depth sampled from RabbitMQ.

Against the real RabbitMQ on 127.0.0.1:5672, in a vhost of this run's own (created and deleted
with ``rabbitmqctl``), so parallel runs never share queues. Skipped, with the reason, when no
RabbitMQ answers or no vhost can be created."""

from __future__ import annotations

import shutil
import socket
import subprocess
import uuid

import pytest

from rcll.dev import processes, stack
from rcll.telemetry.collectors import ScrapeCollector, amqp_queue_depths, queue_depths
from tests.api import test_round_trip as round_trip
from tests.conftest import free_port
from workers.queues import QueueNames

HOST, PORT = "127.0.0.1", 5672
ROUND_TRIP_BANKS = ("rt-bank", "rt-get", "rt-budget")


def _rabbitmq_answers() -> bool:
    try:
        with socket.create_connection((HOST, PORT), timeout=2):
            return True
    except OSError:
        return False


def _ctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def vhost():
    if not _rabbitmq_answers():
        pytest.skip(f"no RabbitMQ answers on {HOST}:{PORT}")
    if shutil.which("rabbitmqctl") is None:
        pytest.skip("rabbitmqctl not on PATH: cannot create a vhost of this run's own")
    name = f"rcll-test-{uuid.uuid4().hex[:8]}"
    made = _ctl("add_vhost", name)
    if made.returncode != 0:
        pytest.skip(f"cannot create a RabbitMQ vhost: {made.stderr.strip()[:300]}")
    perms = _ctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")
    if perms.returncode != 0:
        _ctl("delete_vhost", name)
        pytest.skip(f"cannot grant guest on vhost {name}: {perms.stderr.strip()[:300]}")
    yield name
    _ctl("delete_vhost", name)


@pytest.fixture(scope="module")
def amqp_settings(settings, vhost):
    return settings.model_copy(update={
        "broker_url": f"amqp://guest:guest@{HOST}:{PORT}/{vhost}",
        "metrics_port": free_port()})


@pytest.fixture(scope="module")
def amqp_worker(amqp_settings):
    """A real Celery worker consuming the four queues from RabbitMQ."""
    name = "worker-amqp"
    stack.start_worker(amqp_settings, stack.child_env(amqp_settings), name=name,
                       log=lambda *_: None)
    yield amqp_settings
    processes.stop(amqp_settings.run_dir.resolve(), name)


@pytest.fixture(scope="module")
def amqp_app(services, amqp_settings):
    """The API with its enqueuer on RabbitMQ (the services are the suite's: same database)."""
    from api.app import celery_enqueuer, create_app

    return create_app(services=services, enqueue=celery_enqueuer(amqp_settings))


@pytest.fixture()
def amqp_client(amqp_app):
    c = amqp_app.test_client()
    for bank in ROUND_TRIP_BANKS:  # the Redis run uses the same bank names
        c.delete(f"/v1/default/banks/{bank}")
    yield c
    for bank in ROUND_TRIP_BANKS:
        c.delete(f"/v1/default/banks/{bank}")


@pytest.mark.parametrize("case", [round_trip.test_retain_then_recall_through_worker,
                                  round_trip.test_seed_get_recall_route,
                                  round_trip.test_budget_cut_counts_real_tokens],
                         ids=lambda f: f.__name__)
def test_round_trip_with_rabbitmq(case, amqp_client, amqp_worker, services):
    case(amqp_client, amqp_worker, services)


def test_worker_consumes_from_rabbitmq(amqp_worker, vhost):
    """The round trip went through RabbitMQ: the worker holds a consumer on each queue."""
    out = _ctl("list_queues", "-p", vhost, "name", "consumers")
    assert out.returncode == 0, out.stderr
    consumers = dict(line.split("\t") for line in out.stdout.splitlines()
                     if line.count("\t") == 1 and not line.startswith("name"))
    for q in QueueNames.all():
        assert int(consumers.get(q, 0)) >= 1, out.stdout


def test_queue_depth_from_rabbitmq(vhost, services):
    from kombu import Connection, Exchange, Queue

    url = f"amqp://guest:guest@{HOST}:{PORT}/{vhost}"
    q = f"depth-{uuid.uuid4().hex[:6]}"
    with Connection(url) as conn:
        queue = Queue(q, Exchange(q, type="direct"), routing_key=q, durable=False,
                      auto_delete=False)
        producer = conn.Producer()
        for i in range(3):
            producer.publish({"n": i}, exchange=queue.exchange, routing_key=q,
                             declare=[queue])
    assert amqp_queue_depths(url, [q, "never-declared"], 2.0) == {q: 3, "never-declared": 0}
    assert queue_depths(url, [q], 2.0) == {q: 3}
    fams = {f.name: f for f in ScrapeCollector(url, [q], lambda: services.pool, 2.0).collect()}
    assert [(s.labels, s.value) for s in fams["rcll_queue_depth"].samples] == [({"queue": q}, 3)]
    with Connection(url) as conn:
        conn.default_channel.queue_delete(q)


def test_queue_depth_source_down_is_reported_not_raised(services):
    url = f"amqp://guest:guest@127.0.0.1:{free_port()}//"  # nothing listens there
    fams = {f.name: f for f in ScrapeCollector(url, ["extract"], lambda: services.pool,
                                               0.5).collect()}
    assert "rcll_queue_depth" not in fams
    up = {s.labels["source"]: s.value for s in fams["rcll_metrics_source_up"].samples}
    assert up == {"broker": 0, "database": 1}
