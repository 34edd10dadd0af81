"""`swivel driver --job-config JOB.yaml`: the driver pod's `spark` container (docs/operator.md).

It starts the job's query from its checkpoint with the agent beside it as feed and driver
channel (`$SWIVEL_AGENT_URL`, `$SWIVEL_AGENT_TOKEN`), the Spark settings of the manifest
(`sparkConf`: on a cluster Spark on Kubernetes in client mode; in the sandbox the kubelet
made it `local[2]`), and runs until the query fails (exit 1: the kubelet restarts the
container, resuming from the checkpoint) or SIGTERM (stop at a batch boundary, exit 0).

On a multi-executor master (Spark on Kubernetes `k8s://...`, a standalone `spark://...`;
`swivel.controllers.planning.migrates_bins`) a `MigrationDriver` runs beside the query, as
with `swivel run --master`: it carries out moves and rescales, measures loads for the
operator's policies and applies coordination intervals (the operator starts the agent with
`SWIVEL_AGENT_MIGRATIONS=1` then). The Spark UI is switched on for it (its REST task list
verifies moves and measures loads). Local Spark (the sandbox's `local[2]`) runs none.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import click

from swivel.api.errors import SpecError
from swivel.api.sparkconf import load_rendered_streamjob
from swivel.api.streamjob import StreamJobSpec
from swivel.cli.errors import fail
from swivel.controllers.planning import migrates_bins

_FILE = click.Path(exists=False, dir_okay=False, path_type=Path)
DEFAULT_CHECKPOINT_ROOT = "/var/lib/swivel/checkpoints"
LOCAL_MASTER = "local[2]"


def driver_setup(spec: StreamJobSpec) -> tuple[str, bool, StreamJobSpec]:
    """(the master, whether a MigrationDriver runs beside the query, the spec with the Spark
    settings the session starts with: the UI on and one task per bin when it does)."""
    master = spec.spark_conf.get("spark.master", LOCAL_MASTER)
    if not migrates_bins(master):
        return master, False, spec
    from swivel.jobs.migration.starting import migration_spark_conf

    conf = migration_spark_conf(spec.spark_conf)
    return master, True, spec.model_copy(update={"spark_conf": conf})


@click.command("driver")
@click.option("--job-config", "job_path", type=_FILE, required=True, help="The StreamJob.")
@click.option("--boundary-timeout", type=float, default=50.0, show_default=True,
              help="Seconds to wait for a batch boundary on SIGTERM.")  # fmt: skip
def command(job_path: Path, boundary_timeout: float) -> None:
    """Run the job's query with the agent beside it, until SIGTERM or failure."""
    try:
        job = load_rendered_streamjob(job_path)
    except SpecError as error:
        fail(error, str(job_path))
    url = os.environ.get("SWIVEL_AGENT_URL")
    token = os.environ.get("SWIVEL_AGENT_TOKEN")  # the driver's own credential
    # The workers' credential, handed to Python workers with the feed, and what local
    # Python workers inherit from this process (never the driver's; docs/agent.md).
    worker_token = os.environ.pop("SWIVEL_AGENT_WORKER_TOKEN", None) or token
    if worker_token:
        os.environ["SWIVEL_AGENT_TOKEN"] = worker_token
    if not url:
        raise click.ClickException("SWIVEL_AGENT_URL is not set (the agent beside the driver)")
    from swivel.embedded.sessions import local_session
    from swivel.jobs.control.driver_channel import AgentDriverChannel
    from swivel.jobs.runtime.compiling import job_snapshot
    from swivel.jobs.runtime.driver import JobRuntime
    from swivel.jobs.runtime.feeds import AgentFeed
    from swivel.jobs.runtime.grouping import CoordinationGroups

    master, migrations, spec = driver_setup(job.spec)
    checkpoint = spec.checkpoint.location or f"{DEFAULT_CHECKPOINT_ROOT}/{job.name}"
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    spark = local_session(spec, master=master)
    runtime = JobRuntime(
        spec,
        spark,
        checkpoint=checkpoint,
        name="".join(c if c.isalnum() else "_" for c in job.name),
        feed=AgentFeed(url, worker_token, job_snapshot(spec)),
        agent=AgentDriverChannel(url, token),
        groups=CoordinationGroups(),  # Swivel's per-batch coordination, every g batches (AIMD)
    )
    runtime.start()
    migration = None
    if migrations:
        from swivel.jobs.migration.starting import start_migration_driver

        migration = start_migration_driver(
            spark,
            spec.dataflow.bins,
            lambda: runtime.query,
            url,
            token,
            checkpoint=checkpoint,
            groups=runtime.groups,
        )
    how = "with bin migration" if migration is not None else "without bin migration"
    click.echo(f"swivel driver: {job.name} runs (master {master}, {how}, checkpoint {checkpoint})")
    failure = None
    while not stop.wait(0.5):
        query = runtime.query
        if query is not None and not query.isActive and query.exception() is not None:
            failure = query.exception()
            break
    if migration is not None:
        migration.stop()  # no moves or loads while the query stops
    if failure is not None:
        runtime.stop()
        raise click.ClickException(f"the query failed: {failure}")
    click.echo("swivel driver: SIGTERM, stopping at the next batch boundary")
    runtime.stop_at_boundary(boundary_timeout)
    runtime.stop()
    spark.stop()
