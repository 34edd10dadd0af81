"""Probes Swivel's own tests use to observe a running query: they make batches slow on
purpose, count state transitions, fail once on demand, log when they ran and hold a task.

Several act on files a manifest names (`counting`'s `fail_marker` deletes one, `logged` and
`logged_totals` append to files in a folder, `parity`'s `hold` waits up to 60 s for one),
so this module is in `swivel.jobs.testing`, outside the default function allow-list: only
an installation that adds `swivel.jobs.testing` to `SWIVEL_FUNCTION_PREFIXES` runs it, as
the tests do (tests/conftest.py). The benign `labelled` is an example,
`swivel.jobs.examples.labels:labelled`.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

from swivel.jobs.examples.labels import labelled
from swivel.jobs.runtime.functions import emits


@emits("seen long, transforms long")
def counting(
    key: Any,
    df: pd.DataFrame,
    state: dict[str, Any],
    fail_marker: str | None = None,
    delay_ms: float = 0.0,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Count rows per key; report how often a state transform has been applied to the key.

    With `fail_marker`, the first call that finds the file there deletes it and raises: the
    task fails, the query stops, and a restart replays the batch.
    """
    if delay_ms:
        time.sleep(delay_ms / 1000.0)
    if fail_marker and os.path.exists(fail_marker):
        os.remove(fail_marker)
        raise RuntimeError("probe: failing once on purpose")
    seen = int(state.get("seen", 0)) + len(df)
    transforms = int(state.get("transforms", 0))
    out = df.assign(seen=seen, transforms=transforms)
    return out, {"seen": seen, "transforms": transforms}


def mark_transformed(state: dict[str, Any]) -> dict[str, Any]:
    """A state transform whose every application is visible in the state."""
    return {**state, "transforms": int(state.get("transforms", 0)) + 1}


# --- trail probes: the property test's operators (tests/integration/runtime/
# test_consistency_property.py). Every one adds the same column, `trail`, so any merge of
# their outputs compiles, and appends `;<me>=<label>` to it: the sink rows then show which
# operators a record's copy went through and under which configuration, independently of
# the recorded schedule the checker reads.


def _trail(df: pd.DataFrame, entry: str) -> pd.Series:
    before = df["trail"].fillna("") if "trail" in df.columns else pd.Series("", index=df.index)
    return before + entry


def _sleep_per_row(df: pd.DataFrame, delay_ms: float) -> None:
    # Per row, not per call: the wrapper slices batches by measured cost, so a per-call
    # sleep would make the batch's length depend on the slicing.
    if delay_ms and len(df):
        time.sleep(delay_ms * len(df) / 1000.0)


@emits("trail string")
def trail(df: pd.DataFrame, me: str = "", label: str = "v1", delay_ms: float = 0.0) -> pd.DataFrame:
    """One-to-one (a map, or a replicate's identity): append `;me=label` to the trail."""
    _sleep_per_row(df, delay_ms)
    return df.assign(trail=_trail(df, f";{me}={label}"))


@emits("trail string")
def trail_filter(
    df: pd.DataFrame, me: str = "", label: str = "v1", delay_ms: float = 0.0, drop_one_in: int = 3
) -> pd.DataFrame:
    """A filter: drops the records whose id hashes to 0 modulo `drop_one_in` (the same
    records in every process and run), appends to the trail of the others."""
    _sleep_per_row(df, delay_ms)
    hashed = pd.util.hash_pandas_object(df["_swivel_record"], index=False).to_numpy()
    kept = df[hashed % max(drop_one_in, 1) != 0]
    return kept.assign(trail=_trail(kept, f";{me}={label}"))


@emits("trail string")
def trail_copies(
    df: pd.DataFrame, me: str = "", label: str = "v1", delay_ms: float = 0.0, copies: int = 2
) -> pd.DataFrame:
    """A flatMap: `copies` output rows per input row, each keeping the input's `_swivel_*`
    columns (so the copies carry the source record's id) and numbered in the trail."""
    _sleep_per_row(df, delay_ms)
    repeated = df.loc[df.index.repeat(copies)].reset_index(drop=True)
    number = pd.Series(range(len(repeated)), dtype="int64") % max(copies, 1)
    return repeated.assign(trail=_trail(repeated, f";{me}={label}.") + number.astype(str))


