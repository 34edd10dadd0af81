"""The agent's Prometheus metrics, on a registry of its own.

A registry per agent (not the process-global default) lets several agents live in one test
process and keeps the exposition free of unrelated collectors.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from swivel.protocol.counts import WorkerCounts

# Fries' fast path is milliseconds, the epoch baseline a batch, restart seconds.
DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class AgentMetrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.delay = Histogram(
            "swivel_reconfiguration_delay_seconds",
            "From acceptance until every target worker switched (last switch).",
            ["scheduler"],
            buckets=DELAY_BUCKETS,
            registry=self.registry,
        )
        self.control_messages = Counter(
            "swivel_control_messages_sent",
            "Snapshots delivered to worker processes over the watch channel.",
            registry=self.registry,
        )
        self.acks = Counter(
            "swivel_acks_received",
            "Acknowledgements received from worker processes.",
            registry=self.registry,
        )
        self.plans = Counter(
            "swivel_plans",
            "Plans by outcome (accepted, completed, failed, rejected).",
            ["outcome"],
            registry=self.registry,
        )
        self.rejected = Counter(
            "swivel_agent_rejected",
            "Reports refused as implausible (acks, progress, driver) by what the agent knows; "
            "counts: worker counts with entries dropped as untrue of the job.",
            ["source"],
            registry=self.registry,
        )
        self.state_recovered = Counter(
            "swivel_agent_state_recovered",
            "Times the agent found its state file corrupt, moved it aside and started afresh.",
            registry=self.registry,
        )
        self.workers = Gauge(
            "swivel_workers_registered",
            "Live worker processes known from their watch calls.",
            registry=self.registry,
        )
        self.config_version = Gauge(
            "swivel_config_version", "The configuration version in force.", registry=self.registry
        )
        self.batches = Counter(
            "swivel_driver_batches",
            "Micro-batch events reported by the driver runtime.",
            ["event"],
            registry=self.registry,
        )

        # The driver's latest load measurement (POST /v1/driver/loads), for the bin policies.
        self.bin_records = Gauge(
            "swivel_bin_records",
            "Records a bin's task processed over the measured batches.",
            ["bin", "executor"],
            registry=self.registry,
        )
        self.bin_state_rows = Gauge(
            "swivel_bin_state_rows", "State rows held by a bin.", ["bin", "executor"],
            registry=self.registry,
        )  # fmt: skip
        self.bin_state_bytes = Gauge(
            "swivel_bin_state_bytes", "Estimated state bytes held by a bin.", ["bin", "executor"],
            registry=self.registry,
        )  # fmt: skip
        self.executor_busy = Gauge(
            "swivel_executor_busy_fraction",
            "Busy time of an executor over the measured window (per core), 0..1.",
            ["executor"],
            registry=self.registry,
        )
        self.executor_busy_seconds = Gauge(
            "swivel_executor_busy_seconds", "Busy seconds of an executor over the window.",
            ["executor"], registry=self.registry,
        )  # fmt: skip
        self.executor_state_bytes = Gauge(
            "swivel_executor_state_bytes", "State bytes of the bins an executor serves.",
            ["executor"], registry=self.registry,
        )  # fmt: skip
        self.executor_memory = Gauge(
            "swivel_executor_memory_used_bytes", "JVM storage memory used by an executor.",
            ["executor"], registry=self.registry,
        )  # fmt: skip
        self.loads_measured_at = Gauge(
            "swivel_loads_measured_timestamp_seconds",
            "When the driver measured the loads served at /v1/loads (epoch seconds).",
            registry=self.registry,
        )
        self.coordination_interval = Gauge(
            "swivel_coordination_interval_seconds",
            "The driver's coordination interval (seconds between two load measurements).",
            registry=self.registry,
        )
        self.loads_reports = Counter(
            "swivel_driver_loads", "Load measurements reported by the driver.",
            registry=self.registry,
        )  # fmt: skip
        # The workers' own counts (Chi §5, monitoring through the control plane), from
        # their reports on the acks connection: running totals per operator and partition
        # (for a keyed operator, the partition is its bin).
        self.worker_rows = Counter(
            "swivel_worker_rows",
            "Input rows the workers handed to an operator's user function, per Spark partition "
            "(a keyed operator's bin), from the workers' count reports.",
            ["operator", "partition"],
            registry=self.registry,
        )
        self.worker_busy = Counter(
            "swivel_worker_busy_seconds",
            "Wall time the workers spent in an operator's user function, per Spark partition "
            "(a keyed operator's bin), from the workers' count reports.",
            ["operator", "partition"],
            registry=self.registry,
        )
        self.worker_reports = Counter(
            "swivel_worker_count_reports",
            "Count reports taken from the workers (a report resent after a lost answer once).",
            registry=self.registry,
        )

    def record_worker_counts(self, report: WorkerCounts) -> None:
        """Add one worker's counted report (a repeated `seq` never reaches here) to the
        running totals: Prometheus takes rates of counters, so the totals are exported, not
        the agent's window (`/v1/loads` serves that)."""
        self.worker_reports.inc()
        for part in report.partitions:
            labels = (part.operator, str(part.partition))
            self.worker_rows.labels(*labels).inc(part.rows)
            self.worker_busy.labels(*labels).inc(part.busy_seconds)

    def record_loads(self, loads: dict[str, Any]) -> None:
        """Replace the load gauges with one measurement (executors and bins that left go)."""
        self.loads_reports.inc()
        for gauge in (
            self.bin_records, self.bin_state_rows, self.bin_state_bytes, self.executor_busy,
            self.executor_busy_seconds, self.executor_state_bytes, self.executor_memory,
        ):  # fmt: skip
            gauge.clear()
        for b in loads.get("bins", ()):
            labels = (str(b["bin"]), str(b["executor"]))
            self.bin_records.labels(*labels).set(b.get("records", 0))
            self.bin_state_rows.labels(*labels).set(b.get("stateRows", 0))
            self.bin_state_bytes.labels(*labels).set(b.get("stateBytes", 0))
        for e in loads.get("executors", ()):
            executor = str(e["executor"])
            window = float(e.get("windowSeconds") or 0.0)
            busy = float(e.get("busySeconds") or 0.0)
            fraction = e.get("busyFraction", min(1.0, busy / window) if window else 0.0)
            self.executor_busy.labels(executor).set(fraction)
            self.executor_busy_seconds.labels(executor).set(busy)
            self.executor_state_bytes.labels(executor).set(e.get("memoryBytes", 0))
            self.executor_memory.labels(executor).set(e.get("jvmMemoryUsedBytes", 0))
        if loads.get("measuredAt"):
            self.loads_measured_at.set(float(loads["measuredAt"]))
        if loads.get("coordinationIntervalSeconds"):
            self.coordination_interval.set(float(loads["coordinationIntervalSeconds"]))

    def clear_loads(self) -> None:
        """Bins moved: the per-bin and per-executor gauges describe a placement that is gone."""
        for gauge in (
            self.bin_records, self.bin_state_rows, self.bin_state_bytes, self.executor_busy,
            self.executor_busy_seconds, self.executor_state_bytes, self.executor_memory,
        ):  # fmt: skip
            gauge.clear()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
