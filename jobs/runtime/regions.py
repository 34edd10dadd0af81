"""The body of a region's `mapInPandas`: a sub-DAG of stateless operators over each chunk.

`shapes.plan_shape` decides which operators form a region; this runs one in a Python
worker. Each Arrow chunk goes through the region's operators in topological order: an
operator's input is the chunk (the region's entry) or the concatenation of its inputs'
outputs (a merge), aligned to the operator's input columns (`_swivel_*` columns one input
lacks become NaN/None); a fan-out hands the same output to every branch. The region yields
its exit operator's output.

All operators of a region read the configuration through one `ChunkView`: the snapshot the
first of them sees for a chunk is the one every other uses for that chunk, so two heads on
two branches of a diamond (Fries: two heads of one component; naive: two targets) decide
the same version for the same records. A linear chain keeps the plain
`operators.run_stateless_chain` (each operator checks on its own, as before).

`run_blocking` is the body of a blocking step (an aggregate): it drains its input before it
calls the function once (see `shapes`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pandas as pd  # type: ignore[import-untyped]  # no pandas-stubs in dev deps

from swivel.jobs.control.client import working_on
from swivel.jobs.runtime import freshness
from swivel.jobs.runtime.feeds import SnapshotFeed
from swivel.jobs.runtime.operators import OperatorRunner, run_stateless_chain
from swivel.protocol.snapshots import Snapshot

CHUNK = ""  # the name under which a region's operators find the chunk


@dataclass
class ChunkView:
    """A feed that answers every operator of a region with one snapshot per chunk.

    `begin()` starts a chunk. The first `current` of a chunk pins the real feed's answer;
    later ones return the pinned snapshot, except that an operator asking a second time
    within the chunk (the wrapper waiting for a snapshot a row's tag refers to) re-pins the
    real feed's newest.
    """

    inner: SnapshotFeed
    _snapshot: Snapshot | None = field(default=None, repr=False)
    _asked: set[str] = field(default_factory=set, repr=False)

    def begin(self) -> None:
        self._snapshot = None
        self._asked.clear()

    def current(self, operator: str) -> Snapshot:
        # Always ask the real feed: the agent's client learns from it which operators this
        # process hosts (registration, arming); only the answer is pinned.
        fresh = self.inner.current(operator)
        if self._snapshot is None or operator in self._asked:
            self._snapshot = fresh
        self._asked.add(operator)
        return self._snapshot

    def refresh(self, operator: str) -> Snapshot:
        # A synchronous read (a batch's first check, a tag newer than the snapshot): its
        # answer is pinned for the rest of the chunk, as a second `current` would be.
        self._snapshot = freshness.refresh(self.inner, operator)
        self._asked.add(operator)
        return self._snapshot

    def ack(  # noqa: PLR0917  (SnapshotFeed's signature)
        self,
        operator: str,
        version: int,
        config_version: int,
        partition: int | None,
        batch_id: int | None,
        at: float | None = None,
    ) -> None:
        self.inner.ack(operator, version, config_version, partition, batch_id, at)


@dataclass(frozen=True)
class RegionStep:
    """One operator of a region: its inputs (CHUNK for the entry frame), its input columns
    and its runner (None: a union without a function, which only merges)."""

    name: str
    inputs: tuple[str, ...]
    columns: tuple[str, ...]
    runner: OperatorRunner | None


def run_region(
    steps: Sequence[RegionStep],
    exit_name: str,
    view: ChunkView | None,
    chunks: Iterator[pd.DataFrame],
) -> Iterator[pd.DataFrame]:
    readers: dict[str, int] = {}
    for step in steps:
        for name in step.inputs:
            readers[name] = readers.get(name, 0) + 1
    for chunk in chunks:
        with contextlib.ExitStack() as busy:
            if view is not None:
                # The snapshot is pinned for the whole chunk, so every operator of the region
                # is busy until it ends: none may be armed on receipt mid-chunk (arming.py).
                for step in steps:
                    busy.enter_context(working_on(step.name))
                view.begin()
            outputs: dict[str, pd.DataFrame] = {CHUNK: chunk}
            for step in steps:
                # A fan-out gives each branch its own copy: a function that writes into its
                # input in place must not change the rows another branch reads.
                frames = [
                    outputs[name].copy() if readers[name] > 1 else outputs[name]
                    for name in step.inputs
                ]
                pdf = _merged(step, frames)
                if step.runner is not None:
                    # One check per chunk: slices would re-read the feed mid-chunk and let
                    # two branches of one record run under different snapshots.
                    pdf = next(run_stateless_chain([step.runner], iter([pdf]), sliced=view is None))
                outputs[step.name] = pdf
        yield outputs[exit_name]


def run_blocking(runner: OperatorRunner, chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The body of a blocking step's `mapInPandas`: the partition's whole input, then one call.

    The input iterator is drained before the function runs, so nothing is emitted before
    the last input row of the partition (and, behind the shuffle, of the micro-batch) was
    produced. One check decides the configuration (split by tag like any operator): a head
    switches between two calls, never inside one.
    """
    frames = [chunk for chunk in chunks if len(chunk)]
    if not frames:
        return
    whole = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    yield from run_stateless_chain([runner], iter([whole]), sliced=False)


def _merged(step: RegionStep, frames: list[pd.DataFrame]) -> pd.DataFrame:
    if len(frames) == 1:
        return frames[0]
    aligned = [frame.reindex(columns=list(step.columns)) for frame in frames]
    return pd.concat(aligned, ignore_index=True)
