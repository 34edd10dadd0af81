"""The operator on a real cluster, end to end, in the order a user meets it.

Install the chart (its own release, namespaced RBAC: the least-privilege rules are exercised
for real), run the fraud-detection example, reconfigure it live, rescale it, kill the operator
while a migration is in flight and see it resume, check that a Reconfiguration for a missing
job waits visibly, that the API server rejects bad manifests, and that deleting the job
collects every child. The tests share one release and one job and run in file order; each
later step needs the earlier ones (a failure early makes later ones fail fast on the same
cause). Skipped unless SWIVEL_E2E_KUBECONFIG is set (e2e/conftest.py).

The image must be on the nodes or pullable: `e2e/kind-up.sh --no-install` builds and loads
it into kind. SWIVEL_E2E_IMAGE selects it (default: the tag StreamJobs use by default).
"""

from __future__ import annotations

import copy
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "swivel"
EXAMPLES = ROOT / "examples" / "fraud-detection"
GROUP, VERSION = "swivel.dev", "v1alpha1"
JOB_LABEL = f"{GROUP}/job"
TIMEOUT = float(os.environ.get("SWIVEL_E2E_TIMEOUT", "600"))
T = TypeVar("T")

pytestmark = pytest.mark.timeout(int(TIMEOUT) * 2)


@dataclass
class Cluster:
    core: Any
    apps: Any
    rbac: Any
    custom: Any
    system: str  # the release's namespace
    jobs: str  # the namespace the operator watches
    release: str
    job: str = "fraud-detection"
    driver_uid: str = ""

    def get(self, plural: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
            GROUP, VERSION, self.jobs, plural, name
        )
        return obj

    def create(self, plural: str, body: dict[str, Any], dry_run: str | None = None) -> None:
        kwargs = {"dry_run": dry_run} if dry_run else {}
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, self.jobs, plural, body, **kwargs
        )

    def children(self, job: str) -> dict[str, list[str]]:
        selector = f"{JOB_LABEL}={job}"
        found = {
            "pods": self.core.list_namespaced_pod(self.jobs, label_selector=selector),
            "services": self.core.list_namespaced_service(self.jobs, label_selector=selector),
            "configmaps": self.core.list_namespaced_config_map(self.jobs, label_selector=selector),
            "secrets": self.core.list_namespaced_secret(self.jobs, label_selector=selector),
            "serviceaccounts": self.core.list_namespaced_service_account(
                self.jobs, label_selector=selector
            ),
            "roles": self.rbac.list_namespaced_role(self.jobs, label_selector=selector),
            "rolebindings": self.rbac.list_namespaced_role_binding(
                self.jobs, label_selector=selector
            ),
        }
        return {kind: [o.metadata.name for o in listed.items] for kind, listed in found.items()}

    def pods(self, component: str) -> list[Any]:
        selector = f"{JOB_LABEL}={self.job},app.kubernetes.io/component={component}"
        listed = self.core.list_namespaced_pod(self.jobs, label_selector=selector)
        return [p for p in listed.items if p.metadata.deletion_timestamp is None]

    def operator_pods(self) -> list[Any]:
        selector = f"app.kubernetes.io/instance={self.release},app.kubernetes.io/component=operator"
        return list(self.core.list_namespaced_pod(self.system, label_selector=selector).items)


