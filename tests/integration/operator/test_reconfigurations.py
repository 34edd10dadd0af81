"""Reconfiguration lifecycle under the real kopf runtime on the sandbox, fake agents."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from datetime import UTC, datetime
from typing import Any

from swivel.operator.agents import JobAddress
from tests.integration.operator.conftest import Harness
from tests.polling import wait_for


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _recon(h: Harness, name: str, **spec: Any) -> dict[str, Any]:
    body = h.example("reconfiguration.yaml")
    body["metadata"] = {"name": name}
    body["spec"].update(spec)
    return h.create("reconfigurations", body)


def test_a_reconfiguration_is_planned_applied_and_completed(harness: Harness) -> None:
    h = harness
    h.link.completion_polls = 2
    # What the agent reports, chosen here (not the fake's defaults): the status must carry
    # these values through, and the job's live generation is the agent's version.
    h.link.delay_ms, h.link.workers = 37.25, 5
    h.link.config_versions["fraud-detection"] = 40
    h.link.now = lambda: "2031-02-03T04:05:06.5Z"
    h.job()
    _recon(h, "swap-model")
    done = h.wait_phase("reconfigurations", "swap-model", "Completed")
    status = done["status"]
    assert status["plan"]["kind"] == "live-control"
    assert status["plan"]["components"][0]["heads"] == ["customer-detector"]
    assert status["delayMs"] == 37.25
    assert (status["progress"]["workersSwitched"], status["progress"]["workersTotal"]) == (5, 5)
    agent_instant = datetime(2031, 2, 3, 4, 5, 6, 500_000, tzinfo=UTC)
    for instant in ("acceptedAt", "firstSwitchAt", "completedAt"):
        assert _instant(status["timings"][instant]) == agent_instant, instant
    assert _instant(status["timings"]["requestedAt"]) != agent_instant  # the object's creation
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Succeeded"]["status"] == "True"
    assert conditions["Failed"]["status"] == "False"
    assert done["metadata"]["annotations"]["swivel.dev/agent-plan-id"].startswith(
        "fraud-detection/"
    )
    # The agent's plan id is in status too (the annotation orders it before the status).
    assert status["agentPlanId"] == done["metadata"]["annotations"]["swivel.dev/agent-plan-id"]
    assert [name for _, name, _ in h.link.submissions] == ["swap-model"]
    job = wait_for(
        lambda: (
            (j := h.get("streamjobs", "fraud-detection"))
            and "lastReconfiguration" in j.get("status", {})
            and j
        ),
        5,
        "lastReconfiguration on the job",
    )
    # Labelled with its job (written with the plan id: one metadata patch), for `kubectl -l`.
    assert done["metadata"]["labels"]["swivel.dev/job"] == "fraud-detection"
    assert job["status"]["lastReconfiguration"]["name"] == "swap-model"
    assert job["status"]["lastReconfiguration"]["kind"] == "live-control"
    assert job["status"]["liveGeneration"] == 41  # the agent's version after the plan (40 + 1)


def test_an_invalid_reconfiguration_fails_naming_the_field_and_touches_nothing(
    harness: Harness,
) -> None:
    h = harness
    h.job()
    _recon(h, "bad", functionUpdates=[{"operator": "no-such-operator", "params": {}}])
    failed = h.wait_phase("reconfigurations", "bad", "Failed")
    condition = {c["type"]: c for c in failed["status"]["conditions"]}["Failed"]
    assert condition["status"] == "True"
    assert condition["reason"] == "InvalidReconfiguration"
    assert "spec.functionUpdates[0].operator" in condition["message"]
    assert h.link.submissions == []


def test_a_reconfiguration_for_a_missing_job_waits_visibly_then_runs(harness: Harness) -> None:
    h = harness
    _recon(h, "early")
    waiting = h.await_reason("reconfigurations", "early", "Succeeded", "JobNotFound")
    assert waiting["status"] == "Unknown"
    assert h.phase("reconfigurations", "early") == "Pending"
    h.job()
    h.wait_phase("reconfigurations", "early", "Completed")


def test_a_second_reconfiguration_queues_until_the_first_completes(harness: Harness) -> None:
    h = harness
    h.link.completion_polls = 10_000
    h.job()
    _recon(h, "first")
    h.wait_phase("reconfigurations", "first", "Applying")
    _recon(h, "second", functionUpdates=[{"operator": "combine", "params": {"rule": "any"}}])
    queued = h.wait_phase("reconfigurations", "second", "Queued")
    assert "first" in queued["status"]["message"]
    assert [name for _, name, _ in h.link.submissions] == ["first"]
    h.link.finish_all()
    h.wait_phase("reconfigurations", "first", "Completed")
    h.link.finish_all()
    wait_for(lambda: len(h.link.submissions) == 2, 10, "second submitted")
    h.link.finish_all()
    h.wait_phase("reconfigurations", "second", "Completed")
    assert [name for _, name, _ in h.link.submissions] == ["first", "second"]


def test_a_burst_for_one_job_goes_one_at_a_time_in_order_without_asking_the_agent_twice(
    harness: Harness,
) -> None:
    """Queueing reads the job's siblings from kopf's index, not from a listing: objects
    created back to back still go one at a time, oldest first (same second: by name), and
    none is sent while another runs (the agent is never asked to refuse one with 409)."""
    h = harness
    h.link.completion_polls = 2
    h.job()
    names = [f"burst-{i}" for i in range(4)]
    for i, name in enumerate(names):
        _recon(h, name, functionUpdates=[{"operator": "combine", "params": {"round": i}}])
    for name in names:
        h.wait_phase("reconfigurations", name, "Completed", timeout=15)
    assert [name for _, name, _ in h.link.submissions] == names
    assert [call for call, _ in h.link.calls if call == "submit"] == ["submit"] * len(names)


def test_an_operator_restart_mid_applying_resumes_without_a_second_submit(
    harness: Harness,
) -> None:
    h = harness
    h.link.completion_polls = 10_000
    h.job()
    _recon(h, "swap-model")
    applying = h.wait_phase("reconfigurations", "swap-model", "Applying")
    assert applying["status"]["agentPlanId"] == h.link.plans_of("fraud-detection")[0].id
    h.restart()
    polls = len([c for c in h.link.calls if c[0] == "get_plan"])
    wait_for(
        lambda: len([c for c in h.link.calls if c[0] == "get_plan"]) > polls + 2,
        10,
        "the restarted operator follows the plan",
    )
    h.link.finish_all()
    h.wait_phase("reconfigurations", "swap-model", "Completed")
    assert len(h.link.submissions) == 1


def test_an_unreachable_agent_keeps_the_plan_and_retries(harness: Harness) -> None:
    h = harness
    h.link.unreachable.add("fraud-detection")
    h.job()
    _recon(h, "swap-model")
    waiting = wait_for(
        lambda: (
            (c := h.condition("reconfigurations", "swap-model", "Succeeded"))
            and c["reason"] == "AgentUnreachable"
            and c
        ),
        10,
        "AgentUnreachable",
    )
    assert waiting["status"] == "Unknown"
    assert h.phase("reconfigurations", "swap-model") == "Planned"
    h.link.unreachable.clear()
    h.wait_phase("reconfigurations", "swap-model", "Completed")
    assert len(h.link.submissions) == 1


def test_an_agent_rejection_fails_with_its_fields(harness: Harness) -> None:
    h = harness
    h.link.reject = 422
    h.link.reject_errors = [{"field": "spec.rescale", "reason": "not supported by this agent"}]
    h.job()
    _recon(h, "rescale", functionUpdates=[], rescale={"executors": 4})
    failed = h.wait_phase("reconfigurations", "rescale", "Failed")
    assert "spec.rescale: not supported" in failed["status"]["message"]


def test_deleting_the_job_mid_applying_fails_the_reconfiguration_cleanly(harness: Harness) -> None:
    h = harness
    h.link.completion_polls = 10_000
    h.job()
    _recon(h, "swap-model")
    h.wait_phase("reconfigurations", "swap-model", "Applying")
    h.delete("streamjobs", "fraud-detection")
    failed = h.wait_phase("reconfigurations", "swap-model", "Failed")
    assert failed["status"]["conditions"][-1]["reason"] == "JobDeleted"


def test_a_plan_accepted_and_finished_during_an_operator_crash_is_not_applied_twice(
    harness: Harness,
) -> None:
    """The window before the plan id is recorded: the agent accepted the plan (and it even
    finished) but the operator died before writing the annotation. The resubmission carries
    the same idempotency key (namespace/name/uid), so the agent hands back that plan."""
    h = harness
    h.link.unreachable.add("*")
    h.job()
    created = _recon(h, "swap-model")
    h.wait_phase("reconfigurations", "swap-model", "Planned")
    h.stop()
    # What the crashed operator had sent just before dying (then the plan completed).
    key = f"{h.namespace}/swap-model/{created['metadata']['uid']}"
    address = JobAddress(h.namespace, "fraud-detection", "token")
    h.link.unreachable.clear()
    accepted = asyncio.run(h.link.submit(address, "swap-model", created["spec"], key=key))
    h.link.finish_all()
    asyncio.run(h.link.get_plan(address, accepted["id"]))
    h.start()
    done = h.wait_phase("reconfigurations", "swap-model", "Completed")
    assert len(h.link.submissions) == 1  # applied once
    assert done["status"]["agentPlanId"] == accepted["id"]


def test_the_job_is_no_longer_reconfiguring_as_soon_as_its_plan_completes(
    harness: Harness,
) -> None:
    """Issue 5 review: the job's phase and `Reconfiguring` condition follow the result at
    once (not at the next 10 s health tick), and its metadata.generation stays 1."""
    h = harness
    h.link.config_versions["fraud-detection"] = 6  # the agent's version, unlike the spec's 1
    h.job()
    h.run_driver()
    h.wait_phase("streamjobs", "fraud-detection", "Running")
    h.stop()
    h.start(health=300.0)  # one health run at start, then none during the test
    time.sleep(0.5)
    # What the last health tick wrote while the plan was applying.
    job = h.get("streamjobs", "fraud-detection") or {}
    conditions = [c for c in job["status"]["conditions"] if c["type"] != "Reconfiguring"]
    applying = {"type": "Reconfiguring", "status": "True", "reason": "Applying",
                "message": "swap-model (Applying)",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
    h.custom.patch_namespaced_custom_object_status(
        "swivel.dev", "v1alpha1", h.namespace, "streamjobs", "fraud-detection",
        {"status": {"phase": "Reconfiguring", "conditions": [*conditions, applying]}},
    )  # fmt: skip
    _recon(h, "swap-model")
    h.wait_phase("reconfigurations", "swap-model", "Completed")
    job = h.wait_phase("streamjobs", "fraud-detection", "Running", timeout=3)
    reconfiguring = h.condition("streamjobs", "fraud-detection", "Reconfiguring") or {}
    assert (reconfiguring.get("status"), reconfiguring.get("reason")) == ("False", "Idle")
    assert job["status"]["lastReconfiguration"]["name"] == "swap-model"
    assert job["status"]["liveGeneration"] == 7  # the agent's configuration version (6 + 1)...
    assert job["metadata"]["generation"] == 1  # ...not the spec's: nothing edited it


def _requests(h: Harness) -> collections.Counter[str]:
    """The sandbox's API request counts by `client verb resource` (since it started)."""
    url = h.api.configuration.host + "/sandbox/requests"
    response = h.api.rest_client.pool_manager.request("GET", url)
    return collections.Counter(json.loads(response.data))


