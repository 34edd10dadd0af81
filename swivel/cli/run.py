"""`swivel run JOB.yaml`: run a StreamJob on this machine - local Spark and a local agent.

The agent runs as a subprocess on 127.0.0.1 with a fresh token; the query runs here. The
job is registered in `$SWIVEL_HOME/embedded/` (default `~/.swivel`) so that `swivel apply`
and `swivel status` in another terminal find its agent. Ctrl-C stops the query between two
micro-batches, then the agent, and removes the registration.

`--master local-cluster` (a standalone master and workers started from the pip package's
`spark-class`, `swivel.jobs.migration.cluster.LocalCluster`) or `--master spark://HOST:PORT`
runs the query on `spec.executor.instances` executors instead of local Spark, with a
`MigrationDriver` beside the runtime, so bins can move (`swivel apply` with `moves` or
`rescale`; the agent runs with `SWIVEL_AGENT_MIGRATIONS=1`) and the driver reports loads to
the agent. `--policy rebalance|memory|aimd` then runs the policy loop in this process
(`swivel.jobs.migration.policies.start_policy_loop`); it needs several executors, so it is
refused on local Spark.
"""

from __future__ import annotations

import os
import re
import signal
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from swivel.api.errors import SpecError
from swivel.api.manifests import load_streamjob
from swivel.api.streamjob import QUANTITY_PATTERN
from swivel.cli.errors import fail

_FILE = click.Path(exists=False, dir_okay=False, path_type=Path)
LOCAL_CLUSTER = "local-cluster"
EXECUTOR_MEMORY = "spec.executor.memory"
POLICIES = ("rebalance", "memory", "aimd")


