"""The wrappers that run an operator's function inside a PySpark Python worker.

Each slice of an Arrow batch (a `mapInPandas` chunk, or a key group's chunk in
`transformWithStateInPandas`) is one check: the wrapper reads the newest snapshot from its
feed (µs, from memory), asks `choosing.parts` (the protocol's selection) which configuration
applies, runs the function once per configuration the rows need, writes its tag column,
acknowledges the first use of a function version in this process (stamped with the time of
the check, the moment it switched), counts rows and time inside the function per Spark
partition for the agent (`swivel.jobs.control.counting`, Chi §5), and records `process`
events when recording is on. A switch therefore happens between two slices of a running
micro-batch. Slices are sized from the function's measured cost per row so that a check
comes about every `CHECK_EVERY_S` of work: a cheap function runs whole Arrow batches, an
expensive model a few rows at a time.
Functions already see a key's rows in several chunks (Spark splits key groups at
`spark.sql.execution.arrow.maxRecordsPerBatch`), so slicing changes nothing they can observe.

Function contracts (pandas in, pandas out; unknown columns ride along, so use `assign`):
- stateless (`map`, `filter`, `flatMap`): `f(df, **params) -> df`;
- keyed: `f(key, df, state: dict, **params) -> (df, state)`; the state is JSON-able and
  lives in Spark's state store, in the key's bin;
- state transform: `t(state: dict) -> dict`, applied to a key's state once, the first time
  the key is processed under the function version that declares it (the version is stored
  with the state, so a retried or replayed batch, which re-reads the committed state,
  cannot apply it twice).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

from swivel.jobs.control import counting
from swivel.jobs.control.client import working_on
from swivel.jobs.runtime import freshness
from swivel.jobs.runtime.choosing import Part, parts, tag_order
from swivel.jobs.runtime.feeds import SnapshotFeed
from swivel.jobs.runtime.functions import AllowList, FunctionRefused, resolve
from swivel.protocol.snapshots import OperatorConfig, Snapshot

RECORD_COLUMN = "_swivel_record"
SOURCE_TS_COLUMN = "_swivel_ts"
EMITTED_COLUMN = "_swivel_emitted_at"
SYSTEM_PREFIX = "_swivel_"
CHECK_EVERY_S = float(os.environ.get("SWIVEL_CHECK_EVERY_S", "0.02"))
FIRST_SLICE_ROWS = 8  # before the cost per row is known


@dataclass(frozen=True)
class OperatorPlan:
    """What a worker needs to know about one operator (pickled into the query)."""

    name: str
    keyed: bool
    key: str | None
    input_columns: tuple[str, ...]
    output_columns: tuple[str, ...]
    initial: OperatorConfig  # the config compiled in, checked then: the last resort


@dataclass
class WorkerSettings:
    """Per-query settings shared by every wrapper (pickled; caches rebuilt per process)."""

    feed: SnapshotFeed
    allow: AllowList = field(default_factory=AllowList)
    recording_dir: str | None = None
    started_config_version: int | None = None  # the restart scheduler's "started with"


# Per process: acks already sent, by feed (a reused worker may serve a later query with an
# agent of its own, whose configuration versions start again at 1).
_acked: set[tuple[str | None, str, int, int]] = set()
# Per process: an operator's seconds per row (a runner is unpickled per task, the estimate
# outlives it so a worker's first slices are sized right after the first task).
_cost_per_row: dict[str, float] = {}
_refused: set[str] = set()
_late: set[tuple[str, int, int]] = set()


def _task_position() -> tuple[int | None, int | None]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        freshness.enter_task(None)
        return None, None
    freshness.enter_task(context.taskAttemptId())
    batch = context.getLocalProperty("streaming.sql.batchId")
    return (int(batch) if batch is not None else None), context.partitionId()


class OperatorRunner:
    """Runs one operator over Arrow batches, choosing its configuration per batch and row."""

    def __init__(self, plan: OperatorPlan, settings: WorkerSettings) -> None:
        self.plan = plan
        self.settings = settings
        self._last_good: OperatorConfig = plan.initial
        self._checked_at = 0.0

    def slices(self, pdf: pd.DataFrame) -> Iterator[pd.DataFrame]:
        """`pdf` in slices of about `CHECK_EVERY_S` of this function's work each."""
        total = len(pdf)
        if total == 0:
            yield pdf
            return
        start = 0
        while start < total:
            per_row = _cost_per_row.get(self.plan.name)
            size = FIRST_SLICE_ROWS if per_row is None else int(CHECK_EVERY_S / max(per_row, 1e-9))
            size = max(1, min(size, total - start))
            yield pdf if size == total else pdf.iloc[start : start + size]
            start += size

    def observe(self, rows: int, seconds: float) -> None:
        """Learn the cost per row (a moving average) from one slice's run."""
        if rows <= 0:
            return
        sample = seconds / rows
        previous = _cost_per_row.get(self.plan.name)
        _cost_per_row[self.plan.name] = (
            sample if previous is None else 0.7 * previous + 0.3 * sample
        )

    def _snapshot_for(self, pdf: pd.DataFrame) -> Snapshot:
        """The snapshot this check runs `pdf` under: read synchronously at a task's first
        check and when a row's tag is newer than the snapshot held (`freshness`: why that
        closes the gap between batches, and what a failed read does)."""
        return freshness.snapshot_for(self.settings.feed, self.plan.name, pdf)

    def in_tag_order(self, pdf: pd.DataFrame) -> pd.DataFrame:
        """`pdf` with old-tagged rows first when this operator follows a component's tags."""
        return tag_order(self._snapshot_for(pdf), self.plan.name, pdf)

    def parts(self, pdf: pd.DataFrame, batch_id: int | None) -> list[Part]:
        """The check: read the newest snapshot, split the rows by the configuration they need."""
        name = self.plan.name
        snapshot = self._snapshot_for(pdf)
        self._checked_at = time.time()
        return list(
            parts(
                snapshot,
                name,
                pdf,
                batch_id=batch_id,
                started_config_version=self.settings.started_config_version,
            )
        )

    def function(self, config: OperatorConfig) -> tuple[Any, OperatorConfig]:
        """The callable for `config`, or the last good one if the reference is refused."""
        try:
            function = resolve(config.function or "", self.settings.allow, self.plan.name)
        except FunctionRefused as refused:
            if self._last_good == config:
                raise
            if config.function not in _refused:
                _refused.add(config.function or "")
                print(
                    f"swivel: {refused}; {self.plan.name} keeps {self._last_good.function}",
                    file=sys.stderr,
                )
            return self.function(self._last_good)
        self._last_good = config
        return function, config

    def finish(
        self,
        out: pd.DataFrame,
        part: Part,
        used: OperatorConfig,
        position: tuple[int | None, int | None],
        state_version: int | None = None,
    ) -> pd.DataFrame:
        """`state_version`: the version the key's state was at when `used` ran on it (keyed
        operators), recorded so the checker can judge state reads too."""
        out = self._with_system_columns(out, part.rows)
        if part.write_tag is not None and part.selection.tag is not None:
            out[part.write_tag] = part.selection.tag
        out[EMITTED_COLUMN] = time.time()
        batch_id, partition = position
        self._acknowledge(used, part.selection.config_version, batch_id, partition)
        self._record(part.rows, used, batch_id, state_version)
        columns = self.plan.output_columns
        if tuple(out.columns) == columns:
            return out  # already in order: a reindex costs ~0.1-0.5 ms per key group
        return out.loc[:, list(columns)]

    def _with_system_columns(self, out: pd.DataFrame, rows_in: pd.DataFrame) -> pd.DataFrame:
        missing = [
            c for c in rows_in.columns if c.startswith(SYSTEM_PREFIX) and c not in out.columns
        ]
        if missing:
            if len(out) != len(rows_in):
                raise ValueError(
                    f"{self.plan.name}: the function dropped {missing} and changed the row "
                    "count; keep the input's _swivel_* columns (use df.assign)"
                )
            out = out.assign(**{c: rows_in[c].to_numpy() for c in missing})
        return out.copy() if out is rows_in else out

    def _acknowledge(
        self,
        config: OperatorConfig,
        config_version: int,
        batch_id: int | None,
        partition: int | None,
    ) -> None:
        feed = getattr(self.settings.feed, "url", None)
        seen = (feed, self.plan.name, config.version, config_version)
        if seen in _acked:
            return
        _acked.add(seen)
        try:
            self.settings.feed.ack(
                self.plan.name,
                config.version,
                config_version,
                partition,
                batch_id,
                at=self._checked_at or None,
            )
        except Exception as error:  # an unreachable agent must not stop the data path
            print(f"swivel: ack failed: {error}", file=sys.stderr)

    def _record(
        self,
        rows_in: pd.DataFrame,
        config: OperatorConfig,
        batch_id: int | None,
        state_version: int | None,
    ) -> None:
        # The format of swivel.jobs.control.recording (one file per process), plus the batch.
        directory = self.settings.recording_dir
        if directory is None or not len(rows_in):
            return
        # `at`: when the rows were processed (their output emitted), for the in-effect delay;
        # `state`: the version of the key's state they ran on (keyed operators).
        state = "" if state_version is None else f',"state":{state_version}'
        head = f'{{"event":"process","operator":"{self.plan.name}","version":{config.version}{state},"batch":{json.dumps(batch_id)},"at":{time.time():.6f},"record":'
        lines = "".join(head + json.dumps(str(r)) + "}\n" for r in rows_in[RECORD_COLUMN])
        with open(Path(directory) / f"process-{os.getpid()}.jsonl", "a", encoding="utf-8") as log:
            log.write(lines)


