"""deploy/k8s: every manifest validated offline, and checked against the code.

Validators (both from PyPI, no network): built-in kinds with ``kubernetes-validate`` (it ships
the Kubernetes OpenAPI-derived JSON schemas; strict mode rejects unknown fields) for the
oldest and the newest Kubernetes version it knows of from 1.30 on; KEDA's kinds
(ScaledObject, TriggerAuthentication) with the ``cloudcoil-models-keda`` models, generated
from KEDA's CRDs: a manifest must validate and dump back to exactly itself (so a misspelt
field, which the models would ignore, fails too)."""

from __future__ import annotations

import copy
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from cloudcoil.models.keda.v1alpha1 import ScaledObject, TriggerAuthentication
from deploy_checks import (
    RCLL_VAR,
    ROOT,
    queues_of,
    rcll_command_problem,
    skip_if_no_mcp_command,
)
from kubernetes_validate.utils import all_versions

K8S = ROOT / "deploy" / "k8s"
KEDA = {"ScaledObject": ScaledObject, "TriggerAuthentication": TriggerAuthentication}
VERSIONS = sorted({v for v in all_versions() if tuple(map(int, v.split(".")[:2])) >= (1, 30)},
                  key=lambda v: tuple(map(int, v.split("."))))
VERSIONS = [VERSIONS[0], VERSIONS[-1]]
SECRET_NAMES = {"RCLL_DATABASE_URL", "RCLL_READONLY_DATABASE_URL", "RCLL_REDIS_URL",
                "RCLL_BROKER_URL", "RCLL_ADMIN_KEY", "RCLL_API_KEY", "RCLL_KEY_SECRET"}


def manifests() -> list[tuple[str, dict]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        out += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return out


DOCS = manifests()


def by_kind(kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for _, d in DOCS if d["kind"] == kind}


def containers(doc: dict) -> list[dict]:
    spec = doc["spec"]["template"]["spec"]
    return spec.get("initContainers", []) + spec["containers"]


def keda_problem(doc: dict) -> str | None:
    """None when the KEDA model accepts ``doc`` and dumps back to exactly it."""
    try:
        model = KEDA[doc["kind"]].model_validate(doc)
    except Exception as exc:  # pydantic.ValidationError
        return str(exc)
    back = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return None if back == doc else f"fields the KEDA CRD does not have: {back} != {doc}"


def test_the_folder_holds_the_whole_deployment():
    kinds = sorted({d["kind"] for _, d in DOCS})
    assert kinds == ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Job", "Namespace",
                     "PodDisruptionBudget", "ScaledObject", "Service", "TriggerAuthentication"]
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files
    assert kustomization["namespace"] == by_kind("Namespace").popitem()[0]
    assert "Secret" not in kinds  # secrets are referenced, never shipped


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name, doc", [(f"{f}:{d['kind']}/{d['metadata']['name']}", d)
                                       for f, d in DOCS if d["kind"] not in KEDA])
