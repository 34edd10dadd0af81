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
from rich.console import Console
from rich.table import Table


@click.command("demo")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the PNG, logs and recorded schedule go (default: a new temporary folder).",
)
@click.option("--schedulers", default="fries,epoch,restart", show_default=True)
@click.option("--size", type=click.Choice(["demo", "smoke"]), default="demo", hidden=True)
@click.option("--surge-batch-s", type=float, default=4.0, hidden=True)
@click.option("--after-s", type=float, default=10.0, hidden=True)
def command(
    output_dir: Path | None, schedulers: str, size: str, surge_batch_s: float, after_s: float
) -> None:
    """Swap the fraud model live during a surge under fries, epoch and restart."""
    from swivel.embedded.plotting import plot_timeline
    from swivel.embedded.running import EmbeddedJob
    from swivel.embedded.sessions import local_session
    from swivel.embedded.sizing import DEMO, SMOKE, example_job
    from swivel.embedded.trials import WARM_UP_RATE, TrialRunner, latency_rows
    from swivel.embedded.verdicts import check_run

    sizing = SMOKE if size == "smoke" else DEMO
    folder = output_dir or Path(tempfile.mkdtemp(prefix="swivel-demo-"))
    job = example_job(sizing)
    warm = job.spec.source.model_copy(update={"rows_per_second": WARM_UP_RATE})
    job = job.model_copy(update={"spec": job.spec.model_copy(update={"source": warm})})
    echo = Console(highlight=False).print
    echo(f"[bold]swivel demo[/]: fraud detection on local Spark (output in {folder})")
    spark = local_session(job.spec, folder / "spark.log")
    trials = []
    try:
        with EmbeddedJob(job, folder / "run", spark, record_schedule=True) as embedded:
            runner = TrialRunner(embedded, sizing, surge_batch_s)
            echo("starting the job (the first micro-batch starts Spark's Python workers) ...")
            runner.start_surge()
            echo(
                f"surge: {sizing.rows_per_second} payments/s, more than the expensive model keeps up with"
            )
            for scheduler in (s.strip() for s in schedulers.split(",") if s.strip()):
                echo(
                    f"waiting for {surge_batch_s:g}s micro-batches, then swapping under {scheduler} ..."
                )
                trial = runner.trial(scheduler, after_s)
                echo(
                    f"  {scheduler}: every target switched after {trial.delay_ms or 0:.0f} ms; "
                    f"new versions reached every target after {trial.propagation_ms or 0:.0f} ms"
                )
                trials.append(trial)
            rows = latency_rows(embedded)
            assert embedded.schedule_dir is not None
            verdict = check_run(embedded.schedule_dir)
    finally:
        spark.stop()
    started = runner.surge_started_at or time.time()
    png = plot_timeline(rows, runner.events, started, folder / "latency-timeline.png")
    echo(_table(trials, rows, after_s))
    state = "serializable" if verdict.serializable else "NOT serializable"
    echo(f"consistency (check_schedule on the recorded schedule, {verdict.records} records, "
         f"{len(trials) * 2} update transactions): [bold]{state}[/]")  # fmt: skip
    echo(f"latency timeline: {png}")


def _p50(rows: Any, start: float, end: float) -> str:
    window = rows[(rows["emitted_at"] >= start) & (rows["emitted_at"] < end)]["latency_s"]
    return f"{statistics.median(window):.1f} s" if len(window) else "-"


def _table(trials: list[Any], rows: Any, after_s: float) -> Table:
    table = Table(title="Hot-swapping the customer model (+ combiner) during the surge")
    for column in ("scheduler", "delay", "propagation", "batch before", "latency before",
                   "latency after", "violations"):  # fmt: skip
        table.add_column(column, justify="right")
    for trial in trials:
        table.add_row(
            trial.scheduler,
            f"{trial.delay_ms or 0:.0f} ms",
            f"{trial.propagation_ms or 0:.0f} ms",
            f"{trial.batch_ms_before / 1000:.1f} s",
            _p50(rows, trial.requested_at - 10.0, trial.requested_at),
            _p50(rows, trial.completed_at, trial.completed_at + after_s),
            f"{trial.violations} of {trial.records}",
        )
    return table