def eventually(probe: Callable[[], T | None], what: str, timeout: float = TIMEOUT) -> T:
    """Poll until `probe` returns something truthy; fail with `what` and the last value."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(1)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            found: dict[str, Any] = cond
            return found
    return None


def is_true(obj: dict[str, Any], kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond["status"] == "True"


def example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))
    return loaded


def when(
    cluster: Cluster, plural: str, name: str, predicate: Callable[[dict[str, Any]], bool]
) -> Callable[[], dict[str, Any] | None]:
    """A probe for `eventually`: the object, once `predicate` holds for it."""

    def probe() -> dict[str, Any] | None:
        obj = cluster.get(plural, name)
        return obj if predicate(obj) else None

    return probe


def wait_reconfiguration(cluster: Cluster, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        obj = cluster.get("reconfigurations", name)
        assert obj.get("status", {}).get("phase") != "Failed", obj.get("status")
        return obj if is_true(obj, "Succeeded") else None

    reconf = eventually(done, f"reconfiguration {name} to succeed")
    assert reconf["status"]["phase"] == "Completed"
    assert reconf["status"]["observedGeneration"] == reconf["metadata"]["generation"]
    return reconf


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    helm = pytest.importorskip("helm_python", reason="pip install helm-python-sdk")
    from kubernetes import client, config

    kubeconfig = os.environ["SWIVEL_E2E_KUBECONFIG"]
    load_kube_config: Any = config.load_kube_config  # untyped in the kubernetes stubs
    load_kube_config(config_file=kubeconfig)
    suffix = secrets.token_hex(3)
    # Unique names: cluster-scoped objects (the CRD discovery ClusterRole) are named after
    # the release, so two runs, or a release installed by kind-up.sh, never collide.
    release = system = f"swivel-e2e-{suffix}"
    jobs = f"swivel-e2e-jobs-{suffix}"
    core = client.CoreV1Api()
    for namespace in (system, jobs):
        meta = client.V1ObjectMeta(name=namespace, labels={"swivel.dev/e2e": "true"})
        core.create_namespace(client.V1Namespace(metadata=meta))
    image = os.environ.get("SWIVEL_E2E_IMAGE", "")
    repository, _, tag = image.rpartition(":") if image else ("ghcr.io/swivel-dev/swivel", "", "")
    values = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
        "watch": {"clusterWide": False, "namespaces": [jobs]},
    }
    with helm.Config(kubeconfig_path=kubeconfig, namespace=system) as helm_config:
        helm_config.install(CHART, release, values, namespace=system, wait="watcher", timeout=300)
        try:
            yield Cluster(
                core=core,
                apps=client.AppsV1Api(),
                rbac=client.RbacAuthorizationV1Api(),
                custom=client.CustomObjectsApi(),
                system=system,
                jobs=jobs,
                release=release,
            )
        finally:
            # Jobs first, while the operator still runs to remove its finalizers.
            custom: Any = client.CustomObjectsApi()
            for plural in ("reconfigurations", "streamjobs"):
                custom.delete_collection_namespaced_custom_object(GROUP, VERSION, jobs, plural)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and any(
                custom.list_namespaced_custom_object(GROUP, VERSION, jobs, plural)["items"]
                for plural in ("reconfigurations", "streamjobs")
            ):
                time.sleep(2)
            helm_config.uninstall(release, wait="watcher", timeout=300, ignore_not_found=True)
            for namespace in (jobs, system):
                core.delete_namespace(namespace)


def test_chart_installs_and_the_operator_runs_non_root(cluster: Cluster) -> None:
    deployment = cluster.apps.read_namespaced_deployment(cluster.release, cluster.system)
    assert deployment.spec.strategy.type == "Recreate" and deployment.spec.replicas == 1
    eventually(
        lambda: (
            cluster.apps.read_namespaced_deployment_status(
                cluster.release, cluster.system
            ).status.available_replicas
        ),
        "the operator Deployment to be available",
    )
    (pod,) = cluster.operator_pods()
    assert pod.spec.security_context.run_as_non_root is True
    # The liveness probe (kopf's /healthz) has been passing: no restarts after a minute.
    time.sleep(60)
    (pod,) = cluster.operator_pods()
    assert all(s.restart_count == 0 and s.ready for s in pod.status.container_statuses)
    crds = {c.metadata.name for c in _extensions().list_custom_resource_definition().items}
    assert {"streamjobs.swivel.dev", "reconfigurations.swivel.dev"} <= crds


def _extensions() -> Any:
    from kubernetes import client

    return client.ApiextensionsV1Api()


def test_streamjob_becomes_ready_with_its_children(cluster: Cluster) -> None:
    body = example("streamjob.yaml")
    cluster.create("streamjobs", body)

    job = eventually(
        when(cluster, "streamjobs", cluster.job, lambda obj: is_true(obj, "Ready")),
        "the StreamJob to become Ready",
    )
    assert job["status"]["phase"] == "Running"
    assert job["status"]["observedGeneration"] == job["metadata"]["generation"]
    children = cluster.children(cluster.job)
    for kind in (
        "pods",
        "services",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "roles",
        "rolebindings",
    ):
        assert children[kind], f"no {kind} labelled {JOB_LABEL}={cluster.job}: {children}"
    (driver,) = cluster.pods("driver")
    owners = [(o.kind, o.name) for o in driver.metadata.owner_references]
    assert owners == [("StreamJob", cluster.job)]
    cluster.driver_uid = driver.metadata.uid
    eventually(
        lambda: len(cluster.pods("executor")) == body["spec"]["executor"]["instances"] or None,
        "the executors Spark starts from the pod template",
    )
    events = cluster.core.list_namespaced_event(
        cluster.jobs,
        field_selector=f"involvedObject.name={cluster.job},involvedObject.kind=StreamJob",
    )
    assert events.items, "no Kubernetes Events for the StreamJob's transitions"


def test_the_prewarm_helper_answers_on_every_executor(cluster: Cluster) -> None:
    """The image carries the helper jar: once the query committed a batch with state, the
    driver's check reaches the StreamJob as `PrewarmReady=True` (docs/operator.md)."""
    job = eventually(
        when(
            cluster,
            "streamjobs",
            cluster.job,
            lambda obj: (condition(obj, "PrewarmReady") or {}).get("status") in ("True", "False"),
        ),
        "the driver's prewarm check in the StreamJob's status",
    )
    prewarm = condition(job, "PrewarmReady")
    assert prewarm is not None and prewarm["status"] == "True", prewarm
    assert prewarm["reason"] == "HelperAnswered"


