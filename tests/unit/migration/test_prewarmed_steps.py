"""The BinMover's prewarmed steps against the simulated cluster of test_executor: a step
switches only once its bins are loaded on their targets, the next step loads while the
previous one runs, and whatever cannot be prewarmed moves the plain way and says why.
The fake adapter's switches: the helper is missing, the settings refuse, a load fails or
never ends. (The real loads and switches run on the cluster: test_prewarm.py.)"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from swivel.controllers.migration import Strategy, plan_migration
from swivel.jobs.migration.executor import BinMover
from tests.unit.migration.test_executor import FakeInternals, FakeQuery, drive


class FakePrewarmer:
    def __init__(self, owner: PrewarmingInternals) -> None:
        self.owner = owner

    def available(self) -> bool:
        return self.owner.jar_built

    def refusal(self, query: Any) -> str | None:
        return self.owner.refuses

    def release(
        self, query: Any, bins: Any, target: str, host: str, *, load_id: str, **_: Any
    ) -> list[Any]:
        self.owner.released += list(bins)
        self.owner.released_loads.append(load_id)
        return []


class PrewarmingInternals(FakeInternals):
    """FakeInternals that also prewarms: loads block until `loads_may_finish` is set."""

    def __init__(self, bins: int) -> None:
        super().__init__(bins)
        self.jar_built = True
        self.refuses: str | None = None
        self.load_fails = False  # the load raises (the executor was lost)
        self.load_answer = "loaded"  # what the executor's loader thread answered
        self.loads_may_finish = threading.Event()
        self.loads_may_finish.set()
        self.held_bins: set[int] = set()  # their loads also wait for `held_may_finish`
        self.held_may_finish = threading.Event()
        self.failing_bins: set[int] = set()  # their loads answer `failed`
        self.loaded: list[tuple[int, str]] = []  # (bin, target), in load order
        self.switched: list[tuple[int, int]] = []  # (bin, version read next)
        self.released: list[int] = []
        self.load_ids: list[str] = []  # the load id each prewarm call was given
        self.released_loads: list[str] = []  # the load id each release named
        self.answer_timeouts: list[float | None] = []  # each load's wait for its answers
        self.compact_interval = 10  # a file source's log compacts every this many entries
        self.compact_interval_reads = 0
        self._prewarmer = FakePrewarmer(self)

    def source_log_compact_interval(self) -> int:
        self.compact_interval_reads += 1
        return self.compact_interval

    def prewarmer(self) -> FakePrewarmer:
        return self._prewarmer

    def executor_host(self, executor: str) -> str:
        return "127.0.0.1"

    def prewarm(
        self,
        query: Any,
        bins: Any,
        target: str,
        host: str,
        stores: Any,
        *,
        load_id: str,
        timeout_s: float | None = None,
    ) -> list[Any]:
        self.load_ids.append(load_id)
        self.answer_timeouts.append(timeout_s)
        self.loads_may_finish.wait(10)
        if self.held_bins & set(bins):
            self.held_may_finish.wait(10)
        if self.load_fails:
            raise RuntimeError("executor lost during the load")
        self.loaded += [(b, target) for b in bins]
        return [self._answer(b) for b in bins]

    def _answer(self, bin_id: int) -> dict[str, Any]:
        status = "failed" if bin_id in self.failing_bins else self.load_answer
        failed = {"error": "java.io.IOException: gone"} if status == "failed" else {}
        return {"partition": bin_id, "status": status, **failed}

    def switch_prewarmed(self, query: Any, moves: Any, stores: Any, *, version: int) -> list[Any]:
        for b, target, host in moves:
            self.set_location(query, b, target, host, stores)
            self.switched.append((b, version))
        # the helper's answer: each copy topped up in place to `version` (ChangelogCatchUp),
        # after the follower replayed b + 1 versions into it; it stopped following bin 2
        # early (ChangelogFollower)
        return [
            {
                "partition": b,
                "status": "activated",
                "topup_ms": 12.5 + b,
                "topup": "replayed 2",
                "followed": b + 1,
                "stop_wait_ms": 0.25 * b,
                "follow_stopped": "refused: no changelog checkpointing" if b == 2 else "switched",
            }
            for b, _, _ in moves
        ]


def mover_for(fake: PrewarmingInternals, bins: int, **options: Any) -> BinMover:
    mover = BinMover(None, bins, internals=fake, verify_async=False, **options)  # type: ignore[arg-type]
    mover.attach(FakeQuery())
    return mover


def until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def fluid_moves(fake: FakeInternals, mover: BinMover, bins: list[int], to: str) -> Any:
    current = mover.current_assignment()
    return plan_migration(current, {**current, **dict.fromkeys(bins, to)}, Strategy.FLUID)


def prewarmed_move_of_bin_0(fake: PrewarmingInternals, **options: Any) -> tuple[BinMover, Any]:
    """A mover past its first boundary with bin 0 -> executor 1 submitted, prewarm asked."""
    mover = mover_for(fake, 4, **options)
    mover.boundary(0)
    return mover, mover.submit(fluid_moves(fake, mover, [0], "1"), prewarm=True)


def test_a_step_switches_only_after_its_bins_are_loaded_and_reads_the_next_version() -> None:
    fake = PrewarmingInternals(4)
    fake.loads_may_finish.clear()
    mover, migration = prewarmed_move_of_bin_0(fake)
    batch = drive(fake, mover, 0, 3)  # the load is still running: nothing switches
    assert migration.step == 0 and fake.coordinator[0] == "0" and fake.switched == []
    fake.loads_may_finish.set()
    until(lambda: fake.loaded == [(0, "1")])
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    batch = drive(fake, mover, batch, 1)
    assert fake.switched == [(0, batch + 1)]  # topped up to what batch + 1 reads
    drive(fake, mover, batch, 2)
    assert migration.phase == "Completed" and migration.moved == 1
    assert (migration.prewarmed, migration.prewarm_fallback) == ({0}, "")
    assert migration.to_dict()["binsPrewarmed"] == 1


def test_the_next_step_loads_while_the_previous_one_runs() -> None:
    fake = PrewarmingInternals(6)
    mover = mover_for(fake, 6)
    mover.boundary(0)
    migration = mover.submit(fluid_moves(fake, mover, [0, 2, 4], "1"), prewarm=True)
    batch = drive(fake, mover, 0, 1)  # the migration begins: step 1 starts loading
    while not migration.done.is_set() and batch < 40:
        until(lambda: len(fake.loaded) >= min(3, migration.step + 1))
        until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
        batch = drive(fake, mover, batch, 1)
    assert migration.phase == "Completed"
    assert migration.prewarmed == {0, 2, 4}
    boundaries = [b for b in migration.step_batches if b is not None]
    assert boundaries == sorted(boundaries) and len(set(boundaries)) == 3
    # one step per boundary once loaded: pipelined, not load-then-wait per step
    assert boundaries[-1] - boundaries[0] == 2


def loading_steps(mover: BinMover) -> list[int]:
    """The steps whose prewarm has started and not switched yet."""
    return sorted(step for _, step in mover._prewarmed._steps)


def test_the_next_two_steps_load_ahead_and_a_third_once_the_first_switches() -> None:
    fake = PrewarmingInternals(8)
    mover = mover_for(fake, 8)  # PREWARM_AHEAD: 2
    mover.boundary(0)
    migration = mover.submit(fluid_moves(fake, mover, [0, 2, 4], "1"), prewarm=True)
    batch = drive(fake, mover, 0, 1)  # the migration begins
    assert loading_steps(mover) == [0, 1]
    until(lambda: sorted(fake.loaded) == [(0, "1"), (2, "1")])
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    batch = drive(fake, mover, batch, 1)  # step 1 switches, step 3 starts loading
    assert migration.step == 1 and loading_steps(mover) == [1, 2]
    batch = drive(fake, mover, batch, 1)  # step 2 was loaded ahead: it switches at once
    assert migration.step == 2 and [b for b, _ in fake.switched] == [0, 2]
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    drive(fake, mover, batch, 3)
    assert (migration.phase, migration.prewarmed) == ("Completed", {0, 2, 4})


def test_one_step_ahead_loads_each_step_once_the_one_before_switched() -> None:
    fake = PrewarmingInternals(8)
    mover = mover_for(fake, 8, prewarm_ahead=1)
    mover.boundary(0)
    mover.submit(fluid_moves(fake, mover, [0, 2, 4], "1"), prewarm=True)
    drive(fake, mover, 0, 1)
    assert loading_steps(mover) == [0]


def test_a_step_moving_a_bin_an_earlier_step_moves_is_not_loaded_ahead() -> None:
    """Its giver is the earlier step's target: it loads once that step has switched."""
    from swivel.controllers.migration import MigrationPlan, Move, Step

    fake = PrewarmingInternals(4)
    mover = mover_for(fake, 4)
    mover.boundary(0)
    initial = tuple(fake.coordinator[b] for b in range(4))
    plan = MigrationPlan(
        Strategy.FLUID,
        initial,
        (Step((Move(0, "0", "1"),)), Step((Move(0, "1", "0"),)), Step((Move(2, "0", "1"),))),
    )
    migration = mover.submit(plan, prewarm=True)
    batch = drive(fake, mover, 0, 1)
    assert loading_steps(mover) == [0]  # step 2 moves bin 0 back: not before step 1 switched
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    batch = drive(fake, mover, batch, 1)
    assert loading_steps(mover) == [1, 2]
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    drive(fake, mover, batch, 4)
    assert migration.phase == "Completed" and fake.coordinator[0] == "0"
    assert fake.coordinator[2] == "1" and migration.prewarm_fallback == ""


