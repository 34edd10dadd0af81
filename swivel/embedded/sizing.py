"""The fraud-detection example sized for this machine: the demo's and the benchmark's job.

The example manifest is the job a cluster would run; embedded runs keep its dataflow and
functions but choose how big it is: state partitions (bins), how many customers and
merchants the generator draws, how expensive the expensive model is, and the input rate. A
surge is a rate above what the expensive model sustains: each micro-batch then holds the
rows that arrived during the previous one, so batches grow longer batch after batch, and
the swap to the cheap model drains the backlog.

Two Spark settings shorten a live switch without changing the surge (docs/benchmarks.md,
"Where the time goes"): one task slot per bin (`task_slots`, `local[N]`), so the tasks of a
stage never wait in a second wave behind the first (a Fries switch takes effect only when
the batch's stage behind the heads has run every old-tagged row: with two slots and four
bins that stage ran in two waves, each paying a stateful task's start); and RocksDB
changelog checkpointing, so a stateful task's commit writes a changelog instead of a
snapshot of the store (every task of every stage pays it before the next stage starts).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from swivel.api.dataflow import DataflowSpec
from swivel.api.manifests import load_reconfiguration, load_streamjob
from swivel.api.reconfiguration import Reconfiguration
from swivel.api.streamjob import StreamJob

EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "fraud-detection"
EXPENSIVE_OPERATOR = "customer-detector"


@dataclass(frozen=True)
class Sizing:
    rows_per_second: int = 70
    bins: int = 4
    customers: int = 32
    merchants: int = 8
    work: int = 4000  # rounds of the expensive model per payment (~5 µs each: ~20 ms)
    trigger_ms: int = 500
    max_records_per_arrow_batch: int = 16  # the control-channel measurement's
    trial_arrow_batch: int = 64  # the trials': the runtime's default (checks come from slicing)
    task_slots: int = 4  # the trials': one per bin, no stage runs its tasks in waves
    overhead_rounds: int = 2  # control-channel measurement: (none, 100/s) phase pairs
    overhead_batches_per_phase: int = 5
    drain_batches: int = 3  # at most this many cheap batches between a trial and the swap back


DEMO = Sizing()
SMOKE = Sizing(  # a surge a loaded 2-core machine still drains: CI checks shape, not figures
    rows_per_second=20,
    bins=2,
    customers=8,
    merchants=4,
    work=1000,
    overhead_rounds=1,
    overhead_batches_per_phase=2,
    drain_batches=1,
    task_slots=2,
)
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


def example_job(sizing: Sizing = DEMO, model: str = "expensive") -> StreamJob:
    """The example StreamJob at `sizing` (generator source at its rate, memory sink)."""
    job = load_streamjob(EXAMPLE_DIR / "streamjob.yaml")
    wire = job.spec.dataflow.model_dump(by_alias=True)
    wire["bins"] = sizing.bins
    for op in wire["operators"]:
        if op["name"] == EXPENSIVE_OPERATOR:
            op["params"] = {**op["params"], "work": sizing.work, "model": model}
    options = {
        **job.spec.source.options,
        "customers": str(sizing.customers),
        "merchants": str(sizing.merchants),
    }
    source = job.spec.source.model_copy(
        update={"rows_per_second": sizing.rows_per_second, "options": options}
    )
    trigger = job.spec.trigger.model_copy(update={"interval_ms": sizing.trigger_ms})
    spark_conf = {
        **job.spec.spark_conf,
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(sizing.max_records_per_arrow_batch),
    }
    spec = job.spec.model_copy(
        update={
            "dataflow": DataflowSpec.model_validate(wire),
            "source": source,
            "trigger": trigger,
            "spark_conf": spark_conf,
        }
    )
    return job.model_copy(update={"spec": spec})


def for_trials(job: StreamJob, sizing: Sizing) -> StreamJob:
    """`job` with the Spark settings of the reconfiguration trials (module doc): a local
    master with `sizing.task_slots` slots, `trial_arrow_batch`-row Arrow batches, RocksDB
    changelog checkpointing. The control-channel measurement keeps the example's settings
    in a two-slot session of its own (every Python worker is one more client of the
    stand-in agent), so its figure stays comparable with earlier runs."""
    conf = {
        **job.spec.spark_conf,
        "spark.master": f"local[{sizing.task_slots}]",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(sizing.trial_arrow_batch),
        CHANGELOG: "true",
    }
    return job.model_copy(update={"spec": job.spec.model_copy(update={"spark_conf": conf})})


def swap_model() -> Reconfiguration:
    """The example's reconfiguration (expensive -> cheap model, combiner any -> both)."""
    return load_reconfiguration(EXAMPLE_DIR / "reconfiguration.yaml")


def swap_back(sizing: Sizing = DEMO) -> dict[str, object]:
    """The reverse update, applied between trials so each starts from the expensive model."""
    return {
        "jobRef": {"name": "fraud-detection"},
        "scheduler": "fries",
        "functionUpdates": [
            {
                "operator": EXPENSIVE_OPERATOR,
                "function": "swivel.jobs.examples.fraud:customer_model",
                "params": {"model": "expensive", "threshold": 0.8, "work": sizing.work},
            },
            {"operator": "combine", "params": {"rule": "any"}},
        ],
    }
