"""Chi's hand-over order carried out on the real 2-executor cluster (see conftest): the
agent plans a swap once from the placement the driver measured, the executor re-points the
bins in the planned order (Spark's task lists verify where each ran), and the driver's
report reaches the Reconfiguration's status as the executed order."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from swivel.api.manifests import load_streamjob
from swivel.controllers.assignments import bins_by_executor
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.store import StateStore
from swivel.jobs.migration.actions import MigrationActions
from swivel.jobs.migration.driver import MigrationDriver
from swivel.operator.phases import Phase
from swivel.operator.reconciling import from_agent_plan

from .conftest import BINS
from .test_migration import running

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

FRAUD = load_streamjob(
    Path(__file__).resolve().parents[3] / "examples/fraud-detection/streamjob.yaml"
)
JOB = FRAUD.spec.model_copy(
    update={"dataflow": FRAUD.spec.dataflow.model_copy(update={"bins": BINS})}
)


def test_a_swap_is_carried_out_in_the_planned_hand_over_order(
    cluster_spark: Any, tmp_path: Path
) -> None:
    with running(cluster_spark, tmp_path, files=12) as (workload, mover):
        # The driver measures its loads: each bin's executor is the placement it reports.
        driver = MigrationDriver(cluster_spark, BINS, lambda: workload.query, mover=mover)
        loads = driver.measure_loads()
        assert loads is not None
        owned = bins_by_executor({b["bin"]: b["executor"] for b in loads["bins"]})
        x, y = sorted(owned)
        moves = [{"bins": owned[x][:2], "to": y}, {"bins": owned[y][:1], "to": x}]
        body = {"name": "swap", "spec": {"jobRef": {"name": FRAUD.name}, "moves": moves,
                "migration": {"strategy": "batched", "batchSize": 1}}}  # fmt: skip
        reports: list[dict[str, Any]] = []

        async def scenario() -> dict[str, Any]:
            hub = Hub(JOB, FRAUD.name, store=StateStore(tmp_path / "agent"), migrations=True)
            hub.record_loads(loads)
            record = hub.submit(body)  # planned here, once
            action = await hub.next_driver_action(0, 0)
            assert action is not None and action["plan"] == record.plan["migration"]
            actions = MigrationActions(mover, reports.append)
            await asyncio.to_thread(actions.handle, action, block=True)
            for report in reports:  # what the driver posts, in order
                hub.record_migration(report)
            return {"plan": record.plan, "document": hub.plan_document(hub.plan(record.id))}

        outcome = asyncio.run(scenario())

    planned = [
        (index + 1, h["from"], h["to"], h["bins"])
        for index, step in enumerate(outcome["plan"]["migration"]["steps"])
        for h in step.get("handOver", ())
    ]
    # The swap's bins (up to 2 + 1: a side may own only one), one bin per step, in the
    # planner's order (least-loaded taker first, which depends on the measured placement;
    # the alternation itself is unit-tested in tests/unit/controllers/test_handover.py).
    wanted = [(x, y)] * len(moves[0]["bins"]) + [(y, x)] * len(moves[1]["bins"])
    assert [(step, len(bins)) for step, _, _, bins in planned] == [
        (index + 1, 1) for index in range(len(wanted))
    ]
    directions = [(giver, taker) for _, giver, taker, _ in planned]
    assert sorted(directions) == sorted(wanted)
    final = reports[-1]
    assert final["phase"] == "Completed", final
    executed = final["handOver"]
    assert [(h["step"], h["from"], h["to"], h["bins"]) for h in executed] == planned
    batches = [h["batch"] for h in executed]
    assert batches == sorted(batches) and len(set(batches)) == len(wanted)  # one per step
    migration = mover.history[-1]
    for hand_over in executed:
        assert hand_over["landed"] == hand_over["bins"] and hand_over["elsewhere"] == []
        for bin_id in hand_over["bins"]:  # Spark's task list: it ran on the taker
            assert migration.outcomes[bin_id].served_by == hand_over["to"]
            assert migration.outcomes[bin_id].verified_in_batch >= hand_over["batch"]

    # The agent's document, as the operator turns it into the Reconfiguration's status.
    decision = from_agent_plan(outcome["document"])
    assert decision.phase is Phase.COMPLETED
    shown = decision.updates["progress"].model_dump(mode="json", by_alias=True)
    assert shown["handOvers"] == len(wanted)
    assert [(h["step"], h["from"], h["to"], h["bins"], h["batch"], h["landed"])
            for h in shown["handOver"]] == [
        (h["step"], h["from"], h["to"], h["bins"], h["batch"], len(h["bins"])) for h in executed
    ]  # fmt: skip
