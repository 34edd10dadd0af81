"""How fresh a worker's snapshot must be before a check runs rows under it.

The control client keeps the newest snapshot the agent's long-poll delivered (2-8 ms after
a publication when all is well); `SnapshotFeed.current` reads it from memory at every check.
That alone leaves two holes, both closed here by a synchronous read of the agent
(`SnapshotFeed.refresh`: `GET /v1/control/watch?since=<rev>&timeout=0`, one round trip):

**Across micro-batches: a task's first check refreshes.** Structured Streaming runs
micro-batches one after another: no task of batch b+1 starts before batch b ended. A row
that a head stamped with configuration version v in batch b was stamped under a snapshot the
agent had published before that head read it, so before batch b ended. Every task of batch
b+1 reads the agent at its first check, after b ended, so it holds v or newer: no head
stamps an older version in b+1 once any head stamped v in b, however late or broken its
long-poll is. Without the read, a head whose long-poll was slower than a batch stamped old
tags in b+1, and a keyed non-head met those old rows on keys whose state the new function
had already transformed in b: not serializable whatever the state does (the key's new rows
ran in b, the old row belongs before them). Within one batch, heads that switched at
different checks are reconciled by the keyed non-heads' tag order (`operators.
run_keyed_group`). Together they are the Spark counterpart of Fries' marker alignment (a
non-head switches once every upstream channel sent the marker): per batch and per key
instead of per channel. The read is per task attempt (a retry or a replay reads again), at
the task's first check, so it costs one round trip per task: ~0.3-1 ms on one host
(docs/runtime.md, "Tags").

**A tag newer than the snapshot: read, then wait.** A non-head reads the tag column of
its component; a snapshot older than the transition names no component, so the operator
would run rows its head tagged new under the old configuration. Any tag column whose value
is newer than the snapshot's configuration version means a head already ran under a newer
configuration: the wrapper reads the agent synchronously, then waits (bounded,
`WAIT_FOR_TAGGED_SNAPSHOT_S`) as before for a feed that is still behind.

**A read that fails fails the task.** The control client retries for
`SWIVEL_REFRESH_DEADLINE_S` (10 s by default), then raises `RefreshError`; a FileFeed
raises when nothing is published. The task fails and Spark retries it
(`spark.task.maxFailures`; 1 in local mode); a batch that still fails stops the query,
which resumes from the checkpoint with the batch replayed under the configuration pinned
for it. Going on with a snapshot that may miss a transition another task already ran under
would mix versions, and nothing in the process can tell whether one is in flight.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

from swivel.jobs.runtime.choosing import newest_tag
from swivel.jobs.runtime.feeds import SnapshotFeed
from swivel.protocol.snapshots import Snapshot

WAIT_FOR_TAGGED_SNAPSHOT_S = 30.0

# Per process (a Python worker runs one task at a time): the Spark task attempt running now,
# and, by feed, the task attempt whose first check last read the agent synchronously.
_task: dict[str, int | None] = {"attempt": None}
_refreshed_in: dict[str, int] = {}


def enter_task(attempt: int | None) -> None:
    """The wrappers say which task attempt runs now (None outside Spark: no batches)."""
    _task["attempt"] = attempt


def feed_key(feed: Any) -> str:
    """Which configuration source a feed reads (a region's ChunkView: its inner feed)."""
    inner = getattr(feed, "inner", None)
    if inner is not None:
        return feed_key(inner)
    for attribute in ("url", "path"):
        value = getattr(feed, attribute, None)
        if isinstance(value, str):
            return f"{attribute}:{value}"
    return f"{type(feed).__qualname__}:{id(feed)}"


class StaleConfigurationError(RuntimeError):
    """The feed could not be read synchronously: the task must not run on what it holds."""


def refresh(feed: SnapshotFeed, operator: str) -> Snapshot:
    """`feed.refresh(operator)`; a feed with `current` only (a test's) is read as it is."""
    read = getattr(feed, "refresh", None)
    if read is None:
        return feed.current(operator)
    try:
        snapshot: Snapshot = read(operator)
    except Exception as error:  # RefreshError, LookupError, a broken file: all fail the task
        raise StaleConfigurationError(
            f"swivel: {operator}: cannot read the configuration ({error}); failing the task "
            "so that Spark retries it instead of running it on a snapshot that may miss a "
            "transition (docs/runtime.md, Tags)"
        ) from error
    return snapshot


def snapshot_for(feed: SnapshotFeed, operator: str, pdf: pd.DataFrame) -> Snapshot:
    """The snapshot one check runs `pdf` under (see the module's docstring)."""
    attempt, key = _task["attempt"], feed_key(feed)
    if attempt is not None and _refreshed_in.get(key) != attempt:
        snapshot = refresh(feed, operator)
        _refreshed_in[key] = attempt
    else:
        snapshot = feed.current(operator)
    needed = newest_tag(pdf)
    if snapshot.config_version >= needed:
        return snapshot
    # A head already ran these rows under a configuration this process has not seen yet.
    snapshot = refresh(feed, operator)
    deadline = time.monotonic() + WAIT_FOR_TAGGED_SNAPSHOT_S
    while snapshot.config_version < needed and time.monotonic() < deadline:
        time.sleep(0.002)
        snapshot = feed.current(operator)
    return snapshot
