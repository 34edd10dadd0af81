"""Which operators a worker counts as switched on receiving a snapshot (`arming.py`)."""

from __future__ import annotations

import pytest

from swivel.jobs.control.arming import armed_version
from swivel.protocol.snapshots import Component, OperatorConfig, Snapshot, Transition

OLD = {"head": OperatorConfig(function="m:h", version=1), "tail": OperatorConfig(function="m:t", version=1), "lone": OperatorConfig(function="m:l", version=1)}  # fmt: skip
NEW = {
    "head": OperatorConfig(function="m:h2", version=2),
    "middle": OperatorConfig(function="m:m", version=1),
    "tail": OperatorConfig(function="m:t", version=3),
    "lone": OperatorConfig(function="m:l", version=4),
    "outside": OperatorConfig(function="m:o", version=1),
    "fan": OperatorConfig(
        function="m:f", version=1
    ),  # a head the planner added: no target, same version
}


def snapshot(scheduler: str | None) -> Snapshot:
    transition = None
    if scheduler is not None:
        components = ()
        if scheduler == "fries":
            components = (
                Component(id=0, heads=("head", "fan"), operators=("head", "fan", "middle", "tail")),
            )
        transition = Transition(
            id="p",
            scheduler=scheduler,
            from_config_version=6,
            to_config_version=7,
            previous=OLD,
            components=components,
        )
    return Snapshot(config_version=7, operators=NEW, revision=9, transition=transition)


# (scheduler, operator, busy) -> the version acknowledged as armed, or None
TABLE = [
    (None, "head", False, None),  # no reconfiguration in progress
    ("fries", "head", False, 2),  # an idle head: its next check reads this snapshot
    ("fries", "head", True, None),  # a busy head switches at its next check
    ("fries", "tail", True, 3),  # a non-head follows tags: switched once it holds both
    ("fries", "tail", False, 3),
    ("fries", "middle", False, None),  # in the component but not a target: nothing to ack
    ("fries", "fan", False, 1),  # an idle head that is no target: stamps new tags next
    ("fries", "fan", True, None),  # busy: switches (and acks processed) at its next check
    ("epoch", "fan", False, None),
    ("fries", "outside", False, None),
    ("fries", "lone", False, 4),  # a target in no component switches like a head
    ("fries", "lone", True, None),
    ("naive", "tail", False, 3),  # naive: every target on its own, like a head
    ("naive", "tail", True, None),
    ("epoch", "head", False, None),  # the switch is a batch boundary: first record there
    ("epoch", "tail", False, None),
    ("restart", "head", False, None),  # the switch is a new query
]


@pytest.mark.parametrize("row", TABLE, ids=lambda row: f"{row[0]}-{row[1]}-busy={row[2]}")
def test_arming_table(row: tuple[str | None, str, bool, int | None]) -> None:
    scheduler, operator, busy, expected = row
    assert armed_version(snapshot(scheduler), operator, busy=busy) == expected


def test_an_operator_the_snapshot_does_not_know_is_never_armed() -> None:
    transition = Transition(
        id="p",
        scheduler="fries",
        from_config_version=6,
        to_config_version=7,
        previous={"ghost": OperatorConfig(function="m:g", version=1)},
    )
    bare = Snapshot(config_version=7, operators=NEW, revision=9, transition=transition)
    assert armed_version(bare, "ghost", busy=False) is None
