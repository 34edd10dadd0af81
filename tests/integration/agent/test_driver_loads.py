"""The driver side of the loads: `MigrationDriver` measures after batches, at most once per
coordination interval, never while bins move, and posts to a real agent; the agent serves
what it posted. Spark is replaced by a fake mover and a fake measurement (the real
`metrics.measure` runs in the cluster tests)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from swivel.jobs.control.driver_channel import AgentDriverChannel
from swivel.jobs.migration.driver import MigrationDriver
from swivel.jobs.migration.metrics import BinStats, ExecutorStats, LoadSnapshot
from tests.fakes_migration import FakeMover, FakeQuery
from tests.polling import wait_for

from .conftest import DRIVER_TOKEN


class FakeMeasure:
    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.fail = False  # failure switch: the Spark UI is off, say

    def __call__(
        self, internals: Any, query: Any, bins: int, batches: Iterable[int], **_: Any
    ) -> LoadSnapshot:
        if self.fail:
            raise OSError("the Spark UI is disabled")
        measured = list(batches)
        self.calls.append(measured)
        snapshot = LoadSnapshot(measured, window_s=2.0)
        for b in range(bins):
            snapshot.bins[b] = BinStats(b, str(b % 2), records=10 * b)
        snapshot.executors = {
            "0": ExecutorStats("0", busy_s=1.5, window_s=2.0),
            "1": ExecutorStats("1", busy_s=0.5, window_s=2.0),
        }
        return snapshot


def _driver(agent: Any, measure: FakeMeasure, interval_s: float) -> tuple[MigrationDriver, Any]:
    query = FakeQuery()
    mover = FakeMover()
    driver = MigrationDriver(
        spark=None,
        bins=16,
        query=lambda: query,
        agent=AgentDriverChannel(agent.url, DRIVER_TOKEN),
        mover=mover,  # type: ignore[arg-type]
        coordination_interval_s=interval_s,
        measure_loads=measure,
    )
    return driver, mover


def _wait(check: Any, timeout: float = 5.0) -> Any:
    return wait_for(check, timeout, every=0.02)


def test_loads_are_measured_after_batches_and_rate_limited(agent: Any, call: Any) -> None:
    measure = FakeMeasure()
    driver, mover = _driver(agent, measure, interval_s=0.5)
    threading.Thread(target=driver._measure_loop, daemon=True).start()
    try:
        assert call(agent.url + "/v1/loads")[0] == 404
        driver.on_batch_completed(7, "run-1", duration_ms=1200.0)
        _wait(lambda: measure.calls)
        # Flux's collection phase (jobs/migration/collection.py): it begins with the first
        # batch measured, and each measurement reads only the batches new since the last.
        assert measure.calls == [[7]]
        status, body, _ = _wait(lambda: (r := call(agent.url + "/v1/loads"))[0] == 200 and r)
        assert status == 200 and body["batches"] == [7]
        assert {e["executor"]: e["busyFraction"] for e in body["executors"]} == {
            "0": 0.75,
            "1": 0.25,
        }
        assert body["processingSeconds"] == 1.2 and body["coordinationIntervalSeconds"] == 0.5
        assert body["coordinationSeconds"] > 0
        # Batches inside the interval are not measured; the first one after it is.
        for batch in (8, 9, 10):
            driver.on_batch_completed(batch, "run-1", duration_ms=100.0)
        time.sleep(0.2)
        assert len(measure.calls) == 1
        _wait(lambda: len(measure.calls) == 2, timeout=3.0)
        assert measure.calls[1] == [8, 9, 10]
        _wait(lambda: call(agent.url + "/v1/loads")[1]["batches"] == [7, 8, 9, 10])
        # A batch of another run (the query restarted, not yet attached) is not ours.
        driver.on_batch_completed(11, "run-0")
        assert mover.boundaries == [7, 8, 9, 10]
    finally:
        driver._stopping.set()
        driver._batch_done.set()


def test_no_measurement_while_bins_move_or_when_measuring_fails(agent: Any, call: Any) -> None:
    measure = FakeMeasure()
    driver, mover = _driver(agent, measure, interval_s=0.01)
    driver.on_batch_completed(3, "run-1", duration_ms=100.0)
    mover.migrating = True  # a migration runs
    assert driver.measure_loads() is None and measure.calls == []
    mover.migrating = False
    measure.fail = True
    try:
        driver.measure_loads()
    except OSError:
        pass
    else:
        raise AssertionError("the failure switch did not fire")
    assert call(agent.url + "/v1/loads")[0] == 404  # nothing half-measured was posted
    measure.fail = False
    assert driver.measure_loads() is not None
    assert call(agent.url + "/v1/loads")[0] == 200


def test_a_coordination_plan_reaches_the_driver_and_completes_on_its_report(
    start_agent: Any, call: Any
) -> None:
    plan = {
        "name": "aimd",
        "spec": {"jobRef": {"name": "fraud-detection"}, "coordination": {"intervalSeconds": 12}},
    }
    refused = start_agent()  # no MigrationDriver behind this agent: nobody would apply it
    status, body, _ = call(refused.url + "/v1/plans", "POST", plan)
    assert status == 422 and body["errors"][0]["field"] == "spec.coordination"
    refused.stop()

    agent = start_agent(migrations=True)
    status, document, _ = call(agent.url + "/v1/plans", "POST", plan)
    assert status == 202 and document["phase"] == "Applying"
    _, action, _ = call(agent.url + "/v1/driver/actions?since=0&timeout=0")
    assert action["action"] == "set-coordination" and action["intervalSeconds"] == 12
    assert action["planId"] == document["id"]
    measure = FakeMeasure()
    driver, _ = _driver(agent, measure, interval_s=30.0)
    assert driver.handle(action) is True
    assert driver.coordination_interval_s == 12.0
    _, done, _ = call(agent.url + f"/v1/plans/{document['id']}")
    assert done["phase"] == "Completed"
    assert done["coordination"]["intervalSeconds"] == 12.0 and done["delayMs"] is not None
    _, text, _ = call(agent.url + "/metrics")
    assert "swivel_coordination_interval_seconds 12.0" in text
    bad = call(agent.url + "/v1/driver/coordination", "POST", {"intervalSeconds": 0})
    assert bad[0] == 400 and bad[1]["errors"][0]["field"] == "intervalSeconds"
