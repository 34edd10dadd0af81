"""The mover's prewarm warm-up (jobs/migration/prewarm_warm_up.py) against the simulated
cluster: one bin loads on another executor off the batch path, switches in place at a later
boundary (the placement stays), its copy is released, and a migration that comes first
cancels it. (On the real cluster: tests/integration/cluster/test_prewarm.py.)"""

from __future__ import annotations

import time
from typing import Any

from swivel.jobs.migration.executor import BinMover
from tests.unit.migration.test_executor import FakeQuery, drive
from tests.unit.migration.test_prewarmed_steps import (
    PrewarmingInternals,
    fluid_moves,
    until,
)


class CommittedQuery(FakeQuery):
    lastProgress = {"batchId": 4}  # noqa: N815 - Spark's attribute name


class InPlaceInternals(PrewarmingInternals):
    """Answers a switch as the helper does: `activated` only where a copy was loaded."""

    def switch_prewarmed(self, query: Any, moves: Any, stores: Any, *, version: int) -> list[Any]:
        answers = super().switch_prewarmed(query, moves, stores, version=version)
        loaded = set(self.loaded)
        for answer, (b, target, _) in zip(answers, moves, strict=True):
            answer["status"] = "activated" if (b, target) in loaded else "no-shadow"
        return answers


def warming_mover(fake: PrewarmingInternals, query: Any) -> BinMover:
    mover = BinMover(None, 4, internals=fake, verify_async=False, warm_up_prewarm=True)  # type: ignore[arg-type]
    mover.attach(query)
    return mover


def loaded_warm_up(fake: PrewarmingInternals) -> BinMover:
    """A mover whose warm-up has loaded bin 0 on executor 1 and not yet switched."""
    mover = warming_mover(fake, CommittedQuery())
    mover.boundary(0)  # starts the load in a thread
    until(lambda: mover.warm_up._step is not None and mover.warm_up._step.ready)
    return mover


def test_one_bin_loads_elsewhere_switches_in_place_and_is_released() -> None:
    fake = InPlaceInternals(4)
    before = dict(fake.coordinator)
    mover = loaded_warm_up(fake)
    assert fake.loaded == [(0, "1")]  # the lowest bin, on the executor that does not own it
    assert mover.warm_up.report.status == "loading"
    assert fake.switched == []  # only at a boundary
    assert mover.warm_up.held() == {0}
    mover.boundary(1)
    report = mover.warm_up.report
    assert (report.status, report.bin, report.owner, report.target) == ("done", 0, "0", "1")
    assert (report.switched_at_batch, report.switch_status) == (1, "no-shadow")
    assert fake.switched == [(0, 2)]  # to its owner, at the version the next batch reads
    assert fake.coordinator == before  # nothing moved
    assert mover.warm_up.wait(5)  # ended and released
    assert fake.released == [0]  # the target's copy
    assert fake.released_loads == fake.load_ids
    assert mover.warm_up.held() == set()
    mover.boundary(2)
    assert fake.switched == [(0, 2)]  # once


def test_nothing_loads_before_a_batch_has_committed() -> None:
    fake = InPlaceInternals(4)
    mover = warming_mover(fake, FakeQuery())
    mover.boundary(0)
    assert mover.warm_up.report.status == "pending"
    assert fake.load_ids == []


def test_a_migration_that_comes_first_cancels_it_and_waits_for_its_release() -> None:
    fake = InPlaceInternals(4)
    fake.loads_may_finish.clear()
    mover = warming_mover(fake, CommittedQuery())
    mover.boundary(0)
    until(lambda: len(fake.load_ids) == 1)  # the warm-up's load of bin 0, still running
    migration = mover.submit(fluid_moves(fake, mover, [0], "1"), prewarm=True)
    fake.run_batch(1)
    mover.boundary(1)
    report = mover.warm_up.report
    assert (report.status, report.reason) == (
        "skipped",
        "a migration started before the warm-up ended",
    )
    # the warm-up's copy still holds bin 0's shadow ids: the step loads only after release
    assert fake.released == [] and len(fake.load_ids) == 1
    drive(fake, mover, 1, 2)
    assert mover._prewarmed._steps == {} and migration.step == 0
    fake.loads_may_finish.set()
    assert mover.warm_up.wait(5)
    assert fake.released_loads == fake.load_ids[:1]
    batch = drive(fake, mover, 3, 1)  # now the step loads
    until(lambda: len(fake.load_ids) == 2)
    until(lambda: drive(fake, mover, batch, 1) > 0 and migration.step == 1)
    assert [b for b, _ in fake.switched] == [0]  # the migration's switch, no in-place one
    assert fake.coordinator[0] == "1"