def test_a_step_loaded_ahead_times_out_from_when_it_became_the_next_step() -> None:
    """A step loading behind the one before it is not given up for the time it queued."""
    fake = PrewarmingInternals(8)
    fake.held_bins = {2}  # step 2's load ends only when the test says
    mover = mover_for(fake, 8, prewarm_timeout_s=1.5)
    mover.boundary(0)
    migration = mover.submit(fluid_moves(fake, mover, [0, 2], "1"), prewarm=True)
    batch = drive(fake, mover, 0, 1)  # both steps start loading
    until(lambda: fake.loaded == [(0, "1")])
    time.sleep(1.6)  # longer than the timeout since step 2 started
    batch = drive(fake, mover, batch, 1)  # step 1 switches: step 2 is next from now
    batch = drive(fake, mover, batch, 1)
    assert migration.prewarm_fallback == "" and migration.step == 1  # waiting for its load
    fake.held_may_finish.set()
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    drive(fake, mover, batch, 3)
    assert (migration.phase, migration.prewarmed) == ("Completed", {0, 2})


def test_after_a_gap_step_the_next_step_times_out_from_the_gap_s_boundary() -> None:
    from swivel.controllers.migration import MigrationPlan, Move, Step

    fake = PrewarmingInternals(4)
    fake.held_bins = {2}  # step 3's load ends only when the test says
    mover = mover_for(fake, 4, prewarm_timeout_s=1.5)
    mover.boundary(0)
    initial = tuple(fake.coordinator[b] for b in range(4))
    steps = (Step((Move(0, "0", "1"),)), Step(()), Step((Move(2, "0", "1"),)))
    migration = mover.submit(MigrationPlan(Strategy.FLUID, initial, steps), prewarm=True)
    batch = drive(fake, mover, 0, 1)  # steps 1 and 3 start loading
    until(lambda: fake.loaded == [(0, "1")])
    batch = drive(fake, mover, batch, 1)  # step 1 switches
    time.sleep(1.6)  # past the timeout since step 1's switch
    batch = drive(fake, mover, batch, 1)  # the gap step: step 3 is next from now
    batch = drive(fake, mover, batch, 1)
    assert migration.prewarm_fallback == "" and migration.step == 2
    fake.held_may_finish.set()
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    drive(fake, mover, batch, 3)
    assert (migration.phase, migration.prewarmed) == ("Completed", {0, 2})


