"""Steady-state cost of the control channel: micro-batch time with snapshots pushed to the
workers at `rate`/s against none, same job, same rows per batch, phases alternated so a
change in the machine's load hits both alike."""

from __future__ import annotations

import secrets
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swivel.api.streamjob import StreamJob
from swivel.embedded.agents import free_port
from swivel_tools.bench.pump import ControlPump


@dataclass(frozen=True)
class Overhead:
    batch_ms_without: float
    batch_ms_with: float
    rate_per_s: float
    batches_per_phase: int

    def to_json(self) -> dict[str, Any]:
        return {
            "batch_ms_without": round(self.batch_ms_without, 1),
            f"batch_ms_with_{self.rate_per_s:g}_per_s": round(self.batch_ms_with, 1),
            "ratio": round(self.batch_ms_with / self.batch_ms_without, 3),
            "goal": 1.2,
            "batches_per_phase": self.batches_per_phase,
        }


def measure_overhead(
    spark: Any,
    job: StreamJob,
    workdir: Path,
    *,
    rows_per_batch: int = 200,
    batches_per_phase: int = 5,
    rounds: int = 2,
    rate_per_s: float = 100.0,
) -> Overhead:
    from swivel.jobs.control.driver_channel import AgentDriverChannel
    from swivel.jobs.runtime.compiling import job_snapshot
    from swivel.jobs.runtime.driver import JobRuntime
    from swivel.jobs.runtime.feeds import AgentFeed
    from swivel.jobs.runtime.testing import bounded

    steady = bounded(job.spec, rows_per_batch, name="swivel_overhead")
    snapshot = job_snapshot(steady)
    token = secrets.token_hex(16)
    pump = ControlPump(snapshot, free_port(), token).start()
    runtime = JobRuntime(
        steady,
        spark,
        checkpoint=str(workdir / "overhead-checkpoint"),
        name="swivel_overhead",
        feed=AgentFeed(pump.url, token, snapshot),
        agent=AgentDriverChannel(pump.url, token),
    )
    samples: dict[float, list[float]] = {0.0: [], rate_per_s: []}
    try:
        runtime.start()
        runtime.wait_for_batches(2, 300)  # start-up batches are not steady state
        for round_ in range(rounds):
            # ABBA: a drift in the machine's load over the run hits both sides alike.
            order = (0.0, rate_per_s) if round_ % 2 == 0 else (rate_per_s, 0.0)
            for rate in order:
                pump.rate = rate
                first = runtime.batches_completed() + 1  # the running batch straddles phases
                runtime.wait_for_batches(first + batches_per_phase, 300)
                durations = [e["durationMs"] for e in runtime.progress[first:]]
                samples[rate] += [float(d) for d in durations[:batches_per_phase]]
    finally:
        runtime.stop()
        pump.stop()
    return Overhead(
        batch_ms_without=statistics.median(samples[0.0]),
        batch_ms_with=statistics.median(samples[rate_per_s]),
        rate_per_s=rate_per_s,
        batches_per_phase=batches_per_phase * rounds,
    )
