"""The chart lints clean and renders what the operator needs, in every supported mode."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.prerequisites import require_module

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "swivel"
NAMESPACE = "swivel-system"

Objects = list[dict[str, Any]]
Render = Callable[..., Objects]
CiValues = Callable[[str], dict[str, Any]]
CI_FILES = sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))


def only(objects: Objects, kind: str) -> dict[str, Any]:
    matching = [o for o in objects if o["kind"] == kind]
    assert len(matching) == 1, f"expected one {kind}, got {[o['metadata'] for o in matching]}"
    return matching[0]


def kinds(objects: Objects) -> list[str]:
    return sorted(o["kind"] for o in objects)


def operator_container(objects: Objects) -> dict[str, Any]:
    containers = only(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["operator"]
    container: dict[str, Any] = containers[0]
    return container


@pytest.mark.parametrize("values_file", [None, *CI_FILES])
def test_lint_is_clean_even_strict(values_file: str | None, ci_values: CiValues) -> None:
    helm = require_module("helm_python", "pip install helm-python-sdk")
    values = ci_values(values_file) if values_file else None
    report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE, kube_version="v1.27.0")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["errors"] == [] and problems == [], report


def test_defaults_watch_the_release_namespace_only(render: Render) -> None:
    objects = render()
    assert kinds(objects) == [
        "ClusterRole",  # read-only CRD discovery
        "ClusterRoleBinding",
        "Deployment",
        "NetworkPolicy",  # the operator pod's ingress: liveness and metrics ports only
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    assert only(objects, "Role")["metadata"]["namespace"] == NAMESPACE
    args = operator_container(objects)["args"]
    assert args[0] == "operator"
    assert f"--namespace={NAMESPACE}" in args and "--all-namespaces" not in args
    assert "--standalone" in args


def test_cluster_wide_uses_a_cluster_role_and_no_namespaced_roles(
    render: Render, ci_values: CiValues
) -> None:
    objects = render(ci_values("cluster-wide-values.yaml"))
    assert "Role" not in kinds(objects) and "RoleBinding" not in kinds(objects)
    assert only(objects, "ClusterRole")["metadata"]["name"] == "swivel"
    binding = only(objects, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "swivel",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "swivel", "namespace": NAMESPACE}
    ]
    args = operator_container(objects)["args"]
    assert "--all-namespaces" in args
    assert not [a for a in args if a.startswith("--namespace")]


def test_named_namespaces_get_one_role_each(render: Render, ci_values: CiValues) -> None:
    objects = render(ci_values("namespaces-values.yaml"))
    roles = [o for o in objects if o["kind"] in ("Role", "RoleBinding")]
    assert sorted((o["kind"], o["metadata"]["namespace"]) for o in roles) == [
        ("Role", "analytics"),
        ("Role", "streaming"),
        ("RoleBinding", "analytics"),
        ("RoleBinding", "streaming"),
    ]
    for binding in (o for o in roles if o["kind"] == "RoleBinding"):
        # The ServiceAccount lives in the release namespace, not in the watched one.
        assert binding["subjects"][0]["namespace"] == NAMESPACE
    assert "ClusterRole" not in kinds(objects)  # crdDiscovery: false
    args = operator_container(objects)["args"]
    assert args[:3] == ["operator", "--namespace=streaming", "--namespace=analytics"]
    assert "--standalone" not in args and "--peering" in args
    assert args[-1] == "--metrics-port=9191"


def test_deployment_is_one_replica_recreated_never_rolled(render: Render) -> None:
    deployment = only(render(), "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_operator_runs_non_root_on_a_read_only_root_filesystem(render: Render) -> None:
    objects = render()
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's USER
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = operator_container(objects)["securityContext"]
    assert container["readOnlyRootFilesystem"] is True
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in container
    mounts = {m["mountPath"]: m["name"] for m in operator_container(objects)["volumeMounts"]}
    assert mounts == {"/tmp": "tmp"} and pod["volumes"][0]["emptyDir"]


def test_liveness_probe_hits_the_endpoint_kopf_serves(render: Render) -> None:
    container = operator_container(render({"liveness": {"port": 8181}}))
    assert "--liveness-endpoint=http://0.0.0.0:8181/healthz" in container["args"]
    probe = container["livenessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert probe["path"] == "/healthz" and ports[probe["port"]] == 8181


def test_image_defaults_to_the_app_version(render: Render, chart: Any) -> None:
    assert operator_container(render())["image"] == (
        f"ghcr.io/swivel-dev/swivel:{chart.metadata['appVersion']}"
    )
    custom = operator_container(render({"image": {"tag": "dev", "pullPolicy": "Never"}}))
    assert custom["image"] == "ghcr.io/swivel-dev/swivel:dev"
    assert custom["imagePullPolicy"] == "Never"


def test_metrics_service_selects_the_operator_port(render: Render) -> None:
    objects = render()
    service = only(objects, "Service")
    container = operator_container(objects)
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
    ]
    assert "--metrics-port=9090" in container["args"]
    assert {"name": "metrics", "containerPort": 9090, "protocol": "TCP"} in container["ports"]
    pod_labels = only(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_service_monitor_only_when_asked(render: Render, ci_values: CiValues) -> None:
    assert "ServiceMonitor" not in kinds(render())
    objects = render(ci_values("cluster-wide-values.yaml"))
    monitor = only(objects, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"] == [
        {"port": "metrics", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    service = only(objects, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= (
        service["metadata"]["labels"].items()
    )


def test_metrics_off_removes_service_monitor_and_port(render: Render) -> None:
    objects = render({"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}})
    assert "Service" not in kinds(objects) and "ServiceMonitor" not in kinds(objects)
    container = operator_container(objects)
    assert [p["name"] for p in container["ports"]] == ["health"]
    assert not [a for a in container["args"] if a.startswith("--metrics-port")]


def test_scheduling_and_pod_knobs_reach_the_pod(render: Render, ci_values: CiValues) -> None:
    values = ci_values("namespaces-values.yaml")
    pod = only(render(values), "Deployment")["spec"]["template"]
    spec = pod["spec"]
    assert spec["nodeSelector"] == values["nodeSelector"]
    assert spec["tolerations"] == values["tolerations"]
    assert spec["affinity"] == values["affinity"]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["metadata"]["annotations"] == {"example.com/team": "streaming"}
    env = {e["name"] for e in spec["containers"][0]["env"]}
    assert {"POD_NAME", "POD_NAMESPACE", "SWIVEL_LOG_LEVEL"} <= env


def test_an_existing_service_account_can_be_used(render: Render) -> None:
    objects = render({"serviceAccount": {"create": False, "name": "platform-operator"}})
    assert "ServiceAccount" not in kinds(objects)
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "platform-operator"
    assert only(objects, "RoleBinding")["subjects"][0]["name"] == "platform-operator"


def test_rbac_can_be_left_to_the_cluster_admins(render: Render) -> None:
    objects = render({"rbac": {"create": False}})
    assert not {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} & set(kinds(objects))


def test_names_are_prefixed_by_the_release(chart: Any) -> None:
    import yaml

    manifests = chart.render(None, name="payments", namespace="team-a")
    deployment = yaml.safe_load(manifests["swivel/templates/deployment.yaml"])
    assert deployment["metadata"]["name"] == "payments-swivel"
    assert deployment["metadata"]["namespace"] == "team-a"


def test_notes_tell_what_is_watched(chart: Any) -> None:
    notes = chart.render(None, name="swivel", namespace=NAMESPACE)["swivel/templates/NOTES.txt"]
    assert f"in: {NAMESPACE}." in notes and "kubectl wait --for=condition=Ready" in notes
    wide = chart.render({"watch": {"clusterWide": True}}, name="swivel", namespace=NAMESPACE)
    assert "in every namespace" in wide["swivel/templates/NOTES.txt"]


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"watch": {"clusterWide": "yes"}}, "/watch/clusterWide"),
        ({"replicas": 2}, "replicas"),  # one replica is not a choice (kopf has no standby)
        ({"securityContext": {"runAsNonRoot": False}}, "/securityContext/runAsNonRoot"),
        ({"podSecurityContext": {"runAsUser": 0}}, "/podSecurityContext/runAsUser"),
        ({"watch": {"namespaces": ["Team_A"]}}, "/watch/namespaces/0"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"metrics": {"port": 70000}}, "/metrics/port"),
        ({"metrics": {"serviceMonitor": {"interval": "often"}}}, "interval"),
        ({"rbac": {"createClusterAdmin": True}}, "createClusterAdmin"),
    ],
)
def test_schema_rejects_bad_values(render: Render, values: dict[str, Any], complaint: str) -> None:
    helm = require_module("helm_python", "pip install helm-python-sdk")
    with pytest.raises(helm.HelmValuesError, match=complaint):
        render(values)


def test_schema_accepts_the_defaults_and_every_ci_file(chart: Any, ci_values: CiValues) -> None:
    chart.validate_schema({})
    for name in CI_FILES:
        chart.validate_schema(ci_values(name))
    assert CI_FILES, "charts/swivel/ci has no *-values.yaml"


def test_package_ships_the_chart_without_dev_files(tmp_path: Path) -> None:
    import tarfile

    helm = require_module("helm_python", "pip install helm-python-sdk")
    archive = helm.package(CHART, destination=tmp_path)
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert "swivel/values.schema.json" in names and "swivel/templates/deployment.yaml" in names
    assert "swivel/crds/swivel.dev_streamjobs.yaml" in names
    assert "swivel/argocd/health-streamjob.lua" in names
    assert not [n for n in names if n.startswith(("swivel/hack/", "swivel/ci/"))]


def test_the_operator_pod_takes_connections_on_its_probe_and_metrics_ports_only(
    render: Render,
) -> None:
    policy = only(render(), "NetworkPolicy")
    deployment = only(render(), "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["podSelector"]["matchLabels"] == selector
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert {p["port"] for p in rule["ports"]} == {8080, 9090}
    assert kinds(render({"networkPolicy": {"enabled": False}})).count("NetworkPolicy") == 0