def test_live_reconfiguration_keeps_the_driver(cluster: Cluster) -> None:
    body = example("reconfiguration.yaml")
    cluster.create("reconfigurations", body)
    reconf = wait_reconfiguration(cluster, body["metadata"]["name"])
    assert reconf["status"].get("plan"), "the plan is written to status"

    job = cluster.get("streamjobs", cluster.job)
    assert job["status"]["lastReconfiguration"]["name"] == body["metadata"]["name"]
    assert is_true(job, "Ready")
    (driver,) = cluster.pods("driver")
    assert driver.metadata.uid == cluster.driver_uid, "a live change must not replace the driver"


def test_rescale_moves_bins_to_a_new_executor(cluster: Cluster) -> None:
    body = example("rescale.yaml")
    target = body["spec"]["rescale"]["executors"]
    cluster.create("reconfigurations", body)
    wait_reconfiguration(cluster, body["metadata"]["name"])

    job = eventually(
        when(
            cluster, "streamjobs", cluster.job, lambda obj: obj["status"].get("executors") == target
        ),
        f"status.executors == {target}",
    )
    bins = job["status"]["binsPerExecutor"]
    assert (
        len(bins) == target
        and sum(bins.values()) == example("streamjob.yaml")["spec"]["dataflow"]["bins"]
    )
    eventually(lambda: len(cluster.pods("executor")) == target or None, f"{target} executor pods")
    (driver,) = cluster.pods("driver")
    assert driver.metadata.uid == cluster.driver_uid


