"""Issue 10 §4, proof on real Spark: every reconfiguration the agent accepts is consistent.

Hypothesis draws small dataflows (fan-outs, merges, keyed operators by customer or
merchant, filters, flatMaps emitting two rows per input, replicates, unions, blocking
aggregates), a random set of targets (keyed ones may bring a state transform), feed lags
and the moment of the switch (`consistency_cases`). The agent's own acceptance path (`Hub.submit`, planning with
`plan_reconfiguration`) decides; a job the runtime cannot compile and a plan the agent
refuses are counted, not run. Every accepted fries plan runs on local Spark: the switch is
published inside a running micro-batch, two more batches complete, and

- the recorded schedule, judged by `swivel.controllers.checker`, has 0 violations;
- the sink rows agree (no record shows a target under both versions: the trail probes
  write each operator's label into the data, independently of the recording);
- no keyed target ran its old function on state its transform had already changed.

The naive scheduler (every target switches on its own, no tags) is run on generated
dataflows with two targets a record meets one after the other and that the runtime switches
apart (not in one fused region), the upstream one hearing of the update an hour late and
the switch published while it runs a batch: the checker must flag every one of them.
`test_a_non_head_that_hears_late_follows_the_heads_tag` keeps a case the property found.

Bounded for CI (SWIVEL_PROOF_EXAMPLES=8 generated fries runs plus one explicit, 1 naive
run; derandomized: the same examples every run, ~1.5 min at load 6-9 on 2 cores). The
deeper run, documented with its counts in docs/runtime.md:

    SWIVEL_PROOF_EXAMPLES=200 SWIVEL_PROOF_SEED=random \\
        .venv/bin/pytest tests/integration/runtime/test_consistency_property.py -s

prints one summary line per test and writes `consistency-summary-*.json` under the
test's tmp dir.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, note, seed, settings

from tests.integration.runtime.consistency_cases import (
    Case,
    cases,
    hashed_chain_example,
    issue_example,
    transform_example,
)
from tests.integration.runtime.consistency_runs import (
    Accepted,
    decide,
    not_compilable,
    run_case,
    switched_apart,
)

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("SWIVEL_PROOF_EXAMPLES", "8"))
NAIVE_EXAMPLES = int(os.environ.get("SWIVEL_PROOF_NAIVE_EXAMPLES", str(max(1, EXAMPLES // 10))))
SEED_SETTING = os.environ.get("SWIVEL_PROOF_SEED", "")  # "" = derandomized, "random", or an int
SHRINK = os.environ.get("SWIVEL_PROOF_SHRINK") == "1"  # each shrink step is a Spark run
PER_RUN_S = 75  # a generous bound per Spark run on a loaded 2-core machine
# The naive run: its upstream target sleeps per row so that the switch lands mid-stage.
NAIVE_DELAY_MS, NAIVE_SWITCH_AFTER_S = 25.0, 0.3


def _seeded(test: Any) -> tuple[Any, str]:
    """Apply the seed setting; return the decorated test and how to reproduce the run."""
    if not SEED_SETTING:
        return test, "derandomized (fixed per test)"
    value = random.randrange(2**32) if SEED_SETTING == "random" else int(SEED_SETTING)
    return seed(value)(test), f"SWIVEL_PROOF_SEED={value}"


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=not SEED_SETTING,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if SHRINK else []),
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.filter_too_much,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
        print_blob=True,
    )


def _report(tmp_path: Path, name: str, summary: dict[str, Any]) -> None:
    path = tmp_path / f"consistency-summary-{name}.json"
    path.write_text(json.dumps(summary, indent=2, sort_keys=True))
    line = {k: v for k, v in summary.items() if not isinstance(v, dict | list)}
    print(f"\nswivel-proof {name}: {json.dumps(line, sort_keys=True)} (full: {path})")


def _classify(case: Case, scheduler: str, summary: dict[str, Any]) -> Accepted | None:
    """Count the case as not compilable / refused, or return the agent's accepted plan."""
    summary["generated"] += 1
    error = not_compilable(case)
    if error is not None:
        summary["not_compilable"] += 1
        summary["not_compilable_by_field"][error.field] += 1
        return None
    decision = decide(case, scheduler)
    if not isinstance(decision, Accepted):
        # Refused with `field: reason` before anything changes in the running job.
        assert decision.status == 422 and decision.problems, decision
        assert all(p.field and p.reason for p in decision.problems), decision
        assert decision.unchanged, decision
        summary["refused"] += 1
        for problem in decision.problems:
            summary["refused_by_field"][f"{decision.status} {problem.field}"] += 1
        return None
    return decision