def test_a_failed_step_releases_the_steps_loaded_ahead_of_it() -> None:
    fake = PrewarmingInternals(8)
    fake.failing_bins = {0}
    mover = mover_for(fake, 8)
    mover.boundary(0)
    migration = mover.submit(fluid_moves(fake, mover, [0, 2, 4], "1"), prewarm=True)
    batch = drive(fake, mover, 0, 1)
    until(lambda: len(fake.load_ids) == 2)
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    drive(fake, mover, batch, 5)  # step 1 fails its prewarm: every step moves plainly
    assert migration.phase == "Completed" and fake.switched == []
    assert "bin 0: java.io.IOException: gone" in migration.prewarm_fallback
    until(lambda: sorted(fake.released) == [0, 2])  # step 2's copy is dropped too
    assert len(fake.load_ids) == 2  # step 3 never loaded
    assert [fake.coordinator[b] for b in (0, 2, 4)] == ["1", "1", "1"]


def test_a_step_that_times_out_releases_the_steps_loaded_ahead_of_it() -> None:
    fake = PrewarmingInternals(8)
    fake.held_bins = {0}  # step 1's load does not end in time
    mover = mover_for(fake, 8, prewarm_timeout_s=0.05)
    mover.boundary(0)
    migration = mover.submit(fluid_moves(fake, mover, [0, 2], "1"), prewarm=True)
    batch = drive(fake, mover, 0, 1)
    until(lambda: (2, "1") in fake.loaded)  # step 2 loaded ahead
    time.sleep(0.1)
    batch = drive(fake, mover, batch, 4)
    assert "step 1's prewarm took over" in migration.prewarm_fallback
    assert migration.phase == "Completed" and fake.switched == []  # step 2 moved plainly too
    until(lambda: fake.released == [2])  # step 2's copy dropped; step 1's once it loads
    fake.held_may_finish.set()
    until(lambda: sorted(fake.released) == [0, 2])


