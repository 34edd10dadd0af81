"""The driver's latest load measurement, as the agent keeps and serves it
(docs/control-protocol.md, "Loads"; the document is validated by `loads.parse_loads`).

Only the latest is kept, in memory: a new one replaces it and its gauges, and it is
forgotten when bins move (a measurement of the old placement would make a policy move a
bin twice), so `GET /v1/loads` answers 404 until the driver measures again.

Beside it the document carries the workers' counts over the agent's sliding window
(`workers`, from `worker_loads.WorkerLoadWindow`: rows and busy time per bin, seconds old),
which do not describe a placement and so are not forgotten when bins move.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from swivel.jobs.agent.loads import parse_loads
from swivel.jobs.agent.metrics import AgentMetrics
from swivel.jobs.agent.worker_loads import WorkerLoadWindow
from swivel.protocol.loads import ServedLoads


class LatestLoads:
    def __init__(
        self,
        bins: int,
        metrics: AgentMetrics,
        clock: Callable[[], float],
        workers: WorkerLoadWindow | None = None,
    ) -> None:
        self._bins, self._metrics, self._clock = bins, metrics, clock
        self._workers = workers
        self._loads: dict[str, Any] | None = None  # the driver's latest measurement
        self._received_at: float | None = None

    def record(self, body: Any) -> None:
        """Keep a new measurement; LoadsRejected (400) when malformed, keeping the old one."""
        loads = parse_loads(body, self._bins)
        self._loads, self._received_at = loads, self._clock()
        self._metrics.record_loads(loads)

    def document(self) -> dict[str, Any] | None:
        """The latest measurement with `receivedAt` and `ageSeconds` and the workers'
        counts (`workers`, when any arrived within the window), None before any measurement
        (or after bins moved: a measurement of the old placement would mislead a policy)."""
        if self._loads is None or self._received_at is None:
            return None
        age = max(0.0, self._clock() - self._received_at)
        served = {**self._loads, "receivedAt": self._received_at, "ageSeconds": age}
        workers = self._workers.document() if self._workers is not None else None
        if workers is not None:
            served["workers"] = workers.to_wire()
        return ServedLoads.model_validate(served).to_wire()

    def placement(self) -> dict[int, str] | None:
        """The driver's placement as last measured (each bin's executor in the latest
        measurement): what the agent plans a migration from. None before any measurement,
        after bins moved, or when a bin is missing from it."""
        if self._loads is None:
            return None
        found = {int(b["bin"]): str(b["executor"]) for b in self._loads.get("bins") or ()}
        return found if set(found) == set(range(self._bins)) else None

    def forget(self) -> None:
        self._loads = self._received_at = None
        self._metrics.clear_loads()
