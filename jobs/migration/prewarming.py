"""Prewarmed steps for the BinMover: a step's bins are loaded on their targets *before* the
step's switch, while their old owners keep serving them (Megaphone: state moves ahead of
the routing change), so the batch after the switch does not reload them from the
checkpoint (docs/migration.md, "Prewarmed moves").

`PrewarmedSteps` is the BinMover's part: it decides whether a step may switch at a
boundary, starts the next steps' loads (`PREWARM_AHEAD` of them), and switches a loaded
step. One `StepPrewarm` per step: `start()` runs the loads in a thread, off the batch path
(on each target's loader thread, which holds no task slot: the query keeps them all); a
boundary switches the step only once `ready`, through `switch()` (re-point, top up to the
version the next batch reads, hand the loaded copies over). Whatever cannot be prewarmed
moves the plain way and says why: the helper jar is missing, the session's settings refuse
it (`StatePrewarm.refusal`), or a load failed.
Nothing here decides *what* moves: the plan does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from swivel.controllers.migration import Move
from swivel.jobs.migration.migrations import Migration
from swivel.jobs.migration.source_log import compacted_source_log
from swivel.jobs.spark_helper_jar import jar_on_session
from swivel.jobs.spark_internals import SparkInternals
from swivel.jobs.spark_prewarm_answers import LOAD_GONE, new_load_id
from swivel.protocol.bodies import ANSWERED

Stores = Callable[[], list[tuple[int, str]]]

# a load's answers that end its step's prewarm: the step then moves the plain way
LOAD_FAILED = ("failed", *LOAD_GONE)
# steps whose bins load ahead of their switch (the next one and those after it)
PREWARM_AHEAD = 2
# how long the helper's check at attach waits for the query's first committed batch
CHECK_WAIT_S = 300.0


def prewarm_refusal(internals: SparkInternals, query: Any) -> str | None:
    """Why this query's bins cannot be prewarmed here, or None."""
    prewarm = internals.prewarmer()
    if not prewarm.available():
        return "the prewarm helper jar is not built (python -m swivel.jobs.jvm.build; needs a JDK)"
    return prewarm.refusal(query)


