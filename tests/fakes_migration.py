"""Spark-free stand-ins for what a `MigrationDriver` drives (shared by the unit and the
agent integration tests): a query, a `BinMover` that moves bins in a dict, and a
SparkSession whose only part used is `streams` (listeners).

    from tests.fakes_migration import FakeMover, FakeQuery, FakeSpark

`FakeMover` carries out `MigrationActions`' calls: `current_assignment` (round-robin over
`alive` until something moved), `submit` (a plan as given: it starts after the steps the
placement already reflects, or fails when the placement is not one the plan passes
through, as the real mover does), `migrate` (the policy loop's: records the target) and
`wait` (moves the bins, reports through `on_progress` like the real mover).
`stop_after=n` moves only the first n bins of a migration and reports it still
`Running`: the driver died halfway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from swivel.controllers.resuming import StalePlanError, steps_already_done


@dataclass
class FakeQuery:
    runId: str = "run-1"  # noqa: N815 - Spark's name


@dataclass
class FakeMigration:
    id: str
    target: dict[int, str]
    changes: list[int]  # the bins it moves
    kind: str = ""
    phase: str = "Running"
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "binsTotal": len(self.changes)}


@dataclass
class FakeMover:
    bins: int = 16
    query: Any = None
    last_boundary: int | None = None
    internals: Any = None
    on_progress: Any = None
    migrating: bool = False  # BinMover.migrating: a test switches it
    boundaries: list[int] = field(default_factory=list)
    migrated: list[dict[int, str]] = field(default_factory=list)  # targets, one per migrate
    prewarm_asked: list[bool] = field(default_factory=list)  # submit's prewarm, per plan
    moved: list[tuple[int, str]] = field(default_factory=list)  # (bin, executor) carried out
    assignment: dict[int, str] = field(default_factory=dict)
    alive: list[str] = field(default_factory=lambda: ["0", "1"])
    stop_after: int | None = None
    closed: bool = False
    helper_check: dict[str, str] | None = None  # BinMover.helper_check: a test sets it

    def attach(self, query: Any) -> None:
        self.query = query

    def boundary(self, batch_id: int) -> None:
        self.last_boundary = batch_id
        self.boundaries.append(batch_id)

    def executors(self) -> list[str]:
        return list(self.alive)

    def current_assignment(self) -> dict[int, str]:
        placed = {b: self.alive[b % len(self.alive)] for b in range(self.bins)}
        return {**placed, **self.assignment}

    def migrate(self, target: dict[int, str], strategy: str, **_: Any) -> FakeMigration:
        self.migrated.append(dict(target))
        current = self.current_assignment()
        changes = sorted(b for b, e in target.items() if current.get(b) != e)
        return FakeMigration(f"m-{len(self.migrated)}", dict(target), changes)

    def submit(self, plan: Any, topology: Any = None, *, kind: str = "move-bins",
               on_submit: Any = None, prewarm: bool = False) -> FakeMigration:  # fmt: skip
        """A plan carried out as given, from the first step the placement does not reflect
        (`prewarm` is recorded: the fake loads nothing ahead)."""
        self.prewarm_asked.append(prewarm)
        self.migrated.append(dict(plan.after))
        migration = FakeMigration(f"m-{len(self.migrated)}", dict(plan.after), [], kind)
        try:
            current = self.current_assignment()
            done = steps_already_done(plan, current)
            migration.changes = [
                m.bin
                for step in plan.steps[done:]
                for m in step.moves
                if current[m.bin] != m.target
            ]
        except StalePlanError as error:
            migration.phase, migration.message = "Failed", str(error)
        if on_submit is not None:
            on_submit(migration)
        return migration

    def wait(self, migration: FakeMigration, timeout: float) -> FakeMigration:
        if migration.phase == "Failed":
            if self.on_progress is not None:
                self.on_progress({"id": migration.id, "phase": "Failed",
                                  "message": migration.message})  # fmt: skip
            return migration
        carried = migration.changes[: self.stop_after] if self.stop_after is not None else []
        if self.stop_after is None:
            carried = list(migration.changes)
        for b in carried:
            self.assignment[b] = migration.target[b]
            self.moved.append((b, migration.target[b]))
        if self.on_progress is not None:
            done = len(carried) == len(migration.changes)
            self.on_progress({
                "id": migration.id, "phase": "Completed" if done else "Running",
                "binsMoved": len(carried), "binsTotal": len(migration.changes),
            })  # fmt: skip
        return migration

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeStreams:
    listeners: list[Any] = field(default_factory=list)

    def addListener(self, listener: Any) -> None:
        self.listeners.append(listener)

    def removeListener(self, listener: Any) -> None:
        self.listeners.remove(listener)


@dataclass
class FakeSpark:
    streams: FakeStreams = field(default_factory=FakeStreams)


def placement_loads(placement: dict[int, str]) -> dict[str, Any]:
    """A `POST /v1/driver/loads` body whose bins sit on `placement` (bin -> executor): the
    placement the agent plans a migration from."""
    executors = sorted(set(placement.values()))
    return {
        "measuredAt": 1_700_000_000.0,
        "windowSeconds": 10.0,
        "executors": [
            {"executor": e, "busySeconds": 1.0, "windowSeconds": 10.0} for e in executors
        ],
        "bins": [{"bin": b, "executor": e, "records": 1} for b, e in sorted(placement.items())],
    }


def round_robin(bins: int = 16, executors: int = 2) -> dict[int, str]:
    return {b: str(b % executors) for b in range(bins)}
