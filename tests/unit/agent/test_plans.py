"""The plan lifecycle state machine and its completion rule."""

from __future__ import annotations

import pytest

from swivel.api.phases import FINAL_PHASES, IllegalTransitionError, PlanPhase
from swivel.jobs.agent.plans import (
    ALLOWED_TRANSITIONS,
    PlanRecord,
    Timings,
    completion_due,
    completion_timings,
    expected_workers,
    move,
    progress,
    record_batch_end,
    record_switch,
)


def complete(record: PlanRecord, now: float = 200.0) -> PlanRecord:
    """What the hub does when completion is due."""
    return move(record, PlanPhase.COMPLETED, timings=completion_timings(record, now))


def applying(accepted_at: float = 100.0) -> PlanRecord:
    record = PlanRecord(
        id="swap-2", name="swap", scheduler="fries", spec={}, plan={},
        from_config_version=1, to_config_version=2, targets={"head": 2, "tail": 5},
        timings=Timings(requested_at=accepted_at - 1, accepted_at=accepted_at),
    )  # fmt: skip
    return move(record, PlanPhase.APPLYING)


def switch(
    record: PlanRecord,
    pid: int,
    operator: str,
    version: int,
    *,
    at: float,
    batch: int | None = None,
) -> PlanRecord:
    return record_switch(record, pid=pid, operator=operator, version=version, at=at, batch_id=batch)


@pytest.mark.parametrize("start", list(PlanPhase))
@pytest.mark.parametrize("end", list(PlanPhase))
def test_only_the_drawn_transitions_are_allowed(start: PlanPhase, end: PlanPhase) -> None:
    record = PlanRecord("p", "p", "fries", {}, {}, 1, 2, {}, phase=start)
    if end in ALLOWED_TRANSITIONS[start]:
        assert move(record, end).phase is end
    else:
        with pytest.raises(IllegalTransitionError):
            move(record, end)


def test_finished_phases_are_final() -> None:
    assert {p for p in PlanPhase if p in FINAL_PHASES} == {PlanPhase.COMPLETED, PlanPhase.FAILED}
    assert (
        not ALLOWED_TRANSITIONS[PlanPhase.COMPLETED] and not ALLOWED_TRANSITIONS[PlanPhase.FAILED]
    )


def test_switches_fill_first_and_last_and_ignore_non_switches() -> None:
    record = applying()
    record = switch(record, 1, "head", 1, at=101.0)  # old version: no switch
    record = switch(record, 1, "other", 9, at=101.0)  # not a target
    assert record.switched == frozenset()
    record = switch(record, 1, "head", 2, at=100.5, batch=7)
    record = switch(record, 2, "tail", 5, at=100.2, batch=8)
    record = switch(record, 2, "tail", 5, at=109.0, batch=9)  # already switched
    assert record.switched == {(1, "head"), (2, "tail")}
    assert (record.timings.first_switch_at, record.timings.last_switch_at) == (100.2, 100.5)
    assert record.last_switch_batch == 8


def test_a_switch_cannot_precede_acceptance() -> None:
    record = switch(applying(100.0), 1, "head", 2, at=99.0)
    assert record.timings.first_switch_at == 100.0


def test_completion_needs_every_expected_worker_and_every_target() -> None:
    record = applying()
    hosted = [(1, "head"), (2, "tail"), (3, "tail"), (3, "outside")]
    expected = expected_workers(record, hosted)
    assert expected == {(1, "head"), (2, "tail"), (3, "tail")}
    record = switch(switch(record, 1, "head", 2, at=101.0), 2, "tail", 5, at=102.0)
    assert not completion_due(record, expected)
    assert progress(record, expected)["workersSwitched"] == 2
    assert progress(record, expected)["workersTotal"] == 3
    record = switch(record, 3, "tail", 5, at=103.0)
    assert completion_due(record, expected)
    done = complete(record)
    # From the request (99.0): the last switch and the first new records, both at 103.0.
    assert done.delay_ms == pytest.approx(4000.0)
    assert done.armed_ms == pytest.approx(4000.0)
    assert not completion_due(done, expected)


def test_no_registered_worker_still_needs_one_ack_per_target() -> None:
    record = applying()
    assert not completion_due(record, frozenset())
    record = switch(record, 9, "head", 2, at=101.0)
    assert not completion_due(record, frozenset())
    assert completion_due(switch(record, 9, "tail", 5, at=101.0), frozenset())


