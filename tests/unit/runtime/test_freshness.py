"""A worker reads the configuration synchronously at a task's first check and when a row's
tag is newer than its snapshot (`swivel.jobs.runtime.freshness`), so a late long-poll can
neither make a head stamp old tags after a batch boundary nor a non-head run new-tagged rows
under the old configuration. FileFeed's `lag` delays the asynchronous delivery only.

The real wrapper (`OperatorRunner.parts`) and real FileFeeds on disk; the Spark test is
tests/integration/runtime/test_keyed_tag_order.py, the agent's side
tests/integration/agent/test_client_refresh.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd  # type: ignore[import-untyped]
import pytest

from swivel.jobs.runtime import freshness
from swivel.jobs.runtime.feeds import FileFeed, publish
from swivel.jobs.runtime.operators import (
    EMITTED_COLUMN,
    OperatorPlan,
    OperatorRunner,
    WorkerSettings,
)
from swivel.jobs.runtime.testing import with_transition
from swivel.protocol.snapshots import OperatorConfig, Snapshot

LABEL = "swivel.jobs.examples.labels:labelled"
COLUMNS = ("_swivel_record", "_swivel_tag_0")


@pytest.fixture(autouse=True)
def no_task() -> Iterator[None]:
    freshness.enter_task(None)
    yield
    freshness.enter_task(None)


def _snapshots() -> tuple[Snapshot, Snapshot]:
    before = Snapshot(
        config_version=1,
        revision=1,
        operators={
            "head": OperatorConfig(function=LABEL, version=1),
            "tail": OperatorConfig(function=LABEL, version=1),
        },
    )
    after = with_transition(
        before,
        {"head": {"params": {"label": "v2"}}, "tail": {"params": {"label": "v2"}}},
        components=[(["head"], ["head", "tail"])],
    )
    return before, after


def _runner(name: str, feed: FileFeed) -> OperatorRunner:
    plan = OperatorPlan(
        name,
        False,
        None,
        COLUMNS,
        (*COLUMNS, "label", EMITTED_COLUMN),
        OperatorConfig(function=LABEL, version=1),
    )
    return OperatorRunner(plan, WorkerSettings(feed))


def _rows(tag: int) -> pd.DataFrame:
    return pd.DataFrame({"_swivel_record": ["r1", "r2"], "_swivel_tag_0": [tag, tag]})


def test_a_file_feeds_lag_delays_the_long_poll_not_a_refresh(tmp_path: Path) -> None:
    path = tmp_path / "feed.json"
    before, after = _snapshots()
    publish(path, before)
    publish(path, after)
    lagging = FileFeed(str(path), lag={"head": 3600.0, "tail": 3600.0})
    assert lagging.current("head").config_version == 1  # not delivered for an hour
    assert lagging.refresh("head").config_version == 2  # a synchronous read sees it
    # ... and so does every operator of the process, through the asynchronous path too,
    # and a feed unpickled for the next task (feeds are per task, the view per process).
    assert lagging.current("tail").config_version == 2
    assert FileFeed(str(path), lag={"tail": 3600.0}).current("tail").config_version == 2


def test_a_refresh_with_nothing_published_fails(tmp_path: Path) -> None:
    with pytest.raises(LookupError):
        FileFeed(str(tmp_path / "none.json")).refresh("head")


def test_a_task_whose_first_read_fails_fails_instead_of_running_on_what_it_holds(
    tmp_path: Path,
) -> None:
    path = tmp_path / "feed.json"
    publish(path, _snapshots()[0])
    head = _runner("head", FileFeed(str(path)))
    freshness.enter_task(201)
    head.parts(_rows(0), batch_id=1)  # holds a snapshot now
    path.write_text("not json")  # the source of truth cannot be read any more
    freshness.enter_task(202)
    with pytest.raises(freshness.StaleConfigurationError, match="head: cannot read"):
        head.parts(_rows(0), batch_id=2)


def test_a_head_whose_long_poll_is_late_stamps_the_new_version_from_its_next_task(
    tmp_path: Path,
) -> None:
    path = tmp_path / "feed.json"
    before, after = _snapshots()
    publish(path, before)
    head = _runner("head", FileFeed(str(path), lag={"head": 3600.0}))
    freshness.enter_task(101)  # a task of batch b
    assert [p.selection.config_version for p in head.parts(_rows(0), batch_id=4)] == [1]
    publish(path, after)  # while that task runs: its long-poll will not deliver
    assert [p.selection.config_version for p in head.parts(_rows(0), batch_id=4)] == [1]
    freshness.enter_task(102)  # a task of batch b+1: it started after b ended
    (part,) = head.parts(_rows(0), batch_id=5)
    assert (part.selection.tag, part.selection.config.params["label"]) == (2, "v2")


def test_one_synchronous_read_per_task(tmp_path: Path) -> None:
    class Counting(FileFeed):
        refreshes = 0

        def refresh(self, operator: str) -> Snapshot:
            type(self).refreshes += 1
            return super().refresh(operator)

    path = tmp_path / "feed.json"
    publish(path, _snapshots()[0])
    head = _runner("head", Counting(str(path)))
    head.parts(_rows(0), batch_id=None)  # outside Spark: no task, no batches
    assert Counting.refreshes == 0
    for attempt, checks in ((7, 3), (8, 2), (7, 1)):  # 7 again: a retried task is read again
        freshness.enter_task(attempt)
        for _ in range(checks):
            head.parts(_rows(0), batch_id=1)
    assert Counting.refreshes == 3


def test_a_non_head_that_has_not_heard_of_the_transition_follows_its_heads_tag(
    tmp_path: Path,
) -> None:
    path = tmp_path / "feed.json"
    before, after = _snapshots()
    publish(path, before)
    publish(path, after)
    # tail's process has not heard of the transition (its snapshot names no component),
    # and rows its head stamped with version 2 reach it: it must run them under v2.
    tail = _runner("tail", FileFeed(str(path), lag={"tail": 3600.0}))
    assert tail.settings.feed.current("tail").transition is None
    rows = pd.concat([_rows(1), _rows(2)], ignore_index=True)
    parts = tail.parts(rows, batch_id=3)
    assert [(p.selection.rule, p.selection.config.params.get("label")) for p in parts] == [
        ("fries-tag-old", None),
        ("fries-tag-new", "v2"),
    ]
