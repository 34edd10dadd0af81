"""The agent's Prometheus metrics, on a registry of its own.

A registry per agent (not the process-global default) lets several agents live in one test
process and keeps the exposition free of unrelated collectors.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

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

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
