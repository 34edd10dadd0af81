"""How `plan_mcs` scales: random layered DAGs of 100, 1 000 and 10 000 operators.

    python benchmarks/planner_mcs.py [--output json] [--runs 9] [--seed 7]

Each dataflow has layers about sqrt(n) wide, every operator after the first layer draws
one to three parents from the layer before (so about two out-edges per operator), and
about 10% of the operators are one-to-many (half of them replicates), 3% are uniqueness
operators and 2% are blocking. Five targets are drawn from the second half of the layers
so the MCS has ancestors to look at (deeper graphs give them bigger ancestor cones, so
the MCS share grows with size, from about 30% of the operators to 70%). The time is the best of several runs of `plan_mcs`
(time.perf_counter) on an already-built Dataflow, with and without pruning; the goal is
at most 50 ms at 10 000 operators and roughly 10x growth per 10x operators.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass

from swivel.api.vocabulary import Cardinality
from swivel.controllers.graph import Dataflow, Edge, Operator
from swivel.controllers.mcs import plan_mcs

SIZES = (100, 1_000, 10_000)
TARGETS = 5
GOAL_MS = 50.0


@dataclass(frozen=True)
class Measurement:
    operators: int
    edges: int
    pruned_ms: float
    unpruned_ms: float
    mcs_operators: int
    components: int

    @property
    def ns_per_element(self) -> float:
        """Planning time per operator-or-edge: flat if the planner is linear."""
        return self.pruned_ms * 1e6 / (self.operators + self.edges)


def layered_dataflow(size: int, rng: random.Random) -> tuple[Dataflow, list[str]]:
    width = max(5, round(math.sqrt(size)))
    layers: list[list[str]] = []
    operators: list[Operator] = []
    edges: list[Edge] = []
    for index in range(size):
        if index % width == 0:
            layers.append([])
        name = f"op{index}"
        operators.append(_random_operator(name, rng))
        if len(layers) > 1:
            for parent in rng.sample(layers[-2], k=min(len(layers[-2]), rng.randint(1, 3))):
                edges.append(Edge(parent, name))
        layers[-1].append(name)
    late = [name for layer in layers[len(layers) // 2 :] for name in layer]
    return Dataflow(tuple(operators), tuple(edges)), rng.sample(late, k=TARGETS)


def _random_operator(name: str, rng: random.Random) -> Operator:
    roll = rng.random()
    if roll < 0.05:
        return Operator(name, Cardinality.ONE_TO_MANY, at_most_one_per_edge=True)
    if roll < 0.10:
        return Operator(name, Cardinality.ONE_TO_MANY)
    if roll < 0.13:
        return Operator(name, unique_per_record=True)
    if roll < 0.15:
        return Operator(name, blocking=True)
    return Operator(name)


def best_ms(dataflow: Dataflow, targets: list[str], *, pruning: bool, runs: int) -> float:
    """Best of `runs`. Each starts from a collected heap, so a full collection left over
    from building the dataflow does not land in the timing; GC stays on while planning."""
    best = math.inf
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        plan_mcs(dataflow, targets, pruning=pruning)
        best = min(best, time.perf_counter() - start)
    return best * 1_000


def measure(size: int, *, runs: int, seed: int) -> Measurement:
    dataflow, targets = layered_dataflow(size, random.Random(seed + size))
    plan = plan_mcs(dataflow, targets)
    return Measurement(
        operators=size,
        edges=len(dataflow.edges),
        pruned_ms=best_ms(dataflow, targets, pruning=True, runs=runs),
        unpruned_ms=best_ms(dataflow, targets, pruning=False, runs=runs),
        mcs_operators=len(plan.operators),
        components=len(plan.components),
    )


def growth(results: list[Measurement]) -> list[float]:
    """Time ratio between consecutive sizes (each 10x the last): ~10 means linear."""
    return [b.pruned_ms / a.pruned_ms for a, b in itertools.pairwise(results)]


def render(results: list[Measurement]) -> str:
    lines = [
        f"{'operators':>9} {'edges':>7} {'pruning ms':>11} {'no pruning ms':>14} "
        f"{'ns/(V+E)':>9} {'MCS ops':>8} {'components':>10}"
    ]
    lines += [
        f"{r.operators:>9,} {r.edges:>7,} {r.pruned_ms:>11.2f} {r.unpruned_ms:>14.2f} "
        f"{r.ns_per_element:>9.0f} {r.mcs_operators:>8,} {r.components:>10}"
        for r in results
    ]
    ratios = ", ".join(f"{ratio:.1f}x" for ratio in growth(results))
    lines.append(f"growth per 10x operators (pruning): {ratios}")
    verdict = "meets" if results[-1].pruned_ms <= GOAL_MS else "misses"
    lines.append(f"{results[-1].operators:,} operators {verdict} the {GOAL_MS:.0f} ms goal")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", choices=["table", "json"], default="table")
    parser.add_argument("--runs", type=int, default=9, help="best of this many runs")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    results = [measure(size, runs=args.runs, seed=args.seed) for size in SIZES]
    if args.output == "json":
        document = {
            "results": [asdict(r) | {"ns_per_element": r.ns_per_element} for r in results],
            "growth": growth(results),
            "goal_ms": GOAL_MS,
        }
        print(json.dumps(document, indent=2))
    else:
        print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
