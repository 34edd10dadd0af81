"""What the runtime compiles a DAG-shaped dataflow into, and what it refuses (no Spark
session: `shapes.plan_shape` is pure, the merge rules work on column lists / StructTypes)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pytest
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import StreamJobSpec
from swivel.controllers.shapes import (
    BlockingStep,
    CompileError,
    KeyedStep,
    Region,
    merged_columns,
    plan_shape,
)
from swivel.jobs.runtime.choosing import parts
from swivel.jobs.runtime.compiling import linear_chain, merged_schema
from swivel.jobs.runtime.functions import AllowList
from swivel.jobs.runtime.operators import (
    EMITTED_COLUMN,
    OperatorPlan,
    OperatorRunner,
    WorkerSettings,
)
from swivel.jobs.runtime.regions import CHUNK, ChunkView, RegionStep, run_region
from swivel.protocol.snapshots import Component, OperatorConfig, Snapshot, Transition

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fraud-detection" / "streamjob.yaml"
F = "swivel.jobs.examples.labels:labelled"
K = "swivel.jobs.testing.probes:counting"


def job(*operators: dict[str, Any]) -> StreamJobSpec:
    return StreamJobSpec.model_validate({"dataflow": {"bins": 4, "operators": list(operators)}})


def src(name: str = "in") -> dict[str, Any]:
    return {"name": name, "kind": "source"}


def op(name: str, *inputs: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputs": list(inputs), "function": F, **extra}


def keyed(name: str, *inputs: Any, key: str = "customer", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "keyed",
        "key": key,
        "inputs": list(inputs),
        "function": K,
        **extra,
    }


def sink(name: str, *inputs: str) -> dict[str, Any]:
    return {"name": name, "kind": "sink", "inputs": list(inputs)}


def union(name: str, *inputs: str) -> dict[str, Any]:
    return {"name": name, "kind": "union", "inputs": list(inputs)}


def hashed(source: str, key: str = "customer") -> dict[str, str]:
    return {"from": source, "partitioning": "hash", "key": key}


DIAMOND = job(
    src(),
    op("parse", "in"),
    op("a", "parse"),
    op("b", "parse"),
    union("u", "a", "b"),
    keyed("k", hashed("u")),
    sink("out", "k"),
)


def refusal(*operators: dict[str, Any]) -> CompileError:
    with pytest.raises(CompileError) as caught:
        plan_shape(job(*operators))
    return caught.value


# --- shapes that compile ------------------------------------------------------------------


def test_the_fraud_chain_still_compiles_as_before() -> None:
    example = load_streamjob(EXAMPLE).spec
    shape = plan_shape(example)
    assert shape.steps == (
        Region(("parse",), "parse", "payments"),
        KeyedStep("customer-detector"),
        KeyedStep("merchant-detector"),
        Region(("combine",), "combine", "merchant-detector"),
    )
    assert not shape.splits and not shape.replicated
    assert [o.name for o in linear_chain(example)][-1] == "alerts"


def test_a_diamond_of_stateless_branches_is_one_region_run_in_one_pass() -> None:
    shape = plan_shape(DIAMOND)
    region = Region(("parse", "a", "b", "u"), "u", "in", None, linear=False)
    assert shape.steps == (region, KeyedStep("k"))
    assert shape.order == ("in", "parse", "a", "b", "u", "k", "out")
    assert not shape.splits and not shape.replicated
    assert shape.function_operators == 4


def test_a_union_with_a_function_merges_and_then_runs() -> None:
    shape = plan_shape(
        job(src(), op("a", "in"), op("b", "in"), op("m", "a", "b"), sink("out", "m"))
    )
    assert shape.steps == (Region(("a", "b", "m"), "m", "in", None, linear=False),)


def test_siblings_of_a_keyed_output_share_one_region() -> None:
    shape = plan_shape(
        job(
            src(),
            keyed("k", hashed("in")),
            op("a", "k"),
            op("b", "k"),
            op("m", "a", "b", "k"),  # a merge may also read the producer directly
            sink("out", "m"),
        )
    )
    assert shape.steps == (
        KeyedStep("k"),
        Region(("a", "b", "m"), "m", "k", None, linear=False),
    )
    assert not shape.splits


def test_branches_meeting_after_a_keyed_operator_split_the_shared_stateless_input() -> None:
    shape = plan_shape(
        job(
            src(),
            op("parse", "in"),
            keyed("k", hashed("parse")),
            op("s", "parse"),
            union("u", "k", "s"),
            sink("out", "u"),
        )
    )
    assert shape.steps == (
        Region(("parse",), "parse", "in"),
        Region(("s",), "s", "parse"),
        KeyedStep("k"),
        Region(("u",), "u", None),
    )
    assert shape.splits == {"parse": ("s", "k")}
    assert shape.replicated == {"in", "parse"}  # Spark evaluates them once per branch


def test_a_diamond_beside_a_keyed_branch_stays_one_pass_below_the_split() -> None:
    shape = plan_shape(
        job(
            src(),
            op("parse", "in"),
            keyed("k", hashed("parse")),
            op("a", "parse"),
            op("b", "parse"),
            union("u", "a", "b"),
            sink("x", "u"),
            sink("y", "k"),
        )
    )
    assert shape.steps == (
        Region(("parse",), "parse", "in"),
        Region(("a", "b", "u"), "u", "parse", None, linear=False),
        KeyedStep("k"),
    )
    assert shape.splits == {"parse": ("a", "k")}


def test_several_sinks_are_unioned_into_the_one_sink() -> None:
    shape = plan_shape(
        job(src(), op("p", "in"), op("a", "p"), op("b", "p"), sink("x", "a"), sink("y", "b"))
    )
    assert shape.sinks == ("x", "y")
    assert shape.steps == (
        Region(("p",), "p", "in"),
        Region(("a",), "a", "p"),
        Region(("b",), "b", "p"),
    )
    assert shape.splits == {"p": ("a", "b")}


def test_a_hash_edge_into_a_stateless_operator_repartitions_its_region() -> None:
    shape = plan_shape(
        job(src(), op("a", hashed("in", "merchant")), op("b", "a"), sink("out", "b"))
    )
    assert shape.steps == (Region(("a", "b"), "b", None, "merchant"),)


def test_a_keyed_merge_unions_its_inputs_and_a_union_alone_needs_no_python() -> None:
    shape = plan_shape(
        job(
            src(),
            op("a", "in"),
            op("b", "in"),
            keyed("k", hashed("a"), hashed("b")),
            union("u", "k"),
            sink("out", "u"),
        )
    )
    assert shape.steps[-2:] == (KeyedStep("k"), Region(("u",), "u", "k"))
    assert shape.splits == {"in": ("a", "b")}  # a and b end in different places: two passes


def test_linear_chain_refuses_a_dag() -> None:
    with pytest.raises(CompileError, match=r"operators\[parse\]: not one chain"):
        linear_chain(DIAMOND)


# --- refused ------------------------------------------------------------------------------


def test_a_keyed_operator_above_a_split_is_refused_naming_it() -> None:
    error = refusal(
        src(), keyed("k", hashed("in")), op("a", "k"), op("b", "k"), sink("x", "a"), sink("y", "b")
    )
    assert error.field == "spec.dataflow.operators[k]"
    assert "state would be kept twice" in error.reason


def test_refusals_name_the_field() -> None:
    cases = [
        ((src("s1"), src("s2"), op("a", "s1", "s2"), sink("o", "a")), "spec.dataflow.operators"),
        ((src(), op("a", "in"), op("b", "in"), sink("o", "a")), "spec.dataflow.operators[b]"),
        ((src(), op("a", "in")), "spec.dataflow.operators[a]"),
        (
            (src(), {"name": "j", "kind": "join", "inputs": ["in"]}, sink("o", "j")),
            "spec.dataflow.operators[j].kind",
        ),
        (
            (src(), op("a", {"from": "in", "partitioning": "broadcast"}), sink("o", "a")),
            "spec.dataflow.operators[a].inputs[0].partitioning",
        ),
        (
            (src(), {"name": "r", "kind": "replicate", "inputs": ["in"]}, sink("o", "r")),
            "spec.dataflow.operators[r].function",
        ),
        (
            (src(), {"name": "m", "inputs": ["in"]}, sink("o", "m")),
            "spec.dataflow.operators[m].function",
        ),
        (
            (src(), keyed("k", hashed("in", "merchant")), sink("o", "k")),
            "spec.dataflow.operators[k].inputs[0].key",
        ),
        (
            (src(), op("a", "in"), op("b", hashed("in"), "a"), sink("o", "b")),
            "spec.dataflow.operators[b].inputs",
        ),
        (
            (src(), op("a", "in"), op("b", hashed("in"), hashed("a", "merchant")), sink("o", "b")),
            "spec.dataflow.operators[b].inputs",
        ),
    ]
    for operators, field in cases:
        assert refusal(*operators).field == field, operators


def test_a_join_is_refused_as_out_of_scope() -> None:
    error = refusal(src(), {"name": "j", "kind": "join", "inputs": ["in"]}, sink("o", "j"))
    assert "joins are not supported" in error.reason


# --- merges: how columns are aligned ------------------------------------------------------

TAGS = [("_swivel_record", "string"), ("_swivel_tag_0", "bigint")]


def test_a_merge_keeps_the_first_inputs_order_and_adds_missing_system_columns() -> None:
    first = [("amount", "double"), *TAGS]
    second = [*TAGS, ("amount", "double"), ("_swivel_emitted_at", "double")]
    merged = merged_columns("u", [("inputs[0]", first), ("inputs[1]", second)])
    assert merged == (("amount", "double"), *TAGS, ("_swivel_emitted_at", "double"))


def test_a_merge_of_different_user_columns_is_refused_naming_the_input() -> None:
    first = [("amount", "double"), ("label", "string"), *TAGS]
    second = [("amount", "bigint"), ("score", "double"), *TAGS]
    with pytest.raises(CompileError) as caught:
        merged_columns("u", [("ops[u].inputs[0]", first), ("ops[u].inputs[1]", second)])
    assert caught.value.field == "ops[u].inputs[1]"
    assert "missing ['label']" in caught.value.reason
    assert "extra ['score']" in caught.value.reason
    assert "amount is bigint, not double" in caught.value.reason


def test_merged_schema_works_on_spark_schemas() -> None:
    a = StructType([StructField("x", LongType()), StructField("_swivel_tag_0", LongType())])
    b = StructType(
        [
            StructField("_swivel_tag_0", LongType()),
            StructField("x", LongType()),
            StructField("_swivel_emitted_at", DoubleType()),
        ]
    )
    assert merged_schema("u", [("i0", a), ("i1", b)]).fieldNames() == [
        "x",
        "_swivel_tag_0",
        "_swivel_emitted_at",
    ]
    c = StructType([StructField("x", StringType()), StructField("_swivel_tag_0", LongType())])
    with pytest.raises(CompileError, match="i1: u merges inputs"):
        merged_schema("u", [("i0", a), ("i1", c)])


# --- tags through a merge: a non-head fed by two heads of one component -------------------

OLD = {n: OperatorConfig(function=F, version=1) for n in ("a", "b", "k")}
NEW = {n: OperatorConfig(function=F, version=2, params={"label": "new"}) for n in ("a", "b", "k")}


def fries(config_version: int = 7) -> Snapshot:
    transition = Transition(
        id="t",
        scheduler="fries",
        from_config_version=6,
        to_config_version=7,
        previous=OLD,
        components=(Component(id=0, heads=("a", "b"), operators=("a", "b", "u", "k")),),
    )
    return Snapshot(config_version=config_version, operators=NEW, revision=9, transition=transition)


def test_both_heads_write_the_components_one_tag_column() -> None:
    rows = pd.DataFrame({"_swivel_tag_0": [0, 0]})
    for head in ("a", "b"):
        (part,) = parts(fries(), head, rows, batch_id=3, started_config_version=None)
        assert part.write_tag == "_swivel_tag_0" and part.selection.tag == 7


def test_a_non_head_splits_rows_from_two_heads_by_their_tags() -> None:
    # Head a had switched (tag 7), head b had not heard yet (tag 0: before the switch).
    rows = pd.DataFrame({"_swivel_tag_0": [7, 0, 7, 0], "branch": ["a", "b", "a", "b"]})
    split = list(parts(fries(), "k", rows, batch_id=3, started_config_version=None))
    assert [(p.selection.config.version, list(p.rows["branch"])) for p in split] == [
        (1, ["b", "b"]),  # old rows first
        (2, ["a", "a"]),
    ]
    assert all(p.write_tag is None for p in split)  # a non-head passes tags on


# --- one snapshot per chunk for every operator of a region --------------------------------


class _Feed:
    def __init__(self) -> None:
        self.version = 1
        self.reads: list[str] = []

    def current(self, operator: str) -> Snapshot:
        self.reads.append(operator)
        return Snapshot(config_version=self.version, operators={}, revision=self.version)

    def ack(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_a_chunk_view_answers_every_operator_with_the_first_snapshot_of_the_chunk() -> None:
    feed = _Feed()
    view = ChunkView(feed)
    view.begin()
    assert view.current("a").config_version == 1
    feed.version = 2  # published while branch a runs
    assert view.current("b").config_version == 1  # branch b decides as branch a did
    assert view.current("b").config_version == 2  # asked again: waiting for a tag's version
    view.begin()
    assert view.current("a").config_version == 2
    assert feed.reads == ["a", "b", "b", "a"]  # every operator still registers with the feed


def bump_in_place(df: pd.DataFrame) -> pd.DataFrame:
    """A function that writes into its input (the contract asks for `assign`; not all do)."""
    df["x"] += 1
    return df


class _OneFunction:
    """A feed whose every snapshot runs `bump_in_place` for the operators named."""

    def __init__(self, *operators: str) -> None:
        config = OperatorConfig(function=f"{__name__}:bump_in_place", version=1)
        self.snapshot = Snapshot(config_version=1, operators=dict.fromkeys(operators, config))

    def current(self, operator: str) -> Snapshot:
        return self.snapshot

    def ack(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_a_region_hands_each_branch_its_own_rows_and_concatenates_at_the_merge() -> None:
    columns = ("x", "_swivel_tag_0")
    view = ChunkView(_OneFunction("a"))  # as compiling.region runs a non-linear region
    settings = WorkerSettings(feed=view, allow=AllowList(prefixes=(__name__,)))
    plan = OperatorPlan(
        "a", False, None, columns, (*columns, EMITTED_COLUMN), view.inner.snapshot.operators["a"]
    )
    steps = (
        RegionStep("a", (CHUNK,), columns, OperatorRunner(plan, settings)),  # x += 1 in place
        RegionStep("b", (CHUNK,), columns, None),
        RegionStep("u", ("a", "b"), columns, None),
    )
    chunk = pd.DataFrame({"x": [1, 2], "_swivel_tag_0": [0, 1]})  # tags the snapshot knows
    (out,) = run_region(steps, "u", view, iter([chunk]))
    # Branch b reads the rows as they came: a's write into its input is a's alone.
    assert list(out["x"]) == [2, 3, 1, 2] and list(out["_swivel_tag_0"]) == [0, 1, 0, 1]
    assert list(chunk["x"]) == [1, 2]


# --- invariants on random DAGs ------------------------------------------------------------


def random_job(rng: random.Random) -> StreamJobSpec:
    operators: list[dict[str, Any]] = [src()]
    names = ["in"]
    for index in range(rng.randint(1, 9)):
        name = f"o{index}"
        parents = rng.sample(names, k=min(len(names), rng.choice([1, 1, 1, 2, 3])))
        kind = rng.choice(["map", "map", "map", "keyed", "union", "aggregate"])
        if kind == "keyed":
            operators.append(keyed(name, *(hashed(p) for p in parents)))
        elif kind == "aggregate":  # by customer, or one partition (no key)
            extra = {"kind": "aggregate"} | ({"key": "customer"} if rng.random() < 0.5 else {})
            operators.append(op(name, *parents, **extra))
        elif kind == "union":
            operators.append(union(name, *parents))
        elif rng.random() < 0.2:
            operators.append(op(name, *(hashed(p, "merchant") for p in parents)))
        else:
            operators.append(op(name, *parents))
        names.append(name)
    fed = {i["from"] if isinstance(i, dict) else i for o in operators for i in o.get("inputs", [])}
    ends = [n for n in names if n not in fed]
    for position, end in enumerate(ends):
        operators.append(sink(f"sink{position}", end))
    return job(*operators)


@pytest.mark.parametrize("seed", range(300))
def test_every_accepted_random_dag_is_cut_into_well_formed_steps(seed: int) -> None:
    spec = random_job(random.Random(seed))
    try:
        shape = plan_shape(spec)
    except CompileError as error:
        assert "state would be kept twice" in error.reason, error
        return
    body = [n for n in shape.order if n != shape.source and n not in shape.sinks]
    spec_ops = {o.name: o for o in spec.dataflow.operators}
    placed = [
        name
        for step in shape.steps
        for name in (step.operators if isinstance(step, Region) else (step.operator,))
    ]
    assert sorted(placed) == sorted(body)  # every operator exactly once
    frames = {shape.source}
    for step in shape.steps:
        if isinstance(step, KeyedStep | BlockingStep):
            assert set(shape.inputs[step.operator]) <= frames
            frames.add(step.operator)
            continue
        # a blocking operator never shares a pass with its inputs or its consumers
        assert not [n for n in step.operators if spec_ops[n].resolved_blocking]
        members = set(step.operators)
        outside = [n for n in step.operators if set(shape.consumers[n]) - members]
        assert outside == [step.exit]  # one exit
        reads = {step.producer} if step.producer else set(shape.inputs[step.operators[0]])
        assert reads <= frames  # read only frames built before
        for name in step.operators[1:]:
            allowed = members | ({step.producer} if step.producer else set())
            assert set(shape.inputs[name]) <= allowed
        frames.add(step.exit)
    for sink_name in shape.sinks:
        assert set(shape.inputs[sink_name]) <= frames
