"""Flux's collection phase on the driver: every batch since the last move phase ended,
measured piece by piece and added up, restarted when bins move."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from swivel.jobs.migration.collection import CollectionPhase
from swivel.jobs.migration.driver import MigrationDriver
from swivel.jobs.migration.metrics import BinStats, ExecutorStats, LoadSnapshot
from tests.fakes_migration import FakeMover, FakeQuery


def batch(batch_id: int, busy: float, records: int, *, state_bytes: int = 0) -> LoadSnapshot:
    """One batch of 1 s: bin 0 on executor 0 (busy `busy`), bin 1 on executor 1 (idle)."""
    snapshot = LoadSnapshot([batch_id], window_s=1.0)
    snapshot.bins = {0: BinStats(0, "0", records=records, task_ms=busy * 1000, state_bytes=7)}
    snapshot.bins[1] = BinStats(1, "1", records=1)
    snapshot.executors = {
        "0": ExecutorStats("0", busy_s=busy, window_s=1.0, state_bytes=state_bytes),
        "1": ExecutorStats("1", busy_s=0.0, window_s=1.0),
    }
    return snapshot


def test_measurements_add_up_over_the_phase() -> None:
    phase = CollectionPhase()
    assert phase.batches(4) == range(4, 5)  # a new driver: from the batch it first sees
    phase.add(batch(4, 0.5, 10))
    assert phase.batches(6) == range(5, 7)  # only what is new
    both = LoadSnapshot([5, 6], window_s=2.0)
    both.bins = {0: BinStats(0, "0", records=30), 1: BinStats(1, "1", records=2)}
    both.executors = {
        "0": ExecutorStats("0", busy_s=1.5, window_s=2.0, state_bytes=900),
        "1": ExecutorStats("1", busy_s=0.2, window_s=2.0),
    }
    total = phase.add(both)
    assert total is not None
    assert total.batches == [4, 5, 6] and total.window_s == 3.0
    assert total.bins[0].records == 40 and total.bins[1].records == 3
    assert total.executors["0"].busy_s == 2.0 and total.executors["0"].window_s == 3.0
    assert total.executors["0"].state_bytes == 900  # held now, not summed


def test_a_move_phase_restarts_the_collection() -> None:
    phase = CollectionPhase()
    phase.add(batch(1, 0.9, 100))
    phase.restart(3)  # bins moved; batch 3 is the first wholly on the new placement
    assert phase.empty and phase.batches(2) == range(3, 3)
    # A measurement that straddles the restart describes two placements: not counted.
    straddling = LoadSnapshot([2, 3], window_s=2.0)
    assert phase.add(straddling) is None
    total = phase.add(batch(3, 0.2, 5))
    assert total is not None and total.batches == [3] and total.bins[0].records == 5


def test_a_gone_executor_drops_out() -> None:
    phase = CollectionPhase()
    phase.add(batch(1, 0.5, 10))
    later = batch(2, 0.5, 10)
    del later.executors["1"]
    total = phase.add(later)
    assert total is not None and set(total.executors) == {"0"}


@given(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 1000)), min_size=1, max_size=20))
def test_the_phase_equals_one_measurement_of_all_its_batches(
    batches: list[tuple[float, int]],
) -> None:
    """Adding batch by batch gives what one measurement over the whole phase would."""
    phase = CollectionPhase()
    total = None
    for index, (busy, records) in enumerate(batches):
        total = phase.add(batch(10 + index, busy, records))
    assert total is not None
    assert total.batches == list(range(10, 10 + len(batches)))
    assert total.window_s == len(batches)
    assert total.bins[0].records == sum(r for _, r in batches)
    assert abs(total.executors["0"].busy_s - sum(b for b, _ in batches)) < 1e-9
    assert total.executors["0"].busy_s <= total.executors["0"].window_s


class _Measure:
    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def __call__(
        self, internals: Any, query: Any, bins: int, batches: Iterable[int], **_: Any
    ) -> LoadSnapshot:
        listed = list(batches)
        self.batches.append(listed)
        snapshot = LoadSnapshot(listed, window_s=float(len(listed)))
        snapshot.bins = {b: BinStats(b, str(b % 2), records=len(listed)) for b in range(bins)}
        snapshot.executors = {e: ExecutorStats(e, 0.5 * len(listed), len(listed)) for e in "01"}
        return snapshot


def test_the_driver_reports_every_batch_since_the_last_move_phase() -> None:
    query, mover, measure = FakeQuery(), FakeMover(bins=4), _Measure()
    driver = MigrationDriver(
        spark=None,
        bins=4,
        query=lambda: query,
        mover=mover,  # type: ignore[arg-type]
        measure_loads=measure,
    )
    for batch_id in range(3):
        driver.on_batch_completed(batch_id, "run-1", 1000.0)
    first = driver.measure_loads()
    assert first is not None and first["batches"] == [0, 1, 2]
    for batch_id in range(3, 6):
        driver.on_batch_completed(batch_id, "run-1", 1000.0)
    second = driver.measure_loads()
    assert second is not None and second["batches"] == [0, 1, 2, 3, 4, 5]
    assert measure.batches == [[0, 1, 2], [3, 4, 5]]  # each batch read once
    assert second["bins"][0]["records"] == 6
    mover.migrating = True  # a move phase: batches 6 and 7
    driver.on_batch_completed(6, "run-1", 1000.0)
    mover.migrating = False
    driver.on_batch_completed(7, "run-1", 1000.0)  # its last boundary
    assert driver.measure_loads() is None  # nothing of the new phase yet
    driver.on_batch_completed(8, "run-1", 1000.0)
    third = driver.measure_loads()
    assert third is not None and third["batches"] == [8]
    assert third["windowSeconds"] == 1.0
