"""compose/compose.yaml: valid against the Compose Specification's JSON schema, and every
service's command and environment match what RCLL reads. (The machines here have no compose
plugin and cannot run containers: the file is validated, not run.)

The schema is the Compose Specification's ``compose-spec.json`` as vendored by the PyPI
package check-jsonschema (``check_jsonschema/builtin_schemas/vendor/compose-spec.json``,
Apache-2.0, ``licenses/LICENSE.compose-spec`` beside it)."""

from __future__ import annotations

import copy
import json
import re
from importlib import resources
from urllib.parse import urlparse

import jsonschema
import pytest
import yaml
from deploy_checks import (
    RCLL_VAR,
    ROOT,
    load_module,
    queues_of,
    rcll_command_problem,
    skip_if_no_mcp_command,
)

from rcll.config import Settings

COMPOSE = ROOT / "compose" / "compose.yaml"
ENV_EXAMPLE = ROOT / "compose" / ".env.example"
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-?+][^}]*)?\}")


@pytest.fixture(scope="module")
def compose_text() -> str:
    return COMPOSE.read_text()


@pytest.fixture(scope="module")
def compose(compose_text) -> dict:
    return yaml.safe_load(compose_text)


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    ref = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json")
    schema = json.loads(ref.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def rcll_services(compose: dict) -> dict[str, dict]:
    """The services that run the RCLL image (built from deploy/Dockerfile)."""
    return {name: svc for name, svc in compose["services"].items()
            if (svc.get("build") or {}).get("dockerfile") == "deploy/Dockerfile"}


def errors(validator, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in validator.iter_errors(doc)]


def test_valid_against_the_compose_specification(validator, compose):
    assert errors(validator, compose) == []


@pytest.mark.parametrize("mutate, where", [
    (lambda c: c["services"]["migrate"]["depends_on"]["postgres"].update(condition="done"),
     "services/migrate/depends_on"),
    (lambda c: c["services"]["api"].update(helthcheck={"test": ["CMD", "true"]}),
     "services/api"),
    (lambda c: c["services"]["embed"].update(command={"worker": "embed"}),
     "services/embed/command"),
])
def test_the_schema_rejects_a_broken_file(validator, compose, mutate, where):
    broken = copy.deepcopy(compose)
    mutate(broken)
    found = errors(validator, broken)
    assert found and any(e.startswith(where) for e in found), found


def test_every_rcll_variable_is_a_setting(compose_text, env_names):
    """RCLL_* names anywhere in compose.yaml and .env.example (environment keys,
    interpolations, comments) are settings RCLL reads."""
    used = set(RCLL_VAR.findall(compose_text)) | set(RCLL_VAR.findall(ENV_EXAMPLE.read_text()))
    assert used, "no RCLL_ variable found: the pattern is wrong"
    assert sorted(used - env_names) == []


def test_env_example_lists_every_setting_and_is_generated(env_names):
    text = ENV_EXAMPLE.read_text()
    listed = set(re.findall(r"^#?(RCLL_[A-Z0-9_]+)=", text, flags=re.M))
    assert listed == env_names
    envfile = load_module("deploy/envfile.py")
    assert text == envfile.render(), (
        "compose/.env.example is stale: PYTHONPATH=$PWD .venv/bin/python deploy/envfile.py "
        "> compose/.env.example")


def test_env_example_defaults_are_the_settings_defaults(monkeypatch):
    """Every commented default, read from the environment by Settings as it would be once
    uncommented, is the field's default (lists as JSON, booleans true/false)."""
    import os

    for key in [k for k in os.environ if k.startswith("RCLL_")]:
        monkeypatch.delenv(key)
    text = ENV_EXAMPLE.read_text()
    defaults = Settings.model_construct()
    read_back = 0
    for field, info in Settings.model_fields.items():
        name = f"RCLL_{field.upper()}"
        m = re.search(rf"^#{name}=(.*?)(?:  \(compose\.yaml sets .*\))?$", text, flags=re.M)
        if m is None:  # a required one, with a placeholder
            assert re.search(rf"^{name}=change-me$", text, flags=re.M), name
            continue
        if m.group(1) == "":
            assert info.default in (None, ""), name
            continue
        monkeypatch.setenv(name, m.group(1))
        read_back += 1
    s = Settings()
    assert read_back >= 50  # all but the unset and the required ones
    for field in Settings.model_fields:
        assert getattr(s, field) == getattr(defaults, field), field


def test_wiring_environment_is_read_by_settings(compose, monkeypatch):
    """The environment every RCLL container gets, interpolated with sample values, is what
    Settings reads: the database, Redis and the API are the compose services."""
    env = dict(compose["x-rcll"]["environment"])
    values = {"POSTGRES_PASSWORD": "pw", "RCLL_ADMIN_KEY": "adm", "RCLL_KEY_SECRET": "sec"}
    for key, value in env.items():
        monkeypatch.setenv(key, INTERPOLATION.sub(lambda m: values[m.group(1)], str(value)))
    s = Settings()
    services = set(compose["services"])
    assert urlparse(s.db_url).hostname == "postgres" and urlparse(s.db_url).password == "pw"
    assert urlparse(s.broker).hostname == "redis"
    assert urlparse(s.base_url).hostname == "api" and s.api_port == 8765
    assert {"postgres", "redis", "api"} <= services
    assert s.admin_key == "adm" and s.key_secret == "sec" and s.api_host == "0.0.0.0"
    assert str(s.state_dir) == "/var/lib/rcll"


def test_every_rcll_service_runs_a_real_command(compose):
    services = rcll_services(compose)
    assert set(services) == {"migrate", "api", "extract", "embed", "consolidate",
                             "maintenance", "beat", "mcp"}
    for name, svc in services.items():
        if svc["command"][0] == "mcp":
            continue  # test_mcp_service_command
        assert rcll_command_problem(svc["command"]) is None, name


def test_mcp_service_command(compose):
    cmd = compose["services"]["mcp"]["command"]
    assert cmd[:3] == ["mcp", "--transport", "http"] and "--port" in cmd
    skip_if_no_mcp_command()
    assert rcll_command_problem(cmd) is None


def test_one_worker_service_per_queue_named_after_it(compose, queue_names):
    """`docker compose up --scale embed=4` scales the embed stage alone: exactly one service
    consumes each queue, it consumes nothing else, and it is named after its queue."""
    consumers: dict[str, list[str]] = {}
    for name, svc in rcll_services(compose).items():
        if svc["command"][0] != "worker":
            continue
        queues = queues_of(svc["command"])
        assert queues == [name], f"service {name} consumes {queues}"
        consumers.setdefault(queues[0], []).append(name)
        # nothing that would collide between replicas of a scaled service
        assert "container_name" not in svc and "ports" not in svc, name
    assert consumers == {q: [q] for q in queue_names}


def test_start_order_and_health(compose):
    services = compose["services"]
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["migrate"]["restart"] == "no"
    for name in rcll_services(compose):
        if name == "migrate":
            continue
        deps = services[name]["depends_on"]
        assert deps["migrate"] == {"condition": "service_completed_successfully"}, name
        assert deps["redis"] == {"condition": "service_healthy"}, name
    assert "/readyz" in " ".join(services["api"]["healthcheck"]["test"])
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"], name
    assert services["postgres"]["image"].startswith("pgvector/pgvector:pg18")  # uuidv7()


def test_volumes_are_declared_and_used(compose):
    declared = set(compose["volumes"])
    used = {v.split(":")[0] for svc in compose["services"].values()
            for v in svc.get("volumes", []) if not v.startswith((".", "/"))}
    assert used == declared == {"pgdata", "redisdata", "beatdata"}
