"""The operator refuses user manifests it must not run, visibly and without a traceback
(issue 11 §1, §3): a function reference outside the allow-list, on a Reconfiguration or a
StreamJob, and a Reconfiguration that moves the same bin twice (which once crashed the
planner and stayed Planned). Real kopf on the sandbox API server, a testing agent link."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from swivel.api.functions import PREFIXES_ENV
from tests.integration.operator.conftest import Harness
from tests.polling import wait_for

TO_CSV = "swivel.jobs.examples.fraud:pd.DataFrame.to_csv"


def _events(h: Harness, reason: str) -> list[Any]:
    return [e for e in h.core.list_namespaced_event(h.namespace).items if e.reason == reason]


def _no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    logged = [r for r in caplog.records if r.exc_info and r.levelno >= logging.WARNING]
    assert logged == [], [r.getMessage() for r in logged]


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"function": TO_CSV}, "spec.functionUpdates[0].function"),
        (
            {"function": "swivel.jobs.examples.labels:time.sleep"},
            "spec.functionUpdates[0].function",
        ),
        ({"function": "swivel.jobs.testing.probes:counting"}, "spec.functionUpdates[0].function"),
        ({"stateTransform": "os:system"}, "spec.functionUpdates[0].stateTransform"),
    ],
)
def test_a_reconfiguration_naming_a_refused_function_fails_with_the_field(
    harness: Harness,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    update: dict[str, str],
    field: str,
) -> None:
    monkeypatch.delenv(PREFIXES_ENV, raising=False)  # the default list (the tests widen it)
    h = harness
    h.job()
    body = h.example("reconfiguration.yaml")
    body["metadata"] = {"name": "escape"}
    body["spec"]["functionUpdates"][0].update(update)
    h.create("reconfigurations", body)
    failed = h.wait_phase("reconfigurations", "escape", "Failed")
    condition = {c["type"]: c for c in failed["status"]["conditions"]}["Failed"]
    assert condition["status"] == "True"
    assert condition["reason"] == "InvalidReconfiguration"
    assert condition["message"].startswith(f"{field}: ")
    assert (
        "allowed: functions defined in modules under [swivel.jobs.examples]"
        in (condition["message"])
    )
    event = wait_for(lambda: _events(h, "InvalidReconfiguration"), 10, "a Warning Event")[0]
    assert event.type == "Warning" and event.message.startswith(f"{field}: ")
    assert h.link.submissions == []  # nothing reached the agent
    _no_tracebacks(caplog)


def test_a_streamjob_naming_a_refused_function_fails_with_the_field(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness
    body = h.example("streamjob.yaml")
    body["metadata"] = {"name": "escape-job"}
    body["spec"]["dataflow"]["operators"][4]["function"] = TO_CSV
    h.create("streamjobs", body)
    field = "spec.dataflow.operators[4].function"
    failed = wait_for(
        lambda: (
            (j := h.get("streamjobs", "escape-job"))
            and (j.get("status") or {}).get("phase") == "Failed"
            and (j["status"].get("message") or "").startswith(f"{field}: ")
            and j
        ),
        10,
        "phase Failed with the field in status.message",
    )
    assert TO_CSV in failed["status"]["message"]
    events = wait_for(
        lambda: [e for e in _events(h, "InvalidSpec") if TO_CSV in (e.message or "")],
        10,
        "an InvalidSpec Event naming the reference",
    )
    assert events[0].type == "Warning" and events[0].message.startswith(f"{field}: ")
    condition = wait_for(
        lambda: (
            (c := h.condition("streamjobs", "escape-job", "Ready"))
            and c.get("reason") == "InvalidSpec"
            and c
        ),
        15,
        "the Ready condition naming the field",
    )
    assert condition["status"] == "False" and condition["message"].startswith(f"{field}: ")
    pods = h.core.list_namespaced_pod(h.namespace).items
    assert [p.metadata.name for p in pods] == []  # no driver was started
    _no_tracebacks(caplog)


def test_moving_the_same_bin_twice_fails_as_a_field_error(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness
    h.job()
    body = h.example("reconfiguration.yaml")
    body["metadata"] = {"name": "twice"}
    body["spec"] = {
        "jobRef": {"name": "fraud-detection"},
        "moves": [{"bins": [3], "to": "1"}, {"bins": [3], "to": "0"}],
    }
    h.create("reconfigurations", body)
    failed = h.wait_phase("reconfigurations", "twice", "Failed")
    condition = {c["type"]: c for c in failed["status"]["conditions"]}["Failed"]
    assert condition["reason"] == "InvalidReconfiguration"
    assert condition["message"] == "spec.moves[1].bins[0]: bin 3 is moved twice (also moves[0])"
    assert h.link.submissions == []
    _no_tracebacks(caplog)