def test_json_views_and_durable_round_trip() -> None:
    record = switch(applying(), 1, "head", 2, at=100.25, batch=3)
    assert PlanRecord.from_state(record.to_state()) == record
    document = record.to_json(frozenset({(1, "head"), (2, "tail")}))
    assert document["phase"] == "Applying" and document["delayMs"] is None
    assert document["timings"]["acceptedAt"] == "1970-01-01T00:01:40.000000Z"
    assert document["progress"]["operators"]["tail"] == {"version": 5, "switched": 0, "total": 1}


def test_an_armed_switch_counts_for_the_delay_but_completion_waits_for_records() -> None:
    record = applying(accepted_at=100.0)
    record = record_switch(
        record, pid=1, operator="head", version=2, at=100.05, batch_id=None, kind="armed"
    )
    record = record_switch(
        record, pid=2, operator="tail", version=5, at=100.02, batch_id=None, kind="armed"
    )
    expected = frozenset({(1, "head"), (2, "tail")})
    assert record.switched == expected and record.timings.last_switch_at == 100.05
    assert not completion_due(record, expected)  # no record ran under the new versions yet
    record = switch(record, 1, "head", 2, at=100.4, batch=7)  # already switched: no new time
    assert record.timings.last_switch_at == 100.05 and record.processed == {"head"}
    assert not completion_due(record, expected)
    record = switch(record, 2, "tail", 5, at=101.5, batch=7)
    assert completion_due(record, expected)
    done = complete(record)
    # From the request (99.0): armed at 100.05, in effect when the tail ran new rows (101.5).
    assert done.armed_ms == pytest.approx(1050.0)
    assert done.propagation_ms == pytest.approx(2500.0)
    assert done.delay_ms == pytest.approx(2500.0)
    assert done.to_json()["armedMs"] == pytest.approx(1050.0)
    assert done.last_switch_batch == 7


def test_the_durable_form_keeps_armed_and_processed_apart() -> None:
    record = record_switch(
        applying(), pid=2, operator="tail", version=5, at=100.5, batch_id=None, kind="armed"
    )
    record = switch(record, 1, "head", 2, at=100.7, batch=3)
    again = PlanRecord.from_state(record.to_state())
    assert again == record
    assert again.processed == {"head"} and again.timings.propagated_at == 100.7


def test_a_head_that_is_no_target_must_switch_to_the_new_configuration_version() -> None:
    """The planner heads a component with the targets' one-to-many ancestor (`fan`): it
    keeps function version 1 but stamps tags, so the delay is not over before it stamps
    new ones; its acks carry the configuration version."""
    record = move(
        PlanRecord(
            id="swap-2", name="swap", scheduler="fries", spec={},
            plan={"components": [{"heads": ["fan"], "operators": ["fan", "a", "b"],
                                  "targets": ["a", "b"]}]},
            from_config_version=1, to_config_version=2, targets={"a": 2, "b": 2},
            timings=Timings(accepted_at=100.0),
        ),
        PlanPhase.APPLYING,
    )  # fmt: skip
    assert record.heads == {"fan"}
    expected = expected_workers(record, [(1, "fan"), (2, "a"), (2, "b"), (2, "out")])
    assert expected == {(1, "fan"), (2, "a"), (2, "b")}
    for operator in ("a", "b"):
        record = record_switch(record, pid=2, operator=operator, version=2, at=100.01,
                               batch_id=4, kind="processed", config_version=2)  # fmt: skip
    assert not completion_due(record, expected)  # fan still stamps old tags
    old = record_switch(record, pid=1, operator="fan", version=1, at=100.2, batch_id=4,
                        config_version=1)  # fmt: skip
    assert old == record  # an ack under the old configuration is no switch
    record = record_switch(record, pid=1, operator="fan", version=1, at=100.3, batch_id=5,
                           config_version=2, running_batch=5, completed_batch=4)  # fmt: skip
    assert not completion_due(record, expected)  # a and b follow tags: batch 5 holds old ones
    record = record_batch_end(record, 5, 100.5)
    assert completion_due(record, expected)
    assert record.processed == {"a", "b"} and record.last_switch_batch == 5
    assert progress(record, expected)["heads"] == {"fan": {"switched": 1, "total": 1}}
    done = complete(record)
    assert (done.armed_ms, done.delay_ms) == (pytest.approx(300.0), pytest.approx(500.0))