def run_stateless_chain(
    runners: list[OperatorRunner], chunks: Iterator[pd.DataFrame], *, sliced: bool = True
) -> Iterator[pd.DataFrame]:
    """The body of one `mapInPandas`: a chain of stateless operators, chunk by chunk.

    `sliced=False` checks once per chunk: a region that pins one snapshot per chunk for all
    its branches (regions.ChunkView) needs every branch to see the whole chunk at once.
    """
    batch_id, partition = _task_position()
    for chunk in chunks:
        pdf = chunk
        for runner in runners:
            pdf = _run_stateless(runner, pdf, batch_id, partition, sliced=sliced)
        yield pdf


def _run_stateless(
    runner: OperatorRunner,
    pdf: pd.DataFrame,
    batch_id: int | None,
    partition: int | None,
    *,
    sliced: bool = True,
) -> pd.DataFrame:
    outputs, name = [], runner.plan.name
    for rows in runner.slices(pdf) if sliced else iter([pdf]):
        with working_on(name):
            started = time.perf_counter()
            for part in runner.parts(rows, batch_id):
                function, used = runner.function(part.selection.config)
                began = time.perf_counter()
                out = function(part.rows, **dict(used.params))
                counting.add(name, partition, len(part.rows), time.perf_counter() - began)
                outputs.append(runner.finish(out, part, used, (batch_id, partition)))
            runner.observe(len(rows), time.perf_counter() - started)
    if len(outputs) == 1:
        return outputs[0]
    return pd.concat(outputs, ignore_index=True)


