"""Where a Python worker reads configuration snapshots from.

In production the feed is the agent, through the worker-side control client
(`swivel.jobs.control.client`, a per-process singleton long-polling the agent). Tests and
local experiments can use a `FileFeed`: the snapshots published so far live in one JSON
file that every worker re-reads when its mtime changes (a `stat` per check, a few µs), and a
per-operator `lag` makes one operator see a snapshot later than the others — the way to
show, deterministically, what the naive scheduler does when switches are not coordinated.
`StaticFeed` never changes (a job run without an agent).

A feed is pickled into the query's Python functions, so it holds only plain settings; any
connection or cache is rebuilt lazily in each worker process.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

Snapshot = Mapping[str, Any]  # the wire form of docs/control-protocol.md "Snapshot"


class SnapshotFeed(Protocol):
    def current(self, operator: str) -> Snapshot:
        """The newest snapshot `operator` may see now (from memory; never blocks long)."""
        ...

    def ack(self, acks: Sequence[Mapping[str, Any]]) -> None:
        """Report that this worker processed data of an operator under a version."""
        ...


def initial_snapshot(operators: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Configuration version 1: every operator at function version 1, no transition."""
    return {
        "configVersion": 1,
        "operators": {
            name: {
                "function": cfg.get("function"),
                "params": dict(cfg.get("params") or {}),
                "version": int(cfg.get("version", 1)),
                "stateTransform": cfg.get("stateTransform"),
            }
            for name, cfg in operators.items()
        },
        "transition": None,
    }


@dataclass(frozen=True)
class StaticFeed:
    """One snapshot for the whole run."""

    snapshot: Mapping[str, Any]

    def current(self, operator: str) -> Snapshot:
        return self.snapshot

    def ack(self, acks: Sequence[Mapping[str, Any]]) -> None:
        return None


@dataclass
class FileFeed:
    """Snapshots published to a JSON file (`publish`), seen by every worker on its next check.

    `lag` delays what one operator sees, in seconds after publication.
    """

    path: str
    lag: Mapping[str, float] = field(default_factory=dict)
    acks_path: str | None = None
    _mtime: float = field(default=-1.0, repr=False)
    _published: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def current(self, operator: str) -> Snapshot:
        try:
            mtime = os.stat(self.path).st_mtime
        except FileNotFoundError:
            mtime = -1.0
        if mtime != self._mtime:
            self._mtime = mtime
            self._published = json.loads(Path(self.path).read_text()) if mtime >= 0 else []
        if not self._published:
            raise LookupError(f"no snapshot published in {self.path}")
        visible_before = time.time() - self.lag.get(operator, 0.0)
        visible = [p for p in self._published if p["at"] <= visible_before]
        return (visible or self._published[:1])[-1]["snapshot"]  # type: ignore[no-any-return]

    def ack(self, acks: Sequence[Mapping[str, Any]]) -> None:
        if self.acks_path is None:
            return
        with open(self.acks_path, "a", encoding="utf-8") as sink:
            sink.write("".join(json.dumps(dict(a)) + "\n" for a in acks))

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "lag": dict(self.lag), "acks_path": self.acks_path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]


def publish(path: str | Path, snapshot: Mapping[str, Any]) -> None:
    """Append `snapshot` to a FileFeed's file atomically (write, then rename)."""
    target = Path(path)
    published = json.loads(target.read_text()) if target.exists() else []
    published.append({"at": time.time(), "snapshot": dict(snapshot)})
    temporary = target.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(published))
    os.replace(temporary, target)


@dataclass(frozen=True)
class AgentFeed:
    """The agent, through the per-process control client (`swivel.jobs.control.client`)."""

    url: str
    token: str | None = None

    def current(self, operator: str) -> Snapshot:
        return _control_client(self.url, self.token).current()  # type: ignore[no-any-return]

    def ack(self, acks: Sequence[Mapping[str, Any]]) -> None:
        _control_client(self.url, self.token).ack(list(acks))


def _control_client(url: str, token: str | None) -> Any:
    # The client reads its agent from the environment; in a worker forked by pyspark.daemon
    # the environment is the executor's, so set it from the pickled settings before first use.
    os.environ.setdefault("SWIVEL_AGENT_URL", url)
    if token is not None:
        os.environ.setdefault("SWIVEL_AGENT_TOKEN", token)
    from swivel.jobs.control import client

    return client
