"""Exactly-once driver actions: the agent marks an action done when its outcome arrives
(durably) and never hands a done action out again, so a restarted driver polling from
seq 0 gets only what is left to carry out (docs/control-protocol.md, "Driver channel")."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from swivel.api.manifests import load_streamjob
from swivel.jobs.agent.driver_actions import KEPT_ACTIONS
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.store import StateStore
from tests.fakes_migration import placement_loads, round_robin

JOB = load_streamjob(
    Path(__file__).resolve().parents[3] / "examples/fraud-detection/streamjob.yaml"
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def hub(tmp_path: Path, clock: Clock, **options: Any) -> Hub:
    options.setdefault("migrations", True)
    return Hub(JOB.spec, JOB.name, store=StateStore(tmp_path), clock=clock, **options)


def submit(agent: Hub, name: str, **spec: Any) -> str:
    if spec.get("moves") or spec.get("rescale"):  # the driver's placement, planned from
        agent.record_loads(placement_loads(round_robin()))
    body = {"name": name, "spec": {"jobRef": {"name": JOB.name}, **spec}}
    return agent.submit(body).id


def moves(agent: Hub, name: str = "move", bins: tuple[int, ...] = (1, 3)) -> str:
    return submit(agent, name, moves=[{"bins": list(bins), "to": "1"}])


def handed_out(agent: Hub, since: int = 0) -> list[dict[str, Any]]:
    """Everything a follower polling from `since` receives, in order."""

    async def drain() -> list[dict[str, Any]]:
        got, seq = [], since
        while (action := await agent.next_driver_action(seq, 0)) is not None:
            got.append(action)
            seq = int(action["seq"])
        return got

    return asyncio.run(drain())


def test_a_completed_migration_is_never_handed_out_again(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    plan = moves(agent)
    [action] = handed_out(agent)
    assert action["action"] == "move-bins" and action["planId"] == plan
    assert "doneAt" not in action  # the agent's mark never goes on the wire
    clock.now += 1
    agent.record_migration({"planId": plan, "phase": "Running", "binsMoved": 1, "binsTotal": 2})
    assert [a["seq"] for a in handed_out(agent)] == [action["seq"]]  # not done yet
    agent.record_migration({"planId": plan, "phase": "Completed", "binsMoved": 2, "binsTotal": 2})
    assert agent.plan(plan).phase.value == "Completed"  # type: ignore[union-attr]
    assert handed_out(agent) == []  # a restarted driver (since=0) does not move them again
    assert handed_out(hub(tmp_path, clock)) == []  # durable: an agent restart too


def test_a_failed_migration_is_done_too(tmp_path: Path) -> None:
    agent = hub(tmp_path, Clock())
    plan = moves(agent)
    agent.record_migration({"planId": plan, "phase": "Failed", "message": "executor 1 lost"})
    assert agent.plan(plan).phase.value == "Failed"  # type: ignore[union-attr]
    assert handed_out(agent) == []


def test_the_action_of_a_plan_still_applying_is_handed_out_once_per_follower(
    tmp_path: Path,
) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    first = moves(agent, "first")
    agent.record_migration({"planId": first, "phase": "Completed", "binsMoved": 2})
    clock.now += 5
    second = moves(agent, "second", bins=(2,))
    agent.record_migration({"planId": second, "phase": "Running", "binsMoved": 0, "step": 1})
    # The driver dies mid-plan; the agent restarts as well (same state dir).
    restarted = hub(tmp_path, clock)
    [again] = handed_out(restarted)  # the new driver's follower, from seq 0
    assert again["planId"] == second and again["moves"] == [{"bins": [2], "to": "1"}]
    assert handed_out(restarted, since=int(again["seq"])) == []  # once: its cursor moved on
    restarted.record_migration({"planId": second, "phase": "Completed", "binsMoved": 1})
    assert handed_out(restarted) == []


def test_a_plan_that_times_out_takes_its_actions_with_it(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock, plan_timeout_s=60)
    moves(agent)
    clock.now += 61
    agent.tick()
    assert agent.active_plan is None
    assert handed_out(agent) == []


def test_a_confirmed_coordination_is_done(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    plan = submit(agent, "aimd", coordination={"intervalSeconds": 30.0})
    assert [a["action"] for a in handed_out(agent)] == ["set-coordination"]
    agent.record_coordination({"planId": plan, "intervalSeconds": 30.0})
    assert handed_out(agent) == []
    assert handed_out(hub(tmp_path, clock)) == []


def test_a_restart_reported_done_is_not_replayed(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    update = [{"operator": "customer-detector", "params": {"model": "cheap"}}]
    plan = submit(agent, "swap", scheduler="restart", functionUpdates=update)
    [restart] = handed_out(agent)
    assert restart == {"seq": 1, "action": "restart", "configVersion": 2}
    assert agent.action_done(int(restart["seq"])) is True
    assert agent.action_done(999) is False  # not kept: nothing to mark
    assert handed_out(agent) == []
    assert handed_out(hub(tmp_path, clock)) == []  # durable
    assert agent.plan(plan).phase.value == "Applying"  # type: ignore[union-attr]


def test_a_finished_restart_plan_takes_its_restart_with_it(tmp_path: Path) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock, plan_timeout_s=60)
    update = [{"operator": "customer-detector", "params": {"model": "cheap"}}]
    submit(agent, "swap", scheduler="restart", functionUpdates=update)
    clock.now += 61
    agent.tick()  # failed: timed out
    assert handed_out(agent) == []


def test_old_done_actions_are_trimmed_but_pending_ones_kept(tmp_path: Path) -> None:
    agent = hub(tmp_path, Clock())
    plan = moves(agent)
    for index in range(KEPT_ACTIONS + 5):
        agent._actions.add({"action": "kill-executors", "executors": [str(index)]})
        agent.action_done(int(agent._state.actions[-1]["seq"]))
    kept = agent._state.actions
    assert len(kept) == KEPT_ACTIONS + 1
    assert [a["planId"] for a in handed_out(agent)] == [plan]  # the oldest, still pending


def test_a_state_from_before_done_marks_keeps_only_the_active_plans_action(
    tmp_path: Path,
) -> None:
    clock = Clock()
    agent = hub(tmp_path, clock)
    first = moves(agent, "first")
    agent.record_migration({"planId": first, "phase": "Completed", "binsMoved": 2})
    second = moves(agent, "second", bins=(2,))
    for action in agent._state.actions:  # what an older agent saved: no marks at all
        action.pop("doneAt", None)
    agent._save()
    assert [a["planId"] for a in handed_out(hub(tmp_path, clock))] == [second]
