"""Monitoring through the control plane (Chi §5) on local Spark with the real agent: the
keyed operators' Python workers count rows per bin and report them on their acks
connection; the agent's `GET /v1/loads` serves the sums, and an operator policy round takes
its records per bin from them (`loadSource` workers)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from swivel.api.manifests import load_streamjob
from swivel.controllers.flux import RoundDecision
from swivel.embedded.running import EmbeddedJob
from swivel.jobs.agent.auth import Role, role_token
from swivel.jobs.control.ack_sender import REPORT_EVERY_S
from swivel.jobs.migration.metrics import BinStats, ExecutorStats, LoadSnapshot, loads_document
from swivel.jobs.runtime.testing import bounded, memory_rows
from swivel.operator.agents import Loads
from swivel.operator.policy_decisions import flux_inputs, round_inputs
from tests.integration.runtime.conftest import EXAMPLE, http, small_fraud_job
from tests.polling import wait_for

pytestmark = pytest.mark.spark

KEYED = ("customer-detector", "merchant-detector")
ROWS_PER_BATCH = 40


def local_placement(bins: int) -> dict[str, Any]:
    """What the driver measures on local Spark: every bin on the one executor, `driver`."""
    snapshot = LoadSnapshot(batches=[1, 2], window_s=2.0)
    for b in range(bins):
        snapshot.bins[b] = BinStats(b, "driver", records=1)
    snapshot.executors["driver"] = ExecutorStats("driver", busy_s=1.0, window_s=2.0, cores=2)
    return loads_document(snapshot, measured_at=1.0)


@pytest.mark.timeout(600)  # 144 s at load ~5 (2 cores, other Spark jobs beside it)
def test_worker_counts_reach_the_agent_and_a_policy_round(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The whole run inside the agent's window, so its sums must equal the rows that ran.
    monkeypatch.setenv("SWIVEL_WORKER_LOADS_WINDOW_S", "600")
    example = load_streamjob(EXAMPLE)
    job = example.model_copy(
        update={"spec": bounded(small_fraud_job(), rows_per_batch=ROWS_PER_BATCH)}
    )
    embedded = EmbeddedJob(job, tmp_path / "work", spark)
    try:
        embedded.start()
        runtime, agent = embedded.runtime, embedded.agent
        assert runtime is not None and agent is not None
        runtime.wait_for_batches(runtime.batches_completed() + 3, timeout=300)
        runtime.stop_at_boundary(60)
        runtime.stop()
        ran = len(memory_rows(spark, embedded.job.spec))
        assert ran >= 80
        url = agent.url
        operator = role_token(agent.token, Role.OPERATOR)
        driver = role_token(agent.token, Role.DRIVER)
        bins = job.spec.dataflow.bins
        assert http(url + "/v1/driver/loads", "POST", local_placement(bins), driver)[0] == 202

        def served() -> dict[str, Any]:
            status, document = http(url + "/v1/loads", "GET", None, operator)
            assert status == 200, document
            return dict(document)

        def keyed_rows() -> dict[str, int]:
            workers = served().get("workers") or {}
            return {
                o["operator"]: o["rows"]
                for o in workers.get("operators", [])
                if o["operator"] in KEYED
            }

        # Idle workers report what is left within a second of the last batch. Every row the
        # sink holds ran through both keyed operators; a batch the stop interrupted may have
        # run up to its 40 rows there too, uncommitted.
        wait_for(lambda: min(keyed_rows().values() or [0]) >= ran, 15.0)
        time.sleep(2 * REPORT_EVERY_S + 0.5)  # stragglers of an interrupted batch
        counted = keyed_rows()
        assert set(counted) == set(KEYED)
        assert all(ran <= rows <= ran + ROWS_PER_BATCH for rows in counted.values()), (ran, counted)
        document = served()
        workers = document["workers"]
        assert {b["bin"] for b in workers["bins"]} <= set(range(bins))
        assert len(workers["bins"]) >= 2  # 16 customers and 8 merchants spread over 4 bins
        assert sum(b["rows"] for b in workers["bins"]) == sum(counted.values())
        assert all(b["workers"] >= 1 and b["busySeconds"] > 0 for b in workers["bins"])
        stateless = {o["operator"]: o["keyed"] for o in workers["operators"]}
        assert stateless.get("parse") is False  # counted, but its partitions are no bins

        # The operator's policy round reads them as its records per bin.
        loads = Loads.from_document(document)
        executors, bin_loads, source = flux_inputs(job, loads)
        assert source == "workers"
        reported = {b["bin"]: b["rows"] for b in workers["bins"]}
        assert {b.bin: b.records for b in bin_loads} == {b: reported.get(b, 0) for b in range(bins)}
        (local,) = executors
        assert local.busy_s > 0 and local.window_s == workers["windowSeconds"]
        no_moves = RoundDecision((), dict(loads.assignment), (), {}, {})
        decision_inputs = round_inputs("rebalance", loads, no_moves, job)
        assert decision_inputs["loadSource"] == "workers"
    finally:
        embedded.stop()
