"""Deciding and running a generated `Case` (consistency_cases) on local Spark, and the
oracles that read the sink rows.

Whether a plan is accepted is decided by the agent's own code path: an in-process
`swivel.jobs.agent.hub.Hub` (the object behind `POST /v1/plans`) plans with
`swivel.controllers.planning.plan_reconfiguration`, refuses what it refuses (422 with
field and reason), and writes the `update` events of the schedule; the snapshot it would
publish goes to the workers through a `FileFeed`. Nothing here re-implements the planner.

The sink oracles are independent of the recorded schedule the checker reads: every trail
probe writes `;<operator>=<label>` into the row, so the rows show which configuration each
operator a record's copy went through ran under.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swivel.api.errors import FieldProblem
from swivel.controllers.checker import Verdict
from swivel.controllers.shapes import CompileError, Region, plan_shape
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.intake import PlanRejected
from swivel.jobs.runtime.feeds import FileFeed, publish
from swivel.jobs.runtime.testing import check_recorded, memory_rows, start_bounded
from swivel.protocol.snapshots import Snapshot
from tests.integration.runtime.consistency_cases import (
    JOB_NAME,
    NEW,
    OLD,
    ROWS_PER_BATCH,
    Case,
    lineage,
)
from tests.polling import wait_for


@dataclass
class Accepted:
    before: Snapshot
    after: Snapshot
    plan: Mapping[str, Any]


@dataclass
class Refused:
    status: int
    problems: tuple[FieldProblem, ...]
    unchanged: bool  # the agent publishes the snapshot it had: nothing changed in the job

    def reason(self) -> str:
        return "; ".join(f"{p.field}: {p.reason}" for p in self.problems)


def not_compilable(case: Case) -> CompileError | None:
    """The runtime's refusal of the job itself, before any plan (None: it compiles)."""
    try:
        plan_shape(case.job())
    except CompileError as error:
        return error
    return None


def switched_apart(case: Case) -> tuple[str, str] | None:
    """(upstream, downstream) targets a record meets one after the other and that the
    runtime does not switch together: not both in one fused region (a region pins one
    snapshot per Arrow chunk for all its operators, so even naive switches them at once)."""
    try:
        shape = plan_shape(case.job())
    except CompileError:
        return None
    pinned = [set(s.operators) for s in shape.steps if isinstance(s, Region) and not s.linear]
    ancestors = lineage(case)
    for down in case.targets:
        for up in case.targets:
            if up in ancestors[down] and not any({up, down} <= group for group in pinned):
                return up, down
    return None


def decide(case: Case, scheduler: str, schedule_dir: Path | None = None) -> Accepted | Refused:
    """What the agent answers to this reconfiguration: the plan it publishes, or its refusal."""
    hub = Hub(case.job(), JOB_NAME, schedule_dir=schedule_dir, migrations=False)
    before = hub.snapshot
    try:
        record = hub.submit(case.body(scheduler))
    except PlanRejected as rejected:
        return Refused(rejected.status, rejected.problems, hub.snapshot == before)
    return Accepted(before, hub.snapshot, record.plan)


@dataclass
class Run:
    verdict: Verdict
    rows: list[dict[str, Any]]
    plan: Mapping[str, Any]
    seconds: float
    batches: int
    mixed_at_sink: list[str] = field(default_factory=list)
    old_on_transformed_state: list[str] = field(default_factory=list)
    generations: Counter[str] = field(default_factory=Counter)  # records all-old / all-new
    schedule: Path | None = None
    on_transformed_state: int = 0  # rows a keyed target ran on transformed state (not vacuous)

    def explain(self, records: Sequence[str], limit: int = 3) -> str:
        """The sink rows' trails and the recorded events of a few records, for a report."""
        chosen = set(list(records)[:limit])
        lines = [
            f"{r['_swivel_record']}: {r['trail']}"
            for r in self.rows
            if r["_swivel_record"] in chosen
        ]
        if self.schedule is not None:
            merged = self.schedule / "schedule.jsonl"
            for path in [merged] if merged.exists() else sorted(self.schedule.glob("*.jsonl")):
                for line in path.read_text(encoding="utf-8").splitlines():
                    event = json.loads(line)
                    if event.get("event") == "update" or event.get("record") in chosen:
                        lines.append(line)
        return "\n".join(sorted(lines))