def test_a_step_loaded_ahead_waits_for_its_answers_behind_the_steps_before_it() -> None:
    """The loads' own bound leaves the decision to the step's timeout from when it is next
    (each step before it on a target's loader thread took at most that)."""
    fake = PrewarmingInternals(8)
    mover = mover_for(fake, 8, prewarm_timeout_s=100.0)
    mover.boundary(0)
    mover.submit(fluid_moves(fake, mover, [0, 2], "1"), prewarm=True)
    drive(fake, mover, 0, 1)
    until(lambda: len(fake.answer_timeouts) == 2)
    assert fake.answer_timeouts == [300.0, 300.0]  # 100 s x (2 ahead + 1)


def test_a_refusal_after_steps_were_loaded_ahead_releases_them_unswitched() -> None:
    fake = PrewarmingInternals(8)
    mover = mover_for(fake, 8)
    mover.boundary(0)
    migration = mover.submit(fluid_moves(fake, mover, [0, 2, 4], "1"), prewarm=True)
    batch = drive(fake, mover, 0, 1)
    until(lambda: len(fake.loaded) == 2)
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    fake.refuses = "the session's settings changed"
    batch = drive(fake, mover, batch, 1)  # step 1 switches; step 3 is refused
    assert migration.prewarm_fallback == "the session's settings changed"
    drive(fake, mover, batch, 4)
    assert migration.phase == "Completed" and [b for b, _ in fake.switched] == [0]
    until(lambda: fake.released == [2])  # loaded ahead, never switched
    assert [fake.coordinator[b] for b in (0, 2, 4)] == ["1", "1", "1"]


