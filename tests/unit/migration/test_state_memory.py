"""State bytes per bin, attributed from each operator's own memory figure (Spark reports
state memory per operator, not per partition)."""

from __future__ import annotations

import pytest

from swivel.jobs.migration.metrics import BinStats, LoadSnapshot, apply_state_rows
from swivel.jobs.migration.state_memory import OperatorRows, bin_state, bytes_per_row

# A dedup with many small rows and an aggregation with few large ones.
PROGRESS = [
    {"operatorName": "stateStoreSave", "numRowsTotal": 100, "memoryUsedBytes": 100_000},
    {"operatorName": "dedupe", "numRowsTotal": 10_000, "memoryUsedBytes": 500_000},
]
ROWS = (
    OperatorRows(0, "dedupe", {0: 9_000, 1: 1_000}),
    OperatorRows(1, "stateStoreSave", {0: 10, 1: 90}),
)


def test_each_operator_prices_its_own_rows() -> None:
    assert bytes_per_row(PROGRESS, ROWS) == {0: 50.0, 1: 1000.0}
    # Bin 0: 9000 small rows; bin 1: 90 large ones. Pooled (600 kB over 10100 rows, ~59 B a
    # row) they would hold ~535 kB and ~65 kB; priced per operator, 460 kB and 140 kB.
    assert bin_state(PROGRESS, ROWS) == {0: (9_010, 460_000), 1: (1_090, 140_000)}


def test_operators_sharing_a_name_share_their_pooled_ratio() -> None:
    progress = [
        {"operatorName": "stateStoreSave", "numRowsTotal": 10, "memoryUsedBytes": 1_000},
        {"operatorName": "stateStoreSave", "numRowsTotal": 30, "memoryUsedBytes": 1_000},
    ]
    rows = (OperatorRows(0, "stateStoreSave"), OperatorRows(1, "stateStoreSave"))
    assert bytes_per_row(progress, rows) == {0: 50.0, 1: 50.0}


def test_without_metadata_the_one_store_gets_the_pooled_ratio() -> None:
    assert bytes_per_row(PROGRESS, (OperatorRows(0, "", {0: 1}),)) == {
        0: pytest.approx(600_000 / 10_100)
    }
    assert bytes_per_row([], (OperatorRows(0, "", {0: 1}),)) == {0: 0.0}  # no progress yet


def test_bytes_reach_the_bins_and_their_executors() -> None:
    class Query:
        lastProgress = {"stateOperators": PROGRESS}  # noqa: N815 - Spark's name

    snapshot = LoadSnapshot([1], 1.0, bins={0: BinStats(0, "a"), 1: BinStats(1, "b")})
    apply_state_rows(Query(), ROWS, snapshot)
    assert (snapshot.bins[0].state_rows, snapshot.bins[0].state_bytes) == (9_010, 460_000)
    assert snapshot.executors["a"].state_bytes == 460_000
    assert snapshot.executors["b"].state_bytes == 140_000
    assert snapshot.state_rows == ROWS  # kept for the driver to reuse