def test_builtin_kinds_validate_strictly(name, doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("name, doc", [(f"{d['kind']}/{d['metadata']['name']}", d)
                                       for _, d in DOCS if d["kind"] in KEDA])
def test_keda_kinds_validate(name, doc):
    assert keda_problem(doc) is None


def test_the_validators_reject_broken_manifests():
    deployment = copy.deepcopy(by_kind("Deployment")["rcll-api"])
    c = deployment["spec"]["template"]["spec"]["containers"][0]
    c["readynessProbe"] = c.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSIONS[-1], strict=True)
    hpa = copy.deepcopy(by_kind("HorizontalPodAutoscaler")["rcll-api"])
    hpa["spec"]["minReplicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(hpa, VERSIONS[-1], strict=True)
    scaled = copy.deepcopy(by_kind("ScaledObject")["rcll-worker-embed"])
    scaled["spec"]["minReplicas"] = scaled["spec"].pop("minReplicaCount")  # HPA's spelling
    assert keda_problem(scaled)
    scaled = copy.deepcopy(by_kind("ScaledObject")["rcll-worker-embed"])
    del scaled["spec"]["triggers"][0]["type"]
    assert keda_problem(scaled)


def test_api_probes_hpa_and_disruption_budget():
    api = by_kind("Deployment")["rcll-api"]
    (c,) = containers(api)
    assert rcll_command_problem(c["args"]) is None and c["args"] == ["serve"]
    port = {p["name"]: p["containerPort"] for p in c["ports"]}["http"]
    assert port == 8765  # RCLL_API_PORT's default, which the image sets
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    hpa = by_kind("HorizontalPodAutoscaler")["rcll-api"]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": "rcll-api"}
    assert hpa["spec"]["minReplicas"] >= 2
    assert selects(by_kind("PodDisruptionBudget")["rcll-api"]["spec"]["selector"]["matchLabels"],
                   api)


def selects(match_labels: dict, deployment: dict) -> bool:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    return all(labels.get(k) == v for k, v in match_labels.items())


def test_a_worker_deployment_and_keda_scaler_per_queue(queue_names):
    deployments = by_kind("Deployment")
    scalers = by_kind("ScaledObject")
    budgets = by_kind("PodDisruptionBudget")
    consumers: dict[str, str] = {}
    for name, dep in deployments.items():
        (c,) = containers(dep)
        if c["args"][0] != "worker":
            continue
        assert rcll_command_problem(c["args"]) is None, name
        (queue,) = queues_of(c["args"])
        assert queue not in consumers, f"{queue} consumed by {consumers.get(queue)} and {name}"
        consumers[queue] = name
        scaler = scalers[name]
        assert scaler["spec"]["scaleTargetRef"] == {"name": name}
        (trigger,) = scaler["spec"]["triggers"]
        # Celery's Redis broker keeps queue <q>'s waiting tasks in the list named <q>
        assert trigger["type"] == "redis" and trigger["metadata"]["listName"] == queue
        assert int(trigger["metadata"]["listLength"]) >= 1
        assert trigger["authenticationRef"]["name"] in by_kind("TriggerAuthentication")
        assert scaler["spec"]["minReplicaCount"] >= 1
        assert any(selects(b["spec"]["selector"]["matchLabels"], dep) for b in budgets.values())
        # exporter hook: one metrics port per worker, named in the scrape annotation
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        annotations = dep["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == str(ports["metrics"])
        assert annotations["prometheus.io/path"] == "/metrics"
    assert sorted(consumers) == sorted(queue_names)
    assert len(scalers) == len(queue_names)


def test_beat_is_a_singleton_and_migrations_a_job():
    beat = by_kind("Deployment")["rcll-beat"]
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}
    assert containers(beat)[0]["args"] == ["beat"]
    assert not any(s["spec"]["scaleTargetRef"]["name"] == "rcll-beat"
                   for s in by_kind("ScaledObject").values())
    job = by_kind("Job")["rcll-migrate"]
    (c,) = containers(job)
    assert c["args"] == ["migrate"] and rcll_command_problem(c["args"]) is None


def test_mcp_command():
    (c,) = containers(by_kind("Deployment")["rcll-mcp"])
    assert c["args"][:3] == ["mcp", "--transport", "http"]
    port = int(c["args"][c["args"].index("--port") + 1])
    assert {p["name"]: p["containerPort"] for p in c["ports"]}["mcp"] == port
    skip_if_no_mcp_command()
    assert rcll_command_problem(c["args"]) is None


def test_every_service_reaches_a_pod():
    deployments = by_kind("Deployment")
    for name, svc in by_kind("Service").items():
        targets = [d for d in deployments.values() if selects(svc["spec"]["selector"], d)]
        assert len(targets) == 1, name
        port_names = {p["name"] for c in containers(targets[0]) for p in c.get("ports", [])}
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= port_names, name


def test_pods_run_as_the_image_user_with_measured_resources():
    """Non-root (the image's uid 10001), read-only root file system, and requests and a
    memory limit on every container (numbers: benchmarks/results/process_rss.txt)."""
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert "USER 10001:10001" in dockerfile
    for kind in ("Deployment", "Job"):
        for name, doc in by_kind(kind).items():
            pod = doc["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] is True, name
            assert pod["securityContext"]["runAsUser"] == 10001, name
            for c in containers(doc):
                assert c["image"].split(":")[0] == "rcll", name
                assert c["securityContext"]["readOnlyRootFilesystem"] is True, name
                mounts = {m["mountPath"] for m in c["volumeMounts"]}
                assert {"/var/lib/rcll", "/tmp"} <= mounts, name  # state dir, temp files
                res = c["resources"]
                assert set(res["requests"]) == {"cpu", "memory"} and "memory" in res["limits"]


def test_secrets_by_reference_and_settings_by_name(env_names):
    config = by_kind("ConfigMap")["rcll-config"]["data"]
    assert set(config) <= env_names and not set(config) & SECRET_NAMES
    for kind in ("Deployment", "Job"):
        for name, doc in by_kind(kind).items():
            for c in containers(doc):
                for env in c.get("env", []):
                    if env["name"].startswith("RCLL_"):
                        assert env["name"] in env_names, (name, env["name"])
                    if env["name"] in SECRET_NAMES:
                        assert "value" not in env, (name, env["name"])
                        assert env["valueFrom"]["secretKeyRef"]["name"] == "rcll-secrets"
                names = {e["name"] for e in c.get("env", [])}
                assert "RCLL_DATABASE_URL" in names, name
    text = "".join(p.read_text() for p in K8S.glob("*.yaml"))
    assert set(RCLL_VAR.findall(text)) - env_names == set()


def test_api_metrics_annotation_matches_the_api_port():
    api = by_kind("Deployment")["rcll-api"]
    annotations = api["spec"]["template"]["metadata"]["annotations"]
    (c,) = containers(api)
    assert annotations["prometheus.io/port"] == str(c["ports"][0]["containerPort"])
    assert annotations["prometheus.io/path"] == "/metrics"


def test_kustomization_image_matches_the_manifests():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    images = {c["image"].split(":")[0] for kind in ("Deployment", "Job")
              for doc in by_kind(kind).values() for c in containers(doc)}
    assert images == {i["name"] for i in kustomization["images"]}
    assert Path(K8S / "kustomization.yaml").exists()
