"""One measurement serves the policy loop and the agent: with `loads` set to the
MigrationDriver's `shared_snapshot`, a policy round takes the driver's latest measurement
when it is young enough (and no bins moved since) instead of measuring again. Fakes for
Spark: a mover that records boundaries and a measurement that counts its calls."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import pytest

from swivel.controllers.flux import LoadBalancePolicy
from swivel.jobs.migration import policies
from swivel.jobs.migration.driver import MigrationDriver
from swivel.jobs.migration.metrics import BinStats, ExecutorStats, LoadSnapshot
from swivel.jobs.migration.policies import PolicyLoop
from tests.fakes_migration import FakeMover, FakeQuery


class CountingMeasure:
    """Executor 0 holds every bin and is busy; executor 1 idles: a rebalance moves one."""

    def __init__(self) -> None:
        self.calls = 0
        self.batches: list[list[int]] = []

    def __call__(
        self, internals: Any, query: Any, bins: int, batches: Iterable[int], **_: Any
    ) -> LoadSnapshot:
        self.calls += 1
        self.batches.append(list(batches))
        snapshot = LoadSnapshot(list(batches), window_s=10.0)
        for b in range(bins):
            snapshot.bins[b] = BinStats(b, "0", records=100 + b)
        snapshot.executors = {
            "0": ExecutorStats("0", busy_s=9.0, window_s=10.0),
            "1": ExecutorStats("1", busy_s=1.0, window_s=10.0),
        }
        return snapshot


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> tuple[MigrationDriver, FakeMover, CountingMeasure]:
    def no_own_measurement(*_: Any, **__: Any) -> LoadSnapshot:
        raise AssertionError("the policy loop measured on its own")

    monkeypatch.setattr(policies, "measure", no_own_measurement)
    query, mover, measure = FakeQuery(), FakeMover(bins=4), CountingMeasure()
    driver = MigrationDriver(
        spark=None,
        bins=4,
        query=lambda: query,
        mover=mover,  # type: ignore[arg-type]
        measure_loads=measure,
    )
    driver.on_batch_completed(0, "run-1", 1000.0)
    return driver, mover, measure


def _loop(driver: MigrationDriver, mover: FakeMover, collection_s: float = 60.0) -> PolicyLoop:
    balance = LoadBalancePolicy(min_collection_s=collection_s, initial_collection_s=collection_s)
    return PolicyLoop(mover, "rebalance", balance=balance, loads=driver.shared_snapshot)  # type: ignore[arg-type]


def test_a_round_takes_the_drivers_latest_measurement(setup: Any) -> None:
    driver, mover, measure = setup
    document = driver.measure_loads()  # the driver's own measurement (posted to the agent)
    assert document is not None and measure.calls == 1
    loop = _loop(driver, mover)
    loop.round()
    assert measure.calls == 1  # read once, served both
    (result,) = loop.rounds
    assert result.snapshot is driver.latest_snapshot
    assert [m.bin for m in result.decision.moves] and mover.migrated


def test_a_stale_measurement_is_taken_again_by_the_driver_and_serves_it_too(setup: Any) -> None:
    driver, mover, measure = setup
    driver.measure_loads()
    time.sleep(0.02)
    loop = _loop(driver, mover, collection_s=0.01)
    loop.round()  # the last measurement is older than the collection phase
    assert measure.calls == 2
    assert loop.rounds[0].snapshot is driver.latest_snapshot
    assert driver._remaining_s() > 0  # the driver's loop counts it: no second read soon


def test_no_measurement_yet_means_the_driver_measures_once(setup: Any) -> None:
    driver, mover, measure = setup
    loop = _loop(driver, mover)
    loop.round()
    assert measure.calls == 1 and driver.latest_loads is not None
    loop.round()
    assert measure.calls == 1 and len(loop.rounds) == 2


def test_bins_moving_at_a_boundary_make_the_measurement_unusable(setup: Any) -> None:
    driver, mover, measure = setup
    driver.measure_loads()
    mover.migrating = True  # a migration runs through the next boundary
    driver.on_batch_completed(1, "run-1", 1000.0)
    loop = _loop(driver, mover)
    assert loop.round() == 60.0  # nothing to decide on while bins move: collect on
    assert loop.rounds == [] and measure.calls == 1
    mover.migrating = False  # the move phase ended between two boundaries
    driver.on_batch_completed(2, "run-1", 1000.0)
    assert loop.round() == 60.0  # no batch wholly on the new placement yet
    assert loop.rounds == [] and measure.calls == 1
    driver.on_batch_completed(3, "run-1", 1000.0)
    loop.round()
    assert measure.calls == 2 and len(loop.rounds) == 1  # measured on the new placement
    assert measure.batches[-1] == [3]  # the collection phase: from the first batch after


def test_without_loads_the_loop_measures_itself(
    setup: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, mover, measure = setup
    monkeypatch.setattr(policies, "measure", measure)
    mover.query, mover.last_boundary = FakeQuery(), 0
    loop = PolicyLoop(mover, "rebalance")  # type: ignore[arg-type]
    loop.round()
    assert measure.calls == 1 and len(loop.rounds) == 1