@click.command("run")
@click.argument("job_path", metavar="JOB.yaml", type=_FILE)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Checkpoint, agent state and logs (default: a new folder under $SWIVEL_HOME). "
    "Reuse one to resume from its checkpoint.",
)
@click.option("--record-schedule", is_flag=True, help="Record the schedule and check it at exit.")
@click.option(
    "--master",
    default=None,
    metavar="local-cluster|spark://HOST:PORT",
    help="Run on several executors: a local standalone cluster started here, or a "
    "standalone master. Default: local Spark (one executor).",
)
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    default=None,
    help="Run a bin policy beside the job (needs --master: one executor has nothing to balance).",
)
@click.option("--duration", type=float, hidden=True, help="Stop after this many seconds (tests).")
def command(  # click passes every option by name
    *,
    job_path: Path,
    workdir: Path | None,
    record_schedule: bool,
    master: str | None,
    policy: str | None,
    duration: float | None,
) -> None:
    """Run the job in JOB.yaml locally until Ctrl-C; reconfigure it with `swivel apply`."""
    from swivel.embedded.sessions import forget_inherited_agent

    forget_inherited_agent()
    check_master(master, policy)
    job = _load(job_path, master)
    from swivel.embedded import registry
    from swivel.embedded.running import EmbeddedJob

    try:
        running = registry.lookup(job.name)
    except registry.NoRunningJob:
        pass
    else:
        raise click.ClickException(f"job {job.name} already runs here (pid {running.pid})")
    folder = workdir or registry.home() / "embedded" / "runs" / f"{job.name}-{int(time.time())}"
    where = "local Spark" if master is None else f"Spark on {master}"
    click.echo(f"starting {job.name}: {where} and agent (work folder {folder})")
    if master is not None:
        os.environ["SWIVEL_AGENT_MIGRATIONS"] = "1"  # the agent accepts moves and rescales
    cluster, spark = _session(job, folder, master)
    from swivel.jobs.runtime.grouping import CoordinationGroups

    groups = CoordinationGroups()  # Swivel's per-batch coordination, every g batches (AIMD)
    embedded = EmbeddedJob(job, folder, spark, record_schedule=record_schedule, groups=groups)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill` stops cleanly too
    migration: Any = None
    loop: Any = None
    try:
        _start(embedded, job_path)
        assert embedded.agent is not None
        if master is not None:
            migration, loop = _start_migrations(embedded, folder, policy)
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
        if loop is not None:
            loop.stop()
        if migration is not None:
            migration.stop()
        embedded.stop()
        spark.stop()
        if cluster is not None:
            cluster.stop()
    click.echo("stopped")
    if embedded.schedule_dir is not None:
        _report_schedule(embedded.schedule_dir)


def _load(job_path: Path, master: str | None) -> Any:
    """The job, or one `field: reason` line per problem and exit status 2 (nothing started)."""
    try:
        job = load_streamjob(job_path)
        _check_shape(job)
        if master is not None:  # it sizes the executors' JVMs (local Spark has none)
            _jvm_memory(job.spec.executor.memory, EXECUTOR_MEMORY)
    except SpecError as error:
        fail(error, str(job_path))
    return job


def _check_shape(job: Any) -> None:
    """The dataflow's shape, checked before Spark starts (`plan_shape` needs no session):
    no source, no sink, a cycle or a keyed operator without its key is a field error."""
    from swivel.controllers.shapes import CompileError, plan_shape

    try:
        plan_shape(job.spec)
    except CompileError as error:
        raise SpecError.single(error.field, error.reason) from None


def check_master(master: str | None, policy: str | None) -> None:
    """Refuse what cannot work before anything starts (a usage error, exit status 2)."""
    if master is not None and master != LOCAL_CLUSTER and not master.startswith("spark://"):
        raise click.BadParameter(
            f"{master!r}: give {LOCAL_CLUSTER} or a standalone master spark://HOST:PORT",
            param_hint="--master",
        )
    if policy is not None and master is None:
        raise click.UsageError(
            f"--policy {policy} needs several executors, and local Spark runs one (nothing to "
            f"balance): add --master {LOCAL_CLUSTER} or --master spark://HOST:PORT"
        )


def _start(embedded: Any, job_path: Path) -> None:
    """Start the agent and the query. What only compiling against the source's schema can
    find (a union of branches whose columns differ, a function the workers refuse) is the
    user's manifest, so it is `field: reason` and exit 2, not a traceback; the caller's
    `finally` stops whatever had started."""
    from swivel.api.functions import FunctionRefused
    from swivel.controllers.shapes import CompileError

    try:
        embedded.start()
    except (CompileError, FunctionRefused) as error:
        fail(SpecError.single(error.field, error.reason), str(job_path))


def _session(job: Any, folder: Path, master: str | None) -> tuple[Any, Any]:
    """(the LocalCluster this run started or None, the SparkSession)."""
    from swivel.embedded.sessions import local_session

    if master is None:
        return None, local_session(job.spec, folder / "spark.log")
    from swivel.jobs.migration.cluster import LocalCluster, free_port
    from swivel.jobs.migration.starting import migration_spark_conf
    from swivel.jobs.spark_internals import SparkInternals

    executors = job.spec.executor.instances
    memory = _jvm_memory(job.spec.executor.memory, EXECUTOR_MEMORY)  # before any JVM starts
    cluster = None
    url = master
    if master == LOCAL_CLUSTER:
        # Workers offer 2 cores; executors take spec.executor.cores each (docs/migration.md).
        cores = job.spec.executor.cores
        workers = max(1, -(-executors * cores // 2))
        cluster = LocalCluster(workers=workers, root=folder / "cluster").start()
        url = cluster.master_url
        click.echo(f"local cluster: {url} ({workers} worker(s), UI {cluster.master_ui})")
    conf = migration_spark_conf({  # the UI on, one task per bin
        "spark.ui.port": str(free_port()),
        "spark.executor.cores": str(job.spec.executor.cores),
        "spark.executor.memory": memory,
        **({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
           if cluster is not None else {}),
        **job.spec.spark_conf,
    })  # fmt: skip
    spec = job.spec.model_copy(update={"spark_conf": conf})
    try:
        spark = local_session(spec, folder / "spark.log", master=url)
        internals = SparkInternals(spark)
        internals.request_total_executors(executors)
        internals.wait_for_executors(executors, timeout=180.0)
    except BaseException:
        if cluster is not None:
            cluster.stop()
        raise
    click.echo(f"{executors} executors registered")
    return cluster, spark


_BYTES_PER = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40,
              "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "": 1}  # fmt: skip


def _jvm_memory(quantity: str, field: str) -> str:
    """A Kubernetes memory quantity as Spark's memory string, in whole mebibytes (`1536m`).

    The models refuse milli (`512m`, thousandths of a byte); a fraction of a byte that
    passed them (`0.5`) is refused here, naming `field`."""
    match = re.fullmatch(QUANTITY_PATTERN, quantity)
    if match is None:
        raise SpecError.single(field, f"{quantity!r} is not a Kubernetes quantity (e.g. 2Gi)")
    suffix = match.group(2) or ""
    size = Decimal(quantity.removesuffix(suffix)) * _BYTES_PER[suffix]
    if size != size.to_integral_value():
        raise SpecError.single(field, f"{quantity!r} is not a whole number of bytes")
    return f"{max(1, int(size) // 2**20)}m"


def _start_migrations(embedded: Any, folder: Path, policy: str | None) -> tuple[Any, Any]:
    """The MigrationDriver beside the runtime, and the policy loop if one was asked for."""
    from swivel.jobs.migration.starting import start_migration_driver

    agent = embedded.agent
    checkpoint = str(folder / "checkpoint")
    migration = start_migration_driver(
        embedded.spark,
        embedded.job.spec.dataflow.bins,
        lambda: embedded.runtime.query,
        agent.url,
        agent.driver_token,
        checkpoint=checkpoint,
        groups=embedded.groups,
    )
    if policy is None:
        return migration, None
    from swivel.embedded.agents import BlockingAgent
    from swivel.jobs.migration.policies import start_policy_loop, worker_figures_of

    def show(result: Any) -> None:
        moves = [f"{m.bin}:{m.source}->{m.target}" for m in result.decision.moves]
        busy = {e: f"{u:.0%}" for e, u in result.to_dict()["utilisation"].items()}
        click.echo(f"policy {policy}: busy {busy}; moves {moves or 'none'}")

    loop = start_policy_loop(
        migration.mover,
        policy,
        checkpoint=checkpoint,
        on_round=show,
        loads=migration.shared_snapshot,  # one measurement for the loop and the agent
        worker_figures=lambda: worker_figures_of(
            BlockingAgent(agent.url, agent.token, retries=0, request_timeout_s=2.0).loads()
        ),  # the workers' counts over the agent's window (Chi §5), used when fresh
    )
    click.echo(f"policy {policy} runs beside the job (first round after a minute)")
    return migration, loop


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
