"""The embedded policy loop decides on the workers' counts when they are fresh (Chi §5),
on the driver's measurement otherwise, and survives an agent it cannot read."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.controllers.worker_loads import DRIVER, WORKERS, WorkerFigures, figures_of
from swivel.jobs.migration.policies import PolicyLoop, worker_figures_of
from tests.unit.migration.test_shared_loads import _loop, setup  # noqa: F401 - the fixture

# The driver says executor 0 (all four bins, about even) is busy and 1 idle, so a round
# moves its largest bin, 3. The workers, seconds ago, saw bin 1 carry nearly everything:
# the round moves bin 1.
HOT_1 = figures_of([(0, 1, 0.001), (1, 1000, 3.0), (2, 1, 0.001), (3, 1, 0.001)], 10.0, 0.5)


def _with(loop: PolicyLoop, figures: Any) -> PolicyLoop:
    loop.worker_figures = figures
    return loop


def test_fresh_worker_counts_decide_the_round(setup: Any) -> None:  # noqa: F811
    driver, mover, _ = setup
    loop = _with(_loop(driver, mover), lambda: HOT_1)
    loop.round()
    (result,) = loop.rounds
    assert result.load_source == WORKERS
    assert [m.bin for m in result.decision.moves] == [1]
    assert result.to_dict()["loadSource"] == WORKERS


@pytest.mark.parametrize(
    "figures",
    [
        lambda: None,  # none reported
        lambda: WorkerFigures(HOT_1.bins, 10.0, age_s=120.0),  # stale
        lambda: (_ for _ in ()).throw(OSError("agent unreachable")),  # cannot be read
    ],
)
def test_otherwise_the_drivers_measurement_decides(setup: Any, figures: Any) -> None:  # noqa: F811
    driver, mover, _ = setup
    loop = _with(_loop(driver, mover), figures)
    loop.round()
    (result,) = loop.rounds
    assert result.load_source == DRIVER
    assert [m.bin for m in result.decision.moves] == [3]


def test_figures_are_read_from_a_loads_document() -> None:
    assert worker_figures_of(None) is None
    document: dict[str, Any] = {"executors": [], "bins": []}
    assert worker_figures_of(document) is None
    document["workers"] = {
        "windowSeconds": 8.0,
        "ageSeconds": 0.4,
        "bins": [{"bin": 2, "rows": 7, "busySeconds": 0.1}],
    }
    assert worker_figures_of(document) == figures_of([(2, 7, 0.1)], 8.0, 0.4)