@dataclass
class StepPrewarm:
    """The loads of one step's bins on their targets, and their switch."""

    internals: SparkInternals
    query: Any
    moves: Sequence[Move]
    stores: Stores
    hosts: dict[str, str]
    error: str | None = None
    load_ms: float = 0.0
    # names the step's loads on every target: its release drops them and no later step's
    load_id: str = field(default_factory=new_load_id)
    # how long its loads' answers are waited for (None: the prewarmer's default); a step
    # loaded ahead queues behind the steps before it on each target's loader thread
    answer_timeout_s: float | None = None
    # its switch's top-up: the slowest copy's ms and how the copies were topped up
    # ("replayed N" versions in place, "reopened: why", "current"); how many versions the
    # follower replayed into them while they waited, and why it stopped early, if it did
    topup: dict[str, Any] = field(default_factory=dict)
    _done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> StepPrewarm:
        threading.Thread(target=self._load, daemon=True, name="swivel-prewarm").start()
        return self

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    def _by_target(self) -> dict[str, list[int]]:
        grouped: dict[str, list[int]] = {}
        for move in self.moves:
            grouped.setdefault(move.target, []).append(move.bin)
        return grouped

    def _on_targets(
        self, call: Callable[[str, list[int]], list[dict[str, Any]]]
    ) -> list[list[dict[str, Any]]]:
        """`call(target, bins)` for every target of the step at once, one thread each (each
        target's work runs on its own executor), in target order."""
        targets = sorted(self._by_target().items())
        with ThreadPoolExecutor(
            max_workers=len(targets) or 1, thread_name_prefix="swivel-prewarm-target"
        ) as pool:
            return list(pool.map(lambda item: call(*item), targets))

    def _host(self, executor: str) -> str:
        return self.hosts.get(executor) or self.internals.executor_host(executor)

    def _load(self) -> None:
        """Load the step's bins on all its targets at once (each target's loads run on its
        own loader thread), and wait for every answer."""
        began = time.monotonic()
        try:
            answers = self._on_targets(
                lambda target, bins: self.internals.prewarm(
                    self.query,
                    bins,
                    target,
                    self._host(target),
                    self.stores(),
                    load_id=self.load_id,
                    timeout_s=self.answer_timeout_s,
                )
            )
            for results in answers:
                failed = [r for r in results if r.get("status") in LOAD_FAILED]
                if failed:  # the bins then move the plain way, and the status says why
                    first = failed[0]
                    why = first.get("error") or f"the target answered {first.get('status')}"
                    raise RuntimeError(f"bin {first.get('partition')}: {why}")
        except Exception as error:  # the step then moves the plain way
            self.error = f"prewarm failed: {error}"
        finally:
            self.load_ms = round((time.monotonic() - began) * 1e3, 1)
            self._done.set()

    def switch(self, batch_id: int) -> dict[int, str]:
        """At the boundary after `batch_id`: re-point the step's bins and hand each its loaded
        copy, topped up to version `batch_id + 1` (the one the next batch reads; on RocksDB
        by replaying in place the changelogs of the versions since its load). The
        targets switch at once, in one Spark job with a task per bin on its target: the
        boundary is on the batch path, and one target's top-up need not wait for another's.
        Returns the activation status per bin (`activated`; `no-shadow`: it reloads as
        without)."""
        moves = [(m.bin, m.target, self._host(m.target)) for m in self.moves]
        results = self.internals.switch_prewarmed(
            self.query, moves, self.stores(), version=batch_id + 1
        )
        self.topup = {
            "ms": max((float(r.get("topup_ms", 0.0)) for r in results), default=0.0),
            "how": sorted({str(r["topup"]) for r in results if "topup" in r}),
            # versions the follower replayed into the copies while they waited, and why
            # it had stopped following one before its switch
            "followed": sum(int(r.get("followed", 0)) for r in results),
            # how long the switch waited for a replay of the follower's under way
            "stop_wait_ms": max((float(r.get("stop_wait_ms", 0.0)) for r in results), default=0.0),
            "follow_stopped": sorted(
                {str(r["follow_stopped"]) for r in results if "follow_stopped" in r} - {"switched"}
            ),
            # how the activations reached the targets: `rpc`, or `job` (no endpoint yet)
            "via": sorted({str(r.get("via", "job")) for r in results}),
        }
        statuses: dict[int, str] = {}
        for result in results:
            bin_id = int(result["partition"])
            # several stores per bin: the weakest answer counts
            if statuses.get(bin_id, "activated") == "activated":
                statuses[bin_id] = str(result.get("status"))
        return statuses

    def release(self) -> None:
        """Drop loaded copies that will not be switched (the migration failed or ended)."""
        for target, bins in sorted(self._by_target().items()):
            host = self.hosts.get(target)
            if host is not None:
                self.internals.prewarmer().release(
                    self.query, bins, target, host, stores=self.stores(), load_id=self.load_id
                )