def test_operator_killed_mid_migration_resumes_it(cluster: Cluster) -> None:
    """Kill the operator while a slow migration is Applying; the new operator finishes it
    from status (no lost plan) without restarting anything."""
    body = copy.deepcopy(example("rescale.yaml"))
    body["metadata"]["name"] = "scale-in-slowly"
    body["spec"]["rescale"]["executors"] = 2
    body["spec"]["migration"] = {"strategy": "batched", "batchSize": 1, "gapBatches": 2}
    cluster.create("reconfigurations", body)

    def applying() -> dict[str, Any] | None:
        obj = cluster.get("reconfigurations", "scale-in-slowly")
        phase = obj.get("status", {}).get("phase")
        assert phase != "Completed", "finished before the operator could be killed mid-flow"
        return obj if phase == "Applying" else None

    eventually(applying, "the migration to be Applying")
    (old,) = cluster.operator_pods()
    cluster.core.delete_namespaced_pod(old.metadata.name, cluster.system, grace_period_seconds=0)
    eventually(
        lambda: [
            p
            for p in cluster.operator_pods()
            if p.metadata.uid != old.metadata.uid
            and p.status.container_statuses
            and all(s.ready for s in p.status.container_statuses)
        ],
        "a new operator pod",
    )
    reconf = wait_reconfiguration(cluster, "scale-in-slowly")
    progress = reconf["status"].get("progress") or {}
    assert progress.get("step") == progress.get("steps"), progress
    job = cluster.get("streamjobs", cluster.job)
    assert job["status"]["executors"] == 2 and is_true(job, "Ready")
    (driver,) = cluster.pods("driver")
    assert driver.metadata.uid == cluster.driver_uid


def test_reconfiguration_of_a_missing_job_waits_visibly(cluster: Cluster) -> None:
    body = copy.deepcopy(example("reconfiguration.yaml"))
    body["metadata"]["name"] = "for-a-missing-job"
    body["spec"]["jobRef"]["name"] = "no-such-job"
    cluster.create("reconfigurations", body)
    reconf = eventually(
        when(
            cluster,
            "reconfigurations",
            "for-a-missing-job",
            lambda obj: bool(obj.get("status", {}).get("conditions")),
        ),
        "a condition on the orphan reconfiguration",
        timeout=120,
    )
    assert reconf["status"]["phase"] in ("Pending", "Queued"), reconf["status"]
    assert "no-such-job" in str(reconf["status"]), "the condition should name the missing job"


@pytest.mark.parametrize(
    ("plural", "mutate", "field"),
    [
        ("streamjobs", lambda b: b["spec"]["dataflow"].update(bins=48), "bins"),
        ("streamjobs", lambda b: b["spec"]["executor"].update(instances=0), "instances"),
        ("streamjobs", lambda b: b["spec"]["source"].update(kind="carrier-pigeon"), "kind"),
        ("reconfigurations", lambda b: b["spec"].pop("jobRef"), "jobRef"),
    ],
)
def test_bad_manifests_are_rejected_by_the_api_server(
    cluster: Cluster, plural: str, mutate: Callable[[dict[str, Any]], Any], field: str
) -> None:
    from kubernetes import client

    body = example("streamjob.yaml" if plural == "streamjobs" else "reconfiguration.yaml")
    body["metadata"]["name"] = "rejected"
    mutate(body)
    with pytest.raises(client.ApiException) as caught:
        cluster.create(plural, body, dry_run="All")
    assert caught.value.status == 422 and field in str(caught.value.body)


def test_deleting_the_job_collects_every_child(cluster: Cluster) -> None:
    cluster.custom.delete_namespaced_custom_object(
        GROUP, VERSION, cluster.jobs, "streamjobs", cluster.job
    )

    def gone() -> bool:
        from kubernetes import client

        try:
            cluster.get("streamjobs", cluster.job)
        except client.ApiException as error:
            return bool(error.status == 404)
        return False

    eventually(gone, "the StreamJob to be deleted (finalizers released)")
    eventually(
        lambda: not any(cluster.children(cluster.job).values()) or None,
        "every child (driver, executors, service, configmaps, secret, RBAC) to be collected",
    )
