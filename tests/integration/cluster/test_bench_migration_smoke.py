"""`swivel bench migration` at smoke size (4 bins, 2 000 keys of 200 B, one size): the JSON
contract, every strategy with a balanced swap, the state conserved, and proof from the
throttled storage's read log that the executors' state stores read through `throttled://`.

Its smallest meaningful parameters: 4 bins, so each executor owns 2 and the swap of 2 + 2
bins still gives fluid 4 steps and batched 2 (with 8 bins every batch ran its stateful
stage in two waves of tasks on the 4 slots, each task opening its bin's throttled files);
one steady batch before each strategy (the excess is measured against it, which is all the
contract checks; the figures of a smoke run are no result); two no-migration batches at the
end instead of the longest window + 8 (~13 batches: `steady_window_excess_ms` is only read
by a person, and with 2 it is still computed for the short windows and says why not for the
longer ones); three unread input files ahead of the query instead of 12 (`--feed-ahead`:
the end of a size reads every file written) and a 2 s settle after each migration.

Run as the CLI in a subprocess: the driver JVM must start with the throttled file system
on its class path, which a JVM an earlier test of this process launched would not have.
The figures of a smoke run on a shared machine are no result (docs/migration.md).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from swivel.jobs import jvm
from tests.bench_runs import run_bounded, tail

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(480)]

LIMIT_S = 420.0
FIGURES = {"max_batch_ms", "excess_ms", "duration_s", "moved_bins", "moved_bytes"}


def _bench(tmp_path: Path) -> dict[str, Any]:
    log = tmp_path / "bench.stderr"
    command = [
        sys.executable, "-m", "swivel", "bench", "migration", "--output", "json",
        "--bins", "4", "--sweep-keys", "2000", "--payload-bytes", "200",
        "--rows-per-batch", "50", "--load-batches", "1", "--steady-batches", "1",
        "--steady-run-batches", "2",
        "--swap", "2", "--batch-size", "2", "--executor-memory-gb", "1",
        "--plots", str(tmp_path / "plots"), "--workdir", str(tmp_path / "work"),
        "--timeout-s", "240", "--settle-s", "2", "--feed-ahead", "3",
        "--thread-cpu", "--py4j-calls",
    ]  # fmt: skip
    returncode, out = run_bounded(command, log, LIMIT_S, tmp_path / "work")
    assert returncode == 0, tail(log)
    document: dict[str, Any] = json.loads(out)
    return document


def test_smoke_run_keeps_the_contract(tmp_path: Path) -> None:
    if jvm.jar_path() is None:
        pytest.skip("the helper jar is not built (no JDK): no throttled storage")
    report = _bench(tmp_path)
    assert {"steady_batch_ms", "strategies", "state_rows", "storage", "sweep"} <= set(report)
    assert report["steady_batch_ms"]["p50"] > 0
    strategies = report["strategies"]
    # the size's steady p50 pools every strategy's steady batches (one each here)
    assert report["steady_batch_ms"]["p50"] == statistics.median(
        r["steady_p50_ms"] for r in strategies.values()
    )
    assert set(strategies) == {"all-at-once", "fluid", "batched", "batched-prewarmed"}
    for name, result in strategies.items():
        assert set(result) >= FIGURES, name
        assert result["moved_bins"] == 4, name  # each executor gave 2 and took 2
        assert result["moved_bytes"] > 0, name
        assert result["excess_ms"] == pytest.approx(
            result["max_batch_ms"] - result["steady_p50_ms"], abs=0.1
        )
        assert result["excess_over_steady"] == pytest.approx(
            result["excess_ms"] / result["steady_p50_ms"], abs=0.002
        )
    assert strategies["all-at-once"]["steps"] == 1
    assert strategies["batched"]["steps"] < strategies["fluid"]["steps"]
    prewarmed = strategies["batched-prewarmed"]
    # e5693e2: the product's prewarm (a fallback to plain moves fails the run); every moved
    # bin switched onto a copy loaded on its target
    assert prewarmed["bins_prewarmed"] == 4, prewarmed
    # --py4j-calls: the prewarm's threads (one per step's target) called into the driver's
    # JVM, and were counted
    calls = prewarmed["py4j_calls"]
    assert calls["per_thread"]["swivel-prewarm-target"]["calls"] > 0, calls
    assert calls["calls"] >= sum(entry["calls"] for entry in calls["busiest"]) > 0, calls
    # ee2065c: no Java exception ends a loop over a helper's answers (PySpark's hook would
    # test each against its exception classes: isInstanceOf, dozens of round trips)
    converted = [e for e in calls["busiest"] if e["command"] == "call isInstanceOf"]
    assert not converted, converted
    assert report["prewarm_goal"]["per_size"] == [
        {"keys": 2000, "excess_over_steady": prewarmed["excess_over_steady"]}
    ]
    assert report["state_rows"]["before"] == report["state_rows"]["after"] == 2000
    assert report["counts_match_reference"]
    assert [row["keys"] for row in report["sweep"]] == [2000]
    assert set(report["sweep"][0]["strategies"]) == set(strategies)
    # the state store's reloads went through the throttle: the executors opened state files
    storage = report["storage"]
    assert storage["kind"] == "throttled" and storage["read_mb_per_s"] == 150.0
    reads = strategies["all-at-once"]["storage_reads"]
    assert reads["state_executors"]["opens"] > 0, reads
    assert reads["state_executors"]["slept_s"] >= 0.02 * reads["state_executors"]["opens"] * 0.9
    assert len(report["load_average"]) >= 2
    assert any(p.endswith("migration-excess.png") for p in report["plots"])
    # --thread-cpu: the executors' CPU per thread kind in each batch, read from /proc
    cores = os.cpu_count() or 1
    for name, result in strategies.items():
        cpu = result["thread_cpu"]
        assert cpu["worst_batch"] is not None and cpu["window"], name
        owners = {owner for entry in cpu["window"] for owner in entry["cpu_ms"]}
        assert {"driver", "driver_jvm", "cluster_daemons"} <= owners, (name, owners)
        executors = {owner for owner in owners if owner.isdigit()}
        assert executors == {"0", "1"}, (name, cpu["window"])
        tasks = sum(
            e["cpu_ms"].get(x, {}).get("task", 0.0) for e in cpu["window"] for x in executors
        )
        assert tasks > 0, (name, cpu["window"])
        for entry in cpu["window"]:  # no more than the machine's cores could give
            for executor in executors:
                spent = sum(entry["cpu_ms"].get(executor, {}).values())
                assert spent <= entry["wall_ms"] * cores * 1.2 + 100, (name, entry)
