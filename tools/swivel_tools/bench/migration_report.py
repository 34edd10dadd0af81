"""The parts of `swivel bench migration`'s JSON that describe the run rather than measure
a strategy: the load average at each stage, each size's result kept as soon as it is
measured, the per-size extras of the sweep, the prewarmed strategy's own records, and the
top-level document (issue 13's contract). Apart from the run (`migration.py`)."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from swivel.jobs.migration.migrations import Migration
from swivel.jobs.migration.snapshot_staggering import StaggeredSnapshots
from swivel_tools.bench import migration_figures as figures
from swivel_tools.bench.migration_settings import PREWARMED, BenchConfig, cleanup_ratio


def load_average(label: str) -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    return {"at": label, "time": round(time.time(), 1), "1m": one, "5m": five, "15m": fifteen}


def keep_size_result(root: Path, size: dict[str, Any]) -> None:
    """Write one size's result as soon as it is measured (`<workdir>/size-<keys>.json`): a
    sweep takes an hour on an idle machine, and a later size that fails (executor memory)
    must not take the measured ones with it."""
    path = root / f"size-{size['keys']}.json"
    path.write_text(json.dumps(size, indent=2, default=str))
    print(f"keys={size['keys']}: measured, kept in {path}", file=sys.stderr, flush=True)


def size_extras(size: dict[str, Any]) -> dict[str, Any]:
    keep = ("steady_p50_ms", "state_rows", "state_bytes", "moved", "steady_run", "snapshot_phases")
    return {k: size[k] for k in keep}


def staggering_figures(staggering: StaggeredSnapshots) -> dict[str, Any]:
    """The staggered snapshots' passes over one size (jobs/migration/snapshot_staggering.py)."""
    return {
        "passes": staggering.passes,
        "last": asdict(staggering.report) if staggering.report else None,
        "reason": staggering.reason,
        "error": staggering.error,
    }


def prewarm_figures(migration: Migration) -> dict[str, Any]:
    """What only the prewarmed strategy records, per step."""
    return {
        "bins_prewarmed": len(migration.prewarmed),
        "prewarm_ms": migration.prewarm_ms,  # per step: its loads (queued ones included)
        # per step: its switch's top-up (slowest copy's ms; replayed or reopened)
        "topups": migration.topups,
        # boundaries a loaded step waited out: their batch compacted the input's log
        "switches_deferred": migration.switches_deferred,
    }


def bench_report(
    config: BenchConfig,
    sweep: list[dict[str, Any]],
    chosen: dict[str, Any],
    *,
    loads: list[dict[str, Any]],
    storage: dict[str, Any],
    run_s: float,
    prewarm_reason: str | None,
) -> dict[str, Any]:
    """The JSON `swivel bench migration --output json` prints: the contract's top level
    (`steady_batch_ms`, `strategies`, `state_rows`, `storage`, `sweep`) from the `chosen`
    size, the goals' ratios over the sweep, and how the run was set up."""
    top = dict(chosen["strategies"])
    if prewarm_reason:
        top[PREWARMED] = None
    report: dict[str, Any] = {
        "steady_batch_ms": {"p50": chosen["steady_p50_ms"], "keys": chosen["keys"]},
        "strategies": top,
        "state_rows": chosen["state_rows"],
        "storage": storage,
        "sweep": [
            {**figures.sweep_row(s["keys"], s["strategies"]), **size_extras(s)} for s in sweep
        ],
        "load_average": loads,
        "counts_match_reference": all(s["counts_match_reference"] for s in sweep),
        "setup": {**asdict(config), "cleanup_ratio": cleanup_ratio(config), "run_s": run_s},
    }
    report.update(
        goal=figures.bounded_ratio(report["sweep"]),
        prewarm_goal=figures.prewarm_ratio(report["sweep"]),
    )
    if prewarm_reason:
        report["reason"] = {PREWARMED: prewarm_reason}
    return report
