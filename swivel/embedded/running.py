"""One StreamJob running locally: the agent as a subprocess, the query in this process.

`EmbeddedJob` is what `swivel run`, `swivel demo` and `swivel bench` share. It writes the
job's manifest into its work folder (the agent validates plans against exactly the job that
runs, sizes overridden by the demo included), starts the agent, points this process and its
Python workers at it (`SWIVEL_AGENT_URL` / `SWIVEL_AGENT_TOKEN`; local workers inherit the
driver's environment and `AgentFeed` sets them again in each worker), and starts the
`JobRuntime` with the agent as its feed and driver channel. `stop()` ends the query at a
batch boundary, then the agent.

A `memory` sink becomes a `files` sink (parquet under `<workdir>/output`): Spark cannot
restart a memory-sink query from its checkpoint, which the restart scheduler needs, and in
a long `swivel run` the driver would keep every row; the rows stay readable
(`output_rows()`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swivel.api.streamjob import SinkKind, SinkSpec, StreamJob
from swivel.embedded.agents import LocalAgent


@dataclass
class EmbeddedJob:
    job: StreamJob
    workdir: Path
    spark: Any  # pyspark.sql.SparkSession (imported lazily: `swivel --help` stays fast)
    record_schedule: bool = False
    groups: Any = None  # swivel.jobs.runtime.grouping.CoordinationGroups; None: every batch
    agent: LocalAgent | None = None
    runtime: Any = None  # swivel.jobs.runtime.driver.JobRuntime once started
    _env_before: dict[str, str | None] = field(default_factory=dict)

    @property
    def schedule_dir(self) -> Path | None:
        return self.workdir / "schedule" if self.record_schedule else None

    @property
    def manifest_path(self) -> Path:
        return self.workdir / "streamjob.json"

    @property
    def output_dir(self) -> Path:
        return self.workdir / "output"

    def _restartable(self, job: StreamJob) -> StreamJob:
        if job.spec.sink.kind is not SinkKind.MEMORY:
            return job
        sink = SinkSpec(kind=SinkKind.FILES, options={"path": str(self.output_dir)})
        return job.model_copy(update={"spec": job.spec.model_copy(update={"sink": sink})})

    def output_rows(self, columns: tuple[str, ...]) -> Any:
        """The rows written so far as a pandas DataFrame of `columns` (SQL expressions)."""
        import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

        if not self.output_dir.is_dir() or not any(self.output_dir.glob("*.parquet")):
            return pd.DataFrame(columns=[c.rsplit(" ", 1)[-1] for c in columns])
        return self.spark.read.parquet(str(self.output_dir)).selectExpr(*columns).toPandas()

    def start(self) -> EmbeddedJob:
        from swivel.jobs.control.driver_channel import AgentDriverChannel
        from swivel.jobs.runtime.compiling import job_snapshot
        from swivel.jobs.runtime.driver import JobRuntime
        from swivel.jobs.runtime.feeds import AgentFeed

        self.workdir.mkdir(parents=True, exist_ok=True)
        self.job = self._restartable(self.job)
        self.manifest_path.write_text(json.dumps(self.job.to_manifest(), indent=2))
        agent = LocalAgent(
            self.manifest_path,
            state_dir=self.workdir / "agent",
            schedule_dir=self.schedule_dir,
        )
        self.agent = agent.start()
        self._point_workers_at(self.agent.url, self.agent.worker_token)
        try:
            self.runtime = JobRuntime(
                self.job.spec,
                self.spark,
                checkpoint=str(self.workdir / "checkpoint"),
                name=_query_name(self.job.name),
                feed=AgentFeed(
                    self.agent.url, self.agent.worker_token, job_snapshot(self.job.spec)
                ),
                recording_dir=str(self.schedule_dir) if self.schedule_dir else None,
                agent=AgentDriverChannel(self.agent.url, self.agent.driver_token),
                groups=self.groups,
            )
            if self.schedule_dir is not None:
                self.schedule_dir.mkdir(parents=True, exist_ok=True)
            self.runtime.start()
        except BaseException:
            self.agent.stop()
            raise
        return self

    def _point_workers_at(self, url: str, token: str) -> None:
        for key, value in (("SWIVEL_AGENT_URL", url), ("SWIVEL_AGENT_TOKEN", token)):
            self._env_before.setdefault(key, os.environ.get(key))
            os.environ[key] = value
        from swivel.jobs.control import client

        client.reset()  # this process's client (driver side) must follow the new agent

    def stop(self, boundary_timeout_s: float = 60.0) -> None:
        """Stop the query between two batches, then the agent."""
        try:
            if self.runtime is not None:
                self.runtime.stop_at_boundary(boundary_timeout_s)
                self.runtime.stop()
        finally:
            if self.agent is not None:
                self.agent.stop()
            for key, value in self._env_before.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def __enter__(self) -> EmbeddedJob:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _query_name(job_name: str) -> str:
    # Spark query (and memory table) names: letters, digits and underscores.
    return "".join(c if c.isalnum() else "_" for c in job_name)
