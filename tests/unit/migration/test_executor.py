"""The migration executor's step/verify/retry logic against a simulated cluster: a fake
`SparkInternals` whose coordinator placement decides who runs each bin in the next batch."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from swivel.jobs.agent.driver_actions import driver_action
from swivel.jobs.migration.executor import BinMover
from swivel.jobs.spark_internals import (
    UnsupportedSparkError,
    check_version,
    executor_in_option,
    executor_of_location,
)
from swivel.jobs.spark_status import ExecutorInfo, TaskRun


class FakeQuery:
    runId = "run-1"  # noqa: N815 - Spark's attribute name
    lastProgress: dict[str, Any] | None = None  # noqa: N815 - no batch has reported yet


class NoSnapshotPhases:
    """The simulated query's stores snapshot in maintenance: no staggering pass runs."""

    def applies(self, query: Any) -> str | None:
        return "the simulated stores snapshot in maintenance"


class FakeInternals:
    def __init__(self, bins: int, executors: tuple[str, ...] = ("0", "1")) -> None:
        self.alive = list(executors)
        self.coordinator = {b: executors[b % len(executors)] for b in range(bins)}
        self.runs: dict[int, list[TaskRun]] = {}
        self.wait = "3s"
        self.waits: list[str] = []
        self.endpoint_registrations = threading.Event()  # attach sets up helper endpoints

    # -- what the mover calls
    def executors(self) -> list[ExecutorInfo]:
        return [ExecutorInfo(e, "127.0.0.1", True, 1, 0, 0, 0, None) for e in self.alive]

    def executor_ids(self) -> list[str]:
        return list(self.alive)

    def register_prewarm_endpoints(self) -> dict[str, str]:
        self.endpoint_registrations.set()
        return {e: "registered" for e in self.alive}

    def placement(self, query: Any, bins: int) -> dict[int, str | None]:
        return dict(self.coordinator)

    def state_stores(self, query: Any) -> list[tuple[int, str]]:
        return [(0, "default")]

    def set_location(
        self, query: Any, partition: int, executor: str, host: str, stores: Any
    ) -> None:
        self.coordinator[partition] = executor

    def locality_wait(self) -> str:
        return self.wait

    def set_locality_wait(self, value: str) -> None:
        self.wait = value
        self.waits.append(value)

    def batch_tasks_all(self, run_id: str, batch_id: int, partitions: int) -> list[TaskRun]:
        return self.runs.get(batch_id, [])

    def snapshot_phases(self) -> NoSnapshotPhases:
        return NoSnapshotPhases()

    # -- the simulated batch
    def run_batch(self, batch_id: int, elsewhere: dict[int, str] | None = None) -> None:
        """Every bin runs where the coordinator points (or `elsewhere`), and reports."""
        served = {**self.coordinator, **(elsewhere or {})}
        for b, e in served.items():
            if e not in self.alive:
                served[b] = self.alive[0]
        self.coordinator.update(served)  # executors re-report on task start
        self.runs[batch_id] = [
            TaskRun(1, b, e, "PROCESS_LOCAL", 10.0, "SUCCESS") for b, e in served.items()
        ]


def mover_with(fake: FakeInternals, bins: int) -> BinMover:
    mover = BinMover(None, bins, internals=fake, verify_async=False)  # type: ignore[arg-type]
    mover.attach(FakeQuery())
    return mover


def drive(fake: FakeInternals, mover: BinMover, start: int, batches: int, **elsewhere: Any) -> int:
    batch = start
    for _ in range(batches):
        batch += 1
        fake.run_batch(batch, elsewhere.get(str(batch)))
        mover.boundary(batch)
    return batch


def test_attaching_sets_up_the_prewarm_endpoints_in_the_background() -> None:
    # ahead of any migration: a prewarmed one's first steps then need no helper job
    fake = FakeInternals(4)
    mover_with(fake, 4)
    assert fake.endpoint_registrations.wait(5.0)


def test_fluid_plan_one_move_per_boundary_all_verified() -> None:
    fake = FakeInternals(8)
    mover = mover_with(fake, 8)
    mover.boundary(0)
    target = {**fake.coordinator, 0: "1", 2: "1", 4: "1"}
    migration = mover.migrate(target, "fluid")
    assert migration.plan.step_count == 3
    drive(fake, mover, 0, 6)
    assert migration.done.is_set() and migration.phase == "Completed"
    assert (migration.moved, migration.total, migration.landed_elsewhere) == (3, 3, [])
    assert [o.verified_in_batch for o in migration.outcomes.values()] == [2, 3, 4]
    assert fake.waits == ["30s", "3s"]  # raised for the migration, restored after
    assert fake.coordinator == target
    # each step's boundary is timed (part of the switching batch), its lock wait inside
    assert len(migration.boundary_ms) == len(migration.boundary_lock_ms) == 3
    assert all(
        0 <= lock <= total
        for lock, total in zip(migration.boundary_lock_ms, migration.boundary_ms, strict=True)
    )