def _finalizers(h: Harness, name: str) -> list[str]:
    metadata = (h.get("reconfigurations", name) or {}).get("metadata") or {}
    return list(metadata.get("finalizers") or [])


def test_a_reconfiguration_costs_the_operator_no_kopf_writes(harness: Harness) -> None:
    """The job's kopf daemon follows its Reconfigurations: kopf keeps nothing on them (no
    finalizer, no annotations); the operator's own writes are the plan-id annotation and
    the status writes (Applying, progress, Completed). The counts are in docs/operator.md."""
    h = harness
    h.link.completion_polls = 1  # the happy path: the plan completes at the first poll
    h.job()
    _recon(h, "warm-up")  # counted apart: it waits for the job's agent token Secret
    h.wait_phase("reconfigurations", "warm-up", "Completed")
    rounds = 3
    before = _requests(h)
    for i in range(rounds):
        name = f"swap-{i}"
        _recon(h, name, functionUpdates=[{"operator": "combine", "params": {"round": i}}])
        done = h.wait_phase("reconfigurations", name, "Completed")
        assert set(done["metadata"].get("annotations") or {}) == {"swivel.dev/agent-plan-id"}
        assert _finalizers(h, name) == []
    used = _requests(h) - before
    writes = {
        key: count / rounds
        for key, count in used.items()
        if key.split(" ")[1] in ("create", "patch", "update", "delete")
        and key.split(" ")[2].startswith("reconfigurations")
    }
    events = used["kopf create events"] / rounds
    print(f"writes on Reconfigurations per Reconfiguration: {writes}; Events: {events}")
    assert "kopf patch reconfigurations" not in writes
    assert writes.get("OpenAPI-Generator patch reconfigurations") == 1  # plan id and label
    # Applying, progress (the fake's first poll: 1 of 2 workers switched), Completed.
    assert writes.get("OpenAPI-Generator patch reconfigurations/status") == 3
    h.delete("reconfigurations", "swap-0")
    wait_for(lambda: h.get("reconfigurations", "swap-0") is None, 5, "a finished one goes at once")


def test_a_deleted_reconfiguration_goes_at_once_and_is_followed_no_more(
    harness: Harness,
) -> None:
    h = harness
    h.link.completion_polls = 10_000
    h.job()
    _recon(h, "swap-model")
    h.wait_phase("reconfigurations", "swap-model", "Applying")
    assert _finalizers(h, "swap-model") == []  # the job's daemon follows it: kopf adds none
    h.delete("reconfigurations", "swap-model")
    wait_for(lambda: h.get("reconfigurations", "swap-model") is None, 5, "deleted")
    time.sleep(0.6)  # its follow task ends at its next step, which finds it gone
    _assert_followed_no_more(h)


def test_a_stopped_operator_leaves_no_follower_running(harness: Harness) -> None:
    h = harness
    h.link.completion_polls = 10_000
    h.job()
    _recon(h, "swap-model")
    h.wait_phase("reconfigurations", "swap-model", "Applying")
    h.stop()
    _assert_followed_no_more(h)


def _assert_followed_no_more(h: Harness) -> None:
    """No plan is read over five follow intervals."""
    polls = len([c for c in h.link.calls if c[0] == "get_plan"])
    time.sleep(1.0)
    assert len([c for c in h.link.calls if c[0] == "get_plan"]) == polls
