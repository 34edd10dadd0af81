"""The driver runtime: build (or take) a SparkSession, start the compiled query from its
checkpoint, report batch progress to the agent, and carry out boundary actions.

- Progress: a `StreamingQueryListener` posts `started` per batch and `completed` at every
  coordination point to the agent's driver channel (`POST /v1/driver/progress`) from a
  background thread, so a slow agent never delays a batch; the runtime also keeps every
  event in memory (`progress`). With `groups` (`swivel.jobs.runtime.grouping`) a
  coordination point is every g batches, and every batch while a plan, a pinned replay or
  a bin migration is pending; without, every batch.
- Boundary actions: a daemon thread long-polls `GET /v1/driver/actions`; `restart` stops the
  query between two batches and starts it again from the checkpoint with the configuration
  in force then (the restart scheduler's baseline).
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from swivel.api.streamjob import StreamJobSpec
from swivel.jobs.control.driver_channel import AgentDriverChannel
from swivel.jobs.runtime.compiling import CompiledQuery, compile_job, job_snapshot
from swivel.jobs.runtime.feeds import SnapshotFeed, StaticFeed
from swivel.jobs.runtime.functions import AllowList
from swivel.jobs.runtime.grouping import CoordinationGroups, timed
from swivel.jobs.runtime.listening import ProgressListener
from swivel.jobs.runtime.operators import WorkerSettings
from swivel.jobs.runtime.sinks import build_sink
from swivel.protocol.snapshots import Snapshot


class _ProgressListener(ProgressListener):
    def __init__(self, runtime: JobRuntime) -> None:
        self.runtime = runtime

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802
        return None

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        progress = event.progress
        self.runtime._on_progress(
            {
                "batchId": progress.batchId,
                "event": "completed",
                "at": time.time(),
                "durationMs": progress.durationMs.get("triggerExecution"),
                "numInputRows": progress.numInputRows,
                "queryId": str(progress.id),
                "runId": str(progress.runId),
            }
        )

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        return None

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        return None


@dataclass
class JobRuntime:
    """One StreamJob's query on one SparkSession; restartable from its checkpoint."""

    job: StreamJobSpec
    spark: SparkSession
    checkpoint: str
    name: str = "job"
    feed: SnapshotFeed | None = None
    allow: AllowList = field(default_factory=AllowList)
    recording_dir: str | None = None
    agent: AgentDriverChannel | None = None
    source_override: Any = None  # a DataFrame replacing spec.source (tests)
    progress: list[dict[str, Any]] = field(default_factory=list)
    query: StreamingQuery | None = None
    compiled: CompiledQuery | None = None
    restarts: int = 0
    started_config_version: int | None = None  # the configuration the query last started with
    groups: CoordinationGroups | None = None  # None: every batch end is a coordination point
    _listener: _ProgressListener | None = None
    _outbox: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def start(self, baseline: Snapshot | None = None) -> StreamingQuery:
        """Compile and start the query from the checkpoint (resuming if it exists)."""
        feed = self.feed or StaticFeed(job_snapshot(self.job))
        if baseline is None:
            baseline = _any_snapshot(feed, self.job)
        settings = WorkerSettings(feed, self.allow, self.recording_dir, baseline.config_version)
        self.started_config_version = baseline.config_version
        self.compiled = compile_job(self.spark, self.job, settings, self.source_override)
        writer = build_sink(self.compiled.frame, self.job.sink, self.name)
        interval = self.job.trigger.interval_ms
        writer = writer.trigger(processingTime=f"{interval} milliseconds")
        if self._listener is None:
            self._listener = _ProgressListener(self)
            self.spark.streams.addListener(self._listener)
            self._start_threads()
            if self.groups is not None:
                self.groups.when_pending(self.plan_in_flight)
        if self.groups is not None:
            self.groups.restart()
        self._report_started(next_batch_id(self.checkpoint))
        self.query = writer.option("checkpointLocation", self.checkpoint).start()
        return self.query

    def _start_threads(self) -> None:
        if self.agent is None:
            return
        threading.Thread(target=self._post_progress, daemon=True, name="swivel-progress").start()
        threading.Thread(target=self._follow_actions, daemon=True, name="swivel-actions").start()

    def _on_progress(self, event: dict[str, Any]) -> None:
        with timed(self.groups):
            if self.query is not None and event["runId"] != str(self.query.runId):
                return
            self.progress.append(event)
            batch, groups = int(event["batchId"]), self.groups
            if groups is not None:
                groups.batch_ended(float(event.get("durationMs") or 0.0) / 1000.0)
            if self.agent is not None:
                if groups is None or groups.is_point(batch):
                    self._outbox.put(event)
                # No Python hook runs when a batch starts; with back-to-back triggers the
                # next batch starts as this one completes, which is what the agent needs to
                # know, every batch (grouping.py).
                self._report_started(batch + 1)

    def plan_in_flight(self) -> bool:
        """A plan is in flight or a replay pinned, as far as this process's configuration
        feed knows (the agent pushes it within milliseconds): the agent then needs every
        batch's end."""
        if self.feed is None:
            return False
        snapshot = _any_snapshot(self.feed, self.job)
        return snapshot.transition is not None or bool(snapshot.pinned_batches)

    def _report_started(self, batch_id: int) -> None:
        if self.agent is not None:
            self._outbox.put({"batchId": batch_id, "event": "started", "at": time.time()})

    def _post_progress(self) -> None:
        assert self.agent is not None
        while not self._stopping.is_set():
            event = self._outbox.get()
            try:
                with timed(self.groups):
                    self.agent.report(event)
            except OSError as error:
                print(f"swivel: progress report failed: {error}", file=sys.stderr)

    def _follow_actions(self) -> None:
        """The runtime's action poller: `restart` only (MigrationDriver polls the same channel
        for its own actions). The agent hands out only actions not yet done, so a restarted
        runtime polling from seq 0 sees no restart it (or an earlier process) carried out;
        a restart for a configuration the query already started with (queued while the
        process was down) is skipped, and either way reported done."""
        assert self.agent is not None
        seq = 0
        while not self._stopping.is_set():
            try:
                actions = self.agent.actions(seq)
            except (OSError, ValueError):
                time.sleep(1.0)
                continue
            for action in actions:
                seq = max(seq, int(action.get("seq", seq + 1)))
                if action.get("action") == "restart":
                    version = action.get("configVersion")
                    started = self.started_config_version
                    if not isinstance(version, int) or started is None or version > started:
                        self.restart()
                    self._action_done(action)

    def _action_done(self, action: Mapping[str, Any]) -> None:
        if self.agent is None or "seq" not in action:
            return
        try:
            self.agent.action_done(int(action["seq"]))
        except (OSError, ValueError) as error:  # an older agent: it replays, the check above
            print(f"swivel: action {action['seq']} not marked done: {error}", file=sys.stderr)

    def batches_completed(self) -> int:
        return len(self.progress)

    def wait_for_batches(self, count: int, timeout: float = 120.0) -> None:
        """Block until `count` batches of the current run completed (raises on failure)."""
        deadline = time.monotonic() + timeout
        while self.batches_completed() < count:
            query = self.query
            if query is not None and not query.isActive and query.exception() is not None:
                raise RuntimeError(f"the query failed: {query.exception()}")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.batches_completed()} of {count} batches after {timeout}s"
                )
            time.sleep(0.05)

    def stop_at_boundary(self, timeout: float = 60.0) -> None:
        """Stop right after the running batch completes (up to `timeout`). With back-to-back
        triggers a query is almost never idle, so wait for the next completion instead; a
        batch that has just started is interrupted and re-run from the checkpoint."""
        query = self.query
        if query is None:
            return
        completed = self.batches_completed()
        deadline = time.monotonic() + timeout
        while (
            query.isActive
            and query.status.get("isTriggerActive")
            and self.batches_completed() == completed
            and time.monotonic() < deadline
        ):
            time.sleep(0.005)
        query.stop()

    def restart(self, baseline: Snapshot | None = None) -> StreamingQuery:
        """The restart scheduler: stop at a boundary, start from the checkpoint with the
        configuration in force now."""
        self.stop_at_boundary()
        self.restarts += 1
        return self.start(baseline)

    def stop(self) -> None:
        self._stopping.set()
        if self.query is not None and self.query.isActive:
            self.query.stop()
        if self._listener is not None:
            self.spark.streams.removeListener(self._listener)
            self._listener = None


def _any_snapshot(feed: SnapshotFeed, job: StreamJobSpec) -> Snapshot:
    names = [op.name for op in job.dataflow.operators if op.function is not None]
    return feed.current(names[0]) if names else job_snapshot(job)


def next_batch_id(checkpoint: str) -> int:
    """The batch a query started from `checkpoint` runs first: the last planned batch if it
    never committed (a replay), else the one after the last commit."""

    def ids(folder: str) -> list[int]:
        path = os.path.join(checkpoint, folder)
        names = os.listdir(path) if os.path.isdir(path) else []
        return [int(n) for n in names if n.isdigit()]

    planned, committed = ids("offsets"), ids("commits")
    last_planned, last_committed = max(planned, default=-1), max(committed, default=-1)
    return last_planned if last_planned > last_committed else last_committed + 1
