"""Bin migration beside the job runtime (`swivel.jobs.runtime.driver.JobRuntime`), without
touching its sink: a `StreamingQueryListener` gives the boundaries, a second long-poll on
the agent's driver channel receives `move-bins` / `request-executors` / `kill-executors`
(the runtime's own poller handles `restart` and ignores these), and progress is posted to
`POST /v1/driver/migration`.

    runtime = JobRuntime(job, spark, checkpoint, agent=channel)
    runtime.start()
    migration = MigrationDriver(spark, job.dataflow.bins, lambda: runtime.query, channel)
    migration.start()

Listener boundaries arrive just after a batch ends; with a processing-time trigger the next
batch has usually not been scheduled yet, otherwise a move lands one batch late (or the
verifier sees it run elsewhere and re-points it). A `foreachBatch` sink should call
`BinMover.wrap` instead, which is exact.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from swivel.jobs.migration.actions import MigrationActions
from swivel.jobs.migration.executor import BinMover


class _Boundaries(StreamingQueryListener):
    def __init__(self, driver: MigrationDriver) -> None:
        self.driver = driver

    def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's names
        return None

    def onQueryProgress(self, event: Any) -> None:  # noqa: N802
        self.driver.on_batch_completed(int(event.progress.batchId), str(event.progress.runId))

    def onQueryIdle(self, event: Any) -> None:  # noqa: N802
        return None

    def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
        return None


class MigrationDriver:
    def __init__(
        self,
        spark: Any,
        bins: int,
        query: Callable[[], Any],
        agent: Any = None,  # swivel.jobs.runtime.driver.AgentDriverChannel
        mover: BinMover | None = None,
    ) -> None:
        self.spark = spark
        self.query = query
        self.agent = agent
        self.mover = mover or BinMover(spark, bins)
        self.actions = MigrationActions(self.mover, self._report)
        self._listener: _Boundaries | None = None
        self._stopping = threading.Event()
        self._warned = False

    def start(self) -> MigrationDriver:
        self._listener = _Boundaries(self)
        self.spark.streams.addListener(self._listener)
        if self.agent is not None:
            threading.Thread(
                target=self._follow, daemon=True, name="swivel-migration-actions"
            ).start()
        return self

    def on_batch_completed(self, batch_id: int, run_id: str) -> None:
        query = self.query()
        if query is None or str(query.runId) != run_id:
            return
        if self.mover.query is not query:
            self.mover.attach(query)  # first batch, or the runtime restarted the query
        self.mover.boundary(batch_id)

    def _follow(self) -> None:
        seq = 0
        while not self._stopping.is_set():
            try:
                actions = self.agent.actions(seq)
            except (OSError, ValueError):
                time.sleep(1.0)
                continue
            for action in actions:
                seq = max(seq, int(action.get("seq", seq + 1)))
                self.actions.handle(action)

    def _report(self, body: dict[str, Any]) -> None:
        if self.agent is None:
            return
        try:
            self.agent._request("POST", "/v1/driver/migration", body)
        except OSError as error:
            if not self._warned:
                print(
                    f"swivel: migration progress not accepted by the agent: {error}",
                    file=sys.stderr,
                )
                self._warned = True

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            self.spark.streams.removeListener(self._listener)
            self._listener = None
        self.mover.close()