# --- keyed state ------------------------------------------------------------------------

STATE_SCHEMA_DDL = "state STRING, version LONG"


@dataclass
class KeyState:
    """A key's state as the wrapper keeps it: the user's dict and the version it is at."""

    value: dict[str, Any]
    version: int  # the function version whose state transform (if any) has been applied
    fresh: bool = False


def run_keyed_group(
    runner: OperatorRunner, key: Any, chunks: Iterator[pd.DataFrame], state: KeyState
) -> Iterator[pd.DataFrame]:
    """One key group of a keyed operator in one micro-batch; the caller reads the state
    once and writes it back.

    The group is the key's whole input for the batch: behind the shuffle's stage barrier
    every upstream task has ended, and Spark hands the group over in chunks (split at
    `maxRecordsPerBatch`), so the wrapper takes all of them first. A non-head of a Fries
    component then runs them in tag order (`choosing.tag_order`): every old-tagged row under
    the old function on the untransformed state, then the state transform (once), then the
    new-tagged rows. Run in arrival order, an old row of a head task that switched later
    would meet the state a new row had already transformed: a mixed transaction. The rows
    are still run in slices, each a check, as in `run_stateless_chain`.
    """
    batch_id, partition = _task_position()
    group = _whole_group(runner, chunks)
    if group is None:
        return
    outputs, name = [], runner.plan.name
    for rows in runner.slices(runner.in_tag_order(group)):
        with working_on(name):
            started = time.perf_counter()
            for part in runner.parts(rows, batch_id):
                function, used = runner.function(part.selection.config)
                began = time.perf_counter()
                _transform_once(runner, state, used)
                out, state.value = function(key, part.rows, state.value, **dict(used.params))
                counting.add(name, partition, len(part.rows), time.perf_counter() - began)
                position = (batch_id, partition)
                outputs.append(runner.finish(out, part, used, position, state.version))
            runner.observe(len(rows), time.perf_counter() - started)
    yield outputs[0] if len(outputs) == 1 else pd.concat(outputs, ignore_index=True)


