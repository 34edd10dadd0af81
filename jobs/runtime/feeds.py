"""Where a Python worker reads configuration snapshots from, and sends acks to.

In production the feed is the agent, through the worker-side control client
(`swivel.jobs.control.client`, a per-process singleton long-polling the agent): `AgentFeed`.
Tests and local experiments can use a `FileFeed`: the snapshots published so far live in
one JSON file that every worker re-reads when its mtime changes (a `stat` per check, a few
µs), and a per-operator `lag` makes one operator see a snapshot later than the others - the
way to show, deterministically, what the naive scheduler does when switches are not
coordinated. `StaticFeed` never changes (a job run without an agent).

A feed is pickled into the query's Python functions, so it holds only plain settings; any
connection or cache is rebuilt lazily in each worker process.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from swivel.jobs.control.snapshots import Snapshot


class SnapshotFeed(Protocol):
    def current(self, operator: str) -> Snapshot:
        """The newest snapshot `operator` may see now (from memory; never blocks long)."""
        ...

    def ack(  # noqa: PLR0917  (the wrappers' call, kept positional)
        self,
        operator: str,
        version: int,
        config_version: int,
        partition: int | None,
        batch_id: int | None,
        at: float | None = None,
    ) -> None:
        """This process switched `operator` to `version` at `at` (the check that chose it)."""
        ...


@dataclass(frozen=True)
class StaticFeed:
    """One snapshot for the whole run."""

    snapshot: Snapshot

    def current(self, operator: str) -> Snapshot:
        return self.snapshot

    def ack(  # noqa: PLR0917  (the wrappers' call, kept positional)
        self,
        operator: str,
        version: int,
        config_version: int,
        partition: int | None,
        batch_id: int | None,
        at: float | None = None,
    ) -> None:
        return None


@dataclass
class FileFeed:
    """Snapshots published to a JSON file (`publish`), seen by every worker on its next check.

    `lag` delays, per operator, when a publication becomes visible (seconds).
    """

    path: str
    lag: Mapping[str, float] = field(default_factory=dict)
    acks_path: str | None = None
    _mtime: float = field(default=-1.0, repr=False)
    _published: list[tuple[float, Snapshot]] = field(default_factory=list, repr=False)

    def current(self, operator: str) -> Snapshot:
        try:
            mtime = os.stat(self.path).st_mtime_ns / 1e9
        except FileNotFoundError:
            mtime = -1.0
        if mtime != self._mtime:
            entries = json.loads(Path(self.path).read_text()) if mtime >= 0 else []
            self._published = [(e["at"], Snapshot.from_json(e["snapshot"])) for e in entries]
            self._mtime = mtime
        if not self._published:
            raise LookupError(f"no snapshot published in {self.path}")
        visible_before = time.time() - self.lag.get(operator, 0.0)
        visible = [s for at, s in self._published if at <= visible_before]
        return visible[-1] if visible else self._published[0][1]

    def ack(  # noqa: PLR0917  (the wrappers' call, kept positional)
        self,
        operator: str,
        version: int,
        config_version: int,
        partition: int | None,
        batch_id: int | None,
        at: float | None = None,
    ) -> None:
        if self.acks_path is None:
            return
        ack = {
            "pid": os.getpid(),
            "operator": operator,
            "version": version,
            "configVersion": config_version,
            "partition": partition,
            "batchId": batch_id,
            "at": time.time() if at is None else at,
        }
        with open(self.acks_path, "a", encoding="utf-8") as sink:
            sink.write(json.dumps(ack) + "\n")

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "lag": dict(self.lag), "acks_path": self.acks_path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


def publish(path: str | Path, snapshot: Snapshot) -> None:
    """Append `snapshot` to a FileFeed's file atomically (write, then rename)."""
    target = Path(path)
    published = json.loads(target.read_text()) if target.exists() else []
    published.append({"at": time.time(), "snapshot": snapshot.to_json()})
    temporary = target.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(published))
    os.replace(temporary, target)


@dataclass(frozen=True)
class AgentFeed:
    """The agent, through this process's control client; `initial` until it answers."""

    url: str
    token: str | None
    initial: Snapshot

    def _client(self) -> Any:
        # Workers forked by pyspark.daemon inherit the executor's environment, not the
        # driver's: point the client at the agent before its first use in this process.
        # An address the executor's environment gives (a pod's view of the agent) wins; one
        # a feed wrote is replaced when a later query of this reused worker has another agent.
        for name, value in (("SWIVEL_AGENT_URL", self.url), ("SWIVEL_AGENT_TOKEN", self.token)):
            if value is None:
                continue
            present = os.environ.get(name)
            if present is None or present == _written_by_feeds.get(name):
                os.environ[name] = _written_by_feeds[name] = value
        from swivel.jobs.control import client

        return client

    def current(self, operator: str) -> Snapshot:
        snapshot = self._client().current(operator)
        return snapshot if snapshot is not None else self.initial

    def ack(  # noqa: PLR0917  (the wrappers' call, kept positional)
        self,
        operator: str,
        version: int,
        config_version: int,
        partition: int | None,
        batch_id: int | None,
        at: float | None = None,
    ) -> None:
        self._client().ack(operator, version, config_version, partition, batch_id, at=at)


_written_by_feeds: dict[str, str] = {}  # per process: the environment an AgentFeed set
