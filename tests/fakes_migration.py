"""Spark-free stand-ins for what a `MigrationDriver` drives (shared by the unit and the
agent integration tests): a query, a `BinMover` that moves bins in a dict, and a
SparkSession whose only part used is `streams` (listeners).

    from tests.fakes_migration import FakeMover, FakeQuery, FakeSpark

`FakeMover` carries out `MigrationActions`' calls: `current_assignment` (round-robin over
`alive` until something moved), `migrate` (records the target) and `wait` (moves the bins,
reports through `on_progress` like the real mover). `stop_after=n` moves only the first n
bins of a migration and reports it still `Running`: the driver died halfway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeQuery:
    runId: str = "run-1"  # noqa: N815 - Spark's name


@dataclass
class FakeMigration:
    id: str
    target: dict[int, str]
    changes: list[int]  # the bins it moves
    kind: str = ""

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
    moved: list[tuple[int, str]] = field(default_factory=list)  # (bin, executor) carried out
    assignment: dict[int, str] = field(default_factory=dict)
    alive: list[str] = field(default_factory=lambda: ["0", "1"])
    stop_after: int | None = None
    closed: bool = False

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

    def wait(self, migration: FakeMigration, timeout: float) -> FakeMigration:
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
