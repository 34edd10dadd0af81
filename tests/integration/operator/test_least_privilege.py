"""Least privilege, measured: the real operator (kopf and its `KubernetesCluster`) runs a job
through its life on the sandbox, the sandbox counts every API request by client, verb and
resource, and every (resource, verb) the operator used must be granted by the chart's Role
(rendered by real Helm); the rights the chart grants beyond what was used are exactly the
documented ones. The image policy refuses a job visibly, before anything is created.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from swivel.operator.clusters import KubernetesCluster
from swivel.operator.contexts import Intervals, OperatorContext
from tests.fakes_agent import TestingAgentLink
from tests.integration.operator.conftest import ROOT, Harness, OperatorThread
from tests.integration.sandboxing import sandbox_client
from tests.polling import wait_for
from tests.prerequisites import require_module

AUDITED = "swivel-operator-audit"  # the User-Agent of the operator's own client here
OPERATOR_CLIENTS = ("kopf", AUDITED)
# Granted without being called: the driver Role's pod rights the operator must hold to grant
# them (escalation prevention), the finalizers update the API server's
# OwnerReferencesPermissionEnforcement asks for (it is not a request), kopf's CRD
# discovery (a cluster-scoped watch it opens only for CRD changes), and the checkpoint
# claim's create and delete (the example writes to a memory sink, which cannot resume from a
# checkpoint, so it gets no claim: restarts.uses_checkpoint_claim).
UNUSED_BY_DESIGN = {
    ("pods", "list"),
    ("pods", "watch"),
    ("pods", "deletecollection"),
    ("streamjobs/finalizers", "update"),
    ("customresourcedefinitions", "get"),
    ("customresourcedefinitions", "list"),
    ("customresourcedefinitions", "watch"),
    ("persistentvolumeclaims", "create"),
    ("persistentvolumeclaims", "delete"),
}


# Tried by kopf and refused by the chart on purpose: in namespaced mode kopf lists and watches
# namespaces to find those matching its patterns and, on 403, logs a warning and uses the
# exact names it was given (kopf's namespace_observer), which is all `swivel operator` gives.
TRIED_AND_REFUSED = {("namespaces", "list"), ("namespaces", "watch")}


def _chart_rights() -> set[tuple[str, str]]:
    helm = require_module("helm_python", "pip install helm-python-sdk")
    with helm.Chart.load(ROOT / "charts" / "swivel") as chart:
        manifests: dict[str, str] = chart.render(
            None, name="swivel", namespace="swivel-system", is_install=True
        )
    rights: set[tuple[str, str]] = set()
    for path, text in manifests.items():
        if path.endswith("NOTES.txt"):
            continue
        for obj in yaml.safe_load_all(text):
            if obj and obj["kind"] in ("Role", "ClusterRole"):
                for rule in obj["rules"]:
                    rights |= {(r, v) for r in rule["resources"] for v in rule["verbs"]}
    return rights


def _requests(h: Harness) -> dict[str, int]:
    response = h.api.rest_client.pool_manager.request(
        "GET", h.api.configuration.host + "/sandbox/requests"
    )
    counts: dict[str, int] = json.loads(response.data)
    return counts


def _used(before: dict[str, int], after: dict[str, int]) -> set[tuple[str, str]]:
    used = set()
    for key, count in after.items():
        who, verb, resource = key.split(" ")
        if who in OPERATOR_CLIENTS and count > before.get(key, 0):
            used.add((resource, verb))
    return used


@pytest.fixture
def audited(harness: Harness) -> Iterator[Harness]:
    """The harness's operator, restarted with its own client named AUDITED."""
    harness.stop()
    api = sandbox_client(harness.server, token="sandbox")
    api.user_agent = AUDITED
    ctx = OperatorContext(
        cluster=KubernetesCluster(api),
        agents=harness.link,
        intervals=Intervals(health=0.2, reconfiguration=0.2, policies=0.2),
    )
    harness.operator = OperatorThread(ctx, harness.namespace, harness.server)
    try:
        yield harness
    finally:
        harness.stop()
        api.close()


def _secret(h: Harness, name: str) -> Any:
    try:
        return h.core.read_namespaced_secret(name, h.namespace)
    except client.ApiException as error:
        if error.status == 404:
            return None
        raise


