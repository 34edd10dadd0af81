"""StreamJob handlers under the real kopf runtime on the sandbox."""

from __future__ import annotations

import json
from typing import Any

from swivel.protocol.bodies import PrewarmCheck
from tests.integration.operator.conftest import Harness
from tests.polling import wait_for

CHILDREN = [
    ("v1", "pods", "fraud-detection-driver"),
    ("v1", "services", "fraud-detection-driver"),
    ("v1", "configmaps", "fraud-detection-job"),
    ("v1", "configmaps", "fraud-detection-executor-template"),
    ("v1", "secrets", "fraud-detection-agent-token"),
    ("v1", "serviceaccounts", "fraud-detection-driver"),
    ("rbac.authorization.k8s.io/v1", "roles", "fraud-detection-driver"),
    ("rbac.authorization.k8s.io/v1", "rolebindings", "fraud-detection-driver"),
]


def _child(h: Harness, api_version: str, plural: str, name: str) -> Any:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    url = f"{base}/namespaces/{h.namespace}/{plural}/{name}"
    response = h.api.rest_client.pool_manager.request(
        "GET", h.api.configuration.host + url, headers={"Authorization": "Bearer sandbox"}
    )
    return json.loads(response.data) if response.status == 200 else None


def test_a_new_job_owns_its_children_and_is_ready_once_its_agent_is(harness: Harness) -> None:
    h = harness
    h.link.ready = False
    job = h.job()
    uid = job["metadata"]["uid"]
    for api_version, plural, name in CHILDREN:
        child = wait_for(lambda a=api_version, p=plural, n=name: _child(h, a, p, n), 10, name)
        assert child["metadata"]["ownerReferences"][0]["uid"] == uid
    pending = wait_for(lambda: h.condition("streamjobs", "fraud-detection", "Ready"), 5)
    assert (pending["status"], pending["reason"]) == ("False", "DriverPending")
    h.run_driver()
    wait_for(
        lambda: (
            (h.condition("streamjobs", "fraud-detection", "Ready") or {}).get("reason")
            == "DriverStarting"
        ),
        5,
        "DriverStarting while the agent is not ready",
    )
    h.link.ready = True
    ready = wait_for(
        lambda: (
            (c := h.condition("streamjobs", "fraud-detection", "Ready"))
            and c["status"] == "True"
            and c
        ),
        5,
        "Ready",
    )
    assert ready["reason"] == "Running"
    status = h.get("streamjobs", "fraud-detection")["status"]  # type: ignore[index]
    assert status["observedGeneration"] == 1
    assert status["executors"] == 2
    assert sum(status["binsPerExecutor"].values()) == 16


def test_the_drivers_prewarm_check_is_the_prewarm_ready_condition(harness: Harness) -> None:
    """The health timer shows the agent's `prewarmCheck` as `PrewarmReady`: Unknown before
    one, True once every executor answered, False naming an executor that did not."""
    h = harness
    h.job()
    h.run_driver()
    h.await_reason("streamjobs", "fraud-detection", "PrewarmReady", "NotChecked")
    h.link.prewarm_checks["fraud-detection"] = PrewarmCheck(
        executors={"1": "answered", "2": "answered"}
    )
    answered = h.await_reason("streamjobs", "fraud-detection", "PrewarmReady", "HelperAnswered")
    assert answered["status"] == "True"
    h.link.prewarm_checks["fraud-detection"] = PrewarmCheck(
        executors={"1": "answered", "2": "no helper endpoint registered"}
    )
    failed = h.await_reason("streamjobs", "fraud-detection", "PrewarmReady", "HelperUnanswered")
    assert failed["status"] == "False"
    assert "executor 2: no helper endpoint registered" in failed["message"]
    ready = h.condition("streamjobs", "fraud-detection", "Ready")
    assert ready is not None and ready["status"] == "True"  # prewarm is not readiness


def test_an_unreachable_agent_degrades_the_job(harness: Harness) -> None:
    h = harness
    h.job()
    h.run_driver()
    h.link.unreachable.add("fraud-detection")
    degraded = wait_for(
        lambda: (
            (c := h.condition("streamjobs", "fraud-detection", "Degraded"))
            and c["status"] == "True"
            and c
        ),
        5,
        "Degraded",
    )
    assert degraded["reason"] == "AgentUnreachable"


def test_deleting_a_job_collects_its_children_through_the_finalizer(harness: Harness) -> None:
    h = harness
    h.job()
    wait_for(lambda: _child(h, "v1", "pods", "fraud-detection-driver"), 10)
    assert (
        "swivel.dev/finalizer" in h.get("streamjobs", "fraud-detection")["metadata"]["finalizers"]
    )  # type: ignore[index]
    h.delete("streamjobs", "fraud-detection")
    wait_for(lambda: h.get("streamjobs", "fraud-detection") is None, 10, "job gone")
    for api_version, plural, name in CHILDREN:
        wait_for(
            lambda a=api_version, p=plural, n=name: _child(h, a, p, n) is None, 5, f"{name} gone"
        )


