"""The operator's Prometheus metrics (served by `swivel operator --metrics-port`).

The agent measures the reconfiguration delay itself (acceptance to last switch); the
operator's histogram is what a user waits for end to end: request (creation of the
Reconfiguration) to Completed.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

RECONCILES = Counter(
    "swivel_operator_reconciles_total",
    "Handler runs, by resource and handler.",
    ["resource", "handler"],
)
FAILURES = Counter(
    "swivel_operator_failures_total",
    "Failures seen by handlers, by resource and reason.",
    ["resource", "reason"],
)
RECONFIGURATIONS = Counter(
    "swivel_operator_reconfigurations_total",
    "Reconfigurations that reached a final phase, by phase and kind.",
    ["phase", "kind"],
)
RECONFIGURATION_DELAY = Histogram(
    "swivel_operator_reconfiguration_delay_seconds",
    "Reconfiguration requested (created) to Completed, by kind.",
    ["kind"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
)
AGENT_DELAY = Histogram(
    "swivel_operator_agent_delay_seconds",
    "The agent's own delay (acceptance to last switch) of completed plans, by kind.",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
