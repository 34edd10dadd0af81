"""`swivel bench reconfiguration`: reconfiguration delay per scheduler, consistency
violations, and the control channel's cost, measured on a local job (docs/benchmarks.md)."""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import click


@click.group("bench")
def command() -> None:
    """Benchmarks that run real jobs on this machine."""
    from swivel.embedded.sessions import forget_inherited_agent

    forget_inherited_agent()  # every benchmark starts the agents it measures


@command.command("reconfiguration")
@click.option("--output", "-o", type=click.Choice(["json"]), default="json", show_default=True)
@click.option("--trials", type=click.IntRange(1), default=3, show_default=True)
@click.option("--size", type=click.Choice(["demo", "smoke"]), default="demo", hidden=True)
@click.option("--surge-batch-s", type=float, default=4.0, hidden=True)
@click.option("--after-s", type=float, default=3.0, hidden=True)
@click.option("--schedulers", default="fries,epoch,restart,restart-warm,naive", hidden=True)
@click.option("--no-overhead", is_flag=True, hidden=True)
@click.option("--overhead-rounds", type=click.IntRange(1), default=None, hidden=True)
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), hidden=True)
@click.option("--task-slots", type=click.IntRange(1), default=None, hidden=True,
              help="Spark task slots of the trials' session (default: one per bin).")  # fmt: skip
def reconfiguration(  # noqa: PLR0917 - one parameter per click option
    output: str,
    trials: int,
    size: str,
    surge_batch_s: float,
    after_s: float,
    schedulers: str,
    no_overhead: bool,
    overhead_rounds: int | None,
    workdir: Path | None,
    task_slots: int | None,
) -> None:
    """The fraud swap under fries, epoch, restart (cold), restart-warm and naive; prints one
    JSON document."""
    from swivel.embedded.sizing import DEMO, SMOKE
    from swivel_tools.bench.reconfiguration import run_benchmark

    folder = workdir or Path(tempfile.mkdtemp(prefix="swivel-bench-"))
    sizing = SMOKE if size == "smoke" else DEMO
    if overhead_rounds is not None:
        sizing = replace(sizing, overhead_rounds=overhead_rounds)
    if task_slots is not None:
        sizing = replace(sizing, task_slots=task_slots)
    document = run_benchmark(
        folder,
        sizing,
        trials,
        surge_batch_s=surge_batch_s,
        after_s=after_s,
        schedulers=tuple(s.strip() for s in schedulers.split(",") if s.strip()),
        overhead=not no_overhead,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    click.echo(json.dumps(document, indent=2))


def _add_migration_benchmarks() -> None:
    # `swivel bench migration` and `swivel bench overhead` (bin migration, issue 4).
    from swivel_tools.cli import bench_migration

    for subcommand in bench_migration.COMMANDS:
        command.add_command(subcommand)


_add_migration_benchmarks()


def _add_coordination_benchmark() -> None:
    # `swivel bench coordination` (Swivel's per-batch coordination grouped, issue 13).
    from swivel_tools.cli.bench_coordination import coordination

    command.add_command(coordination)


_add_coordination_benchmark()
