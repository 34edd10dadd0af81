"""The migration executor carries out the plan it is given, in the plan's (Chi's) hand-over
order, and refuses a plan whose placement is gone instead of planning again: a simulated
cluster (`FakeInternals`) with switches for the placement it finds and the executor ids
Spark registers."""

from __future__ import annotations

import threading
from typing import Any

from swivel.controllers.migration import MigrationPlan, plan_migration
from swivel.controllers.planning import plan_placement
from swivel.jobs.migration.actions import MigrationActions
from tests.unit.migration.test_executor import FakeInternals, drive, mover_with


class RecordingInternals(FakeInternals):
    """Records each re-pointing, in order; scales out with the ids `fresh_ids` names."""

    def __init__(self, bins: int, executors: tuple[str, ...] = ("0", "1"), **kw: Any) -> None:
        super().__init__(bins, executors)
        self.pointed: list[tuple[int, str]] = []
        self.fresh_ids: list[str] = list(kw.get("fresh_ids", ()))
        self.killed: list[str] = []

    def set_location(
        self, query: Any, partition: int, executor: str, host: str, stores: Any
    ) -> None:
        self.pointed.append((partition, executor))
        super().set_location(query, partition, executor, host, stores)

    def request_total_executors(self, total: int) -> None:
        while len(self.alive) < total and self.fresh_ids:
            self.alive.append(self.fresh_ids.pop(0))

    def wait_for_executors(self, total: int, timeout: float) -> list[str]:
        return list(self.alive)

    def kill_executors(self, ids: list[str]) -> None:
        self.killed += ids
        self.alive = [e for e in self.alive if e not in ids]


def spread_out(bins: int = 12) -> tuple[dict[int, str], dict[int, str]]:
    """Three givers with 4, 4, 4 bins; the fresh executor 3 takes one from each."""
    current = {b: str(b % 3) for b in range(bins)}
    return current, {**current, 0: "3", 1: "3", 2: "3"}


def test_the_executor_re_points_in_the_plans_hand_over_order() -> None:
    fake = RecordingInternals(12, ("0", "1", "2", "3"))
    fake.coordinator = spread_out()[0]
    mover = mover_with(fake, 12)
    mover.boundary(0)
    plan = plan_migration(*spread_out(), "batched", batch_size=2)
    migration = mover.submit(plan)
    drive(fake, mover, 0, 6)
    assert migration.phase == "Completed"
    planned = [(m.bin, m.target) for step in plan.steps for m in step.moves]
    assert fake.pointed == planned  # exactly the plan's order, nothing else
    report = migration.to_dict()["handOver"]
    assert [(h["step"], h["from"], h["to"], h["bins"]) for h in report] == [
        (i + 1, h.giver, h.taker, list(h.bins))
        for i, step in enumerate(plan.steps)
        for h in step.hand_overs
    ]
    assert [h["batch"] for h in report] == [2, 2, 3]  # re-pointed after batches 1 and 2
    assert all(h["landed"] == h["bins"] and h["elsewhere"] == [] for h in report)


def test_a_plan_for_a_placement_that_is_gone_is_refused_and_nothing_moves() -> None:
    fake = RecordingInternals(12, ("0", "1", "2", "3"))
    current, target = spread_out()
    fake.coordinator = {**current, 4: "2", 5: "0"}  # two bins moved since the plan was made
    mover = mover_with(fake, 12)
    reports: list[dict[str, Any]] = []
    mover.on_progress = reports.append
    mover.boundary(0)
    migration = mover.submit(plan_migration(current, target, "fluid"))
    drive(fake, mover, 0, 3)
    assert migration.done.is_set() and migration.phase == "Failed"
    assert "bin 4 on 2 (planned from 1)" in migration.message
    assert "bin 5 on 0 (planned from 2)" in migration.message
    assert fake.pointed == [] and fake.waits == []  # nothing re-pointed, wait untouched
    assert reports[-1]["phase"] == "Failed" and reports[-1]["handOver"] == []
    assert not mover.migrating


def test_a_resumed_plan_goes_on_after_the_steps_the_placement_reflects() -> None:
    fake = RecordingInternals(12, ("0", "1", "2", "3"))
    current, target = spread_out()
    plan = plan_migration(current, target, "fluid")
    fake.coordinator = plan.assignment_after(0)  # an earlier driver carried out step 1
    mover = mover_with(fake, 12)
    mover.boundary(0)
    migration = mover.submit(plan)
    drive(fake, mover, 0, 5)
    assert migration.phase == "Completed" and fake.coordinator == target
    assert fake.pointed == [(m.bin, m.target) for step in plan.steps[1:] for m in step.moves]
    batches = [h["batch"] for h in migration.to_dict()["handOver"]]
    assert batches == [None, 2, 3]  # step 1 by the earlier driver


def test_a_stale_action_fails_its_plan_with_the_reason() -> None:
    """Through the driver's action handler: the failure report carries the reason the
    Reconfiguration shows."""
    fake = RecordingInternals(12, ("0", "1", "2", "3"))
    current, target = spread_out()
    fake.coordinator = {**current, 7: "0"}
    mover = mover_with(fake, 12)
    mover.verify_timeout_s = 0.1
    mover.boundary(0)
    reports: list[dict[str, Any]] = []
    actions = MigrationActions(mover, reports.append)
    plan = plan_migration(current, target, "batched", batch_size=2)
    action = {"action": "move-bins", "planId": "p-1", "plan": plan.to_dict()}
    actions.handle(action)  # a thread: it waits for the boundary
    drive(fake, mover, 0, 1)
    mover.wait(mover.history[-1], 5)
    failed = reports[-1]
    assert failed["planId"] == "p-1" and failed["phase"] == "Failed"
    assert "bin 7 on 0 (planned from 1)" in failed["message"]
    assert fake.pointed == []


def test_an_action_without_a_plan_is_not_planned_by_the_driver() -> None:
    fake = RecordingInternals(4)
    mover = mover_with(fake, 4)
    reports: list[dict[str, Any]] = []
    MigrationActions(mover, reports.append).handle(
        {"action": "move-bins", "planId": "p-2", "moves": [{"bins": [0], "to": "1"}]},
        block=True,
    )
    assert reports[-1]["phase"] == "Failed" and "no migration plan" in reports[-1]["message"]
    assert mover.history == [] and fake.pointed == []


def test_a_scale_out_names_the_new_executor_as_spark_registered_it() -> None:
    """The planner expects id 2 (max + 1); Spark never reuses ids and registers 5: the
    plan's steps and order stay, with the new executor named 5."""
    fake = RecordingInternals(8, ("0", "1"), fresh_ids=["5"])
    mover = mover_with(fake, 8)
    mover.boundary(0)
    plan, _ = plan_placement(fake.coordinator, executors=3, strategy="fluid")
    assert set(plan.after.values()) == {"0", "1", "2"}
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(mover.rescale(plan, 3)))
    worker.start()
    batch = 0
    while worker.is_alive() and batch < 20:
        batch = drive(fake, mover, batch, 1)
        worker.join(0.05)
    (migration,) = done
    assert migration.phase == "Completed" and "registered as ['5']" in migration.message
    assert [b for b, _ in fake.pointed] == [m.bin for m in plan.moves]
    assert {e for _, e in fake.pointed} == {"5"}


def test_a_plan_survives_its_wire_form() -> None:
    plan = plan_migration(*spread_out(), "batched", batch_size=2, gap_batches=1)
    assert MigrationPlan.from_dict(plan.to_dict()) == plan
