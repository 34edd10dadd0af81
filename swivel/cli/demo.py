"""`swivel demo`: the fraud-detection example, a surge, and a live model swap under each
scheduler - delay, latency before and after, the consistency verdict, and a timeline PNG.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from rich import box
from rich.console import Console
from rich.table import Table


@click.command("demo")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the PNGs, logs and recorded schedule go (default: a new temporary folder).",
)
@click.option(
    "--schedulers",
    default="fries,epoch,restart",
    show_default=True,
    help="restart: a new driver from the checkpoint; restart-warm: the query restarted in "
    "the same driver.",
)
@click.option("--size", type=click.Choice(["demo", "smoke"]), default="demo", hidden=True)
@click.option("--surge-batch-s", type=float, default=4.0, hidden=True)
@click.option("--after-s", type=float, default=10.0, hidden=True)
def command(
    output_dir: Path | None, schedulers: str, size: str, surge_batch_s: float, after_s: float
) -> None:
    """Swap the fraud model live during a surge under fries, epoch and restart."""
    from swivel.embedded.plotting import plot_aligned, plot_timeline
    from swivel.embedded.running import EmbeddedJob
    from swivel.embedded.sessions import forget_inherited_agent, local_session
    from swivel.embedded.sizing import DEMO, SMOKE
    from swivel.embedded.trials import TrialRunner, latency_rows, surge_job
    from swivel.embedded.verdicts import check_run

    forget_inherited_agent()
    sizing = SMOKE if size == "smoke" else DEMO
    folder = output_dir or Path(tempfile.mkdtemp(prefix="swivel-demo-"))
    job = surge_job(sizing)
    console = Console(highlight=False, width=min(Console().width, 80))
    echo = console.print
    echo(f"[bold]swivel demo[/]: fraud detection on local Spark (output in {folder})")
    spark = local_session(job.spec, folder / "spark.log")
    trials = []
    try:
        with EmbeddedJob(job, folder / "run", spark, record_schedule=True) as embedded:
            runner = TrialRunner(embedded, sizing, surge_batch_s)
            echo("starting the job (the first micro-batch starts Spark's Python workers) ...")
            runner.start_surge()
            echo(
                f"surge: {sizing.rows_per_second} payments/s, more than the expensive model "
                "keeps up with"
            )
            for scheduler in (s.strip() for s in schedulers.split(",") if s.strip()):
                echo(f"waiting for a {surge_batch_s:g} s micro-batch, then swapping under "
                     f"{scheduler} ...")  # fmt: skip
                trial = runner.trial(scheduler, after_s)
                echo(
                    f"  {scheduler}: in effect after {_ms(trial.delay_ms)} (armed "
                    f"{_ms(trial.armed_ms)}; batch before: {trial.batch_ms_before / 1000:.1f} s)"
                )
                trials.append(trial)
            rows = latency_rows(embedded)
            assert embedded.schedule_dir is not None
            verdict = check_run(embedded.schedule_dir)
    finally:
        spark.stop()
    started = runner.surge_started_at or time.time()
    plot_timeline(rows, runner.events, started, folder / "latency-timeline.png")
    swaps = [(t.scheduler, t.requested_at, t.effect.in_effect_at) for t in trials]
    png = plot_aligned(rows, swaps, folder / "swaps-aligned.png")
    echo(_table(trials, rows, after_s))
    state = "serializable" if verdict.serializable else "NOT serializable"
    echo(f"consistency (check_schedule on the recorded schedule, {verdict.records} records, "
         f"{len(trials) * 2} update transactions): [bold]{state}[/]")  # fmt: skip
    if runner.top_ups:
        echo(f"(surge topped up {runner.top_ups}x by a pause, so every swap met a surge batch)")
    echo(f"the swaps side by side: {png}")
    echo(f"latency over the whole run: {folder / 'latency-timeline.png'}")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _p50(rows: Any, start: float, end: float) -> str:
    window = rows[(rows["emitted_at"] >= start) & (rows["emitted_at"] < end)]["latency_s"]
    return f"{statistics.median(window):.1f} s" if len(window) else "-"


def _table(trials: list[Any], rows: Any, after_s: float) -> Table:
    """One row per swap, the in-effect delay first; sized for an 80-column terminal."""
    table = Table(
        title="Hot-swapping the customer model (+ combiner) during the surge",
        box=box.SIMPLE_HEAD,
        show_edge=False,
    )
    columns = ("scheduler", "in effect", "armed", "batch\nbefore", "latency\nbefore",
               "latency\nafter", "violations\n/records")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    for trial in trials:
        table.add_row(
            trial.scheduler,
            _ms(trial.delay_ms),
            _ms(trial.armed_ms),
            f"{trial.batch_ms_before / 1000:.1f} s",
            _p50(rows, trial.requested_at - 10.0, trial.requested_at),
            _p50(rows, trial.completed_at, trial.completed_at + after_s),
            f"{trial.violations}/{trial.records}",
        )
    table.caption = (
        "in effect: every target ran the new version and none will run the old one;\n"
        "armed: every worker holds it (both from the request)"
    )
    return table
