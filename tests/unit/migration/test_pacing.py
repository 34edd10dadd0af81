"""Late-batch pacing (jobs/migration/pacing.py): a ready step lets the boundary of a batch
that is already late pass, at most `max_waits` in a row; never without enough history."""

from __future__ import annotations

from swivel.jobs.migration.pacing import LateBatchPacing


def _batches(pacing: LateBatchPacing, durations: list[float], start: float = 0.0) -> float:
    """Runs boundaries `durations` apart (a boundary takes no time); returns the clock."""
    now = start
    pacing.ended(now, None)
    for duration in durations:
        now += duration
        pacing.ended(now, pacing.elapsed(now))
    return now


def test_a_batch_over_the_recent_median_by_the_margin_is_late() -> None:
    pacing = LateBatchPacing(margin=0.25, min_history=5)
    now = _batches(pacing, [1.0] * 6)
    assert not pacing.late(pacing.elapsed(now + 1.2))
    assert pacing.late(pacing.elapsed(now + 1.3))


def test_no_batch_is_late_before_enough_history_or_after_a_restart() -> None:
    pacing = LateBatchPacing(min_history=5)
    assert not pacing.late(pacing.elapsed(10.0))  # no boundary yet: elapsed unknown
    now = _batches(pacing, [1.0] * 4)
    assert not pacing.late(pacing.elapsed(now + 5.0))  # 4 batches of history only


def test_a_step_waits_at_most_max_waits_boundaries_in_a_row() -> None:
    pacing = LateBatchPacing(max_waits=2)
    now = _batches(pacing, [1.0] * 10)
    late = pacing.elapsed(now + 2.0)
    assert [pacing.should_wait(late) for _ in range(3)] == [True, True, False]
    assert pacing.should_wait(late)  # the count starts again after a switch
    assert not pacing.should_wait(pacing.elapsed(now + 1.0))  # on time: switch now


def test_the_median_follows_the_recent_batches_only() -> None:
    pacing = LateBatchPacing(history=5, min_history=5)
    now = _batches(pacing, [1.0] * 5 + [2.0] * 5)  # the query slowed down for good
    assert not pacing.late(pacing.elapsed(now + 2.2))