def test_migrating_from_submit_until_the_migration_is_done() -> None:
    fake = FakeInternals(4)
    mover = mover_with(fake, 4)
    mover.boundary(0)
    assert not mover.migrating
    migration = mover.migrate({**fake.coordinator, 0: "1"}, "all-at-once")
    assert mover.migrating  # queued: nothing applied before the next boundary
    batch = drive(fake, mover, 0, 1)
    assert mover.migrating and migration.phase == "Running"
    drive(fake, mover, batch, 2)
    assert migration.done.is_set() and not mover.migrating


def test_a_move_that_ran_elsewhere_is_retried() -> None:
    fake = FakeInternals(4)
    mover = mover_with(fake, 4)
    mover.boundary(0)
    migration = mover.migrate({**fake.coordinator, 0: "1"}, "all-at-once")
    # Batch 2 (the first after the step) runs bin 0 on its old executor: busy target.
    drive(fake, mover, 0, 5, **{"2": {0: "0"}})
    outcome = migration.outcomes[0]
    assert (outcome.status, outcome.attempts, outcome.served_by) == ("landed", 2, "1")
    assert migration.to_dict()["retries"] == 1


def test_a_move_to_a_dead_executor_is_reported_not_lost() -> None:
    fake = FakeInternals(4)
    mover = mover_with(fake, 4)
    mover.boundary(0)
    migration = mover.migrate({**fake.coordinator, 0: "1", 2: "1"}, "fluid")
    drive(fake, mover, 0, 2)  # bin 0 lands in batch 2
    fake.alive.remove("1")  # executor 1 is killed: its bins reload on executor 0
    drive(fake, mover, 2, 4)
    assert migration.phase == "Completed"
    assert migration.outcomes[0].status == "landed"
    (lost,) = migration.landed_elsewhere
    assert (lost.move.bin, lost.move.target, lost.served_by) == (2, "1", "0")
    assert "bins [2]" in migration.message


def test_two_successful_attempts_of_one_bin_are_flagged() -> None:
    fake = FakeInternals(2)
    mover = mover_with(fake, 2)
    mover.boundary(0)
    mover.migrate({0: "1", 1: "1"}, "all-at-once")
    fake.run_batch(1)
    mover.boundary(1)
    fake.run_batch(2)
    fake.runs[2].append(TaskRun(1, 1, "0", "ANY", 5.0, "SUCCESS"))
    mover.boundary(2)
    assert mover.batches[2].duplicates == (1,)


def test_driver_actions_from_a_reconfiguration() -> None:
    spec = {"moves": [{"bins": [3, 5], "to": "1"}], "migration": {"strategy": "fluid"}}
    plan = {"migration": {"strategy": "fluid", "initial": ["0"] * 8, "steps": []}}
    assert driver_action("p-1", spec, plan) == {
        "action": "move-bins",
        "planId": "p-1",
        "moves": [{"bins": [3, 5], "to": "1"}],
        "migration": {"strategy": "fluid"},
        "plan": plan["migration"],  # carried out as given
    }
    rescale = driver_action("p-2", {"rescale": {"executors": 3}})
    assert rescale is not None and rescale["action"] == "request-executors"
    assert rescale["executors"] == 3
    assert driver_action("p-3", {"functionUpdates": [{"operator": "a"}]}) is None


def test_version_check_and_locations() -> None:
    check_version("4.3.0")
    with pytest.raises(UnsupportedSparkError, match=r"3\.5"):
        check_version("3.5.1")
    assert executor_of_location("executor_127.0.0.1_12") == "12"
    assert executor_of_location("127.0.0.1") == "127.0.0.1"
    # the coordinator's Option[String] as Scala prints it (placement reads it in one call)
    assert executor_in_option("Some(executor_127.0.0.1_12)") == "12"
    assert executor_in_option("Some(10.0.0.7)") == "10.0.0.7"
    assert executor_in_option("None") is None
    with pytest.raises(ValueError, match="Option"):
        executor_in_option("executor_127.0.0.1_12")