def test_the_operator_calls_only_what_the_chart_grants(audited: Harness) -> None:
    h = audited
    assert isinstance(h.link, TestingAgentLink)
    before = _requests(h)
    h.job()
    h.run_driver()
    wait_for(lambda: h.condition("streamjobs", "fraud-detection", "Ready"), 10, "Ready")
    # A live edit (a Reconfiguration is created and applied), then a restart-class edit (the
    # driver pod is replaced, every other child patched), then deletion.
    body = h.get("streamjobs", "fraud-detection") or {}
    operators = body["spec"]["dataflow"]["operators"]
    operators[2]["params"] = {"model": "cheap", "threshold": 0.8}
    h.patch("streamjobs", "fraud-detection", {"spec": {"dataflow": {"operators": operators}}})
    h.wait_phase("reconfigurations", "fraud-detection-g2", "Completed", timeout=15)
    h.patch("streamjobs", "fraud-detection", {"spec": {"source": {"rowsPerSecond": 7}}})
    wait_for(lambda: _restart_handled(h), 15, "the restart-class edit handled")
    secret = "fraud-detection-agent-token"
    assert _secret(h, secret) is not None
    h.delete("streamjobs", "fraud-detection")
    wait_for(lambda: h.get("streamjobs", "fraud-detection") is None, 10, "job gone")
    # The operator may not delete Secrets: the garbage collector takes it with its owner.
    wait_for(lambda: _secret(h, secret) is None, 10, "the Secret collected")
    used = _used(before, _requests(h))
    granted = _chart_rights()

    assert {verb for resource, verb in used if resource == "secrets"} <= {"get", "create"}
    assert used - granted - TRIED_AND_REFUSED == set(), f"not granted: {sorted(used - granted)}"
    assert not TRIED_AND_REFUSED & granted
    assert granted - used - UNUSED_BY_DESIGN == {
        # read by name only when kopf's index does not hold the object yet (operator/
        # reconfigurations.py: a job or Reconfiguration not seen on the watch stream)
        ("streamjobs", "get"),
        ("reconfigurations", "get"),
    }, f"granted but never used: {sorted(granted - used - UNUSED_BY_DESIGN)}"


def _restart_handled(h: Harness) -> bool:
    """The children were re-applied: the driver replaced, or (the example writes to a memory
    sink, which cannot resume) the replacement refused after the other children's patches."""
    status = (h.get("streamjobs", "fraud-detection") or {}).get("status") or {}
    return status.get("phase") == "Restarting" or "restart refused" in str(status.get("message"))


def test_a_refused_image_fails_the_job_visibly_and_creates_nothing(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = harness
    monkeypatch.setenv("SWIVEL_ALLOWED_IMAGES", "registry.example.com")
    h.job()
    # The phase and the message may land in two status writes (a timer can write Failed
    # first): wait for the message itself.
    failed = wait_for(
        lambda: (
            (j := h.get("streamjobs", "fraud-detection"))
            and (j.get("status") or {}).get("phase") == "Failed"
            and (j["status"].get("message") or "").startswith("spec.image: ")
            and j
        ),
        10,
        "phase Failed with spec.image in status.message",
    )
    message = failed["status"]["message"]
    assert message.startswith("spec.image: 'ghcr.io/swivel-dev/swivel:"), message
    assert "not from an allowed repository (registry.example.com" in message

    def refused_event() -> Any:
        events = h.core.list_namespaced_event(h.namespace).items
        return next((e for e in events if e.reason == "ImageRefused"), None)

    event = wait_for(refused_event, 5, "an ImageRefused Event")
    assert event.type == "Warning"
    ready = wait_for(lambda: h.condition("streamjobs", "fraud-detection", "Ready"), 5)
    assert ready["status"] == "False" and "spec.image" in ready["message"]
    assert h._pod("fraud-detection-driver") is None
    assert _secret(h, "fraud-detection-agent-token") is None
    # An allowed image (the edit is the fix) runs.
    monkeypatch.setenv("SWIVEL_ALLOWED_IMAGES", "registry.example.com,ghcr.io/swivel-dev")
    h.patch("streamjobs", "fraud-detection", {"spec": {"image": "ghcr.io/swivel-dev/swivel:0.2"}})
    wait_for(lambda: h._pod("fraud-detection-driver"), 10, "the driver pod")


def test_a_spark_setting_that_mounts_a_secret_fails_the_job_and_creates_nothing(
    harness: Harness,
) -> None:
    """The sparkConf denylist is part of the model, so the operator refuses such a job like
    any invalid spec: a Failed phase naming the key, a Warning Event, no child."""
    h = harness
    body = h.example("streamjob.yaml")
    body["metadata"] = {"name": "fraud-detection"}
    body["spec"]["sparkConf"] = {"spark.kubernetes.executor.secrets.db-password": "/etc/db"}
    h.create("streamjobs", body)
    # The phase and the message may land in two status writes (a timer can write Failed
    # first): wait for the message itself.
    failed = wait_for(
        lambda: (
            (j := h.get("streamjobs", "fraud-detection"))
            and (j.get("status") or {}).get("phase") == "Failed"
            and (j["status"].get("message") or "").startswith("spec.sparkConf")
            and j
        ),
        10,
        "phase Failed with spec.sparkConf in status.message",
    )
    message = failed["status"]["message"]
    assert message.startswith(
        "spec.sparkConf[spark.kubernetes.executor.secrets.db-password]: not allowed: it mounts"
    ), message

    def invalid_event() -> Any:
        events = h.core.list_namespaced_event(h.namespace).items
        return next((e for e in events if e.reason == "InvalidSpec"), None)

    assert wait_for(invalid_event, 5, "an InvalidSpec Event").type == "Warning"
    assert h._pod("fraud-detection-driver") is None
    assert _secret(h, "fraud-detection-agent-token") is None
