"""The prewarm's first use, moved to the job's start: one bin is loaded on another executor
and switched in place once, so the first migration a user asks for does not pay it.

Why: the first prewarmed migration in a driver's life runs code paths its JVMs have not run
before (the helper's jobs and their results, the block manager look-ups of the loads'
answers, the switch's job, the snapshot request). HotSpot then deoptimises and recompiles
the Spark scheduler and status code those paths share, and compiles the new ones: in the
160 k-key benchmark the driver's JIT threads used 1.1-1.2 s in each of the four batches after
the window's first, against 0.1 s in a steady batch, on the two cores the executors also use
(docs/migration.md, "The prewarm's first use, moved to the job's start").

What it does, once per BinMover (once per driver: a restarted query is not warmed again),
when prewarm can run and there are two executors:

1. At the first boundary after a batch has committed, a thread picks the lowest bin whose
   owner is an active executor and another active executor as the target, and runs a step's
   prewarm for that one move (`StepPrewarm.load`: the giver's snapshot request, the load on
   the target's loader thread, the wait for its answer and for the upload), off the batch
   path, exactly as a migration's step does.
2. At the first boundary after the load ended, with no migration queued or running and the
   bin still on its owner in every store, it switches the bin *to that owner* with the
   step's switch (`switchStep`: the re-pointing, the activation job, the shadows' release).
   The owner holds no loaded copy and answers `no-shadow`: the placement does not change,
   and the activation's own path (the top-up, the hand-over of the copy) does not run.
3. Then the target's copy is released.

A migration that starts before the warm-up has switched cancels it: the load, if running,
is not interrupted (a load on the same executor queues behind it on that executor's loader
thread), and its copy is released when it ends. Until then a step that moves the warm-up's
bin does not start its loads (`held`; the two loads share the bin's shadow ids), for at
most the step's prewarm timeout: then it moves the plain way and says why. What it
costs, once: one bin's load on one executor, and one boundary's switch job (`report`).
Executors added later are not warmed.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from swivel.controllers.migration import Move
from swivel.jobs.migration.prewarming import (
    StepPrewarm,
    Stores,
    prewarm_refusal,
    release_when_loaded,
)
from swivel.jobs.spark_internals import SparkInternals

WARM_UP_TIMEOUT_S = 120.0  # the load's answer; after it the warm-up gives up (nothing moved)


@dataclass
class WarmUpReport:
    """What the warm-up did: `status` is pending, loading, done or skipped (`reason` says
    why: disabled, one executor, prewarm refused, a migration came first, a failure)."""

    status: str = "pending"
    reason: str | None = None
    bin: int | None = None
    owner: str | None = None
    target: str | None = None
    load_ms: float | None = None
    switch_ms: float | None = None
    switched_at_batch: int | None = None
    switch_status: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PrewarmWarmUp:
    """One warm-up, driven by the BinMover's boundaries (see the module docstring)."""

    def __init__(
        self,
        internals: SparkInternals,
        stores: Stores,
        bins: int,
        *,
        enabled: bool,
        timeout_s: float = WARM_UP_TIMEOUT_S,
    ) -> None:
        self.internals = internals
        self.stores = stores
        self.bins = bins
        self.timeout_s = timeout_s
        self.report = WarmUpReport()
        self._lock = threading.RLock()  # the load's thread and the boundaries end it
        self._ended = threading.Event()
        self._released = threading.Event()  # no copy of the warm-up's is left anywhere
        self._step: StepPrewarm | None = None
        self._started_at = 0.0
        self._query: Any = None
        if not enabled:
            self._end("skipped", "disabled")

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def wait(self, timeout: float) -> bool:
        """Until the warm-up is done or skipped and its copy released; False after
        `timeout` s."""
        deadline = time.monotonic() + timeout
        return self._ended.wait(timeout) and self._released.wait(
            max(0.0, deadline - time.monotonic())
        )

    def attach(self, query: Any) -> None:
        """The mover's query changed (a restart): a warm-up begun on the old one ends."""
        if self._query is not None and query is not self._query:
            self._cancel("the query restarted before the warm-up ended")
        self._query = query

    def held(self) -> set[int]:
        """The bin whose shadow ids the warm-up's copy still uses (none once released)."""
        with self._lock:
            step = self._step
            if step is None or self._released.is_set():
                return set()
            return {move.bin for move in step.moves}

    def boundary(self, query: Any, batch_id: int, *, migrating: bool) -> None:
        """At every boundary of the BinMover (under its lock, on the batch path: nothing
        here blocks but the switch, which is what a migration's step does at a boundary)."""
        if self.ended or query is None or query is not self._query:
            return
        if migrating:
            self._cancel("a migration started before the warm-up ended")
            return
        if self.report.status == "pending":
            if not query.lastProgress:
                return  # nothing committed yet: no state to load
            self.report.status = "loading"
            self._started_at = time.monotonic()
            threading.Thread(
                target=self._load, args=(query,), daemon=True, name="swivel-prewarm-warm-up"
            ).start()
            return
        step = self._step
        if step is None or not step.ready:
            if time.monotonic() - self._started_at > self.timeout_s:
                self._cancel(f"the load took over {self.timeout_s:.0f} s")
            return
        self._switch_then_release(query, step, batch_id)

    # -- the two halves -------------------------------------------------------------------

    def _load(self, query: Any) -> None:
        """Choose the bin and the target (status REST API and coordinator reads: off the
        batch path) and load it, as a step's prewarm does."""
        try:
            hosts = {e.id: e.host for e in self.internals.executors() if e.active}
            if len(hosts) < 2:
                self._end("skipped", "one executor: no bin can load anywhere but its owner")
                return
            refusal = prewarm_refusal(self.internals, query)
            if refusal is not None:
                self._end("skipped", refusal)
                return
            placement = self.internals.placement(query, self.bins)
            owned = [(b, e) for b, e in sorted(placement.items()) if e in hosts]
            if not owned:
                self._end("skipped", "no bin is placed on an active executor yet")
                return
            bin_id, owner = owned[0]
            target = min(e for e in hosts if e != owner)
            self.report.bin, self.report.owner, self.report.target = bin_id, owner, target
            step = StepPrewarm(
                self.internals, query, [Move(bin_id, owner, target)], self.stores, hosts
            )
            with self._lock:
                if self.ended:  # cancelled while choosing: nothing loaded, nothing to release
                    return
                self._step = step  # from here a cancel releases what the load made
        except Exception as error:  # a warm-up's failure costs the first migration its JIT
            self._end("skipped", f"{type(error).__name__}: {error}")
            return
        step.load()  # answers its own failures (step.error); sets `ready` in any case

    def _switch_then_release(self, query: Any, step: StepPrewarm, batch_id: int) -> None:
        """Switch the bin to the executor that serves it (the placement stays), then release
        the target's copy (in a thread: the release job is not on this boundary)."""
        self.report.load_ms = step.load_ms
        try:
            self._switch_in_place(query, step, batch_id)
        finally:
            release_when_loaded(step, released=self._released.set)

    def _switch_in_place(self, query: Any, step: StepPrewarm, batch_id: int) -> None:
        bin_id, owner = self.report.bin, self.report.owner
        if step.error is not None or bin_id is None or owner is None:
            self._end("skipped", step.error or "no bin was chosen")
            return
        began = time.perf_counter()
        try:
            # every store's id of the bin: `switchStep` re-points them all
            operators = sorted({operator for operator, _ in self.stores()})
            if any(self.internals.location(query, bin_id, op) != owner for op in operators):
                self._end("skipped", f"bin {bin_id} left {owner} before the switch")
                return
            host = step.hosts.get(owner) or self.internals.executor_host(owner)
            answers = self.internals.switch_prewarmed(
                query, [(bin_id, owner, host)], self.stores(), version=batch_id + 1
            )
        except Exception as error:
            self._end("skipped", f"the switch failed: {type(error).__name__}: {error}")
            return
        self.report.switch_ms = round((time.perf_counter() - began) * 1e3, 1)
        self.report.switched_at_batch = batch_id
        self.report.switch_status = ",".join(sorted({str(a.get("status")) for a in answers}))
        self._end("done", None)

    # -- ending ---------------------------------------------------------------------------

    def _cancel(self, reason: str) -> None:
        with self._lock:
            step = self._step
            self._end("skipped", reason)
        if step is not None:  # a load that is still running is released when it ends
            release_when_loaded(step, released=self._released.set)

    def _end(self, status: str, reason: str | None) -> None:
        with self._lock:
            if self.ended:
                return
            self.report.status, self.report.reason = status, reason
            if self._step is None:  # nothing was loaded: nothing to release
                self._released.set()
            self._ended.set()
        if status == "skipped" and reason != "disabled":
            print(f"swivel: the prewarm's warm-up was skipped: {reason}")