@emits("trail string")
def trail_keyed(
    key: Any,
    df: pd.DataFrame,
    state: dict[str, Any],
    *,
    me: str = "",
    label: str = "v1",
    delay_ms: float = 0.0,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Keyed: counts rows per key and appends `;me=label/t<n>`, n = how often a state
    transform (`mark_transformed`) has been applied to the key's state when the row ran."""
    _sleep_per_row(df, delay_ms)
    transforms = int(state.get("transforms", 0))
    seen = int(state.get("seen", 0)) + len(df)
    out = df.assign(trail=_trail(df, f";{me}={label}/t{transforms}"))
    return out, {"seen": seen, "transforms": transforms}


@emits("label string")
def parity(
    df: pd.DataFrame, keep: int = 0, label: str = "v1", delay_ms: float = 0.0, hold: str = ""
) -> pd.DataFrame:
    """Keep the payments whose id has parity `keep` and write `label` on them: two of these
    on one stream (keep 0 and keep 1) split it in two disjoint halves, so each payment takes
    exactly one branch. `delay_ms` per input row makes a task last (a switch lands in it);
    `hold` holds it until the test has published (`_hold_second_call`)."""
    _sleep_per_row(df, delay_ms)
    if hold:
        _hold_second_call(hold)
    return df[df["payment"] % 2 == keep].assign(label=label)


_calls_in_task = [-1, 0]  # [task attempt id, calls]: a worker runs one task at a time
HOLD_AT_MOST_S = 60.0


def _hold_second_call(path: str) -> None:
    """In a task of batch 1 or later, wait at its second call until `path` exists.

    Why the second call: the first call's rows are recorded (the test sees the task running)
    and the rows after this call are run under whatever the worker's next check reads, so a
    test that publishes an update and then creates `path` gets a task with old and new rows
    however loaded the machine is. A timed publish lands between tasks when the machine is
    busy. At most `HOLD_AT_MOST_S`: a test that never creates the file fails, not hangs.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    batch = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
    if context is None or batch is None or int(batch) < 1:
        return
    attempt = context.taskAttemptId()
    if _calls_in_task[0] != attempt:
        _calls_in_task[:] = [attempt, 0]
    _calls_in_task[1] += 1
    if _calls_in_task[1] != 2:
        return
    deadline = time.monotonic() + HOLD_AT_MOST_S
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)


def _log_time(log: str, what: str, rows: int) -> None:
    """Append `<what> <batch> <epoch seconds> <rows>` to this process's file under `log`."""
    from pyspark import TaskContext

    context = TaskContext.get()
    batch = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
    with open(os.path.join(log, f"{what}-{os.getpid()}.txt"), "a", encoding="utf-8") as out:
        out.write(f"{what} {batch} {time.time():.6f} {rows}\n")


@emits("label string")
def logged(df: pd.DataFrame, log: str, delay_ms: float = 0.0) -> pd.DataFrame:
    """`labels.labelled` that notes when it produced each Arrow batch's rows (`_log_time`)."""
    out = labelled(df, "v1", delay_ms)
    _log_time(log, "produced", len(out))
    return out


@emits("total double, payments long")
def logged_totals(df: pd.DataFrame, log: str, by: str = "customer") -> pd.DataFrame:
    """`aggregates.totals` that notes when it was called, i.e. when it starts to emit."""
    from swivel.jobs.examples.aggregates import totals

    _log_time(log, "aggregated", len(df))
    return totals(df, by=by)


@emits("trail string")
def trail_aggregate(
    df: pd.DataFrame, me: str = "", label: str = "v1", delay_ms: float = 0.0, by: str = "customer"
) -> pd.DataFrame:
    """A blocking aggregate: one row per `by` value of the batch, a new record (Fries §7.1:
    what a blocking operator emits starts a fresh transaction), so its trail starts afresh
    with `;me=label`; the record is named after the operator, the key and the group's first
    input record."""
    _sleep_per_row(df, delay_ms)
    if df.empty:
        return df.assign(trail=pd.Series(dtype="object"))
    groups = df.groupby(by, sort=True)
    out = groups.tail(1).copy()
    first = out[by].map(groups["_swivel_record"].first())
    out["_swivel_record"] = (
        f"{me}(" + out[by].astype(str) + "," + first.astype(str) + ")"
    ).to_numpy()
    out["trail"] = f";{me}={label}"
    return out.reset_index(drop=True)
