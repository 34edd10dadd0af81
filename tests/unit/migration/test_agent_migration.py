"""The agent side of bin migration: a moves/rescale plan queues a driver action, the
driver's progress reports show in the plan, and only its `Completed` report completes it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from swivel.api.manifests import load_streamjob
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.intake import PlanRejected
from swivel.jobs.agent.store import StateStore
from swivel.operator.reconciling import from_agent_plan
from tests.fakes_migration import placement_loads, round_robin

JOB = load_streamjob(
    Path(__file__).resolve().parents[3] / "examples/fraud-detection/streamjob.yaml"
)


def moves_body() -> dict[str, Any]:
    return {
        "name": "move",
        "spec": {
            "jobRef": {"name": JOB.name},
            "moves": [{"bins": [1, 3], "to": "1"}],
            "migration": {"strategy": "fluid"},
        },
    }


def make_hub(tmp_path: Path, migrations: bool, placement: dict[int, str] | None = None) -> Hub:
    """A hub whose driver reported `placement` (round-robin by default) in its loads."""
    hub = Hub(JOB.spec, JOB.name, store=StateStore(tmp_path), migrations=migrations)
    if migrations:
        hub.record_loads(placement_loads(placement or round_robin()))
    return hub


async def _next_action(hub: Hub) -> dict[str, Any] | None:
    return await hub.next_driver_action(0, 0)


def test_moves_are_refused_without_a_migrating_driver(tmp_path: Path) -> None:
    async def scenario() -> None:
        with pytest.raises(PlanRejected) as raised:
            make_hub(tmp_path, migrations=False).submit(moves_body())
        assert raised.value.status == 422

    asyncio.run(scenario())


def test_a_moves_plan_completes_on_the_drivers_report(tmp_path: Path) -> None:
    async def scenario() -> None:
        hub = make_hub(tmp_path, migrations=True)
        record = hub.submit(moves_body())
        action = await _next_action(hub)
        assert action is not None
        assert action["action"] == "move-bins" and action["planId"] == record.id
        assert action["moves"] == [{"bins": [1, 3], "to": "1"}]
        # ... and the plan made from the reported placement, the one the status shows
        assert action["plan"] == record.plan["migration"]
        assert action["plan"]["initial"] == [str(b % 2) for b in range(16)]
        hub.check_plan()
        assert hub.plan(record.id).phase.value == "Applying"  # not before the driver says so
        hand_over = [{"step": 1, "from": "0", "to": "1", "bins": [1], "batch": 8,
                      "landed": [1], "elsewhere": []}]  # fmt: skip
        report = {"planId": record.id, "phase": "Running", "binsMoved": 1, "binsTotal": 2,
                  "step": 1, "steps": 2, "handOver": hand_over}  # fmt: skip
        hub.record_migration(report)
        document = hub.plan_document(hub.plan(record.id))
        assert document["progress"]["binsMoved"] == 1 and document["progress"]["steps"] == 2
        assert document["progress"]["handOver"] == [
            {"step": 1, "from": "0", "to": "1", "bins": [1], "binCount": 1, "batch": 8,
             "landed": 1, "elsewhere": []}
        ]  # fmt: skip
        assert document["phase"] == "Applying"
        hub.record_migration({**report, "phase": "Completed", "binsMoved": 2, "step": 2})
        done = hub.plan(record.id)
        assert done.phase.value == "Completed" and hub.active_plan is None
        assert hub.plan_document(done)["progress"]["binsMoved"] == 2
        # ... and the Reconfiguration's status shows the executed order (operator side)
        status = from_agent_plan(hub.plan_document(done)).updates["progress"]
        assert [(h.step, h.from_, h.to, h.bins, h.batch) for h in status.hand_over] == [
            (1, "0", "1", [1], 8)
        ]

    asyncio.run(scenario())


def test_a_stale_plan_fails_the_reconfiguration_with_the_drivers_reason(tmp_path: Path) -> None:
    async def scenario() -> None:
        hub = make_hub(tmp_path, migrations=True)
        record = hub.submit(moves_body())
        reason = "the placement changed since the plan was made: bin 3 on 0 (planned from 1)"
        hub.record_migration({"planId": record.id, "phase": "Failed", "message": reason})
        decision = from_agent_plan(hub.plan_document(hub.plan(record.id)))
        assert decision.phase.value == "Failed" and decision.message == reason

    asyncio.run(scenario())


def test_a_failed_migration_fails_the_plan(tmp_path: Path) -> None:
    async def scenario() -> None:
        hub = make_hub(tmp_path, migrations=True)
        body = moves_body()
        body["spec"] = {"jobRef": {"name": JOB.name}, "rescale": {"executors": 3}}
        record = hub.submit(body)
        action = await _next_action(hub)
        assert action is not None and action["action"] == "request-executors"
        hub.record_migration({"planId": record.id, "phase": "Failed", "message": "no capacity"})
        failed = hub.plan(record.id)
        assert failed.phase.value == "Failed" and failed.message == "no capacity"

    asyncio.run(scenario())


def test_a_migration_waits_for_the_drivers_placement(tmp_path: Path) -> None:
    """The agent plans a migration from the placement the driver reported: none yet (or
    none since bins last moved) is a 409 the operator retries, and nothing is queued."""

    async def scenario() -> None:
        hub = Hub(JOB.spec, JOB.name, store=StateStore(tmp_path), migrations=True)
        with pytest.raises(PlanRejected) as raised:
            hub.submit(moves_body())
        assert raised.value.status == 409
        assert "placement" in str(raised.value)
        assert await _next_action(hub) is None
        placement = {b: "1" if b < 8 else "0" for b in range(16)}
        hub.record_loads(placement_loads(placement))
        record = hub.submit(moves_body())  # bins 1 and 3 are on 1 already: nothing moves
        assert record.plan["migration"]["initial"] == [placement[b] for b in range(16)]
        assert record.plan["migration"]["movedBins"] == []

    asyncio.run(scenario())
