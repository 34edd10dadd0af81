"""The property test's own parts without Spark: the trail probes, the sink oracles (each can
fail), and the generator (every case is a valid StreamJob of at most 8 operators)."""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps
from hypothesis import HealthCheck, given, settings

from swivel.jobs.testing.probes import (
    mark_transformed,
    trail,
    trail_copies,
    trail_filter,
    trail_keyed,
)
from tests.integration.runtime.consistency_cases import Case, cases, transform_example
from tests.integration.runtime.consistency_runs import (
    generations,
    mixed_at_sink,
    old_on_transformed_state,
    trail_entries,
)


def rows(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"_swivel_record": record, "trail": path} for record, path in pairs]


def test_mixed_at_sink_flags_a_record_whose_targets_ran_under_both_versions() -> None:
    sink = rows(
        ("p1", ";p0=v1;a=v1;b=v1"),
        ("p2", ";p0=v2;a=v2.0;b=v1/t0"),  # a (new, a flatMap copy) but b old
        ("p3", ";p0=v2;a=v2.1"),
        ("p3", ";p0=v2;b=v2/t1"),  # two rows of one record, both new
    )
    assert mixed_at_sink(sink, ["a", "b"]) == ["p2"]
    assert mixed_at_sink(sink, ["p0", "a"]) == []
    assert generations(sink, ["a", "b"]) == {"old": 1, "mixed": 1, "new": 1}


def test_old_rows_on_transformed_state_and_double_transforms_are_flagged() -> None:
    sink = rows(
        ("p1", ";k=v1/t0"),
        ("p2", ";k=v2/t1"),
        ("p3", ";k=v1/t1"),  # old function, transformed state
        ("p4", ";k=v2/t2"),  # transformed twice
        ("p5", ";other=v1/t1"),  # not a transformed target
    )
    found = old_on_transformed_state(sink, ["k"])
    assert [line.split()[0] for line in found] == ["p3", "p4"]
    assert trail_entries(sink[2]) == [("k", "v1/t1")]


def test_trail_probes_keep_the_record_id_and_append_their_label() -> None:
    df = pd.DataFrame({"_swivel_record": ["p1", "p2", "p3"], "customer": [1, 2, 1]})
    first = trail(df, me="p0", label="v1")
    copies = trail_copies(first, me="f", label="v2", copies=2)
    assert list(copies["_swivel_record"]) == ["p1", "p1", "p2", "p2", "p3", "p3"]
    assert list(copies["trail"])[:2] == [";p0=v1;f=v2.0", ";p0=v1;f=v2.1"]
    many = trail(pd.DataFrame({"_swivel_record": [f"p{i}" for i in range(60)]}), me="p0")
    kept = trail_filter(many, me="x", drop_one_in=3)
    assert 25 <= len(kept) <= 55  # about a third dropped
    assert kept.equals(trail_filter(many.iloc[::-1], me="x", drop_one_in=3).iloc[::-1])
    assert set(kept["trail"]) == {";p0=v1;x=v1"}
    state = mark_transformed({"seen": 3})
    out, state = trail_keyed(1, first, state, me="k", label="v2")
    assert list(out["trail"]) == [";p0=v1;k=v2/t1"] * 3 and state["seen"] == 6


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_every_generated_case_is_a_small_valid_job(case: Case) -> None:
    job = case.job()  # validates: names, inputs, no cycle, forward parallelism
    assert len(job.dataflow.operators) <= 8
    functional = {op.name for op in job.dataflow.operators if op.function}
    assert 2 <= len(case.targets) <= 3 and set(case.targets) <= functional
    assert all(u["params"]["me"] == u["operator"] for u in case.updates)
    assert set(case.lag) <= functional


def test_the_explicit_transform_case_has_every_feature_but_flatmap() -> None:
    assert transform_example().features() == {
        "fan-out",
        "filter",
        "keyed",
        "merge",
        "replicate",
        "state transform",
    }
