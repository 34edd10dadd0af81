"""The operator stopped abruptly at random points while Reconfigurations run (issue 11 §5).

The real kopf operator runs on the sandbox with an in-memory agent (`TestingAgentLink`, which
survives the operator like a real agent does). For each of N Reconfigurations of one job it
is created, the operator runs for a random time (seeded: half the time under 0.1 s, while it
admits, plans and submits; else up to 0.8 s), is stopped abruptly and started again. Abruptly: kopf's `queueing.exit_timeout` is 0, so handlers still running
are cancelled at whatever `await` they are in (a write sent or not, an agent call answered or
not), with no time to finish. A Python thread cannot be SIGKILLed; a cancellation at an await
point is the closest in-process equivalent (nothing after it runs, finally-blocks aside).

Afterwards every Reconfiguration must be terminal exactly once and none half-applied:

- each ended Completed, and its phases, as seen on the watch stream, only ever moved forward
  (Pending/Queued -> Planned -> Applying -> Completed), reaching Completed once;
- the agent accepted exactly one plan per Reconfiguration, in creation order (a resubmission
  after a crash carried the same idempotency key and got the same plan back), and each
  Reconfiguration records that plan's id; every agent plan is Completed;
- the job records the last one (`lastReconfiguration`) and the agent's last configuration
  version (`liveGeneration` = the agent's starting version + N; the test picks the start):
  no completion was lost or recorded out of order.

`SWIVEL_CHAOS_SEED` picks the seed (default 11). The figures (kills by the phase they hit,
plans, submit calls) are printed (`-s`) and kept in docs/reliability.md. The 20-run version
is marked `slow` (`make test-slow`); a 6-run version with the same checks runs in `make test`.
"""

from __future__ import annotations

import collections
import os
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch

from swivel.api.phases import FINAL_PHASES
from swivel.operator import main, reconfigurations
from tests.integration.operator.conftest import Harness
from tests.polling import wait_for

ORDER = {"Pending": 0, "Queued": 0, "Planned": 1, "Applying": 2, "Completed": 3, "Failed": 3}
SEED = int(os.environ.get("SWIVEL_CHAOS_SEED", "11"))
AGENT_START_VERSION = 30  # where the fake agent's configuration version starts


class PhaseRecorder:
    """Every phase each Reconfiguration of a namespace shows on the watch stream, in order."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.phases: dict[str, list[str]] = collections.defaultdict(list)
        self._watch = watch.Watch()
        self._custom = client.CustomObjectsApi(api)
        self._namespace = namespace
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._follow()
        except Exception:  # the stream breaks when the test stops it or the sandbox closes
            if not self._stopping.is_set():
                raise

    def _follow(self) -> None:
        stream = self._watch.stream(
            self._custom.list_namespaced_custom_object,
            "swivel.dev",
            "v1alpha1",
            self._namespace,
            "reconfigurations",
            timeout_seconds=600,
        )
        for event in stream:
            obj = event["object"]
            phase = (obj.get("status") or {}).get("phase")
            seen = self.phases[obj["metadata"]["name"]]
            if phase and (not seen or seen[-1] != phase):
                seen.append(phase)

    def stop(self) -> None:
        self._stopping.set()
        self._watch.stop()
        self._thread.join(5)


@pytest.fixture
def abrupt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopping the operator cancels its running handlers and followers at once (no 2 s,
    resp. `CANCELLATION_BACKOFF_S`, to finish)."""
    real = main.settings
    # Followers between steps exit at once; one in a step is cancelled 0.1 s later.
    monkeypatch.setattr(reconfigurations, "CANCELLATION_BACKOFF_S", 0.1)

    def settings(**options: Any) -> Any:
        configured = real(**options)
        configured.queueing.exit_timeout = 0.0
        return configured

    monkeypatch.setattr(main, "settings", settings)


@pytest.fixture
def recorder(harness: Harness) -> Iterator[PhaseRecorder]:
    recording = PhaseRecorder(harness.api, harness.namespace)
    try:
        yield recording
    finally:
        recording.stop()


def _recon(h: Harness, name: str, round_: int) -> None:
    body = h.example("reconfiguration.yaml")
    body["metadata"] = {"name": name}
    body["spec"]["functionUpdates"] = [{"operator": "combine", "params": {"round": round_}}]
    h.create("reconfigurations", body)


def _in_flight(h: Harness, names: list[str]) -> str:
    """The phase of the oldest unfinished Reconfiguration (what a kill interrupts)."""
    for name in names:
        phase = h.phase("reconfigurations", name) or "Pending"
        if phase not in FINAL_PHASES:
            return phase
    return "idle"


def run_chaos(h: Harness, recorder: PhaseRecorder, runs: int) -> dict[str, Any]:
    rng = random.Random(SEED)
    started = time.monotonic()
    h.link.config_versions["fraud-detection"] = AGENT_START_VERSION
    h.job()
    names = [f"chaos-{i:02d}" for i in range(runs)]
    kills: collections.Counter[str] = collections.Counter()
    for i, name in enumerate(names):
        h.link.completion_polls = rng.choice((1, 2, 3))
        _recon(h, name, i)
        # Half the kills come within 0.1 s (admission, planning, the submit), half later.
        time.sleep(rng.uniform(0.0, 0.1) if rng.random() < 0.5 else rng.uniform(0.1, 0.8))
        kills[_in_flight(h, names[: i + 1])] += 1
        h.stop()  # abrupt: handlers are cancelled where they are
        h.start()
    for name in names:
        h.wait_phase("reconfigurations", name, "Completed", timeout=60)
    wait_for(lambda: all(recorder.phases[n][-1:] == ["Completed"] for n in names), 10)

    # Terminal exactly once, phases only forward.
    for name in names:
        seen = recorder.phases[name]
        assert seen[-1] == "Completed", (name, seen)
        assert sum(p in FINAL_PHASES for p in seen) == 1, (name, seen)
        assert [ORDER[p] for p in seen] == sorted(ORDER[p] for p in seen), (name, seen)

    # One plan per Reconfiguration at the agent, in order, each recorded and completed.
    assert [name for _, name, _ in h.link.submissions] == names
    plans = {p.name: p for p in h.link.plans_of("fraud-detection")}
    assert sorted(plans) == names
    for name in names:
        status = (h.get("reconfigurations", name) or {})["status"]
        assert status["agentPlanId"] == plans[name].id, name
        assert plans[name].document["phase"] == "Completed", name

    # The job recorded the last one and the agent's last configuration version.
    job_status = (h.get("streamjobs", "fraud-detection") or {})["status"]
    assert job_status["lastReconfiguration"]["name"] == names[-1]
    assert job_status["liveGeneration"] == AGENT_START_VERSION + runs

    figures = {
        "runs": runs,
        "seed": SEED,
        "kills by phase hit": dict(kills),
        "completed": sum(h.phase("reconfigurations", n) == "Completed" for n in names),
        "plans at the agent": len(plans),
        "submit calls": sum(1 for call, _ in h.link.calls if call == "submit"),
        "operator starts": runs + 1,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(f"operator chaos figures: {figures}")
    return figures


def test_operator_stopped_abruptly_during_6_reconfigurations(
    harness: Harness, recorder: PhaseRecorder, abrupt: None
) -> None:
    run_chaos(harness, recorder, runs=6)


@pytest.mark.slow
def test_operator_stopped_abruptly_during_20_reconfigurations(
    harness: Harness, recorder: PhaseRecorder, abrupt: None
) -> None:
    run_chaos(harness, recorder, runs=20)
