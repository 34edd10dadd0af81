"""Pure decisions: the lifecycle table, admission/queueing, edit classification, policies."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from swivel.api.base import Disruption
from swivel.api.manifests import load_streamjob
from swivel.api.phases import FINAL_PHASES, IllegalTransitionError
from swivel.api.reconfiguration import ReconfigurationStatus
from swivel.api.streamjob import StreamJob
from swivel.operator.agents import Loads
from swivel.operator.classifying import classify
from swivel.operator.naming import Owner
from swivel.operator.phases import Phase, Reason, transition
from swivel.operator.policy_decisions import automatic_reconfiguration, decide_rebalance, moves_of
from swivel.operator.reconciling import (
    Decision,
    Sibling,
    admit,
    apply_decision,
    from_agent_plan,
    plan_fields,
)

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def job() -> StreamJob:
    return load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")


@pytest.mark.parametrize("final", [p for p in Phase if p in FINAL_PHASES])
def test_final_phases_have_no_way_out(final: Phase) -> None:
    for target in Phase:
        with pytest.raises(IllegalTransitionError):
            transition(final, target)


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        (Phase.PENDING, Phase.PLANNED, True),
        (Phase.QUEUED, Phase.PLANNED, True),
        (Phase.PLANNED, Phase.APPLYING, True),
        (Phase.APPLYING, Phase.COMPLETED, True),
        (Phase.PENDING, Phase.APPLYING, True),  # admitted and accepted in one status write
        (Phase.QUEUED, Phase.APPLYING, True),
        (Phase.PENDING, Phase.COMPLETED, False),
        (Phase.APPLYING, Phase.QUEUED, False),
        (Phase.APPLYING, Phase.PLANNED, False),
    ],
)
def test_transitions(current: Phase, target: Phase, allowed: bool) -> None:
    if allowed:
        assert transition(current, target) is target
    else:
        with pytest.raises(IllegalTransitionError):
            transition(current, target)


def _s(name: str, phase: Phase, created: str = "2026-01-01T00:00:00Z") -> Sibling:
    return Sibling(name, phase, created)


@pytest.mark.parametrize(
    ("siblings", "found", "problems", "phase", "reason"),
    [
        ([], False, [], Phase.PENDING, Reason.JOB_NOT_FOUND),
        ([], True, ["spec.x: bad"], Phase.FAILED, Reason.INVALID),
        ([_s("other", Phase.APPLYING)], True, [], Phase.QUEUED, Reason.QUEUED),
        ([_s("a-older", Phase.QUEUED)], True, [], Phase.QUEUED, Reason.QUEUED),
        (
            [_s("z-later", Phase.PENDING, "2026-01-02T00:00:00Z")],
            True,
            [],
            Phase.PLANNED,
            Reason.PLANNED,
        ),
        ([_s("done", Phase.COMPLETED)], True, [], Phase.PLANNED, Reason.PLANNED),
    ],
)
def test_admission(
    siblings: list[Sibling], found: bool, problems: list[str], phase: Phase, reason: Reason
) -> None:
    me = _s("me", Phase.PENDING)
    decision = admit(me, [me, *siblings], found, problems)
    assert (decision.phase, decision.reason) == (phase, reason)


def test_a_completed_plan_sets_conditions_timings_and_progress() -> None:
    status = ReconfigurationStatus(phase=Phase.APPLYING)
    document = {
        "phase": "Completed",
        "delayMs": 3.0,
        "progress": {"workersSwitched": 4, "workersTotal": 4},
        "timings": {"acceptedAt": "2026-01-01T00:00:00Z", "lastSwitchAt": "2026-01-01T00:00:01Z"},
    }
    after = apply_decision(status, from_agent_plan(document), now=NOW, generation=1)
    conditions = {c.type: c for c in after.conditions}
    assert after.phase is Phase.COMPLETED
    assert conditions["Succeeded"].status == "True" and conditions["Failed"].status == "False"
    assert after.progress is not None and after.progress.workers_switched == 4
    assert after.timings is not None and after.timings.completed_at == NOW
    with pytest.raises(IllegalTransitionError):
        apply_decision(after, Decision(Phase.APPLYING, Reason.APPLYING, ""), now=NOW, generation=1)


def test_timings_the_status_does_not_have_are_left_out() -> None:
    """The agent's plan document grew `propagatedAt`; copying it into the status failed
    every Completed write (the plan stayed Applying for ever)."""
    status = ReconfigurationStatus(phase=Phase.APPLYING)
    document = {
        "phase": "Completed",
        "timings": {
            "requestedAt": "2026-01-01T00:00:00Z",
            "acceptedAt": "2026-01-01T00:00:00Z",
            "lastSwitchAt": "2026-01-01T00:00:01Z",
            "propagatedAt": "2026-01-01T00:00:01Z",
            "somethingNew": "2026-01-01T00:00:02Z",
        },
    }
    after = apply_decision(status, from_agent_plan(document), now=NOW, generation=1)
    assert after.phase is Phase.COMPLETED
    assert after.timings is not None and after.timings.last_switch_at is not None


def _edited(job: StreamJob, **changes: object) -> StreamJob:
    manifest = job.to_manifest()
    for path, value in changes.items():
        target = manifest["spec"]
        parts = path.split("__")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        target[parts[-1]] = value
    return StreamJob.model_validate(manifest)


@pytest.mark.parametrize(
    ("changes", "disruption", "has_updates", "rescale"),
    [
        (
            {"dataflow__operators__2__params": {"model": "cheap"}},
            Disruption.LIVE_CONTROL,
            True,
            None,
        ),
        ({"executor__instances": 4}, Disruption.LIVE_MIGRATION, False, 4),
        ({"source__rowsPerSecond": 5}, Disruption.RESTART, False, None),
        ({"policies": {"rebalance": {"enabled": True}}}, Disruption.NONE, False, None),
    ],
)
def test_edits_map_to_the_least_disruptive_action(
    job: StreamJob,
    changes: dict[str, object],
    disruption: Disruption,
    has_updates: bool,
    rescale: int | None,
) -> None:
    plan = classify(job.spec, _edited(job, **changes).spec, "fraud-detection")
    assert plan.disruption is disruption
    recon = plan.reconfiguration
    if disruption in (Disruption.LIVE_CONTROL, Disruption.LIVE_MIGRATION):
        assert recon is not None
        assert bool(recon.function_updates) == has_updates
        assert (recon.rescale.executors if recon.rescale else None) == rescale
    else:
        assert recon is None


def test_an_imbalanced_round_becomes_an_automatic_reconfiguration(job: StreamJob) -> None:
    assignment = {b: str(b % 2) for b in range(16)}
    loads = Loads(
        executors=(
            {"executor": "0", "busySeconds": 9.0, "windowSeconds": 10.0},
            {"executor": "1", "busySeconds": 1.0, "windowSeconds": 10.0},
        ),
        bins=tuple(
            {"bin": b, "executor": assignment[b], "records": 1000 if b % 2 == 0 else 10}
            for b in range(16)
        ),
        assignment=assignment,
    )
    decision = decide_rebalance(job, loads)
    assert decision.moved
    owner = Owner("fraud-detection", "streams", "uid-1")
    recon = automatic_reconfiguration(owner, "rebalance", moves_of(decision), NOW)
    assert recon["metadata"]["labels"]["swivel.dev/automatic"] == "true"
    assert recon["metadata"]["labels"]["swivel.dev/policy"] == "rebalance"
    assert recon["spec"]["moves"][0]["to"] == "1"


def test_status_shows_the_agents_plan_and_the_drivers_bins() -> None:
    """The operator never plans: status.plan is the plan the agent made and runs, and the
    bins moved are the driver's migration report as the agent relays it in its progress."""
    agent_plan = {"kind": "migration", "components": [], "migration": {"moves": [[3, "0", "1"]]}}
    document = {
        "phase": "Applying",
        "plan": agent_plan,
        "progress": {
            "workersSwitched": 0,
            "workersTotal": 0,
            "binsMoved": 1,
            "binsTotal": 2,
            "step": 1,
            "steps": 2,
        },
    }
    assert plan_fields(document) == {"plan": agent_plan, "kind": "migration"}
    assert plan_fields({"phase": "Applying"}) == {}
    status = apply_decision(
        ReconfigurationStatus(phase=Phase.APPLYING),
        Decision(
            Phase.APPLYING,
            Reason.APPLYING,
            "",
            {**plan_fields(document), **from_agent_plan(document).updates},
        ),
        now=NOW,
        generation=1,
    )
    assert status.plan == agent_plan and status.kind == "migration"
    assert status.progress is not None
    assert (status.progress.bins_moved, status.progress.bins_total) == (1, 2)
    assert (status.progress.step, status.progress.steps) == (1, 2)
