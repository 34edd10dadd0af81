"""`swivel bench reconfiguration`: the same swap under every scheduler, several trials
each, on one running query; plus the control channel's steady-state cost.

The JSON document is a contract (issue 3, "The benchmark"): `schedulers.<name>` holds
`delay_ms.p50`/`max`, `violations` (summed over trials, from the recorded schedule) and
`trials`; `ratios` compares fries with the baselines on p50 delay; `control_channel` is
the overhead measurement. Keys may be added, never renamed.

Two figures per scheduler, both from the agent's plan timings (jobs/agent/plans.py):
`delay_ms` ends when every live worker hosting a target has switched, the moment from
which every record entering the job runs under the new versions (a Fries non-head is
switched when it holds the new function and follows tags: `jobs/control/arming.py`);
`propagation_ms` ends when the new versions have processed records at every target, which
behind a shuffle waits for the upstream stage to end. `ratios_of_propagation` compares
those.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

from swivel.embedded.overhead import measure_overhead
from swivel.embedded.running import EmbeddedJob
from swivel.embedded.sessions import local_session
from swivel.embedded.sizing import Sizing, example_job
from swivel.embedded.trials import SCHEDULERS, WARM_UP_RATE, Trial, TrialRunner
from swivel.embedded.verdicts import check_run


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
    job = example_job(sizing)
    warm = job.spec.source.model_copy(update={"rows_per_second": WARM_UP_RATE})
    job = job.model_copy(update={"spec": job.spec.model_copy(update={"source": warm})})
    started = time.time()
    spark = local_session(job.spec, workdir / "spark.log")
    control: dict[str, Any] | None = None
    try:
        if overhead:
            log("measuring the control channel's steady-state cost ...")
            cheap = example_job(sizing, model="cheap")
            control = measure_overhead(
                spark,
                cheap,
                workdir,
                batches_per_phase=sizing.overhead_batches_per_phase,
                rounds=sizing.overhead_rounds,
            ).to_json()
            log(f"control channel: {control}")
        if not schedulers:  # the control channel alone (`--schedulers ''`)
            return {"control_channel": control}
        embedded = EmbeddedJob(job, workdir / "run", spark, record_schedule=True)
        results: list[Trial] = []
        with embedded:
            runner = TrialRunner(embedded, sizing, surge_batch_s)
            runner.start_surge()
            for round_ in range(trials):
                for scheduler in schedulers:
                    trial = runner.trial(scheduler, after_s)
                    log(f"trial {round_ + 1}/{trials}: {trial.summary()}")
                    results.append(trial)
        assert embedded.schedule_dir is not None
        whole = check_run(embedded.schedule_dir)
    finally:
        spark.stop()
    return _document(results, control, whole, sizing, time.time() - started)


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
        delays = [t.delay_ms for t in mine if t.delay_ms is not None]
        schedulers[name] = {
            "delay_ms": {
                "p50": round(statistics.median(delays), 1) if delays else None,
                "max": round(max(delays), 1) if delays else None,
            },
            "first_switch_ms_p50": _median(t.first_switch_ms for t in mine),
            "propagation_ms": {
                "p50": _median(t.propagation_ms for t in mine),
                "max": _max(t.propagation_ms for t in mine),
            },
            "violations": sum(t.violations for t in mine),
            "trials": len(mine),
            "trials_with_violations": sum(1 for t in mine if t.violations),
            "records_checked": sum(t.records for t in mine),
            "batch_ms_before_p50": round(statistics.median(t.batch_ms_before for t in mine), 1),
            "completed": sum(1 for t in mine if t.plan.get("phase") == "Completed"),
        }
    return {
        "schedulers": schedulers,
        "ratios": {
            "fries/epoch": _ratio(schedulers, "fries", "epoch"),
            "fries/restart": _ratio(schedulers, "fries", "restart"),
        },
        "ratios_of_propagation": {
            "fries/epoch": _ratio(schedulers, "fries", "epoch", "propagation_ms"),
            "fries/restart": _ratio(schedulers, "fries", "restart", "propagation_ms"),
        },
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
