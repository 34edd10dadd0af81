"""When the migration executor's boundaries start a staggering pass, against a fake
`SnapshotPhases` with failure switches: the stores do not stagger, the helper jar is
missing, a pass raises, a pass is slow. (The real pass on real RocksDB stores:
tests/integration/runtime/test_snapshot_phases.py.)"""

from __future__ import annotations

import threading
from typing import Any

from swivel.jobs.migration.snapshot_staggering import StaggeredSnapshots
from swivel.jobs.spark_snapshot_phases import HelperUnavailableError, PhaseReport


class FakePhases:
    def __init__(self) -> None:
        self.reason: str | None = None  # applies(): why nothing staggers
        self.jar_missing = False
        self.fails = False
        self.may_finish = threading.Event()
        self.may_finish.set()
        self.passes: list[Any] = []  # the queries passed over, in order
        self.misses: list[str] = []  # executors the next passes' tasks do not reach

    def applies(self, query: Any) -> str | None:
        return self.reason

    def offset(self, query: Any) -> PhaseReport:
        self.may_finish.wait(10)
        if self.jar_missing:
            raise HelperUnavailableError("io.swivel.spark.SnapshotPhases is not loadable")
        if self.fails:
            raise RuntimeError("executor lost")
        self.passes.append(query)
        missed = [self.misses.pop(0)] if self.misses else []
        return PhaseReport(every=10, stores=64, offset=58, in_phase=6, missed=missed)


def staggering(recheck: int = 100) -> tuple[StaggeredSnapshots, FakePhases]:
    fake = FakePhases()
    keeper = StaggeredSnapshots(None, recheck_batches=recheck, phases=fake)  # type: ignore[arg-type]
    return keeper, fake


def at(keeper: StaggeredSnapshots, batch: int, migrating: bool = False) -> None:
    keeper.boundary(batch, migrating)
    keeper.wait(10)


def test_nothing_runs_before_a_query_is_attached() -> None:
    keeper, fake = staggering()
    at(keeper, 0)
    assert fake.passes == [] and keeper.passes == 0


def test_a_pass_at_the_first_boundary_then_only_every_recheck_batches() -> None:
    keeper, fake = staggering(recheck=10)
    keeper.attach("q")
    for batch in range(25):
        at(keeper, batch)
    assert keeper.passes == 3 and fake.passes == ["q"] * 3  # batches 0, 10 and 20
    assert keeper.report == PhaseReport(every=10, stores=64, offset=58, in_phase=6)


def test_no_pass_while_migrating_and_one_right_after() -> None:
    keeper, fake = staggering()
    keeper.attach("q")
    at(keeper, 0)
    for batch in range(1, 6):
        at(keeper, batch, migrating=True)
    assert keeper.passes == 1
    at(keeper, 6)
    assert keeper.passes == 2  # the moved bins reloaded: offset them again
    at(keeper, 7)
    assert keeper.passes == 2 and fake.passes == ["q", "q"]


def test_a_restarted_query_gets_its_own_first_pass() -> None:
    keeper, fake = staggering()
    keeper.attach("q1")
    at(keeper, 0)
    keeper.attach("q2")
    at(keeper, 1)
    assert fake.passes == ["q1", "q2"]


def test_stores_that_snapshot_in_maintenance_are_left_alone() -> None:
    keeper, fake = staggering(recheck=1)
    fake.reason = "spark.sql.streaming.stateStore.providerClass=(HDFS-backed)"
    keeper.attach("q")
    for batch in range(5):
        at(keeper, batch)
    assert fake.passes == [] and keeper.reason == fake.reason


def test_a_missing_helper_jar_stops_the_passes_and_says_why() -> None:
    keeper, fake = staggering(recheck=1)
    fake.jar_missing = True
    keeper.attach("q")
    at(keeper, 0)
    at(keeper, 1)
    assert keeper.passes == 0 and "not loadable" in (keeper.reason or "")


def test_a_failed_pass_never_raises_into_the_boundary_and_is_retried() -> None:
    keeper, fake = staggering(recheck=2)
    fake.fails = True
    keeper.attach("q")
    at(keeper, 0)
    assert keeper.error == "RuntimeError: executor lost" and keeper.reason is None
    fake.fails = False
    at(keeper, 1)
    assert keeper.passes == 0  # retried at the recheck, not at every boundary
    at(keeper, 2)
    assert keeper.passes == 1 and keeper.error is None


def test_a_slow_pass_is_never_run_twice_at_once() -> None:
    keeper, fake = staggering(recheck=1)
    fake.may_finish.clear()
    keeper.attach("q")
    for batch in range(5):
        keeper.boundary(batch, False)  # returns at once: the pass runs on its own thread
    fake.may_finish.set()
    keeper.wait(10)
    assert keeper.passes == 1


def test_a_pass_whose_task_missed_an_executor_runs_again_at_the_next_boundary() -> None:
    keeper, fake = staggering(recheck=100)
    fake.misses = ["1"]
    keeper.attach("q")
    at(keeper, 0)
    assert keeper.report is not None and keeper.report.missed == ["1"]
    at(keeper, 1)
    assert keeper.passes == 2 and keeper.report.missed == []
    at(keeper, 2)
    assert keeper.passes == 2


def test_a_pass_still_running_for_a_restarted_query_records_nothing() -> None:
    keeper, fake = staggering()
    fake.may_finish.clear()
    fake.fails = True
    keeper.attach("q1")
    keeper.boundary(0, False)  # q1's pass starts and blocks
    keeper.attach("q2")  # the query restarted
    fake.may_finish.set()
    keeper.wait(10)
    assert keeper.error is None and keeper.reason is None and keeper.passes == 0
    fake.fails = False
    at(keeper, 1)
    assert fake.passes == ["q2"] and keeper.passes == 1