def test_a_restarted_query_releases_the_steps_loaded_for_its_old_run() -> None:
    fake = PrewarmingInternals(8)
    fake.held_bins = {0}
    mover = mover_for(fake, 8)
    mover.boundary(0)
    migration = mover.submit(fluid_moves(fake, mover, [0, 2], "1"), prewarm=True)
    batch = drive(fake, mover, 0, 1)
    until(lambda: (2, "1") in fake.loaded)
    mover.attach(FakeQuery())  # the query restarted: a new run id
    assert migration.prewarm_fallback == "the query restarted: the steps left move the plain way"
    assert mover._prewarmed._steps == {}
    until(lambda: fake.released == [2])
    fake.held_may_finish.set()
    until(lambda: sorted(fake.released) == [0, 2])
    drive(fake, mover, batch, 4)
    assert migration.phase == "Completed" and fake.switched == []
    assert [fake.coordinator[b] for b in (0, 2)] == ["1", "1"]


def test_prewarm_ahead_below_one_step_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 step, not 0"):
        mover_for(PrewarmingInternals(4), 4, prewarm_ahead=0)


def test_refused_settings_move_the_plain_way_and_say_why() -> None:
    fake = PrewarmingInternals(4)
    fake.refuses = "spark.sql.streaming.stateStore.unloadOnCommit=true: ..."
    mover, migration = prewarmed_move_of_bin_0(fake)
    drive(fake, mover, 0, 3)
    assert migration.phase == "Completed" and fake.coordinator[0] == "1"
    assert fake.loaded == [] and migration.prewarmed == set()
    assert migration.prewarm_fallback.startswith("spark.sql.streaming.stateStore.unloadOnCommit")
    assert migration.to_dict()["prewarmFallback"] == migration.prewarm_fallback


def test_without_the_helper_jar_bins_move_the_plain_way() -> None:
    fake = PrewarmingInternals(4)
    fake.jar_built = False
    mover, migration = prewarmed_move_of_bin_0(fake)
    drive(fake, mover, 0, 3)
    assert migration.phase == "Completed" and fake.coordinator[0] == "1"
    assert "helper jar" in migration.prewarm_fallback


@pytest.mark.parametrize(
    ("switch", "value", "reason"),
    [
        ("load_fails", True, "executor lost"),  # the load raised: the executor was lost
        ("load_answer", "failed", "bin 0: java.io.IOException: gone"),  # loader thread failed
        ("load_answer", "no-load", "bin 0: the target answered no-load"),  # it lost the load
        ("load_answer", "superseded", "bin 0: the target answered superseded"),  # replaced
    ],
)
def test_a_failed_load_moves_the_step_the_plain_way_and_says_why(
    switch: str, value: object, reason: str
) -> None:
    fake = PrewarmingInternals(4)
    setattr(fake, switch, value)
    mover, migration = prewarmed_move_of_bin_0(fake)
    batch = drive(fake, mover, 0, 1)
    until(
        lambda: (
            bool(mover._prewarmed._steps)
            and all(p.ready for p, _ in mover._prewarmed._steps.values())
        )
    )
    drive(fake, mover, batch, 3)
    assert migration.phase == "Completed" and fake.coordinator[0] == "1"
    assert fake.switched == [] and reason in migration.prewarm_fallback
    until(lambda: fake.released == [0])  # whatever did load is dropped, not left loaded


