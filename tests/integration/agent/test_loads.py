"""Loads for the policies through the agent: the driver posts a measurement
(`POST /v1/driver/loads`, the body `metrics.loads_document` builds), the agent serves the
latest at `GET /v1/loads` and as gauges in `/metrics`, and forgets it when bins move."""

from __future__ import annotations

from typing import Any

from swivel.jobs.migration.metrics import BinStats, ExecutorStats, LoadSnapshot, loads_document


def measurement(busy: dict[str, float], *, at: float = 1_700_000_000.0) -> dict[str, Any]:
    """A driver-side snapshot of 16 bins over 10 s, executors `busy` seconds each."""
    snapshot = LoadSnapshot(batches=[3, 4, 5], window_s=10.0)
    executors = sorted(busy)
    for b in range(16):
        executor = executors[b % len(executors)]
        snapshot.bins[b] = BinStats(
            b, executor, records=100 + b, task_ms=5.0, state_rows=10, state_bytes=1000 * (b + 1)
        )
    for executor, seconds in busy.items():
        snapshot.executors[executor] = ExecutorStats(
            executor, busy_s=seconds, window_s=10.0, state_bytes=4096, jvm_memory_used=2048
        )
    return loads_document(
        snapshot, measured_at=at, coordination_s=0.4, processing_s=9.6, interval_s=30.0
    )


def test_no_loads_is_404_and_the_route_needs_the_token(agent: Any, call: Any) -> None:
    status, body, _ = call(agent.url + "/v1/loads")
    assert status == 404 and body["errors"][0]["field"] == "loads"
    assert call(agent.url + "/v1/loads", token=None)[0] == 401
    assert call(agent.url + "/v1/driver/loads", "POST", measurement({"0": 1}), token=None)[0] == 401


def test_the_latest_measurement_is_served_and_exported(agent: Any, call: Any) -> None:
    assert call(agent.url + "/v1/driver/loads", "POST", measurement({"0": 9, "1": 1}))[0] == 202
    status, body, _ = call(agent.url + "/v1/loads")
    assert status == 200
    assert {e["executor"]: e["busyFraction"] for e in body["executors"]} == {"0": 0.9, "1": 0.1}
    assert len(body["bins"]) == 16 and body["bins"][3] == {
        "bin": 3, "executor": "1", "records": 103, "taskMs": 5.0, "stateRows": 10,
        "stateBytes": 4000,
    }  # fmt: skip
    assert body["coordinationSeconds"] == 0.4 and body["coordinationIntervalSeconds"] == 30.0
    assert body["ageSeconds"] >= 0 and body["receivedAt"] > 0
    _, text, _ = call(agent.url + "/metrics")
    assert 'swivel_executor_busy_fraction{executor="0"} 0.9' in text
    assert 'swivel_bin_records{bin="3",executor="1"} 103.0' in text
    assert 'swivel_bin_state_bytes{bin="3",executor="1"} 4000.0' in text
    assert 'swivel_executor_memory_used_bytes{executor="1"} 2048.0' in text
    assert "swivel_coordination_interval_seconds 30.0" in text
    # A newer measurement replaces it: an executor that left is gone from the gauges.
    assert call(agent.url + "/v1/driver/loads", "POST", measurement({"0": 5}))[0] == 202
    _, body, _ = call(agent.url + "/v1/loads")
    assert [e["executor"] for e in body["executors"]] == ["0"]
    _, text, _ = call(agent.url + "/metrics")
    assert 'executor="1"' not in text


def test_malformed_loads_are_400_with_the_field_and_keep_the_last(agent: Any, call: Any) -> None:
    url = agent.url + "/v1/driver/loads"
    assert call(url, "POST", measurement({"0": 9, "1": 1}))[0] == 202
    bad = measurement({"0": 9})
    bad["bins"][2]["bin"] = 99
    bad["executors"][0]["busySeconds"] = -1
    status, body, _ = call(url, "POST", bad)
    assert status == 400
    assert {e["field"] for e in body["errors"]} == {"bins[2].bin", "executors[0].busySeconds"}
    assert call(url, "POST", raw=b"[")[0] == 400
    assert call(url, "POST", {"bins": []})[1]["errors"][0]["field"] == "executors"
    _, body, _ = call(agent.url + "/v1/loads")
    assert len(body["executors"]) == 2  # the refused bodies changed nothing


def test_moving_bins_forgets_the_loads(start_agent: Any, call: Any) -> None:
    agent = start_agent(migrations=True)
    assert call(agent.url + "/v1/driver/loads", "POST", measurement({"0": 9, "1": 1}))[0] == 202
    plan = {
        "name": "rebalance",
        "spec": {"jobRef": {"name": "fraud-detection"}, "moves": [{"bins": [0], "to": "1"}]},
    }
    status, document, _ = call(agent.url + "/v1/plans", "POST", plan)
    assert status == 202
    assert call(agent.url + "/v1/loads")[0] == 404  # measured on the old placement
    assert call(agent.url + "/v1/driver/loads", "POST", measurement({"0": 5, "1": 5}))[0] == 202
    report = {"planId": document["id"], "phase": "Completed", "binsMoved": 1, "binsTotal": 1}
    assert call(agent.url + "/v1/driver/migration", "POST", report)[0] == 202
    assert call(agent.url + "/v1/loads")[0] == 404  # that one saw the bins in motion