def test_a_params_edit_in_git_becomes_a_live_control_plan(harness: Harness) -> None:
    h = harness
    h.job()
    wait_for(lambda: h.phase("streamjobs", "fraud-detection"), 10)
    pod_uid = wait_for(lambda: _child(h, "v1", "pods", "fraud-detection-driver"), 10)["metadata"][
        "uid"
    ]
    body = h.get("streamjobs", "fraud-detection")
    operators = body["spec"]["dataflow"]["operators"]  # type: ignore[index]
    operators[2]["params"] = {"model": "cheap", "threshold": 0.8}
    h.patch("streamjobs", "fraud-detection", {"spec": {"dataflow": {"operators": operators}}})
    done = h.wait_phase("reconfigurations", "fraud-detection-g2", "Completed")
    assert done["metadata"]["labels"]["swivel.dev/automatic"] == "true"
    assert done["status"]["kind"] == "live-control"
    ((job, name, spec),) = h.link.submissions
    assert (job, name) == ("fraud-detection", "fraud-detection-g2")
    assert spec["functionUpdates"] == [
        {
            "operator": "customer-detector",
            "function": "swivel.jobs.examples.fraud:customer_model",
            "params": {"model": "cheap", "threshold": 0.8},
        }
    ]
    status = wait_for(
        lambda: (
            (status := (h.get("streamjobs", "fraud-detection") or {}).get("status") or {})
            and "lastReconfiguration" in status
            and "message" in status
            and status
        ),
        15,
        "the classification and the result on the job",
    )
    assert "live-control" in status["message"]
    assert status["lastReconfiguration"]["name"] == "fraud-detection-g2"
    pod = _child(h, "v1", "pods", "fraud-detection-driver")
    assert pod["metadata"]["uid"] == pod_uid  # a live edit never replaces the driver


def test_a_restart_class_edit_of_a_memory_sink_job_is_refused_visibly(harness: Harness) -> None:
    """A memory-sink query cannot resume from a checkpoint (Spark refuses), so a restart
    would start it over and lose its keyed state: the driver keeps running, and the
    status and a warning Event say why (`restarts.restart_refusal`)."""
    h = harness
    h.job()  # the example: a memory sink
    pod = wait_for(lambda: _child(h, "v1", "pods", "fraud-detection-driver"), 10)
    assert pod["metadata"]["annotations"]["swivel.dev/sink"] == "memory"
    h.patch("streamjobs", "fraud-detection", {"spec": {"image": "swivel:edited"}})
    status = wait_for(
        lambda: (
            (status := (h.get("streamjobs", "fraud-detection") or {}).get("status") or {})
            and "restart refused" in (status.get("message") or "")
            and status
        ),
        30,
        "the refusal in status.message",
    )
    assert "memory sink" in status["message"] and status["observedGeneration"] == 2
    wait_for(  # kopf posts its Events on their own, after the status patch
        lambda: any(
            e.reason == "RestartRefused" and e.type == "Warning"
            for e in h.core.list_namespaced_event(h.namespace).items
        ),
        30,
        "a RestartRefused warning Event",
    )
    kept = _child(h, "v1", "pods", "fraud-detection-driver")
    assert kept["metadata"]["uid"] == pod["metadata"]["uid"]  # never replaced
    assert not kept["metadata"].get("deletionTimestamp")


def test_ready_waits_for_every_driver_container_the_kubelet_reports(harness: Harness) -> None:
    """The agent can answer the operator before the kubelet's readiness probe has seen it:
    Ready must not run ahead of the pod's own containers (`kubectl get pod` 1/2)."""
    h = harness
    h.job()
    h.run_driver()

    def containers(agent_ready: bool) -> None:
        statuses = [
            {"name": name, "ready": ready, "restartCount": 0, "state": {"running": {}}}
            | {"image": "swivel:dev", "imageID": "swivel:dev"}
            for name, ready in (("spark", True), ("agent", agent_ready))
        ]
        h.core.patch_namespaced_pod_status(
            "fraud-detection-driver",
            h.namespace,
            {"status": {"phase": "Running", "containerStatuses": statuses}},
        )

    containers(agent_ready=False)
    waiting = h.await_reason("streamjobs", "fraud-detection", "Ready", "ContainersNotReady")
    assert waiting["status"] == "False" and "agent" in waiting["message"]
    containers(agent_ready=True)
    wait_for(
        lambda: (
            (h.condition("streamjobs", "fraud-detection", "Ready") or {}).get("status") == "True"
        ),
        10,
        "Ready once every container is",
    )