def test_a_load_that_does_not_end_in_time_gives_way_and_its_copy_is_released() -> None:
    fake = PrewarmingInternals(4)
    fake.loads_may_finish.clear()
    mover, migration = prewarmed_move_of_bin_0(fake, prewarm_timeout_s=0.05)
    batch = drive(fake, mover, 0, 1)
    time.sleep(0.1)
    drive(fake, mover, batch, 3)
    assert migration.phase == "Completed" and fake.coordinator[0] == "1"
    assert "took over" in migration.prewarm_fallback and fake.switched == []
    fake.loads_may_finish.set()
    until(lambda: fake.released == [0])  # the late copy is dropped once loaded
    # by its own load's id: a later step's load of the bin would answer `superseded`
    assert fake.released_loads == fake.load_ids and len(set(fake.load_ids)) == 1


def test_without_prewarm_nothing_is_loaded() -> None:
    fake = PrewarmingInternals(4)
    mover = mover_for(fake, 4)
    mover.boundary(0)
    migration = mover.submit(fluid_moves(fake, mover, [0], "1"))
    drive(fake, mover, 0, 3)
    assert migration.phase == "Completed" and fake.loaded == [] and fake.switched == []
    assert migration.to_dict()["prewarmFallback"] is None


@pytest.mark.parametrize(
    ("migration", "prewarmed"),
    [
        ({"strategy": "fluid", "prewarm": True}, {0}),
        ({"strategy": "fluid"}, {0}),  # an older agent's action: the spec's default, on
        ({"strategy": "fluid", "prewarm": False}, set()),
    ],
)
def test_the_actions_migration_prewarm_reaches_the_mover(
    migration: dict[str, Any], prewarmed: set[int]
) -> None:
    """`spec.migration.prewarm` travels in the driver action's `migration` (as the agent
    copies the spec's) to `BinMover.submit`; without it, the Reconfiguration's default
    (prewarm) holds."""
    from swivel.jobs.migration.actions import MigrationActions

    fake = PrewarmingInternals(4)
    mover = mover_for(fake, 4)
    mover.boundary(0)
    reports: list[dict[str, Any]] = []
    actions = MigrationActions(mover, reports.append)
    plan = fluid_moves(fake, mover, [0], "1")
    action = {
        "seq": 1,
        "action": "move-bins",
        "planId": "p-1",
        "migration": migration,
        "plan": plan.to_dict(),
    }
    assert actions.handle(action)
    until(lambda: bool(mover.history))
    batch = 0
    while not mover.history[0].done.is_set() and batch < 20:
        batch = drive(fake, mover, batch, 1)
        time.sleep(0.02)
    assert mover.history[0].prewarmed == prewarmed
    assert fake.coordinator[0] == "1"
    assert reports[-1]["binsPrewarmed"] == len(prewarmed) and reports[-1]["planId"] == "p-1"


def test_a_reconfiguration_prewarms_unless_it_says_false() -> None:
    """The default a user meets: state moves ahead of the switch (Megaphone)."""
    from swivel.api.reconfiguration import MigrationSpec

    assert MigrationSpec().prewarm is True
    assert MigrationSpec.model_validate({"prewarm": False}).prewarm is False


def test_each_switched_step_records_its_top_up() -> None:
    """The switch's top-up is on the batch path: per step, the slowest copy's time and how
    the copies were brought to the switch's version (replayed in place, or reopened and why),
    and what the follower had replayed into them before (or why it stopped early)."""
    fake = PrewarmingInternals(4)
    mover = mover_for(fake, 4)
    mover.boundary(0)
    migration = mover.submit(fluid_moves(fake, mover, [0, 2], "1"), prewarm=True)
    batch = drive(fake, mover, 0, 1)
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    drive(fake, mover, batch, 6)
    assert migration.phase == "Completed", migration.to_dict()
    assert migration.topups == [
        {
            "ms": 12.5,
            "how": ["replayed 2"],
            "followed": 1,
            "stop_wait_ms": 0.0,
            "follow_stopped": [],
            "via": ["job"],  # the fake answers as a job would
        },
        {
            "ms": 14.5,
            "how": ["replayed 2"],
            "followed": 3,
            "stop_wait_ms": 0.5,
            "follow_stopped": ["refused: no changelog checkpointing"],
            "via": ["job"],
        },
    ]


