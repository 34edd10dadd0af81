"""Two checkouts of Swivel, one benchmark, side by side in one run: before/after a change.

    python benchmarks/before_after.py --before /tmp/ba/before --after /tmp/ba/after \
        --pairs 2 reaction [--output json]
    python benchmarks/before_after.py --before ... --after ... --pairs 1 overhead

Each checkout runs *its own* copy of the benchmark with *its own* virtualenv (`make setup`
in each: a checkout older than the tools split has the harness inside the product), so
the figures compare the code, not two installs of one tree. Runs alternate ABBA (before,
after, after, before, ...) so that a drift of the machine's load weighs on both sides
alike; every run records the 1-minute load average at its start and end, and the report
gives each figure's median per side and the ratio after/before.

Benchmarks:

- `reaction`: `benchmarks/operator_reaction.py --jobs 1,100@5,100 --reconfigurations 3`
  (the operator's reaction, Reconfiguration applied -> plan accepted by the agent; no
  Spark): per scenario p50/p99 and the operator's CPU ms per Reconfiguration.
- `overhead`: `swivel bench overhead` (the same keyed query in plain PySpark and under the
  Swivel runtime, ABBA inside): the batch-time ratio, its per-round median and the CPU ratio.

Run it alone: no other Spark, test run or helper process (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Figures = dict[str, float]


def _reaction_command(checkout: Path, rounds: int) -> list[str]:
    return [
        str(checkout / ".venv/bin/python"),
        "benchmarks/operator_reaction.py",
        "--jobs",
        "1,100@5,100",
        "--reconfigurations",
        str(rounds),
        "--output",
        "json",
    ]


def _reaction_figures(report: dict[str, Any]) -> Figures:
    figures: Figures = {}
    for scenario, phase in report["jobs"].items():
        figures[f"{scenario} p50_ms"] = phase["p50_ms"]
        figures[f"{scenario} p99_ms"] = phase["p99_ms"]
        figures[f"{scenario} operator_cpu_ms"] = phase["cpu_ms_per_reconfiguration"]["operator"]
    return figures


def _overhead_command(checkout: Path, rounds: int) -> list[str]:
    return [
        str(checkout / ".venv/bin/swivel"),
        "bench",
        "overhead",
        "--output",
        "json",
        "--rounds",
        str(rounds),
    ]


def _overhead_figures(report: dict[str, Any]) -> Figures:
    return {
        "ratio": report["ratio"],
        "pair_ratio_median": report["pair_ratio_median"],
        "cpu_ratio": report["cpu_ratio"],
        "swivel_batch_ms": report["swivel_batch_ms"],
        "plain_batch_ms": report["plain_batch_ms"],
    }


BENCHMARKS: dict[str, tuple[Callable[[Path, int], list[str]], Callable[..., Figures], int]] = {
    # name: (command in a checkout, figures of its JSON, default rounds)
    "reaction": (_reaction_command, _reaction_figures, 3),
    "overhead": (_overhead_command, _overhead_figures, 4),
}


def _json_tail(stdout: str) -> dict[str, Any]:
    """The report is the last JSON document on stdout (progress lines may precede it)."""
    start = stdout.find("{")
    while start != -1:
        try:
            return dict(json.loads(stdout[start:]))
        except json.JSONDecodeError:
            start = stdout.find("{", start + 1)
    raise ValueError("no JSON report on the benchmark's stdout")


def run_once(
    name: str, side: str, checkout: Path, rounds: int, extra: Sequence[str] = ()
) -> dict[str, Any]:
    command_of, figures_of, _ = BENCHMARKS[name]
    load_start = os.getloadavg()[0]
    began = time.monotonic()
    done = subprocess.run(
        [*command_of(checkout, rounds), *extra],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": ""},
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{name} in {checkout} exited {done.returncode}")
    return {
        "side": side,
        "figures": figures_of(_json_tail(done.stdout)),
        "load_average_1m": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "run_s": round(time.monotonic() - began, 1),
    }


def compare(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per figure: the median of each side and after/before."""
    names = runs[0]["figures"].keys()
    table: dict[str, dict[str, float]] = {}
    for figure in names:
        sides = {
            side: statistics.median(r["figures"][figure] for r in runs if r["side"] == side)
            for side in ("before", "after")
        }
        ratio = sides["after"] / sides["before"] if sides["before"] else float("nan")
        table[figure] = {**sides, "after/before": round(ratio, 3)}
    return table


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", choices=sorted(BENCHMARKS))
    parser.add_argument("--before", type=Path, required=True, help="checkout with its .venv")
    parser.add_argument("--after", type=Path, required=True, help="checkout with its .venv")
    parser.add_argument("--pairs", type=int, default=1, help="ABBA half-rounds: 2 = A B B A")
    parser.add_argument("--rounds", type=int, help="the benchmark's own rounds")
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument(
        "--extra", default="", help="more options for the benchmark, one string (the later wins)"
    )
    args = parser.parse_args(argv)
    rounds = args.rounds or BENCHMARKS[args.benchmark][2]
    order = [("before", args.before), ("after", args.after)]
    runs: list[dict[str, Any]] = []
    for pair in range(args.pairs):
        for side, checkout in order if pair % 2 == 0 else order[::-1]:
            sys.stderr.write(f"{args.benchmark}: {side} ({checkout}) ...\n")
            runs.append(run_once(args.benchmark, side, checkout, rounds, shlex.split(args.extra)))
            sys.stderr.write(f"  {runs[-1]}\n")
    commits = {
        side: subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        for side, path in order
    }
    report = {"benchmark": args.benchmark, "commits": commits, "runs": runs}
    report["compare"] = compare(runs)
    if args.output == "json":
        print(json.dumps(report, indent=2))
        return
    print(f"{args.benchmark}: before {commits['before']}, after {commits['after']}")
    for run in runs:
        print(f"  {run['side']:>6}: load {run['load_average_1m']}, {run['run_s']} s")
    for figure, row in report["compare"].items():
        print(
            f"  {figure:<28} before {row['before']:>9.2f}  after {row['after']:>9.2f}"
            f"  after/before {row['after/before']:.3f}"
        )


if __name__ == "__main__":
    main()
