"""The per-record configuration choice of docs/control-protocol.md, as a table."""

from __future__ import annotations

from typing import Any

import pytest

from swivel.jobs.control.selection import select, tag_column
from swivel.protocol.snapshots import Component, OperatorConfig, Snapshot, Transition

OLD = {
    "head": OperatorConfig(function="m:h", version=1),
    "tail": OperatorConfig(function="m:t", version=1),
}
NEW = {
    "head": OperatorConfig(function="m:h2", version=2),
    "middle": OperatorConfig(function="m:m", version=1),
    "tail": OperatorConfig(function="m:t", version=2, params={"rule": "both"}),
    "outside": OperatorConfig(function="m:o", version=1),
}


def snapshot(
    scheduler: str | None, *, apply_from: int | None = None, pinned: bool = False
) -> Snapshot:
    transition = None
    if scheduler is not None:
        components = ()
        if scheduler == "fries":
            components = (Component(id=0, heads=("head",), operators=("head", "middle", "tail")),)
        transition = Transition(
            id="p", scheduler=scheduler, from_config_version=6, to_config_version=7,
            previous=OLD, components=components, apply_from_batch=apply_from,
        )  # fmt: skip
    return Snapshot(
        config_version=7,
        operators=NEW,
        revision=9,
        transition=transition,
        pinned_batches={42: 6} if pinned else {},
    )


# (scheduler, operator, tag, batch id, started cv) -> (function version, config version, tag, rule)
TABLE = [
    (None, "head", None, 5, None, 2, 7, None, "no-transition"),
    ("fries", "outside", None, 5, None, 1, 7, None, "untouched"),
    ("fries", "head", None, 5, None, 2, 7, 7, "fries-head"),
    ("fries", "tail", 7, 5, None, 2, 7, 7, "fries-tag-new"),
    ("fries", "tail", 6, 5, None, 1, 6, 6, "fries-tag-old"),
    ("fries", "tail", None, 5, None, 1, 6, None, "fries-tag-old"),
    ("fries", "middle", 6, 5, None, 1, 6, 6, "fries-tag-old"),  # non-target: same either way
    ("epoch", "tail", None, 41, None, 1, 6, None, "epoch-old"),
    ("epoch", "tail", None, 42, None, 2, 7, None, "epoch-new"),
    ("epoch", "tail", None, None, None, 1, 6, None, "epoch-old"),
    ("epoch", "middle", None, 42, None, 1, 7, None, "untouched"),
    ("naive", "tail", None, 1, None, 2, 7, None, "naive"),
    ("naive", "head", None, 1, None, 2, 7, None, "naive"),
    ("restart", "head", None, 1, 6, 1, 6, None, "restart-old"),
    ("restart", "head", None, 1, 7, 2, 7, None, "restart-new"),
    ("restart", "head", None, 1, None, 1, 6, None, "restart-old"),
]


@pytest.mark.parametrize("row", TABLE, ids=lambda row: f"{row[0]}-{row[1]}-{row[-1]}")
def test_selection_table(row: tuple[Any, ...]) -> None:
    scheduler, operator, tag, batch, started, version, cv, tag_out, rule = row
    chosen = select(
        snapshot(scheduler, apply_from=42),
        operator,
        tag=tag,
        batch_id=batch,
        started_config_version=started,
    )
    assert (chosen.config.version, chosen.config_version, chosen.tag, chosen.rule) == (
        version, cv, tag_out, rule,
    )  # fmt: skip


@pytest.mark.parametrize("scheduler", ["fries", "epoch", "naive", "restart"])
def test_a_pinned_replay_wins_over_every_scheduler(scheduler: str) -> None:
    for operator in ("head", "tail"):
        chosen = select(
            snapshot(scheduler, apply_from=0, pinned=True), operator, tag=7, batch_id=42
        )
        assert (chosen.config.version, chosen.config_version, chosen.rule) == (
            1,
            6,
            "pinned-replay",
        )
    other_batch = select(snapshot("naive", pinned=True), "head", batch_id=43)
    assert other_batch.config.version == 2


def test_a_pinned_replay_after_the_transition_retired_uses_the_pinned_configs() -> None:
    retired = Snapshot(
        config_version=7,
        operators=NEW,
        pinned_batches={42: 6},
        pinned_configs={6: OLD},
    )
    assert select(retired, "tail", batch_id=42).config == OLD["tail"]
    assert select(retired, "middle", batch_id=42).config == NEW["middle"]


def test_unknown_operator_is_an_error_not_a_guess() -> None:
    with pytest.raises(KeyError):
        select(snapshot(None), "nope")


def test_snapshot_json_round_trip() -> None:
    original = snapshot("fries", pinned=True)
    assert Snapshot.model_validate(original.to_wire()) == original
    assert tag_column(3) == "_swivel_tag_3"


def test_unknown_scheduler_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown scheduler"):
        Transition(
            id="p", scheduler="sometimes", from_config_version=1, to_config_version=2, previous={}
        )
