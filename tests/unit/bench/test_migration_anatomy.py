"""The glue between a migration's records and `moved_task_extra_ms`: which bins moved into
which batch, and where each batch's task times come from (no Spark: the mover's records
and the REST reader are faked)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from swivel.controllers.migration import MigrationPlan, Move, Step, Strategy
from swivel.jobs.migration.migrations import BatchRecord, Migration, MoveOutcome
from swivel.jobs.spark_status import TaskRun
from swivel_tools.bench import migration_anatomy as anatomy

PLAN = MigrationPlan(
    Strategy.BATCHED,
    ("a", "a", "b", "b"),
    (
        Step((Move(0, "a", "b"), Move(2, "b", "a"))),
        Step(),  # a gap step moves nothing and switches at no boundary
        Step((Move(1, "a", "b"),)),
    ),
)


def test_bins_move_into_the_batch_they_were_verified_in() -> None:
    outcomes = {
        0: MoveOutcome(Move(0, "a", "b"), status="landed", verified_in_batch=11),
        2: MoveOutcome(Move(2, "b", "a"), status="landed", verified_in_batch=11),
        1: MoveOutcome(Move(1, "a", "b"), status="landed", verified_in_batch=13),
        3: MoveOutcome(Move(3, "b", "a"), status="issued"),  # not verified: no batch yet
    }
    migration = Migration("m", PLAN, outcomes=outcomes)
    assert anatomy.moved_in(migration) == {11: [0, 2], 13: [1]}


class FakeInternals:
    def __init__(self, tasks: dict[int, list[TaskRun]]) -> None:
        self.tasks = tasks
        self.asked: list[int] = []

    def batches_tasks(self, run_id: str, batch_ids: Any, partitions: int) -> dict[int, Any]:
        self.asked = list(batch_ids)
        return {b: self.tasks.get(b, []) for b in self.asked}


def task(partition: int, ms: float) -> TaskRun:
    return TaskRun(1, partition, "1", "PROCESS_LOCAL", ms, "SUCCESS")


def test_task_times_come_from_the_movers_records_else_the_rest_api() -> None:
    internals = FakeInternals({6: [task(0, 300.0), task(1, 90.0)]})
    mover: Any = SimpleNamespace(
        batches={5: BatchRecord(5, {0: "1", 1: "2"}, (), {0: 500.0, 1: 100.0})},
        internals=internals,
    )
    out = anatomy.task_times(mover, "run", [5, 6, 7], bins=2)
    assert out == {5: {0: 500.0, 1: 100.0}, 6: {0: 300.0, 1: 90.0}}  # 7: no task list
    assert internals.asked == [6, 7]  # the recorded batch is not read again


class FakeRest:
    """The status REST API's answers for one batch: one job, one stage of 2 tasks."""

    def __init__(self) -> None:
        launch = "2026-11-26T05:00:00.000GMT"
        self.answers: dict[str, Any] = {
            "/jobs": [{"jobGroup": "run", "description": "x batch = 7", "stageIds": [3]}],
            "/stages/3": [{"numTasks": 2, "status": "COMPLETE", "attemptId": 0}],
            "/stages/3/0/taskList?length=16": [
                {"index": 0, "executorId": "1", "launchTime": launch, "duration": 900,
                 "status": "SUCCESS", "taskMetrics": {"jvmGcTime": 610}},
                {"index": 1, "executorId": "1", "launchTime": launch, "duration": 800,
                 "status": "SUCCESS", "taskMetrics": {"jvmGcTime": 600}},
            ],
        }  # fmt: skip

    def _rest(self, path: str) -> Any:
        return self.answers[path]


def test_the_anatomy_of_a_batch_says_how_long_the_jvm_collected() -> None:
    (executor,) = anatomy.batch_anatomy(FakeRest(), "run", 7, 2, moved={0}).values()
    assert (executor["gc_ms_max"], executor["gc_ms_sum"]) == (610.0, 1210)
    assert (executor["moved_in_bins"], executor["busy_ms"]) == (1, 1700)
