"""Smoke test of `benchmarks/operator_reaction.py`: 2 jobs, 2 reconfigurations each.

The whole path runs (sandbox and operator subprocesses, real agents): every plan must reach
its agent and the report must have the documented shape. Figures are not asserted; this
machine is too noisy for that (docs/operator.md, "Reaction benchmark").
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def load_benchmark() -> ModuleType:
    path = ROOT / "benchmarks" / "operator_reaction.py"
    spec = importlib.util.spec_from_file_location("swivel_bench_operator_reaction", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(60)
def test_two_jobs_two_reconfigurations_reach_their_agents(tmp_path: Path) -> None:
    bench = load_benchmark()
    started = time.monotonic()
    report = bench.run_benchmark([2], 2, workdir=tmp_path)
    elapsed = time.monotonic() - started

    assert set(report) >= {"jobs", "reconciles_per_s", "goal_p99_ms", "met"}
    assert report["goal_p99_ms"] == 1000
    assert isinstance(report["met"], bool)
    phase = report["jobs"]["2"]
    assert {"p50_ms", "p95_ms", "p99_ms", "max_ms", "n"} <= set(phase)
    assert phase["n"] == phase["expected"] == 4 and phase["delivered"]
    assert 0 < phase["p50_ms"] <= phase["p99_ms"] <= phase["max_ms"]
    assert phase["reconciles"]["reconfiguration/step"] >= 4
    assert report["reconciles_per_s"] == phase["reconciles_per_s"] > 0
    assert report["met"] == (phase["p99_ms"] <= 1000)
    assert elapsed < 40, f"the smoke run took {elapsed:.0f}s"
    # The printed table is built from the same report.
    assert "goal: p99 <= 1000 ms" in bench.table(report)