def _fries_component(accepted_at: float = 100.0) -> PlanRecord:
    """`head` heads a component whose other target, `tail`, follows its tags."""
    record = PlanRecord(
        id="swap-2", name="swap", scheduler="fries", spec={},
        plan={"components": [{"heads": ["head"], "operators": ["head", "tail"],
                              "targets": ["head", "tail"]}]},
        from_config_version=1, to_config_version=2, targets={"head": 2, "tail": 5},
        timings=Timings(requested_at=accepted_at, accepted_at=accepted_at),
    )  # fmt: skip
    return move(record, PlanPhase.APPLYING)


def test_a_tag_follower_is_in_effect_only_when_the_batch_with_old_tags_ended() -> None:
    """The head switched inside batch 7: rows it tagged before are still in batch 7's later
    stages, where the tail runs them under its old version until the batch ends."""
    record = _fries_component()
    expected = frozenset({(1, "head"), (2, "tail")})
    record = record_switch(record, pid=1, operator="head", version=2, at=100.02, batch_id=7,
                           running_batch=7, completed_batch=6)  # fmt: skip
    record = record_switch(record, pid=2, operator="tail", version=5, at=100.01, batch_id=None,
                           kind="armed", running_batch=7, completed_batch=6)  # fmt: skip
    record = record_switch(record, pid=2, operator="tail", version=5, at=100.3, batch_id=7)
    assert record.old_rows_batch == 7
    assert not completion_due(record, expected)  # old-tagged rows may still reach the tail
    assert record_batch_end(record, 6, 100.4) == record  # an earlier batch: nothing changes
    record = record_batch_end(record, 7, 100.6)
    assert completion_due(record, expected)
    done = complete(record)
    assert done.armed_ms == pytest.approx(20.0)
    assert done.propagation_ms == pytest.approx(300.0)
    assert done.delay_ms == pytest.approx(600.0)
    assert PlanRecord.from_state(done.to_state()) == done


def test_a_head_armed_after_its_batch_ended_leaves_no_old_rows() -> None:
    record = _fries_component()
    record = record_switch(record, pid=1, operator="head", version=2, at=100.02, batch_id=None,
                           kind="armed", running_batch=7, completed_batch=7)  # fmt: skip
    assert record.old_rows_batch is None
    record = record_switch(record, pid=2, operator="tail", version=5, at=100.9, batch_id=8)
    record = record_switch(record, pid=1, operator="head", version=2, at=100.5, batch_id=8)
    assert completion_due(record, frozenset({(1, "head"), (2, "tail")}))
    assert complete(record).delay_ms == pytest.approx(900.0)


def test_without_tag_followers_no_batch_is_awaited() -> None:
    """Every target is a head (or the scheduler is not fries): a target stops running the
    old version at its own switch."""
    record = applying()  # fries, but no components: no heads, no tag-followers
    record = record_switch(record, pid=1, operator="head", version=2, at=100.1, batch_id=7,
                           running_batch=7, completed_batch=6)  # fmt: skip
    assert record.old_rows_batch is None


def test_an_agent_no_driver_reports_to_does_not_wait_for_a_batch_end() -> None:
    record = _fries_component()
    record = record_switch(record, pid=1, operator="head", version=2, at=100.02, batch_id=7)
    assert record.old_rows_batch is None


def test_an_epoch_plan_is_in_effect_at_the_first_new_records_of_the_last_target() -> None:
    """A worker whose first task under the new version comes a batch later switches later,
    but it runs nothing old meanwhile: the old version ended at the batch boundary."""
    record = move(
        PlanRecord(
            id="swap-2", name="swap", scheduler="epoch", spec={}, plan={},
            from_config_version=1, to_config_version=2, targets={"head": 2, "tail": 5},
            timings=Timings(requested_at=100.0, accepted_at=100.0),
        ),
        PlanPhase.APPLYING,
    )  # fmt: skip
    record = switch(record, 1, "head", 2, at=102.0, batch=8)
    record = switch(record, 2, "tail", 5, at=102.5, batch=8)
    record = switch(record, 3, "head", 2, at=104.0, batch=9)  # idle in batch 8
    done = complete(record)
    assert done.delay_ms == pytest.approx(2500.0)
    assert done.armed_ms == pytest.approx(4000.0)
