"""What the prewarm tests on the standalone cluster share (tests/integration/cluster/
test_prewarm.py): a REST-tolerant retry, a boundary that runs actions between batches, and
the checks of where a bin's state came from."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swivel.jobs.spark_internals import SparkInternals

BINS = 4


def patiently(call: Callable[[], Any], tries: int = 3) -> Any:
    """`call()`, again after a timeout of the Spark UI's REST API (a loaded machine)."""
    for attempt in range(tries):
        try:
            return call()
        except OSError:
            if attempt == tries - 1:
                raise
            time.sleep(2.0)
    raise AssertionError("not reached")


class Boundary:
    """foreachBatch wrapper running queued actions after the batch's write (no stateful
    task of this batch or the next runs then); records the batch each action ran at."""

    def __init__(self) -> None:
        self.actions: queue.Queue[tuple[str, Callable[[], Any]]] = queue.Queue()
        self.done: dict[str, tuple[int, Any]] = {}
        self.batch_id = -1  # the batch whose boundary runs the actions, while they run

    def wrap(self, write: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
        def run(frame: Any, batch_id: int) -> None:
            write(frame, batch_id)
            self.batch_id = batch_id
            while not self.actions.empty():
                name, action = self.actions.get()
                self.done[name] = (batch_id, action())

        return run

    def at_next(self, name: str, action: Callable[[], Any], timeout: float = 120.0) -> int:
        self.actions.put((name, action))
        deadline = time.monotonic() + timeout
        while name not in self.done:
            assert time.monotonic() < deadline, f"{name} did not run at a boundary"
            time.sleep(0.05)
        return self.done[name][0]


def assert_first_batch_on_the_loaded_copy(
    internals: SparkInternals, query: Any, bins: tuple[int, int], target: str, first: int
) -> tuple[dict[int, Any], dict[int, Any]]:
    """On `target`, the prewarmed bin is served by the provider object its prewarm loaded
    (the shadow copy gone), the control bin by a provider reloaded from the checkpoint.
    Returns the probe and batch `first`'s stateful tasks, per bin."""
    moved, control = bins
    host = internals.executor_host(target)
    probed = {
        p["partition"]: p
        for p in internals.prewarmer().probe(query, [moved, control], target, host)
    }
    assert probed[moved]["prewarmed_provider"], probed[moved]
    assert not probed[moved]["shadow_loaded"]
    assert not probed[control]["prewarmed_provider"]  # reloaded from the checkpoint
    run_id = str(query.runId)
    tasks = {t.partition: t for t in patiently(lambda: internals.batch_tasks(run_id, first, BINS))}
    return probed, tasks


def shadow_location(internals: SparkInternals, query: Any, partition: int) -> str | None:
    """Where the coordinator points bin `partition`'s shadow id (its prewarm's copy)."""
    shadow_run = str(internals.prewarmer()._helper().shadowRunId(str(query.runId)))
    return internals._locations(query, [partition], 0, run_id=shadow_run)[partition]


def older_files(store: Path, version: int) -> list[Path]:
    """The bin's delta and snapshot files (and their checksums) of versions <= `version`:
    what a reload from the checkpoint at a later version would read."""
    found = []
    for path in store.iterdir():
        stem = path.name.lstrip(".").split(".", 1)[0]
        kind = path.name.lstrip(".").removeprefix(stem)
        if stem.isdigit() and int(stem) <= version and kind.startswith((".delta", ".snapshot")):
            found.append(path)
    return found


def rocksdb_files(store: Path, version: int) -> list[Path]:
    """What a reload of the bin at `version` or earlier would read from the checkpoint: the
    snapshots (`<v>.zip`) and changelogs of those versions, and the SST files."""
    found = []
    for path in store.rglob("*"):
        if not path.is_file() or "_metadata" in path.parts:
            continue
        stem = path.name.lstrip(".").split(".", 1)[0].split("_", 1)[0]
        if "SSTs" in path.parts or (stem.isdigit() and int(stem) <= version):
            found.append(path)
    return found