class PrewarmedSteps:
    """The prewarms of the BinMover's migrations, one per (migration, step). The next
    `ahead` steps with moves load while the step before them runs: each target's loader
    thread takes its bins one after another, so with `ahead` > 1 it always has a step's
    bins queued and a step need not wait a batch or two for its own loads after the one
    before it switched (docs/migration.md, "Loading two steps ahead"). A step, and every one
    after it, waits while an earlier step still to switch moves one of its bins (its giver
    is that step's target)."""

    def __init__(
        self,
        internals: SparkInternals,
        stores: Stores,
        timeout_s: float,
        ahead: int = PREWARM_AHEAD,
    ) -> None:
        if ahead < 1:
            raise ValueError(f"prewarm ahead must be at least 1 step, not {ahead}")
        self.internals = internals
        self.stores = stores
        self.timeout_s = timeout_s
        self.ahead = ahead
        # the helper's check after the endpoints registered: executor id -> `answered` or
        # why not (None: not run yet, or no helper jar on the session)
        self.helper_check: dict[str, str] | None = None
        # per (migration, step): its prewarm, and since when it is the next step to switch
        # (its timeout counts from then: a step loaded ahead waits behind the one before)
        self._steps: dict[tuple[str, int], tuple[StepPrewarm, float]] = {}
        # the file source log's compaction interval: Spark reads it when the query's source
        # is created, so it is read once per attach, at the first loaded step's boundary
        self._compact_interval: int | None = None

    def attach(self, query: Any) -> None:
        """A new query run: its compaction setting is read again at its first loaded
        step's boundary, and the executors' helper endpoints are set up for it."""
        self._compact_interval = None
        self.register_endpoints_soon(query)

    def register_endpoints_soon(self, query: Any) -> None:
        """Set up the executors' helper endpoints in the background, ahead of any
        migration, when the session carries the helper jar: a prewarmed migration's first
        steps then start their loads over Spark's RPC, not with a job each (their first
        use of the scheduler's paths compiled on the driver while the batches ran,
        docs/migration.md "Helper calls over Spark's RPC"). One job of a task per
        executor; a failure only means the first steps use jobs. Then, once the query has
        committed a batch, one round trip of the helper's (`StatePrewarm.check`): a helper
        that does not answer is reported at start, not at the first migration."""

        def run() -> None:
            try:
                self.internals.register_prewarm_endpoints()
            except Exception as error:
                print(f"swivel: helper endpoints not set up ahead: {error}")
            try:
                if jar_on_session(self.internals) and _wait_for_a_batch(query, CHECK_WAIT_S):
                    states = self.internals.prewarmer().check(query)
                    self.helper_check = states
                    failed = {e: s for e, s in states.items() if s != ANSWERED}
                    if failed:
                        print(f"swivel: the prewarm helper did not answer: {failed}")
            except Exception as error:  # e.g. a stateless query: nothing to prewarm
                print(f"swivel: the prewarm helper's check at attach failed: {error}")

        threading.Thread(target=run, daemon=True, name="swivel-prewarm-endpoints").start()

    def ready(self, migration: Migration, query: Any, hosts: dict[str, str], batch_id: int) -> bool:
        """Whether the next step may switch at the boundary after batch `batch_id`: always
        without prewarm; with it, once its bins are loaded on their targets (or prewarm gave
        up: plain moves), and not after a batch that compacted a file source's log (the
        switch would add to it: one batch later, `source_log.py`)."""
        if not migration.prewarm or migration.prewarm_fallback:
            return True
        if not migration.plan.steps[migration.step].moves:
            return True
        key = (migration.id, migration.step)
        if key not in self._steps:
            self.start(migration, query, hosts)
            return key not in self._steps  # refused: plain moves now
        prewarm, since = self._steps[key]
        if prewarm.ready:
            if self._after_compaction(query, batch_id):
                migration.switches_deferred.append(batch_id)
                return False
            return True
        if time.monotonic() - since > self.timeout_s:
            self._give_up(
                migration, f"step {migration.step + 1}'s prewarm took over {self.timeout_s:.0f} s"
            )
            return True
        return False

    def _after_compaction(self, query: Any, batch_id: int) -> bool:
        """Whether batch `batch_id` compacted a file source's log; False when the progress
        or the setting cannot be read (the boundary runs inside the user's batch: a failure
        here must not fail it, the switch then only does not wait)."""
        try:
            if self._compact_interval is None:
                self._compact_interval = self.internals.source_log_compact_interval()
            return compacted_source_log(query.lastProgress, batch_id, self._compact_interval)
        except Exception:
            return False

    def start(self, migration: Migration, query: Any, hosts: dict[str, str]) -> None:
        """Start loading the migration's next `ahead` steps with moves, those not loading
        yet (nothing without prewarm or once prewarm gave up; refused: none of its steps
        switches prewarmed, and those loading already are released)."""
        if not migration.prewarm or migration.prewarm_fallback:
            return
        indices = [
            i for i in self._steps_to_load(migration) if (migration.id, i) not in self._steps
        ]
        if not indices:
            return
        reason = prewarm_refusal(self.internals, query)
        if reason is not None:
            self._give_up(migration, reason)
            return
        for index in indices:
            moves = migration.plan.steps[index].moves
            prewarm = StepPrewarm(
                self.internals,
                query,
                moves,
                self.stores,
                dict(hosts),
                # the outer bound is `timeout_s` from when the step is next (`ready`); each
                # step before it on a loader thread took at most that, or prewarm gave up
                answer_timeout_s=self.timeout_s * (self.ahead + 1),
            )
            self._steps[(migration.id, index)] = (prewarm.start(), time.monotonic())

    def _steps_to_load(self, migration: Migration) -> list[int]:
        """The next `ahead` steps with moves from the migration's next step on, up to the
        first that moves a bin an earlier one of them also moves (gap steps are skipped)."""
        chosen: list[int] = []
        moving: set[int] = set()
        for index in range(migration.step, migration.plan.step_count):
            bins = {move.bin for move in migration.plan.steps[index].moves}
            if not bins:
                continue
            if bins & moving or len(chosen) == self.ahead:
                break
            chosen.append(index)
            moving |= bins
        return chosen

    def switch(self, migration: Migration, batch_id: int) -> set[int]:
        """Switch the next step's loaded bins (re-pointed, topped up, handed their copies):
        the bins returned are re-pointed; the caller re-points the others plainly."""
        self._restart_clock(migration)  # a gap step too: the step after it is next from now
        pending = self._steps.pop((migration.id, migration.step), None)
        if pending is None:
            return set()
        prewarm = pending[0]
        if migration.prewarm_fallback or prewarm.error is not None:
            # gave up meanwhile, or its loads failed: what did load must not stay loaded
            self._give_up(migration, prewarm.error or migration.prewarm_fallback)
            release_when_loaded(prewarm)
            return set()
        try:
            statuses = prewarm.switch(batch_id)
        except Exception as error:  # re-pointed or not, the caller re-points them plainly
            self._give_up(migration, f"step {migration.step + 1}'s switch failed: {error}")
            return set()
        migration.prewarmed.update(b for b, status in statuses.items() if status == "activated")
        migration.prewarm_ms.append(prewarm.load_ms)
        migration.topups.append(prewarm.topup)
        return set(statuses)

    def _restart_clock(self, migration: Migration) -> None:
        """The step after the one switching is now the next: its timeout counts from now."""
        for key, (prewarm, _) in self._steps.items():
            if key[0] == migration.id and key[1] > migration.step:
                self._steps[key] = (prewarm, time.monotonic())
                return

    def _give_up(self, migration: Migration, reason: str) -> None:
        """Prewarm ends for the migration: its steps left move the plain way, and the steps
        loading ahead release their copies. The first reason given is the one kept."""
        migration.prewarm_fallback = migration.prewarm_fallback or reason
        self.drop(migration)

    def drop(self, migration: Migration) -> None:
        """The migration ended or gave up prewarm: release the copies of steps that will
        not switch."""
        for key in [k for k in self._steps if k[0] == migration.id]:
            release_when_loaded(self._steps.pop(key)[0])

    def drop_all(self) -> None:
        """The query restarted: every step's copies were loaded for its old run (each step
        releases them under the run it loaded for)."""
        for key in list(self._steps):
            release_when_loaded(self._steps.pop(key)[0])


def _wait_for_a_batch(query: Any, timeout_s: float) -> bool:
    """Whether `query` committed a batch with state within `timeout_s` (False: it stopped
    first). A progress of a trigger that ran no batch has no state operators' rows."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        progress = query.lastProgress or {}
        if any(op.get("numRowsTotal") for op in progress.get("stateOperators") or []):
            return True
        if not query.isActive:
            return False
        time.sleep(1.0)
    return False


def release_when_loaded(prewarm: StepPrewarm) -> None:
    """Drop a step's loaded copies once its loads end (a thread: they may still run)."""

    def run() -> None:
        while not prewarm.ready:
            time.sleep(0.2)
        try:
            prewarm.release()
        except Exception as error:
            print(f"swivel: releasing prewarmed bins failed: {error}")

    threading.Thread(target=run, daemon=True, name="swivel-prewarm-release").start()
