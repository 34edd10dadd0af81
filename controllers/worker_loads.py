"""Flux's inputs from the workers' own counts (Chi §5: monitoring through the control plane).

The workers report, per bin, the rows their keyed operators ran and the wall time spent in
those operators' functions; the agent sums the reports over a sliding window of seconds
(`GET /v1/loads`, `workers`). When those figures are there and fresh, a Flux round uses
them instead of the driver's measurement, which polls Spark's REST API after batches and
is often a minute old:

- a bin's `records` are the rows the workers ran for it within the window;
- an executor's busy time is the sum of the busy time of the bins placed on it, per core,
  over the same window: the *movable* utilisation -- the work that goes where its bin goes.
  Time no bin move can shift (shuffles, stateless operators, the JVM) is left out, so the
  thresholds compare what a move can actually change.

What workers cannot see stays the driver's: the placement (which executor serves a bin:
Spark's scheduler decides, a Python worker does not know its executor on every cluster
manager), each executor's cores and memory, and each bin's state bytes (Spark keeps a
state store's size per partition in the JVM only; the driver's state reader attributes it,
`swivel.jobs.migration.state_memory`). Figures that are absent, empty or older than
`max_age_s` fall back to the driver's measurement, as before.

Pure: plain values in, Flux's `ExecutorLoad` / `BinLoad` out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from swivel.controllers.flux_rounds import BinLoad, ExecutorLoad

MAX_WORKER_AGE_S = 30.0  # newer than this (the agent's default window) counts as fresh
DRIVER, WORKERS = "driver", "workers"  # where a round's loads came from


@dataclass(frozen=True, slots=True)
class WorkerBinCounts:
    """One bin's counts over the agent's window."""

    bin: int
    rows: int
    busy_s: float


@dataclass(frozen=True, slots=True)
class WorkerFigures:
    """The workers' counts as the agent served them (`WorkerLoads`)."""

    bins: tuple[WorkerBinCounts, ...]
    window_s: float
    age_s: float  # since the agent received the newest report, at the agent's answer


def unusable(figures: WorkerFigures | None, max_age_s: float = MAX_WORKER_AGE_S) -> str | None:
    """Why a round cannot use `figures` (None when it can)."""
    if figures is None:
        return "no worker reported counts within the agent's window"
    if not figures.bins:
        return "the workers ran no rows of a keyed operator within the window"
    if not figures.window_s > 0:
        return "the workers' window is empty"
    if figures.age_s > max_age_s:
        return f"the newest worker report is {figures.age_s:.1f}s old (limit {max_age_s:g}s)"
    return None


def with_worker_figures(
    executors: Sequence[ExecutorLoad],
    bins: Sequence[BinLoad],
    figures: WorkerFigures,
    cores: Mapping[str, int] | None = None,
) -> tuple[list[ExecutorLoad], list[BinLoad]]:
    """The driver's loads with records and busy time replaced by the workers' (module
    docstring): placement, memory and state bytes stay the driver's. A bin the workers did
    not report ran no rows within the window."""
    counted = {b.bin: b for b in figures.bins}
    busy: dict[str, float] = {}
    out_bins = []
    for load in bins:
        worker = counted.get(load.bin)
        rows = worker.rows if worker is not None else 0
        busy[load.executor] = busy.get(load.executor, 0.0) + (worker.busy_s if worker else 0.0)
        out_bins.append(replace(load, records=rows))
    window = figures.window_s
    out_executors = [
        replace(
            load,
            busy_s=min(
                window, busy.get(load.executor, 0.0) / max(1, (cores or {}).get(load.executor, 1))
            ),
            window_s=window,
        )
        for load in executors
    ]
    return out_executors, out_bins


def figures_of(
    bins: Iterable[tuple[int, int, float]], window_s: float, age_s: float
) -> WorkerFigures:
    """`WorkerFigures` from (bin, rows, busy seconds) triples."""
    return WorkerFigures(
        tuple(WorkerBinCounts(b, rows, busy) for b, rows, busy in bins), window_s, age_s
    )
