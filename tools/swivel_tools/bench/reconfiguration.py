"""`swivel bench reconfiguration`: the same swap under every scheduler, several trials
each, on one running query; plus the control channel's steady-state cost.

The JSON document is a contract (issue 3, "The benchmark"): `schedulers.<name>` holds
`delay_ms.p50`/`max`, `violations` (summed over trials, from the recorded schedule) and
`trials`; `ratios` compares fries with the baselines on p50 delay; `control_channel` is
the overhead measurement. Keys may be added, never renamed.

Per scheduler, each as `{p50, max}` over its trials, in ms after the request:
- `delay_ms`: the new version is *in effect* - every target has processed records under
  its new version and none will process another record under its old one - read off the
  recorded schedule (`swivel/embedded/effect.py`, docs/benchmarks.md). `ratios` compare
  these.
- `armed_ms`: the last worker hosting a target (or a Fries head) holds the new version
  (the agent's `armedMs`): from then on every record entering the job runs under it.
- `agent_delay_ms`: the agent's own in-effect figure (`delayMs`, from acks and batch ends:
  what a Reconfiguration's status shows), beside the schedule's.
- `propagation_ms`: the new versions had processed records at every target (agent).
`restart` is the cold restart (a new driver process, `swivel/embedded/cold.py`),
`restart-warm` the same-driver query restart. `timelines` names one PNG per scheduler
(`timeline.py`): where the time of its first switch went.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from swivel.embedded.running import EmbeddedJob
from swivel.embedded.sessions import local_session
from swivel.embedded.sizing import Sizing, example_job
from swivel.embedded.trials import SCHEDULERS, Trial, TrialRunner, surge_job
from swivel.embedded.verdicts import check_run
from swivel_tools.bench.control_overhead import measure_overhead
from swivel_tools.bench.timeline import plot_switch, switch_marks


def run_benchmark(
    workdir: Path,
    sizing: Sizing,
    trials: int,
    *,
    surge_batch_s: float,
    after_s: float,
    schedulers: tuple[str, ...] = SCHEDULERS,
    overhead: bool = True,
    log: Any = print,
) -> dict[str, Any]:
    """Every scheduler's trials and the control channel's cost; with no schedulers, only the
    control channel's cost (`swivel bench reconfiguration --schedulers ''`)."""
    job = surge_job(sizing)
    started = time.time()
    control: dict[str, Any] | None = None
    if overhead:
        log("measuring the control channel's steady-state cost ...")
        cheap = example_job(sizing, model="cheap")
        spark = local_session(cheap.spec, workdir / "spark.log")
        try:
            control = measure_overhead(
                spark,
                cheap,
                workdir,
                batches_per_phase=sizing.overhead_batches_per_phase,
                rounds=sizing.overhead_rounds,
            ).to_json()
        finally:
            spark.stop()
        log(f"control channel: {control}")
    if not schedulers:  # the control channel alone (`--schedulers ''`)
        return {"control_channel": control}
    spark = local_session(job.spec, workdir / "spark.log")
    try:
        embedded = EmbeddedJob(job, workdir / "run", spark, record_schedule=True)
        results: list[Trial] = []
        timelines: dict[str, str] = {}
        operators = [op.name for op in job.spec.dataflow.operators]
        with embedded:
            runner = TrialRunner(embedded, sizing, surge_batch_s)
            runner.start_surge()
            for round_ in range(trials):
                for scheduler in schedulers:
                    trial = runner.trial(scheduler, after_s)
                    log(f"trial {round_ + 1}/{trials}: {trial.summary()}")
                    results.append(trial)
                    if scheduler not in timelines:
                        timelines[scheduler] = str(_timeline(trial, operators, workdir))
        assert embedded.schedule_dir is not None
        whole = check_run(embedded.schedule_dir)
    finally:
        spark.stop()
    document = _document(results, control, whole, sizing, time.time() - started)
    document["timelines"] = timelines
    return document