def test_no_switch_when_the_bin_left_its_owner_and_the_copy_is_released() -> None:
    fake = InPlaceInternals(4)
    mover = loaded_warm_up(fake)
    fake.coordinator[0] = "1"  # re-pointed meanwhile (an executor lost, say)
    mover.boundary(1)
    report = mover.warm_up.report
    assert (report.status, report.reason) == ("skipped", "bin 0 left 0 before the switch")
    assert fake.switched == []
    assert mover.warm_up.wait(5) and fake.released == [0]


def test_a_failed_load_is_reported_and_nothing_switches() -> None:
    fake = InPlaceInternals(4)
    fake.load_answer = "failed"
    mover = loaded_warm_up(fake)
    mover.boundary(1)
    report = mover.warm_up.report
    assert report.status == "skipped" and "java.io.IOException: gone" in str(report.reason)
    assert fake.switched == []
    assert mover.warm_up.wait(5)


def test_skipped_with_one_executor_or_when_prewarm_cannot_run() -> None:
    alone = InPlaceInternals(4)
    alone.alive = ["0"]
    alone.coordinator = dict.fromkeys(range(4), "0")
    mover = warming_mover(alone, CommittedQuery())
    mover.boundary(0)
    assert mover.warm_up.wait(5)
    assert mover.warm_up.report.reason == "one executor: no bin can load anywhere but its owner"

    no_jar = InPlaceInternals(4)
    no_jar.jar_built = False
    mover = warming_mover(no_jar, CommittedQuery())
    mover.boundary(0)
    assert mover.warm_up.wait(5)
    assert "jar is not built" in str(mover.warm_up.report.reason)
    assert alone.load_ids == no_jar.load_ids == []


def test_off_unless_asked() -> None:
    fake = InPlaceInternals(4)
    mover = BinMover(None, 4, internals=fake, verify_async=False)  # type: ignore[arg-type]
    mover.attach(CommittedQuery())
    mover.boundary(0)
    assert (mover.warm_up.report.status, mover.warm_up.report.reason) == ("skipped", "disabled")
    assert fake.load_ids == []


def test_a_step_that_waits_too_long_for_the_release_moves_the_plain_way() -> None:
    fake = InPlaceInternals(4)
    fake.loads_may_finish.clear()  # the warm-up's load never ends here
    mover = BinMover(
        None,  # type: ignore[arg-type]
        4,
        internals=fake,
        verify_async=False,
        warm_up_prewarm=True,
        prewarm_timeout_s=0.3,
    )
    mover.attach(CommittedQuery())
    mover.boundary(0)
    until(lambda: len(fake.load_ids) == 1)
    migration = mover.submit(fluid_moves(fake, mover, [0], "1"), prewarm=True)
    batch = drive(fake, mover, 0, 2)
    assert migration.step == 0 and not migration.prewarm_fallback
    time.sleep(0.4)
    drive(fake, mover, batch, 1)
    assert migration.prewarm_fallback == (
        "step 1 waited over 0.3 s for the warm-up's copy of bins [0] to be released"
    )
    assert migration.step == 1 and fake.coordinator[0] == "1"  # re-pointed plainly
    assert len(fake.load_ids) == 1  # the step loaded nothing
    fake.loads_may_finish.set()


class TwoOperators(InPlaceInternals):
    """Bin 0 of operator 1 is served elsewhere than bin 0 of operator 0."""

    def state_stores(self, query: Any) -> list[tuple[int, str]]:
        return [(0, "default"), (1, "default")]

    def location(self, query: Any, partition: int, operator: int = 0) -> str | None:
        return "1" if operator == 1 else super().location(query, partition, operator)


def test_no_switch_when_another_store_of_the_bin_is_elsewhere() -> None:
    fake = TwoOperators(4)
    mover = loaded_warm_up(fake)
    mover.boundary(1)
    assert mover.warm_up.report.reason == "bin 0 left 0 before the switch"
    assert fake.switched == []


def test_a_restarted_query_ends_the_warm_up_begun_on_the_old_one() -> None:
    fake = InPlaceInternals(4)
    mover = loaded_warm_up(fake)
    mover.attach(CommittedQuery())  # another query object: the runtime restarted it
    mover.boundary(1)
    report = mover.warm_up.report
    assert (report.status, report.reason) == (
        "skipped",
        "the query restarted before the warm-up ended",
    )
    assert fake.switched == []
    assert mover.warm_up.wait(5) and fake.released == [0]
