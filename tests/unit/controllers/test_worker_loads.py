"""Flux's inputs from the workers' counts (Chi §5): used when fresh, the driver's otherwise;
and the operator's round deciding on them, with its annotation saying which it used."""

from __future__ import annotations

from pathlib import Path

import pytest

from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJob
from swivel.controllers.flux import BinLoad, ExecutorLoad, balance_round
from swivel.controllers.worker_loads import (
    DRIVER,
    WORKERS,
    figures_of,
    unusable,
    with_worker_figures,
)
from swivel.operator.agents import Loads
from swivel.operator.policy_decisions import decide_rebalance, flux_inputs, round_inputs
from swivel.protocol.counts import WorkerLoads

ROOT = Path(__file__).resolve().parents[3]
ASSIGNMENT = {b: str(b % 2) for b in range(8)}


def driver_loads() -> tuple[list[ExecutorLoad], list[BinLoad]]:
    """The driver's minute-old view: balanced (both executors half busy, equal records)."""
    executors = [ExecutorLoad("0", 30.0, 60.0, memory_bytes=100), ExecutorLoad("1", 30.0, 60.0)]
    bins = [BinLoad(b, ASSIGNMENT[b], records=100, state_bytes=10 * b) for b in range(8)]
    return executors, bins


def test_fresh_worker_counts_replace_records_and_busy_time() -> None:
    executors, bins = driver_loads()
    # Seconds old: bin 0 became hot on executor 0; bin 3 (executor 1) ran a little; the rest
    # ran nothing within the window.
    figures = figures_of([(0, 900, 4.0), (2, 50, 0.5), (3, 40, 0.2)], window_s=10.0, age_s=0.5)
    assert unusable(figures) is None
    new_executors, new_bins = with_worker_figures(executors, bins, figures, {"0": 2, "1": 1})
    assert [(e.executor, e.busy_s, e.window_s) for e in new_executors] == [
        ("0", 2.25, 10.0),  # (4.0 + 0.5) s over 2 cores
        ("1", 0.2, 10.0),
    ]
    assert new_executors[0].memory_bytes == 100  # memory stays the driver's
    assert [(b.bin, b.records, b.state_bytes) for b in new_bins][:4] == [
        (0, 900, 0), (1, 0, 10), (2, 50, 20), (3, 40, 30)
    ]  # fmt: skip
    # The driver's view moves nothing; the workers' moves the hot executor's load.
    assert not balance_round(executors, bins, ASSIGNMENT).moved
    assert balance_round(new_executors, new_bins, ASSIGNMENT).moved


@pytest.mark.parametrize(
    ("figures", "reason"),
    [
        (None, "no worker reported"),
        (figures_of([], 10.0, 0.0), "no rows"),
        (figures_of([(0, 1, 0.1)], 0.0, 0.0), "window is empty"),
        (figures_of([(0, 1, 0.1)], 10.0, 45.0), "45.0s old"),
    ],
)
def test_absent_empty_or_stale_counts_fall_back(figures: object, reason: str) -> None:
    why = unusable(figures)  # type: ignore[arg-type]
    assert why is not None and reason in why


def test_busy_time_never_exceeds_the_window() -> None:
    executors, bins = driver_loads()
    figures = figures_of([(0, 10, 50.0)], window_s=10.0, age_s=0.0)  # a clock hiccup
    new_executors, _ = with_worker_figures(executors, bins, figures)
    assert new_executors[0].busy_s == 10.0


@pytest.fixture(scope="module")
def job() -> StreamJob:
    return load_streamjob(ROOT / "examples" / "fraud-detection" / "streamjob.yaml")


def loads(workers: WorkerLoads | None) -> Loads:
    return Loads(
        executors=(
            {"executor": "0", "busySeconds": 5.0, "windowSeconds": 10.0, "cores": 1},
            {"executor": "1", "busySeconds": 5.0, "windowSeconds": 10.0, "cores": 1},
        ),
        bins=tuple({"bin": b, "executor": ASSIGNMENT[b], "records": 100} for b in range(8)),
        assignment=ASSIGNMENT,
        workers=workers,
    )


def worker_document(age: float) -> WorkerLoads:
    return WorkerLoads.model_validate(
        {
            "windowSeconds": 10.0,
            "ageSeconds": age,
            "reports": 12,
            "bins": [
                {"bin": 0, "rows": 800, "busySeconds": 6.0, "workers": 2},
                {"bin": 2, "rows": 100, "busySeconds": 1.0, "workers": 1},
                {"bin": 1, "rows": 100, "busySeconds": 1.0, "workers": 1},
            ],
        }
    )


def test_the_operators_round_decides_on_fresh_worker_counts(job: StreamJob) -> None:
    assert not decide_rebalance(job, loads(None)).moved  # the driver saw balance
    assert flux_inputs(job, loads(worker_document(age=60.0)))[2] == DRIVER  # stale
    fresh = loads(worker_document(age=1.0))
    executors, _, source = flux_inputs(job, fresh)
    assert source == WORKERS
    assert {e.executor: e.utilisation for e in executors} == {"0": 0.7, "1": 0.1}
    decision = decide_rebalance(job, fresh)
    assert [(m.bin, m.source, m.target) for m in decision.moves] == [(2, "0", "1")]
    inputs = round_inputs("rebalance", fresh, decision, job)
    assert inputs["loadSource"] == WORKERS and inputs["workersAgeSeconds"] == 1.0
    assert inputs["executors"]["0"]["utilisation"] == 0.7
    assert inputs["moves"] == [{"bin": 2, "from": "0", "to": "1", "records": 100, "stateBytes": 0}]
    assert round_inputs("rebalance", loads(None), decision)["loadSource"] == DRIVER
