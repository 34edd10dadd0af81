"""`swivel bench migration` and `swivel bench overhead`: bin migration on a local standalone
cluster (started and stopped by the command). See docs/migration.md for the figures."""

from __future__ import annotations

import json
from pathlib import Path

import click


def _emit(report: dict[str, object], output: str) -> None:
    if output == "json":
        click.echo(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        click.echo(f"{key}: {json.dumps(value)}")


@click.command("migration")
@click.option("--output", type=click.Choice(["text", "json"]), default="text")
@click.option("--bins", type=int, default=64, show_default=True)
@click.option("--keys", type=int, default=1_000_000, show_default=True)
@click.option("--payload-bytes", type=int, default=3_000, show_default=True)
@click.option("--batch-size", type=int, default=1, show_default=True, help="Batched strategy.")
@click.option("--gap-batches", type=int, default=0, show_default=True)
@click.option(
    "--plots",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Folder for the latency-timeline PNGs (one per strategy).",
)
def migration(
    *,
    output: str,
    bins: int,
    keys: int,
    payload_bytes: int,
    batch_size: int,
    gap_batches: int,
    plots: Path,
) -> None:
    """Move half of one executor's bins to the other: all-at-once, fluid, batched."""
    from swivel_tools.bench.migration import run_migration_bench

    report = run_migration_bench(
        bins=bins,
        keys=keys,
        payload_bytes=payload_bytes,
        batch_size=batch_size,
        gap_batches=gap_batches,
        plot_dir=plots,
    )
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
