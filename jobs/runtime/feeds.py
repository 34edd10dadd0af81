"""Where a Python worker reads configuration snapshots from, and sends acks to.

In production the feed is the agent, through the worker-side control client
(`swivel.jobs.control.client`, a per-process singleton long-polling the agent): `AgentFeed`.
Tests and local experiments can use a `FileFeed`: the snapshots published so far live in
one JSON file that every worker re-reads when its mtime changes (a `stat` per check, a few
µs), and a per-operator `lag` makes one operator see a snapshot later than the others - the
way to show, deterministically, what the naive scheduler does when switches are not
coordinated. `StaticFeed` never changes (a job run without an agent).

Two reads, as in production: `current` is the asynchronous path (what the agent's long-poll
has delivered to this process so far, read from memory at every check), `refresh` the
synchronous one (the wrappers' read at the first check of each Spark task, and when a row
carries a tag newer than the process's snapshot; `swivel.jobs.runtime.freshness`). A FileFeed's `lag` models the delivery
delay of the long-poll only: `refresh` re-reads the file and makes everything published up
to that moment visible to every operator of the process, as a synchronous
`GET /v1/control/watch?timeout=0` would. So a lag of an hour is a worker whose long-poll
never delivers: it switches at the start of its next task, not never (docs/runtime.md,
"Tags").

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

from swivel.protocol.snapshots import Snapshot


class SnapshotFeed(Protocol):
    def current(self, operator: str) -> Snapshot:
        """The newest snapshot `operator` may see now (from memory; never blocks long)."""
        ...

    def refresh(self, operator: str) -> Snapshot:
        """Read the newest snapshot synchronously (one round trip); what `current` returns
        afterwards is at least as new. Raises when it cannot: the caller must not go on."""
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

    def refresh(self, operator: str) -> Snapshot:
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

    `lag` delays, per operator, when a publication becomes visible through `current`
    (seconds): the long-poll's delivery delay. `refresh` sees every publication up to now.
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
            self._published = [(e["at"], Snapshot.model_validate(e["snapshot"])) for e in entries]
            self._mtime = mtime
        if not self._published:
            raise LookupError(f"no snapshot published in {self.path}")
        delivered_before = time.time() - self.lag.get(operator, 0.0)
        delivered = sum(1 for at, _ in self._published if at <= delivered_before)
        # Publications are appended: the first n entries are those a refresh read.
        seen = max(delivered, _file_refreshed.get(self.path, 0), 1)
        return self._published[min(seen, len(self._published)) - 1][1]

    def refresh(self, operator: str) -> Snapshot:
        """Re-read the file now; every snapshot published so far becomes visible to every
        operator of this process (the lag delays only the asynchronous delivery)."""
        self._mtime = -2.0  # read the file even if its mtime looks unchanged
        self.current(operator)  # LookupError when nothing is published: the task fails
        count = len(self._published)
        _file_refreshed[self.path] = max(_file_refreshed.get(self.path, 0), count)
        return self.current(operator)

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
    published.append({"at": time.time(), "snapshot": snapshot.to_wire()})
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

    def refresh(self, operator: str) -> Snapshot:
        """`GET /v1/control/watch?timeout=0` now (`client.refresh`; `RefreshError` once its
        retries are spent)."""
        snapshot = self._client().refresh(operator)
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
# Per process: how many of a FileFeed's publications (by path) a refresh has read. Feeds are
# unpickled per task; the process's view outlives them, as the control client's snapshot does.
_file_refreshed: dict[str, int] = {}