@pytest.mark.timeout(120 + PER_RUN_S * EXAMPLES)
def test_every_accepted_fries_plan_is_consistent_on_spark(spark, tmp_path: Path) -> None:
    summary: dict[str, Any] = {
        "generated": 0,
        "not_compilable": 0,
        "not_compilable_by_field": Counter(),
        "refused": 0,
        "refused_by_field": Counter(),
        "accepted_runs": 0,
        "records_checked": 0,
        "process_events": 0,
        "violations": 0,
        "features": Counter(),
        "runs_switched_mid_surge": 0,
        "rows_on_transformed_state": 0,
        "runs": [],
    }
    started = time.monotonic()

    @_settings(EXAMPLES)
    @given(case=cases())
    @example(case=issue_example())  # refused: Spark would run its head once per branch
    @example(case=transform_example())  # every run has a state transform at a non-head
    def fries_is_consistent(case: Case) -> None:
        accepted = _classify(case, "fries", summary)
        assume(accepted is not None)  # counted; Hypothesis draws another
        assert accepted is not None
        note(f"plan: {json.dumps(accepted.plan.get('components'))}")
        workdir = tmp_path / f"case-{summary['accepted_runs']}"
        summary["accepted_runs"] += 1
        run = run_case(spark, case, workdir, scheduler="fries", lag=case.lag)
        summary["records_checked"] += run.verdict.records
        summary["process_events"] += run.verdict.process_events
        summary["violations"] += len(run.verdict.violations)
        summary["features"].update(case.features())
        summary["rows_on_transformed_state"] += run.on_transformed_state
        summary["runs_switched_mid_surge"] += bool(
            run.generations["old"] and run.generations["new"]
        )
        summary["runs"].append(
            {
                "targets": list(case.targets),
                "features": sorted(case.features()),
                "components": [c["heads"] for c in accepted.plan.get("components", ())],
                "records": run.verdict.records,
                "at_sink": dict(run.generations),
                "batches": run.batches,
                "seconds": round(run.seconds, 1),
            }
        )
        assert run.verdict.records > 0, "no record reached a recorded operator"
        assert run.verdict.serializable, [v.describe() for v in run.verdict.violations[:10]]
        assert not run.mixed_at_sink, (
            f"{len(run.mixed_at_sink)} records mix versions at the sink (the checker "
            f"saw {len(run.verdict.violations)} violations):\n{run.explain(run.mixed_at_sink)}"
        )
        assert not run.old_on_transformed_state, run.old_on_transformed_state[:10]

    test, reproduce = _seeded(fries_is_consistent)
    try:
        test()
    finally:
        summary["seed"] = reproduce
        summary["wall_seconds"] = round(time.monotonic() - started, 1)
        summary["load_average"] = os.getloadavg()[0]
        _report(tmp_path, "fries", summary)
    assert summary["accepted_runs"] >= min(EXAMPLES, 1)
    # Not vacuous: some run had records under the old and under the new version.
    assert summary["runs_switched_mid_surge"] >= 1, summary["runs"]
    assert summary["rows_on_transformed_state"] > 0, "no keyed target ran on transformed state"


@pytest.mark.timeout(120 + PER_RUN_S * NAIVE_EXAMPLES)
def test_the_naive_scheduler_is_caught_on_generated_dataflows(spark, tmp_path: Path) -> None:
    summary: dict[str, Any] = {
        "generated": 0,
        "not_compilable": 0,
        "not_compilable_by_field": Counter(),
        "refused": 0,
        "refused_by_field": Counter(),
        "without_targets_switched_apart": 0,
        "naive_runs": 0,
        "naive_caught": 0,
    }
    started = time.monotonic()

    @_settings(NAIVE_EXAMPLES)
    @given(case=cases())
    def naive_is_caught(case: Case) -> None:
        path = switched_apart(case)
        if path is None:
            summary["without_targets_switched_apart"] += 1
        assume(path is not None)
        assert path is not None
        assume(_classify(case, "naive", summary) is not None)
        upstream, downstream = path
        # The upstream target hears of the update an hour late through the feed's delivery
        # (a long-poll that never delivers; a task's first check of a batch reads the feed
        # synchronously, so it switches at its next batch). It is slowed down and the switch
        # published once it is running a batch: its later rows of that batch run old, the
        # downstream target, hearing at once, runs them new.
        case = case.slowed(upstream, NAIVE_DELAY_MS, NAIVE_SWITCH_AFTER_S)
        note(f"{upstream} hears of the update an hour late; {downstream} does not")
        summary["naive_runs"] += 1
        workdir = tmp_path / f"case-{summary['naive_runs']}"
        run = run_case(
            spark,
            case,
            workdir,
            scheduler="naive",
            lag={upstream: 3600.0},
            switch_once_running=upstream,
        )
        assert not run.verdict.serializable, (
            f"{run.verdict.records} records, none seen by {upstream}@old and {downstream}@new"
        )
        summary["naive_caught"] += 1

    test, reproduce = _seeded(naive_is_caught)
    try:
        test()
    finally:
        summary["seed"] = reproduce
        summary["wall_seconds"] = round(time.monotonic() - started, 1)
        _report(tmp_path, "naive", summary)
    assert summary["naive_caught"] >= 1


@pytest.mark.timeout(120 + PER_RUN_S)
def test_a_non_head_that_hears_late_follows_the_heads_tag(spark, tmp_path: Path) -> None:
    # p0 (head) -> o1 (hash) -> o2 (flatMap, hash), all targets; o1 hears of the update
    # 5 s late through the feed's delivery: it must read the snapshot the tag names, not run
    # p0's new rows under the old version. Found by the property test (lags 0.3 s and 1 s);
    # it failed on every run before 0b1f94b (o1 ran v1 on the rows p0 had tagged v2:
    # `p40: o1@old(1) but o2@new(2), p0@new(2)`, 30-40 of 160 records).
    case = hashed_chain_example()
    assert isinstance(decide(case, "fries"), Accepted)
    run = run_case(spark, case, tmp_path, scheduler="fries", lag=case.lag)
    assert run.verdict.records > 0
    assert run.verdict.serializable, [v.describe() for v in run.verdict.violations[:5]]
    assert not run.mixed_at_sink, run.explain(run.mixed_at_sink)
