"""`swivel run JOB.yaml`: run a StreamJob on this machine - local Spark and a local agent.

The agent runs as a subprocess on 127.0.0.1 with a fresh token; the query runs here. The
job is registered in `$SWIVEL_HOME/embedded/` (default `~/.swivel`) so that `swivel apply`
and `swivel status` in another terminal find its agent. Ctrl-C stops the query between two
micro-batches, then the agent, and removes the registration.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import click

from swivel.api.errors import SpecError
from swivel.api.manifests import load_streamjob
from swivel.cli.errors import fail

_FILE = click.Path(exists=False, dir_okay=False, path_type=Path)


@click.command("run")
@click.argument("job_path", metavar="JOB.yaml", type=_FILE)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Checkpoint, agent state and logs (default: a new folder under $SWIVEL_HOME). "
    "Reuse one to resume from its checkpoint.",
)
@click.option("--record-schedule", is_flag=True, help="Record the schedule and check it at exit.")
@click.option("--duration", type=float, hidden=True, help="Stop after this many seconds (tests).")
def command(
    job_path: Path, workdir: Path | None, record_schedule: bool, duration: float | None
) -> None:
    """Run the job in JOB.yaml locally until Ctrl-C; reconfigure it with `swivel apply`."""
    try:
        job = load_streamjob(job_path)
    except SpecError as error:
        fail(error, str(job_path))
    from swivel.embedded import registry
    from swivel.embedded.running import EmbeddedJob
    from swivel.embedded.sessions import local_session

    try:
        running = registry.lookup(job.name)
    except registry.NoRunningJob:
        pass
    else:
        raise click.ClickException(f"job {job.name} already runs here (pid {running.pid})")
    folder = workdir or registry.home() / "embedded" / "runs" / f"{job.name}-{int(time.time())}"
    click.echo(f"starting {job.name}: local Spark and agent (work folder {folder})")
    spark = local_session(job.spec, folder / "spark.log")
    embedded = EmbeddedJob(job, folder, spark, record_schedule=record_schedule)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` stops cleanly too
    try:
        embedded.start()
        assert embedded.agent is not None
        registry.register(
            registry.RunningJob(
                job=job.name,
                url=embedded.agent.url,
                token=embedded.agent.token,
                pid=os.getpid(),
                manifest=str(embedded.manifest_path),
                state_dir=str(folder / "agent"),
                schedule_dir=str(embedded.schedule_dir) if embedded.schedule_dir else None,
                started_at=time.time(),
            )
        )
        click.echo(
            f"agent on {embedded.agent.url}; `swivel apply RECONF.yaml` from another terminal"
        )
        click.echo("Ctrl-C stops the job at the next micro-batch boundary")
        _follow(embedded.runtime, duration)
    except KeyboardInterrupt:
        click.echo("\nstopping at the next micro-batch boundary ...")
    finally:
        registry.unregister(job.name, os.getpid())
        embedded.stop()
        spark.stop()
    click.echo("stopped")
    if embedded.schedule_dir is not None:
        _report_schedule(embedded.schedule_dir)


def _follow(runtime: Any, duration: float | None) -> None:
    """Print one line per completed micro-batch until the time is up (or Ctrl-C)."""
    deadline = time.monotonic() + duration if duration else None
    shown = 0
    while deadline is None or time.monotonic() < deadline:
        query = runtime.query
        if query is not None and not query.isActive and query.exception() is not None:
            raise click.ClickException(f"the query failed: {query.exception()}")
        for event in runtime.progress[shown:]:
            click.echo(
                f"batch {event['batchId']:>5}: {event['numInputRows']:>6} rows "
                f"in {event['durationMs'] or 0:>6} ms"
            )
        shown = len(runtime.progress)
        time.sleep(0.2)


def _report_schedule(schedule_dir: Path) -> None:
    from swivel.embedded.verdicts import check_run

    verdict = check_run(schedule_dir)
    state = "serializable" if verdict.serializable else "NOT serializable"
    click.echo(
        f"recorded schedule: {state} ({verdict.records} records, "
        f"{len(verdict.violations)} violations) in {schedule_dir}"
    )