def test_a_loaded_step_does_not_switch_after_a_batch_that_compacted_the_source_log() -> None:
    """The switch would add to the batch that read the file source's log (every tenth
    entry, source_log.py): it waits one batch, and the migration records which boundary."""
    fake = PrewarmingInternals(4)
    fake.loads_may_finish.clear()
    mover, migration = prewarmed_move_of_bin_0(fake)
    query = mover.query

    def boundary_after(batch: int) -> None:
        # what the boundary after `batch` reads: the progress of the batch before it, whose
        # file source wrote log entry batch - 1 (so batch 9 writes entry 9, which compacts)
        query.lastProgress = {
            "batchId": batch - 1,
            "sources": [
                {"description": "FileStreamSource[file:/in]", "endOffset": {"logOffset": batch - 1}}
            ],
        }
        fake.run_batch(batch)
        mover.boundary(batch)

    for batch in range(1, 9):  # the load runs until batch 8 has ended
        boundary_after(batch)
    fake.loads_may_finish.set()
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    boundary_after(9)  # loaded, but batch 9 compacted the log: no switch
    assert fake.switched == [] and migration.switches_deferred == [9]
    boundary_after(10)
    assert fake.switched == [(0, 11)]  # after batch 10, topped up to what batch 11 reads
    assert migration.switches_deferred == [9]


def loaded_after_eight_batches() -> tuple[PrewarmingInternals, BinMover, Any, int]:
    """Bin 0's step, loaded once batch 8 has ended: its next boundary is batch 9's, the one
    that would compact a file source's log (every tenth entry)."""
    fake = PrewarmingInternals(4)
    fake.loads_may_finish.clear()
    mover, migration = prewarmed_move_of_bin_0(fake)
    batch = drive(fake, mover, 0, 8)
    fake.loads_may_finish.set()
    until(lambda: all(p.ready for p, _ in mover._prewarmed._steps.values()))
    return fake, mover, migration, batch


def test_without_a_file_source_a_loaded_step_switches_at_once() -> None:
    fake, mover, migration, batch = loaded_after_eight_batches()
    mover.query.lastProgress = {"batchId": batch, "sources": [{"description": "RateStreamV2"}]}
    drive(fake, mover, batch, 1)  # batch 9: it would have compacted a file source's log
    assert fake.switched == [(0, 10)] and migration.switches_deferred == []


def test_the_compaction_setting_is_read_once_per_attach() -> None:
    """Spark reads it when the query's source is created: one py4j read at the first
    loaded step's boundary, not one per boundary (here two: one waited out, one switching);
    a new run (attach) reads it again."""
    fake, mover, migration, batch = loaded_after_eight_batches()
    for ended in (batch + 1, batch + 2):  # 9 compacts its log entry, 10 does not
        mover.query.lastProgress = {
            "batchId": ended - 1,
            "sources": [
                {"description": "FileStreamSource[file:/in]", "endOffset": {"logOffset": ended - 1}}
            ],
        }
        fake.run_batch(ended)
        mover.boundary(ended)
    assert migration.switches_deferred == [9] and fake.switched == [(0, 11)]
    assert fake.compact_interval_reads == 1
    mover.attach(mover.query)
    assert mover._prewarmed._compact_interval is None


def test_a_progress_that_cannot_be_read_does_not_hold_the_switch() -> None:
    """The boundary runs inside the user's batch: a query whose progress read fails (it
    is stopping) must not fail that batch; the loaded step then switches without waiting."""
    fake, mover, migration, batch = loaded_after_eight_batches()

    class Stopping:
        runId = "run-1"  # noqa: N815 - Spark's attribute name

        @property
        def lastProgress(self) -> Any:
            raise RuntimeError("py4j: the query stopped")

    mover.query = Stopping()
    drive(fake, mover, batch, 1)
    assert fake.switched == [(0, batch + 2)] and migration.switches_deferred == []
