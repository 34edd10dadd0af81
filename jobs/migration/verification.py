"""Checking a migration's moves against the batches that ran them: which executor served
each bin (read from the batch's task list), and what becomes of an issued move once the
batch after its boundary has been read.

The BinMover (jobs/migration/executor.py) calls these: `read_batch` on its verifier
thread, off the batch path (a task list is a REST read of the driver's status store), and
`settle` under its lock, at a boundary (where a move may be re-pointed: no stateful task
runs) or after a read (where it may only be recorded). Kept apart from the stepping so that
what counts as "landed" is read in one place.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from swivel.jobs.migration.migrations import BatchRecord, Migration, MoveOutcome
from swivel.jobs.spark_internals import SparkInternals

# how often a batch's task list is read again while some of its bins have no finished task
_REREAD_S = 0.2


def read_batch(
    internals: SparkInternals, run_id: str, batch_id: int, bins: int, timeout_s: float
) -> BatchRecord:
    """Which executor served each bin in batch `batch_id` of run `run_id`, and which bins
    ran more than once successfully. Reads again until every bin has a successful task, or
    `timeout_s` passed (the status store may lag the boundary by a few task-end events);
    a bin still without one is left out of `served`, and `settle` waits for a later read."""
    tasks = internals.batch_tasks_all(run_id, batch_id, bins)
    deadline = time.monotonic() + timeout_s
    while len({t.partition for t in tasks if t.status == "SUCCESS"}) < bins:
        if time.monotonic() > deadline:
            break
        time.sleep(_REREAD_S)
        tasks = internals.batch_tasks_all(run_id, batch_id, bins)
    served: dict[int, str] = {}
    counts: dict[int, int] = {}
    task_ms: dict[int, float] = {}
    for task in tasks:
        if task.status == "SUCCESS":
            served[task.partition] = task.executor
            counts[task.partition] = counts.get(task.partition, 0) + 1
            task_ms[task.partition] = task.duration_ms
    duplicates = tuple(sorted(b for b, n in counts.items() if n > 1))
    return BatchRecord(batch_id, served, duplicates, task_ms)


def settle(
    migration: Migration,
    batches: dict[int, BatchRecord],
    *,
    alive: Callable[[], set[str]],
    max_attempts: int,
    repoint: Callable[[MoveOutcome], None] | None,
) -> None:
    """Check the migration's issued moves against the batches read so far. A move whose
    next batch ran the bin on its target has landed. One that ran elsewhere is re-pointed
    (`repoint`; None: not now, between boundaries) while its target is alive and it has
    attempts left; otherwise it is reported as served elsewhere, never silently dropped.
    `alive` is read at most once, and only when a move ran elsewhere."""
    live: set[str] | None = None
    for outcome in migration.outcomes.values():
        if outcome.status != "issued" or outcome.issued_at_batch is None:
            continue
        record = batches.get(outcome.issued_at_batch + 1)
        if record is None:
            continue
        served = record.served.get(outcome.move.bin)
        outcome.served_by = served
        outcome.verified_in_batch = record.batch_id
        if served == outcome.move.target:
            outcome.status = "landed"
            continue
        live = live if live is not None else alive()
        if outcome.move.target not in live:
            outcome.status = "elsewhere"  # its target is gone: the bin lives on `served`
        elif outcome.attempts >= max_attempts:
            outcome.status = "elsewhere"
        elif repoint is not None:
            repoint(outcome)


def issued(outcome: MoveOutcome, batch_id: int) -> None:
    """The bin was re-pointed at the boundary after `batch_id`: verify it in the next."""
    outcome.attempts += 1
    outcome.issued_at_batch = batch_id
    outcome.status = "issued"


def all_settled(migration: Migration) -> bool:
    """No move of the migration is still waiting to be issued or verified."""
    return all(o.status not in ("pending", "issued") for o in migration.outcomes.values())