def _whole_group(runner: OperatorRunner, chunks: Iterator[pd.DataFrame]) -> pd.DataFrame | None:
    frames = []
    for chunk in chunks:
        chunk.columns = list(runner.plan.input_columns)  # see compiling: TWS renames `_x`
        frames.append(chunk)
    if not frames:
        return None
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _transform_once(runner: OperatorRunner, state: KeyState, config: OperatorConfig) -> None:
    if state.fresh:
        state.version, state.fresh = config.version, False
        return
    if config.version < state.version:
        _late_old_rows(runner, state, config)
        return
    if config.version == state.version:
        return
    if config.state_transform:
        transform = resolve(
            config.state_transform, runner.settings.allow, f"{runner.plan.name}.stateTransform"
        )
        state.value = transform(state.value)
    state.version = config.version


def _late_old_rows(runner: OperatorRunner, state: KeyState, config: OperatorConfig) -> None:
    """Rows that need an older function than the one the key's state is at.

    For a Fries non-head the tag order rules this out within a batch, and the synchronous
    read at every task's first check (`freshness`) across batches: no head stamps an old
    version in a batch after one in which a head stamped the new one. The naive scheduler,
    which follows no tags, can still send them (docs/runtime.md, "Limits"). The rows still
    run (under the function their selection names, on the state as it is); the worker says
    so on stderr once per operator and versions, so a run can be checked for it.
    """
    seen = (runner.plan.name, config.version, state.version)
    if seen in _late:
        return
    _late.add(seen)
    print(
        f"swivel: {runner.plan.name}: rows for function version {config.version} met a key "
        f"whose state is already at version {state.version}: a worker (a naive target, or a "
        "Fries head whose feed was not read at its task's start) was still on the old version "
        "in a later batch than the one that switched the key; they ran on that state "
        "(docs/runtime.md, Limits)",
        file=sys.stderr,
    )


def encode_state(state: KeyState) -> tuple[str, int]:
    return json.dumps(state.value), state.version


def decode_state(stored: tuple[Any, ...] | None) -> KeyState:
    if stored is None:
        return KeyState({}, 0, fresh=True)
    return KeyState(json.loads(stored[0]), int(stored[1]))
