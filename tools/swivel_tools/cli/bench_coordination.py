"""`swivel bench coordination`: Swivel's per-batch coordination on the driver at g = 1
against the g AIMD tunes, side by side in one run. See docs/benchmarks.md."""

from __future__ import annotations

import json

import click


@click.command("coordination")
@click.option("--output", type=click.Choice(["json"]), default="json", show_default=True)
@click.option("--batches", type=click.IntRange(1), default=16, show_default=True,
              help="Measured per phase.")  # fmt: skip
@click.option("--warmup", type=click.IntRange(0), default=4, show_default=True,
              help="Batches dropped after each switch of g.")  # fmt: skip
@click.option("--rounds", type=click.IntRange(1), default=4, show_default=True,
              help="Phase pairs (AB, BA, AB, ...).")  # fmt: skip
@click.option("--rows-per-batch", type=click.IntRange(1), default=1_000, show_default=True)
@click.option("--customers", type=click.IntRange(1), default=200, show_default=True)
def coordination(  # noqa: PLR0917 - one parameter per click option
    output: str, batches: int, warmup: int, rounds: int, rows_per_batch: int, customers: int
) -> None:
    """The overhead benchmark's keyed query under the full runtime; phases alternate a fixed
    g = 1 and AIMD's g; prints one JSON document with the ratio of their per-batch
    coordination time."""
    from swivel_tools.bench.coordination import run_coordination_bench

    report = run_coordination_bench(
        batches=batches,
        warmup=warmup,
        rounds=rounds,
        rows_per_batch=rows_per_batch,
        customers=customers,
    )
    click.echo(json.dumps(report, indent=2))
