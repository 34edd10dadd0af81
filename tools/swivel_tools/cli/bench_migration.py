"""`swivel bench migration` and `swivel bench overhead`: bin migration on a local standalone
cluster (started and stopped by the command). See docs/migration.md for the figures."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import click


def _emit(report: dict[str, object], output: str) -> None:
    if output == "json":
        click.echo(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        click.echo(f"{key}: {json.dumps(value)}")


def _sizes(value: str) -> tuple[int, ...]:
    sizes = tuple(int(v) for v in value.split(",") if v.strip())
    if not sizes or min(sizes) <= 0:
        raise click.BadParameter("a comma-separated list of positive key counts")
    return sizes


@click.command("migration")
@click.option("--output", type=click.Choice(["text", "json"]), default="text")
@click.option("--bins", type=int, default=64, show_default=True)
@click.option(
    "--sweep-keys",
    default="80000,320000,640000",
    show_default=True,
    help="State sizes (keys, each --payload-bytes of state), one fresh query per size.",
)
@click.option("--payload-bytes", type=int, default=3_000, show_default=True)
@click.option("--rows-per-batch", type=int, default=2_000, show_default=True)
@click.option("--load-batches", type=int, default=8, show_default=True)
@click.option("--steady-batches", type=int, default=6, show_default=True)
@click.option(
    "--steady-run-batches",
    type=click.IntRange(min=0),
    default=None,
    help="No-migration batches recorded at the end of each size for steady_window_excess_ms "
    "(default: the size's longest migration window + 8; 0: none).",
)
@click.option(
    "--swap", type=int, default=0, help="Bins each executor gives (and takes); 0: bins/4."
)
@click.option("--batch-size", type=int, default=2, show_default=True, help="Batched strategies.")
@click.option("--gap-batches", type=int, default=0, show_default=True)
@click.option(
    "--trigger-ms",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Start a batch every N ms (0: back to back): idle time beside the batches.",
)
@click.option(
    "--executor-cores",
    type=int,
    default=1,
    show_default=True,
    help="Task slots per executor (2 executors; 1 each: one per core of a 2-core machine).",
)
@click.option("--executor-memory-gb", type=int, default=5, show_default=True)
@click.option(
    "--storage",
    type=click.Choice(["throttled", "local"]),
    default="throttled",
    show_default=True,
    help="Checkpoint on throttled:// (remote-like reads) or plain local disk.",
)
@click.option(
    "--state-store",
    type=click.Choice(["hdfs", "rocksdb"]),
    default="hdfs",
    show_default=True,
    help="The workload's state store: HDFS-backed (state in the executors' heap) or RocksDB "
    "(off-heap, changelog checkpointing: what Swivel's own operators use).",
)
@click.option("--read-mb-s", type=float, default=150.0, show_default=True, help="Per stream.")
@click.option("--open-latency-ms", type=float, default=20.0, show_default=True)
@click.option("--snapshot-every", type=int, default=10, show_default=True)
@click.option(
    "--source-log-compact-interval",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="The input file source's log compacts every N batches (Spark's default 10). On "
    "throttled storage a compacting batch reads the last N log files first (~225 ms, "
    "migration or not); a value above the run's batches keeps that out of every window.",
)
@click.option(
    "--cleanup-batched-by-snapshots/--spark-cleanup-ratio",
    default=True,
    show_default=True,
    help="Set Spark's ratioExtraSpaceAllowedInCheckpoint so that its maintenance lists a "
    "bin's checkpoint only once a deletion is due (2 x --snapshot-every versions; Spark's "
    "0.3 fits its default snapshot interval of 10). --spark-cleanup-ratio keeps 0.3: with "
    "--snapshot-every 50 every bin's folder is then listed on every maintenance pass for "
    "stretches of up to 50 versions, migration or not (the figures before 2026-12-07 14:24).",
)
@click.option("--prewarmed/--no-prewarmed", default=True, show_default=True)
@click.option("--chosen-keys", type=int, default=None, help="Size of the top-level figures.")
@click.option(
    "--plots",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Folder for the PNGs (timelines of the chosen size, excess vs moved state).",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    hidden=True,
    help="Cluster, inputs, checkpoints and the storage's read log, kept (default: a temp "
    "folder, removed at the end: a size's checkpoint alone can be tens of GB).",
)
@click.option("--timeout-s", type=float, default=900.0, hidden=True)
@click.option(
    "--feed-ahead",
    type=click.IntRange(min=1),
    default=12,
    hidden=True,
    help="Unread input files kept in front of the query; a size's end reads every one.",
)
@click.option("--settle-s", type=float, default=5.0, hidden=True)
@click.option(
    "--thread-cpu/--no-thread-cpu",
    default=False,
    show_default=True,
    help="Sample the JVMs' CPU per thread kind (task, prewarm loader, RocksDB, GC, ...) "
    "per batch, into each strategy's `thread_cpu`. The sampler is a process of its own on "
    "the same cores (~10-16 % of one; its CPU is in the JSON): no figure of record.",
)
@click.option("--thread-cpu-interval-s", type=click.FloatRange(min=0.05), default=0.25, hidden=True)
@click.option(
    "--py4j-calls",
    is_flag=True,
    hidden=True,
    help="Count the driver's py4j round trips per Python thread and command, into each "
    "strategy's `py4j_calls` (a diagnostic: what the driver JVM's Thread-N answer).",
)
@click.option(
    "--warm-up-prewarm",
    is_flag=True,
    hidden=True,
    help="Before the strategies, one unmeasured prewarmed migration and back: the JVMs then "
    "run the prewarm's code paths (class loading, JIT) before any window (docs/migration.md).",
)
@click.option(
    "--prewarm-ahead",
    type=click.IntRange(min=1),
    default=None,
    help="batched-prewarmed: how many steps' bins load ahead of their switch (1: each step "
    "loads once the one before it switched; default: the product's, PREWARM_AHEAD).",
)
def migration(
    *,
    output: str,
    bins: int,
    sweep_keys: str,
    payload_bytes: int,
    rows_per_batch: int,
    load_batches: int,
    steady_batches: int,
    steady_run_batches: int | None,
    swap: int,
    batch_size: int,
    gap_batches: int,
    trigger_ms: int,
    executor_cores: int,
    executor_memory_gb: int,
    storage: str,
    state_store: str,
    read_mb_s: float,
    open_latency_ms: float,
    snapshot_every: int,
    source_log_compact_interval: int,
    cleanup_batched_by_snapshots: bool,
    prewarmed: bool,
    chosen_keys: int | None,
    plots: Path,
    workdir: Path | None,
    timeout_s: float,
    feed_ahead: int,
    settle_s: float,
    thread_cpu: bool,
    thread_cpu_interval_s: float,
    py4j_calls: bool,
    warm_up_prewarm: bool,
    prewarm_ahead: int | None,
) -> None:
    """Swap bins between two executors with every strategy, per state size: the excess
    latency each adds over the steady batch (Megaphone Fig. 1 and its scaling figure).
    Take the figures on an idle machine: the JSON records the load average."""
    from swivel_tools.bench.migration import BenchConfig, run_migration_bench

    config = BenchConfig(
        bins=bins,
        sweep_keys=_sizes(sweep_keys),
        payload_bytes=payload_bytes,
        rows_per_batch=rows_per_batch,
        load_batches=load_batches,
        steady_batches=steady_batches,
        steady_run_batches=steady_run_batches,
        swap=swap,
        batch_size=batch_size,
        gap_batches=gap_batches,
        trigger_ms=trigger_ms,
        executor_cores=executor_cores,
        executor_memory_gb=executor_memory_gb,
        storage=storage,
        state_store=state_store,
        read_mb_per_s=read_mb_s,
        open_latency_ms=open_latency_ms,
        snapshot_every=snapshot_every,
        source_log_compact_interval=source_log_compact_interval,
        cleanup_batched_by_snapshots=cleanup_batched_by_snapshots,
        prewarmed=prewarmed,
        chosen_keys=chosen_keys,
        timeout_s=timeout_s,
        feed_ahead=feed_ahead,
        settle_s=settle_s,
        thread_cpu=thread_cpu,
        thread_cpu_interval_s=thread_cpu_interval_s,
        py4j_calls=py4j_calls,
        warm_up_prewarm=warm_up_prewarm,
    )
    if prewarm_ahead is not None:
        config = replace(config, prewarm_ahead=prewarm_ahead)
    report = run_migration_bench(config, plot_dir=plots, workdir=workdir)
    if output == "text":
        from swivel_tools.bench.migration_figures import noise_lines

        keys = report["steady_batch_ms"]["keys"]
        click.echo(f"excess (the goal's figure) and its diagnostics at {keys} keys:")
        for line in noise_lines(report["strategies"]):
            click.echo(line)
    _emit(report, output)


@click.command("overhead")
@click.option("--output", type=click.Choice(["text", "json"]), default="text")
@click.option("--batches", type=int, default=8, show_default=True, help="Measured per phase.")
@click.option(
    "--rounds", type=int, default=4, show_default=True, help="Phase pairs (AB, BA, AB, ...)."
)
@click.option("--rows-per-batch", type=int, default=1_000, show_default=True)
@click.option("--customers", type=int, default=200, show_default=True)
@click.option(
    "--coordination-interval-s",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds between load measurements (the driver's default; AIMD tunes it).",
)
def overhead(  # noqa: PLR0917 - one parameter per click option
    output: str,
    batches: int,
    rounds: int,
    rows_per_batch: int,
    customers: int,
    coordination_interval_s: float,
) -> None:
    """The same keyed query in plain PySpark and under the full Swivel runtime (agent,
    control client, tags, load metrics; no reconfiguration), phases alternated."""
    from swivel_tools.bench.runtime_overhead import run_overhead_bench

    report = run_overhead_bench(
        batches=batches,
        rounds=rounds,
        rows_per_batch=rows_per_batch,
        customers=customers,
        coordination_interval_s=coordination_interval_s,
    )
    _emit(report, output)


COMMANDS = (migration, overhead)