def run_case(
    spark: Any,
    case: Case,
    workdir: Path,
    *,
    scheduler: str,
    lag: Mapping[str, float],
    switch_once_running: str | None = None,
    batches_after: int = 2,
    timeout: float = 240.0,
) -> Run:
    """Run the job on local Spark, publish the agent's snapshot `switch_after_s` into the
    second micro-batch (or, with `switch_once_running`, as soon as that operator has
    processed rows of a batch after the first: mid-way through its stage), let
    `batches_after` more complete, stop; judge the recorded schedule. The plan must be one
    the agent accepts (`decide` first)."""
    started = time.monotonic()
    feed_path, schedule = workdir / "feed.json", workdir / "schedule"
    schedule.mkdir(parents=True)
    accepted = decide(case, scheduler, schedule)  # writes the schedule's update events
    assert isinstance(accepted, Accepted), accepted
    publish(feed_path, accepted.before)
    runtime = start_bounded(
        spark,
        case.job(),
        workdir,
        rows_per_batch=ROWS_PER_BATCH,
        feed=FileFeed(str(feed_path), lag=dict(lag)),
        recording_dir=str(schedule),
    )
    try:
        runtime.wait_for_batches(1, timeout=timeout)
        if switch_once_running is None:
            time.sleep(case.switch_after_s)  # the switch lands inside a running batch
        else:
            _wait_until_running(schedule, switch_once_running, runtime.batches_completed(), timeout)
        publish(feed_path, accepted.after)
        runtime.wait_for_batches(runtime.batches_completed() + batches_after, timeout=timeout)
        runtime.stop_at_boundary()
    finally:
        runtime.stop()
    rows = memory_rows(spark, runtime.job)
    transformed = [u["operator"] for u in case.updates if "stateTransform" in u]
    return Run(
        verdict=check_recorded(schedule),
        rows=rows,
        plan=accepted.plan,
        seconds=time.monotonic() - started,
        batches=runtime.batches_completed(),
        mixed_at_sink=mixed_at_sink(rows, case.targets),
        old_on_transformed_state=old_on_transformed_state(rows, transformed),
        generations=generations(rows, case.targets),
        schedule=schedule,
        on_transformed_state=sum(
            1
            for row in rows
            for name, value in trail_entries(row)
            if name in transformed and not value.endswith("/t0")
        ),
    )


def _wait_until_running(schedule: Path, operator: str, batch: int, timeout: float) -> None:
    """Until the recording shows `operator` processing rows of batch `batch` or later."""
    marker = f'"operator":"{operator}",'

    def running() -> bool:
        for path in schedule.glob("process-*.jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                if marker in line and line.endswith("}"):
                    seen = json.loads(line).get("batch")
                    if seen is not None and seen >= batch:
                        return True
        return False

    wait_for(running, timeout, f"{operator} processing a row of batch {batch}", every=0.01)


# --- oracles on the sink rows (independent of the recorded schedule) ----------------------


def trail_entries(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """[(operator, "label[.copy][/tN]")] from a row's trail."""
    entries = []
    for part in (row.get("trail") or "").split(";"):
        if part:
            name, _, value = part.partition("=")
            entries.append((name, value))
    return entries


def _label(value: str) -> str:
    return value.split("/", maxsplit=1)[0].split(".", maxsplit=1)[0]


def mixed_at_sink(rows: Sequence[Mapping[str, Any]], targets: Sequence[str]) -> list[str]:
    """Records whose rows at the sink show a target under the old and a target under the new
    configuration (the checker's rule, read from the data instead of the recording)."""
    labels: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        for name, value in trail_entries(row):
            if name in targets:
                labels[row["_swivel_record"]].add(_label(value))
    return sorted(record for record, seen in labels.items() if len(seen) > 1)


def generations(rows: Sequence[Mapping[str, Any]], targets: Sequence[str]) -> Counter[str]:
    """How many records reached the sink through targets all under the old version, all
    under the new one, or mixed: a run with both "old" and "new" switched mid-surge."""
    labels: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        for name, value in trail_entries(row):
            if name in targets:
                labels[row["_swivel_record"]].add(_label(value))
    names = {frozenset({OLD}): "old", frozenset({NEW}): "new"}
    return Counter(names.get(frozenset(seen), "mixed") for seen in labels.values())


def old_on_transformed_state(rows: Sequence[Mapping[str, Any]], keyed: Sequence[str]) -> list[str]:
    """Rows a keyed target ran under the old function on state a transform had already
    changed, or on state transformed twice (issue 10 §2): `record op=v1/t1`."""
    found = []
    for row in rows:
        for name, value in trail_entries(row):
            if name not in keyed or "/t" not in value:
                continue
            label, transforms = _label(value), int(value.rsplit("/t", 1)[1])
            if (label == OLD and transforms > 0) or transforms > 1:
                found.append(
                    f"{row['_swivel_record']} {name}={value} (customer {row.get('customer')}, merchant {row.get('merchant')})"
                )
    return sorted(set(found))