def _timeline(trial: Trial, operators: list[str], workdir: Path) -> Path:
    title = (
        f"{trial.scheduler}: in effect {trial.delay_ms or 0:.0f} ms after the request "
        f"(armed {trial.armed_ms or 0:.0f} ms), batch before {trial.batch_ms_before / 1000:.1f} s"
    )
    return plot_switch(
        trial.effect,
        operators,
        workdir / f"timeline-{trial.scheduler}.png",
        title=title,
        marks=switch_marks(trial.plan),
    )


def _document(
    results: list[Trial],
    control: dict[str, Any] | None,
    whole: Any,
    sizing: Sizing,
    elapsed_s: float,
) -> dict[str, Any]:
    schedulers: dict[str, Any] = {}
    for name in dict.fromkeys(t.scheduler for t in results):
        mine = [t for t in results if t.scheduler == name]
        schedulers[name] = {
            "delay_ms": _spread(t.delay_ms for t in mine),
            "armed_ms": _spread(t.armed_ms for t in mine),
            "agent_delay_ms": _spread(t.agent_delay_ms for t in mine),
            "first_switch_ms_p50": _median(t.first_switch_ms for t in mine),
            "propagation_ms": _spread(t.propagation_ms for t in mine),
            "violations": sum(t.violations for t in mine),
            "trials": len(mine),
            "trials_with_violations": sum(1 for t in mine if t.violations),
            "records_checked": sum(t.records for t in mine),
            "batch_ms_before_p50": round(statistics.median(t.batch_ms_before for t in mine), 1),
            "completed": sum(1 for t in mine if t.plan.get("phase") == "Completed"),
            "per_trial": [t.summary() for t in mine],
        }
    return {
        "schedulers": schedulers,
        "ratios": {
            "fries/epoch": _ratio(schedulers, "fries", "epoch"),
            "fries/restart": _ratio(schedulers, "fries", "restart"),
            "fries/restart-warm": _ratio(schedulers, "fries", "restart-warm"),
        },
        "goals": _goals(schedulers),
        "control_channel": control,
        "whole_run": {
            "serializable": whole.serializable,
            "records": whole.records,
            "violations": len(whole.violations),
        },
        "setup": {
            "rows_per_second": sizing.rows_per_second,
            "bins": sizing.bins,
            "customers": sizing.customers,
            "work": sizing.work,
            "cpus": os.cpu_count(),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "elapsed_s": round(elapsed_s, 1),
        },
    }


def _goals(schedulers: dict[str, Any]) -> dict[str, bool | None]:
    """Issue 10's goals, checked on this run (None: a scheduler it needs did not run)."""

    def p50(name: str, figure: str = "delay_ms") -> float | None:
        value = schedulers.get(name, {}).get(figure, {}).get("p50")
        return float(value) if value is not None else None

    def clean(name: str) -> bool | None:
        return None if name not in schedulers else schedulers[name]["violations"] == 0

    fries, epoch, restart, armed = p50("fries"), p50("epoch"), p50("restart"), None
    armed = p50("fries", "armed_ms")
    naive = schedulers.get("naive")
    return {
        "fries_le_epoch_over_20": None if fries is None or not epoch else fries <= epoch / 20,
        "fries_le_restart_over_40": (
            None if fries is None or not restart else fries <= restart / 40
        ),
        "fries_armed_le_50ms": None if armed is None else armed <= 50.0,
        "fries_no_violations": clean("fries"),
        "epoch_no_violations": clean("epoch"),
        "restart_no_violations": clean("restart"),
        "naive_caught": None if naive is None else naive["violations"] > 0,
    }


def _spread(values: Any) -> dict[str, float | None]:
    present = [v for v in values if v is not None]
    return {
        "p50": round(statistics.median(present), 1) if present else None,
        "max": round(max(present), 1) if present else None,
    }


def _median(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 1) if present else None


def _max(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return round(max(present), 1) if present else None


def _ratio(schedulers: dict[str, Any], a: str, b: str, figure: str = "delay_ms") -> float | None:
    try:
        x, y = schedulers[a][figure]["p50"], schedulers[b][figure]["p50"]
    except KeyError:
        return None
    return round(x / y, 4) if x is not None and y else None
