"""State rows per bin cost Spark jobs beside the query: the MigrationDriver reads them at most
every `state_rows_every_s` and reuses the last counts in the loads between (a bin's rows do
not move with its placement). Fakes for Spark, as in test_shared_loads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from swivel.jobs.migration.driver import MigrationDriver
from swivel.jobs.migration.metrics import BinStats, ExecutorStats, LoadSnapshot, apply_state_rows
from swivel.jobs.migration.state_memory import OperatorRows
from tests.fakes_migration import FakeMover


class _Query:
    runId = "run-1"  # noqa: N815 - Spark's name
    lastProgress = {  # noqa: N815
        "stateOperators": [
            {"operatorName": "stateStoreSave", "numRowsTotal": 40, "memoryUsedBytes": 4000}
        ]
    }


class _Measure:
    """Bins 0-1 on executor 0, bins 2-3 on executor 1; state rows only with a checkpoint."""

    def __init__(self) -> None:
        self.checkpoints: list[str | None] = []

    def __call__(
        self, internals: Any, query: Any, bins: int, batches: Iterable[int], **options: Any
    ) -> LoadSnapshot:
        self.checkpoints.append(options.get("checkpoint"))
        snapshot = LoadSnapshot(list(batches), window_s=10.0)
        for b in range(bins):
            snapshot.bins[b] = BinStats(b, "0" if b < 2 else "1", records=10)
        snapshot.executors = {e: ExecutorStats(e, busy_s=1.0, window_s=10.0) for e in "01"}
        if options.get("checkpoint"):  # what metrics.measure does with a checkpoint
            rows = (OperatorRows(0, "stateStoreSave", {b: 10 * (b + 1) for b in range(bins)}),)
            apply_state_rows(query, rows, snapshot)
        return snapshot


def _driver(every_s: float) -> tuple[MigrationDriver, _Measure]:
    query, measure = _Query(), _Measure()
    driver = MigrationDriver(
        spark=None,
        bins=4,
        query=lambda: query,
        mover=FakeMover(bins=4),  # type: ignore[arg-type]
        checkpoint="/checkpoint",
        measure_loads=measure,
        state_rows_every_s=every_s,
    )
    driver.on_batch_completed(0, "run-1", 1000.0)
    return driver, measure


def test_state_rows_are_read_once_per_interval_and_reused_between() -> None:
    driver, measure = _driver(every_s=600.0)
    first = driver.measure_loads()
    second = driver.measure_loads()
    assert measure.checkpoints == ["/checkpoint", None]
    assert first is not None and second is not None
    assert [b["stateRows"] for b in second["bins"]] == [10, 20, 30, 40]
    assert [b["stateBytes"] for b in second["bins"]] == [1000, 2000, 3000, 4000]
    assert {e["executor"]: e["memoryBytes"] for e in second["executors"]} == {
        "0": 3000,
        "1": 7000,
    }


def test_state_rows_are_read_again_once_the_interval_passed() -> None:
    driver, measure = _driver(every_s=0.0)
    driver.measure_loads()
    driver.measure_loads()
    assert measure.checkpoints == ["/checkpoint", "/checkpoint"]
