"""The agent's durable state: round trip, atomic replacement, refusing unknown formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swivel.api.phases import PlanPhase
from swivel.jobs.agent.plans import PlanRecord, Timings
from swivel.jobs.agent.store import KEPT_BATCHES, DurableState, StateStore
from swivel.protocol.snapshots import Component, OperatorConfig, Transition


def sample_state() -> DurableState:
    old = {"a": OperatorConfig(function="m:a", version=1, params={"x": 1})}
    new = {"a": OperatorConfig(function="m:a2", version=2, params={"x": 2}, state_transform="m:t")}
    plan = PlanRecord(
        id="p-2", name="p", scheduler="fries", spec={"jobRef": {"name": "j"}}, plan={"kind": "live-control"},
        from_config_version=1, to_config_version=2, targets={"a": 2}, phase=PlanPhase.APPLYING,
        timings=Timings(1.0, 2.0), switched=frozenset({(11, "a")}), last_switch_batch=4,
    )  # fmt: skip
    return DurableState(
        config_version=2,
        operators=new,
        revision=5,
        history={1: old, 2: new},
        accepted_at={1: 0.5, 2: 2.0},
        transition=Transition(
            id="p-2",
            scheduler="fries",
            from_config_version=1,
            to_config_version=2,
            previous=old,
            components=(Component(id=0, heads=("a",), operators=("a",)),),
        ),
        plans={"p-2": plan},
        active_plan="p-2",
        batch_versions={3: 1, 4: 2},
        pinned_batches={3: 1},
        actions=[{"seq": 1, "action": "restart", "configVersion": 2}],
    )


def test_round_trip(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    assert store.load() is None
    state = sample_state()
    store.save(state)
    assert StateStore(tmp_path / "state").load() == state


def test_saves_replace_the_file_and_leave_no_temporaries(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    state = sample_state()
    store.save(state)
    state.config_version = 3
    store.save(state)
    assert [p.name for p in tmp_path.iterdir()] == ["agent-state.json"]
    assert json.loads(store.path.read_text())["configVersion"] == 3


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"format": 99}).encode(),  # another version's
        b'{"format": 1, "configVersion": ',  # cut short
        b"\xff\xfe\x00garbage",
        b"[1, 2]",
        json.dumps({"format": 1, "configVersion": "x"}).encode(),
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_a_corrupt_state_file_is_moved_aside_not_a_crash(tmp_path: Path, content: bytes) -> None:
    store = StateStore(tmp_path, clock=lambda: 1700000000.0)
    store.path.write_bytes(content)
    assert store.load() is None  # the agent starts from the job spec
    aside = tmp_path / "agent-state.json.corrupt-1700000000"
    assert store.recovered_from == aside and aside.read_bytes() == content
    assert not store.path.exists()
    store.save(sample_state())  # and carries on
    assert StateStore(tmp_path).load() is not None


def test_only_recent_batches_are_kept() -> None:
    state = sample_state()
    for batch in range(KEPT_BATCHES + 10):
        state.remember_batch(batch, 2)
    assert len(state.batch_versions) == KEPT_BATCHES
    assert min(state.batch_versions) == 10
