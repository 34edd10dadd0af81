"""Random dataflows, target sets and surges for the consistency property test, and the
harness that runs one on local Spark and judges it.

A `Case` is a small job (a source, a first map `p0`, 2-5 more operators, 1-2 sinks: at most
8 operators) built from the trail probes (`swivel.jobs.testing.probes`): maps, filters,
flatMaps (k rows per input), replicates, unions, blocking aggregates and keyed operators
(by customer or merchant, forward or hash in-edges), wired into fan-outs and merges at
random, plus a random
set of targets (keyed targets may bring a state transform), per-operator feed lags and the
moment of the switch. Every probe adds the same column (`trail`), so merges always have
equal columns; a job can still be refused by the runtime (`CompileError`, e.g. a keyed
operator above a split), which the harness counts apart from refused plans.

Deciding (the agent's own acceptance path) and running a case: `consistency_runs`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from swivel.api.streamjob import StreamJobSpec

JOB_NAME = "proof"
PROBES = "swivel.jobs.testing.probes:"
FUNCTIONS = {
    "map": "trail",
    "filter": "trail_filter",
    "flatMap": "trail_copies",
    "replicate": "trail",
    "aggregate": "trail_aggregate",
    "union": "trail",
    "keyed": "trail_keyed",
}
TRANSFORM = PROBES + "mark_transformed"
KEYS = ("customer", "merchant")
KINDS = ("keyed", "flatMap", "union", "map", "replicate", "filter", "keyed", "union", "aggregate")
ROWS_PER_BATCH = 40
OLD, NEW = "v1", "v2"


@dataclass(frozen=True)
class Case:
    """One generated example: the job, its function updates, feed lags, when to switch."""

    operators: tuple[dict[str, Any], ...]
    updates: tuple[dict[str, Any], ...]
    lag: Mapping[str, float]
    switch_after_s: float

    def job(self) -> StreamJobSpec:
        return StreamJobSpec.model_validate(
            {
                "sparkConf": {"spark.sql.execution.arrow.maxRecordsPerBatch": "10"},
                "source": {"kind": "generator", "options": {"customers": "8", "merchants": "4"}},
                "dataflow": {"bins": 4, "operators": list(self.operators)},
            }
        )

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(u["operator"] for u in self.updates)

    def body(self, scheduler: str = "fries") -> dict[str, Any]:
        """The `POST /v1/plans` body (`naive` is the agent's benchmark-only override)."""
        spec = {"jobRef": {"name": JOB_NAME}, "functionUpdates": list(self.updates)}
        body: dict[str, Any] = {"name": "proof", "spec": {**spec, "scheduler": "fries"}}
        if scheduler == "naive":
            body["schedulerOverride"] = "naive"
        elif scheduler != "fries":
            body["spec"]["scheduler"] = scheduler
        return body

    def slowed(self, operator: str, delay_ms: float, switch_after_s: float) -> Case:
        """This case with `operator` sleeping `delay_ms` per row under both versions and the
        switch `switch_after_s` into a batch: a long stage for the switch to land in."""

        def slow(params: Mapping[str, Any]) -> dict[str, Any]:
            return {**params, "delay_ms": delay_ms}

        operators = tuple(
            {**op, "params": slow(op["params"])} if op["name"] == operator else op
            for op in self.operators
        )
        updates = tuple(
            {**u, "params": slow(u["params"])} if u["operator"] == operator else u
            for u in self.updates
        )
        return Case(operators, updates, self.lag, switch_after_s)

    def features(self) -> set[str]:
        """Which of the shapes the issue asks for this case has (for the summary)."""
        found = set()
        consumers: Counter[str] = Counter()
        for op in self.operators:
            kind = op.get("kind", "map")
            if kind in ("keyed", "flatMap", "replicate", "filter", "aggregate"):
                found.add(kind)
            if len(op.get("inputs", ())) > 1:
                found.add("merge")
            for edge in op.get("inputs", ()):
                consumers[edge if isinstance(edge, str) else edge["from"]] += 1
        if any(n > 1 for n in consumers.values()):
            found.add("fan-out")
        if any("stateTransform" in u for u in self.updates):
            found.add("state transform")
        return found

    def __repr__(self) -> str:
        # What Hypothesis prints for a failing example: enough to rebuild it by hand.
        lines = ["Case("]
        for op in self.operators:
            lines.append(f"  {_describe(op)}")
        lines.append(f"  targets: {json.dumps(list(self.updates))}")
        lines.append(f"  lag: {dict(self.lag)}, switch after {self.switch_after_s:.2f} s)")
        return "\n".join(lines)


def _describe(op: Mapping[str, Any]) -> str:
    ins = []
    for edge in op.get("inputs", ()):
        if isinstance(edge, str):
            ins.append(edge)
        else:
            ins.append(f"{edge['from']}#{edge['partitioning']}({edge.get('key')})")
    kind = op.get("kind", "map")
    key = f"[{op['key']}]" if op.get("key") else ""
    fn = op.get("function", "").removeprefix(PROBES)
    return f"{op['name']} = {kind}{key}({', '.join(ins)}) {fn} {op.get('params', {})}"


def _params(name: str, kind: str, label: str, delay_ms: float) -> dict[str, Any]:
    params: dict[str, Any] = {"me": name, "label": label, "delay_ms": delay_ms}
    if kind == "flatMap":
        params["copies"] = 2
    return params


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A small random dataflow with fan-outs, merges, keyed and one-to-many operators."""
    p0_delay = draw(st.sampled_from([0.0, 2.0, 5.0]))
    operators: list[dict[str, Any]] = [
        {"name": "src", "kind": "source"},
        {
            "name": "p0",
            "inputs": ["src"],
            "function": PROBES + "trail",
            "params": _params("p0", "map", OLD, p0_delay),
        },
    ]
    kinds: dict[str, str] = {"p0": "map"}
    # The first choices of every draw are what Hypothesis tries first (and shrinks towards),
    # so they make an interesting job: p0 -> keyed -> flatMap -> sink, targets p0 and the keyed.
    for index in range(1, draw(st.integers(2, 5)) + 1):
        name = f"o{index}"
        available = [op["name"] for op in operators[1:]]
        kind = draw(st.sampled_from(KINDS))
        if kind == "union" and len(available) < 2:
            kind = "map"
        if kind == "union" or (kind == "map" and len(available) >= 2 and draw(st.booleans())):
            sources = draw(
                st.lists(st.sampled_from(available), min_size=2, max_size=3, unique=True)
            )
        else:
            # Half the time the newest operator: deeper chains, and fewer fan-outs of p0
            # (whose branches meeting only after a keyed operator split it: refused).
            sources = [draw(st.one_of(st.just(available[-1]), st.sampled_from(available)))]
        op: dict[str, Any] = {"name": name, "kind": kind}
        key = draw(st.sampled_from(KEYS))
        hashed = draw(st.booleans())
        if kind == "keyed":
            op["key"] = key
        if hashed:
            op["inputs"] = [{"from": s, "partitioning": "hash", "key": key} for s in sources]
        else:
            op["inputs"] = list(sources)
        if kind != "union" or draw(st.booleans()):  # a union may only merge
            op["function"] = PROBES + FUNCTIONS[kind]
            op["params"] = _params(name, kind, OLD, 0.0)
            if kind == "aggregate":
                op["params"]["by"] = key  # per key of the batch (one partition without hash)
        operators.append(op)
        kinds[name] = kind
    consumed = {
        edge if isinstance(edge, str) else edge["from"]
        for op in operators
        for edge in op.get("inputs", ())
    }
    dangling = [op["name"] for op in operators[1:] if op["name"] not in consumed]
    if len(dangling) >= 2 and len(operators) <= 6 and draw(st.booleans()):
        cut = draw(st.integers(1, len(dangling) - 1))
        operators.append({"name": "out", "kind": "sink", "inputs": dangling[:cut]})
        operators.append({"name": "out2", "kind": "sink", "inputs": dangling[cut:]})
    else:
        operators.append({"name": "out", "kind": "sink", "inputs": dangling})

    functional = [op for op in operators if "function" in op]
    targets = draw(
        st.lists(st.sampled_from(functional), min_size=min(2, len(functional)),
                 max_size=min(3, len(functional)), unique_by=lambda op: op["name"])
    )  # fmt: skip
    updates = []
    for op in sorted(targets, key=operators.index):
        name, kind = op["name"], kinds[op["name"]]
        update: dict[str, Any] = {
            "operator": name,
            "params": {**op["params"], "label": NEW},
        }
        if kind == "keyed" and draw(st.booleans()):
            update["stateTransform"] = TRANSFORM
        updates.append(update)
    lagged = draw(st.lists(st.sampled_from(functional), max_size=2, unique_by=lambda o: o["name"]))
    lag = {op["name"]: draw(st.sampled_from([0.3, 1.0])) for op in lagged}
    switch_after = draw(st.sampled_from([0.0, 0.3, 0.8]))
    return Case(tuple(operators), tuple(updates), lag, switch_after)


def issue_example() -> Case:
    """Issue 10 §1's example: parse -> {s1 (keyed by customer), s2 (map)} -> union -> det
    (keyed), targets s1, s2 and det: s1 and s2 must not head one component whose copies of
    a record can reach det under two versions (refused, or planned so they cannot)."""
    keyed = PROBES + FUNCTIONS["keyed"]
    hashed = {"partitioning": "hash", "key": "customer"}
    operators = (
        {"name": "src", "kind": "source"},
        {"name": "p0", "inputs": ["src"], "function": PROBES + "trail",
         "params": _params("p0", "map", OLD, 2.0)},
        {"name": "s1", "kind": "keyed", "key": "customer", "inputs": [{"from": "p0", **hashed}],
         "function": keyed, "params": _params("s1", "keyed", OLD, 0.0)},
        {"name": "s2", "inputs": ["p0"], "function": PROBES + "trail",
         "params": _params("s2", "map", OLD, 0.0)},
        {"name": "u", "kind": "union", "inputs": ["s1", "s2"]},
        {"name": "det", "kind": "keyed", "key": "customer", "inputs": [{"from": "u", **hashed}],
         "function": keyed, "params": _params("det", "keyed", OLD, 0.0)},
        {"name": "out", "kind": "sink", "inputs": ["det"]},
    )  # fmt: skip
    updates = tuple(
        {"operator": name, "params": _params(name, kind, NEW, 0.0)}
        for name, kind in (("s1", "keyed"), ("s2", "map"), ("det", "keyed"))
    )
    return Case(operators, updates, {}, 0.3)


def transform_example() -> Case:
    """A replicate fanning out to two maps that a union merges (one region), then a keyed
    operator with a state transform: targets one branch and the keyed operator, whose
    every record arrives twice, under the one tag its head stamped."""
    keyed = PROBES + FUNCTIONS["keyed"]
    operators = (
        {"name": "src", "kind": "source"},
        {"name": "p0", "inputs": ["src"], "function": PROBES + "trail",
         "params": _params("p0", "map", OLD, 5.0)},
        {"name": "o1", "kind": "replicate", "inputs": ["p0"], "function": PROBES + "trail",
         "params": _params("o1", "replicate", OLD, 0.0)},
        {"name": "o2", "inputs": ["o1"], "function": PROBES + "trail",
         "params": _params("o2", "map", OLD, 0.0)},
        {"name": "o3", "kind": "filter", "inputs": ["o1"], "function": PROBES + "trail_filter",
         "params": _params("o3", "filter", OLD, 0.0)},
        {"name": "o4", "kind": "union", "inputs": ["o2", "o3"]},
        {"name": "o5", "kind": "keyed", "key": "customer",
         "inputs": [{"from": "o4", "partitioning": "hash", "key": "customer"}],
         "function": keyed, "params": _params("o5", "keyed", OLD, 0.0)},
        {"name": "out", "kind": "sink", "inputs": ["o5"]},
    )  # fmt: skip
    updates = (
        {"operator": "o2", "params": _params("o2", "map", NEW, 0.0)},
        {"operator": "o5", "params": _params("o5", "keyed", NEW, 0.0), "stateTransform": TRANSFORM},
    )
    return Case(operators, updates, {"o1": 0.3}, 0.3)


def hashed_chain_example() -> Case:
    """p0 -> o1 (hash by customer) -> o2 (a flatMap, hash by merchant) -> sink, all three
    targets, the non-head o1 hearing of the update 5 s late. Found by the generator (with
    lags o1 0.3 s, o2 1 s, the switch landing as a batch began): the head's new rows reach
    o1 before its snapshot has the transition."""
    operators = (
        {"name": "src", "kind": "source"},
        {"name": "p0", "inputs": ["src"], "function": PROBES + "trail",
         "params": _params("p0", "map", OLD, 5.0)},
        {"name": "o1", "inputs": [{"from": "p0", "partitioning": "hash", "key": "customer"}],
         "function": PROBES + "trail", "params": _params("o1", "map", OLD, 0.0)},
        {"name": "o2", "kind": "flatMap",
         "inputs": [{"from": "o1", "partitioning": "hash", "key": "merchant"}],
         "function": PROBES + "trail_copies", "params": _params("o2", "flatMap", OLD, 0.0)},
        {"name": "out", "kind": "sink", "inputs": ["o2"]},
    )  # fmt: skip
    updates = tuple(
        {"operator": name, "params": _params(name, kind, NEW, 5.0 if name == "p0" else 0.0)}
        for name, kind in (("p0", "map"), ("o1", "map"), ("o2", "flatMap"))
    )
    return Case(operators, updates, {"o1": 5.0}, 0.0)


# --- which operators a plan or a path involves ----------------------------------------


def lineage(case: Case) -> dict[str, set[str]]:
    """Each operator's ancestors (not itself)."""
    inputs = {
        op["name"]: [e if isinstance(e, str) else e["from"] for e in op.get("inputs", ())]
        for op in case.operators
    }
    ancestors: dict[str, set[str]] = {}

    def up(name: str) -> set[str]:
        if name not in ancestors:
            ancestors[name] = set()
            for parent in inputs[name]:
                ancestors[name] |= {parent} | up(parent)
        return ancestors[name]

    for name in inputs:
        up(name)
    return ancestors
