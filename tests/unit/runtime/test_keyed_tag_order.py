"""A keyed non-head of a Fries component runs a key's rows in tag order within a batch.

The mixed transaction these tests guard against (issue 10 §2): a key's state is
transformed at its first new-version row; a later old-tagged row of the same key in the
same batch (a row from another head task that switched later) then ran the *old* function
on the *transformed* state. The wrapper now takes the key's whole input for the batch
(every chunk Spark hands it), runs the old-tagged rows first under the old function on the
untransformed state, transforms the state once, then runs the new-tagged rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pytest

from swivel.controllers.checker import UpdateEvent, check_schedule
from swivel.controllers.schedule_parsing import iter_events
from swivel.jobs.control.recording import complete_lines
from swivel.jobs.runtime import operators
from swivel.jobs.runtime.feeds import StaticFeed
from swivel.jobs.runtime.operators import (
    EMITTED_COLUMN,
    KeyState,
    OperatorPlan,
    OperatorRunner,
    WorkerSettings,
    decode_state,
    run_keyed_group,
)
from swivel.jobs.runtime.testing import with_transition
from swivel.protocol.snapshots import OperatorConfig, Snapshot

COUNTING = "swivel.jobs.testing.probes:counting"
LABEL = "swivel.jobs.examples.labels:labelled"
TRANSFORM = "swivel.jobs.testing.probes:mark_transformed"
INPUT = ("_swivel_record", "customer", "_swivel_tag_0")
OUTPUT = (*INPUT, "seen", "transforms", EMITTED_COLUMN)


def _follower(name: str, recording_dir: Path | None = None) -> OperatorRunner:
    """`name` (keyed, counting) is a non-head of component 0 headed by `head`, and the
    update gives it a state transform that counts its applications."""
    before = Snapshot(
        config_version=1,
        revision=1,
        operators={
            "head": OperatorConfig(function=LABEL, version=1),
            name: OperatorConfig(function=COUNTING, version=1),
        },
    )
    after = with_transition(
        before,
        {"head": {"params": {"label": "v2"}}, name: {"stateTransform": TRANSFORM}},
        components=[(["head"], ["head", name])],
    )
    plan = OperatorPlan(name, True, "customer", INPUT, OUTPUT, before.operators[name])
    directory = None if recording_dir is None else str(recording_dir)
    return OperatorRunner(plan, WorkerSettings(StaticFeed(after), recording_dir=directory))


def _rows(records: list[str], tag: int) -> pd.DataFrame:
    # as transformWithStateInPandas hands them over: `_x` columns renamed by position
    return pd.DataFrame({"_0": records, "customer": [7] * len(records), "_2": [tag] * len(records)})


def _by_record(outputs: list[pd.DataFrame]) -> dict[str, dict[str, Any]]:
    out = pd.concat(outputs, ignore_index=True)
    return {row["_swivel_record"]: row for row in out.to_dict("records")}


def _check(rows: dict[str, dict[str, Any]], old: list[str], new: list[str], before: int) -> None:
    for record in old:
        assert rows[record]["transforms"] == 0, f"old row {record} saw the transformed state"
    for record in new:
        assert rows[record]["transforms"] == 1, f"new row {record} missed the transform"
    # every old row ran before every new row of the key
    assert max(rows[r]["seen"] for r in old) < min(rows[r]["seen"] for r in new)
    assert max(rows[r]["seen"] for r in new) == before + len(old) + len(new)


def test_old_rows_in_a_later_chunk_of_the_key_run_before_the_transform() -> None:
    runner = _follower("det-chunks")
    state = KeyState({"seen": 5, "transforms": 0}, 1)
    new, old = ["n1", "n2"], ["o1", "o2", "o3"]
    chunks = iter([_rows(new, 2), _rows(old, 1)])  # Spark split the key group in two
    rows = _by_record(list(run_keyed_group(runner, (7,), chunks, state)))
    _check(rows, old, new, before=5)
    assert (state.value, state.version) == ({"seen": 10, "transforms": 1}, 2)


def test_old_rows_in_a_later_slice_of_one_chunk_run_before_the_transform(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = _follower("det-slices")
    # an expensive function: the wrapper checks after every row
    monkeypatch.setitem(operators._cost_per_row, "det-slices", 1.0)
    state = KeyState({"seen": 0, "transforms": 0}, 1)
    new, old = ["n1", "n2", "n3"], ["o1", "o2"]
    chunk = pd.concat([_rows(new, 2), _rows(old, 0)], ignore_index=True)  # 0: before any switch
    rows = _by_record(list(run_keyed_group(runner, (7,), iter([chunk]), state)))
    _check(rows, old, new, before=0)
    assert (state.value, state.version) == ({"seen": 5, "transforms": 1}, 2)


def test_a_new_key_is_transformed_after_its_old_rows_built_its_state() -> None:
    runner = _follower("det-fresh")
    state = decode_state(None)  # the key has no state yet
    new, old = ["n1"], ["o1", "o2"]
    rows = _by_record(
        list(run_keyed_group(runner, (7,), iter([_rows(new, 2), _rows(old, 1)]), state))
    )
    _check(rows, old, new, before=0)
    assert (state.value, state.version) == ({"seen": 3, "transforms": 1}, 2)


def test_rows_of_a_key_outside_any_transition_keep_their_arrival_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(operators._cost_per_row, "plain", 1.0)  # one row per check
    plan = OperatorPlan(
        "plain", True, "customer", INPUT, OUTPUT, OperatorConfig(function=COUNTING, version=1)
    )
    snapshot = Snapshot(config_version=1, revision=1, operators={"plain": plan.initial})
    runner = OperatorRunner(plan, WorkerSettings(StaticFeed(snapshot)))
    # tags no one follows (at most the snapshot's version: a newer one is waited for)
    chunks = iter([_rows(["a", "b"], 1), _rows(["c"], 0)])
    rows = _by_record(list(run_keyed_group(runner, (7,), chunks, decode_state(None))))
    assert [rows[r]["seen"] for r in ("a", "b", "c")] == [1, 2, 3]


def test_old_rows_after_the_batch_that_transformed_the_key_are_reported(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # Under Fries the read at every task's start rules these out (runtime.freshness); the
    # naive scheduler can still send them (docs/runtime.md, "Limits"). The state is not
    # transformed again and the worker says so.
    runner = _follower("det-late")
    state = KeyState({"seen": 4, "transforms": 1}, 2)  # transformed in an earlier batch
    rows = _by_record(list(run_keyed_group(runner, (7,), iter([_rows(["o1"], 1)]), state)))
    assert rows["o1"]["transforms"] == 1
    assert (state.value, state.version) == ({"seen": 5, "transforms": 1}, 2)
    assert "det-late: rows for function version 1 met a key" in capfd.readouterr().err


def _verdict_of(directory: Path) -> list[str]:
    """The checker's violations over what the wrapper recorded, with the update 1 -> 2."""
    lines = [
        line for path in directory.glob("*.jsonl") for line in complete_lines(path).splitlines()
    ]
    events = [UpdateEvent("det-rec", 1, 2), *iter_events(lines)]
    return [violation.describe() for violation in check_schedule(events).violations]


def test_the_recorded_state_versions_let_the_checker_judge_state_reads(tmp_path: Path) -> None:
    """The wrapper records the version of the key's state each row ran on: in tag order
    every row reads state at its own function's version (clean), and a late old row on
    transformed state is a violation the checker names, not only the worker's stderr."""
    in_order, late = tmp_path / "in-order", tmp_path / "late"
    in_order.mkdir(), late.mkdir()
    runner = _follower("det-rec", in_order)
    state = KeyState({"seen": 0, "transforms": 0}, 1)
    chunks = iter([_rows(["n1"], 2), _rows(["o1"], 1)])
    list(run_keyed_group(runner, (7,), chunks, state))
    assert _verdict_of(in_order) == []

    runner = _follower("det-rec", late)
    state = KeyState({"seen": 4, "transforms": 1}, 2)  # transformed in an earlier batch
    list(run_keyed_group(runner, (7,), iter([_rows(["o2"], 1)]), state))
    assert _verdict_of(late) == ["o2: det-rec@old(1) but det-rec.state@new(2)"]
