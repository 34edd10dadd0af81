"""Policies that propose bin moves for a running query (embedded mode runs them in a
thread; the operator runs the same rounds as timers).

- `rebalance`: one Flux load-balancing round (`controllers.flux.balance_round`) over the
  busy time per executor and records per bin of the collection phase: every batch since
  the last move phase ended.
- `memory`: Flux's memory-constrained round (`controllers.flux.memory_round`), state bytes
  per executor against `memory_limit_bytes`.
- `aimd`: Drizzle's AIMD (`controllers.aimd`) on the coordination interval: how many
  seconds pass between two policy rounds, grown when the time spent migrating is a large
  fraction of the batch time and shrunk when it is small.

`run_round` is one round (measure -> decide -> migrate and time the move phase);
`PolicyLoop` repeats it on Flux's `RoundSchedule` (`controllers.flux_phases`: the next
collection phase as long as the last move phase, halved after a round that moved nothing,
never below the minimum), the same schedule the operator's policy timer keeps in the
StreamJob's status; `aimd` paces rounds by the AIMD interval instead. `swivel run --policy
NAME` starts a `PolicyLoop` next to the job runtime (`start_policy_loop`).

Beside a `MigrationDriver` (which measures loads for the agent every coordination interval)
the loop does not measure on its own: its `loads` is the driver's `shared_snapshot`, so one
measurement serves the loop and the agent's `/v1/loads` (the operator's policies). A round
takes the driver's latest measurement if it was taken within the collection phase's
length, else has the driver measure (and post) now; either way it covers the driver's
collection phase, which restarts when a migration ends. Without a driver the loop
measures itself, from the first batch after its last move phase.

With `worker_figures` (the workers' own counts as the agent sums them, Chi §5: rows and busy
time per bin over a window of seconds; `swivel run --policy` reads them from the embedded
agent's `GET /v1/loads`) a round decides on those when they are fresh, and on the driver's
measurement otherwise (`controllers.worker_loads`), as the operator's timers do.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from swivel.controllers import aimd
from swivel.controllers import worker_loads as chi
from swivel.controllers.flux import (
    LoadBalancePolicy,
    MemoryPolicy,
    RoundDecision,
    RoundSchedule,
    balance_round,
    memory_round,
)
from swivel.jobs.migration.executor import BinMover
from swivel.jobs.migration.metrics import LoadSnapshot, collect_loads, measure
from swivel.jobs.migration.migrations import PREWARM_DEFAULT, Migration
from swivel.protocol.loads import ServedLoads

POLICIES = ("rebalance", "memory", "aimd")


@dataclass
class RoundResult:
    policy: str
    snapshot: LoadSnapshot
    decision: RoundDecision
    migration: Migration | None
    move_phase_s: float
    load_source: str = chi.DRIVER  # whose records and busy time the round decided on

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "moves": [m._asdict() for m in self.decision.moves],
            "pairs": [
                {
                    "donor": p.donor,
                    "receiver": p.receiver,
                    "outcome": str(p.outcome),
                    "bin": p.moved_bin,
                }
                for p in self.decision.pairs
            ],
            "utilisation": {
                e.executor: e.busy_s / (e.window_s or 1) for e in self.snapshot.executors.values()
            },
            "migration": self.migration.to_dict() if self.migration else None,
            "movePhaseS": self.move_phase_s,
            "loadSource": self.load_source,
        }


def run_round(
    mover: BinMover,
    policy: str = "rebalance",
    *,
    last_batches: int = 5,
    since_batch: int | None = None,
    checkpoint: str | None = None,
    memory_limit_bytes: int | None = None,
    strategy: str = "batched",
    batch_size: int = 1,
    balance: LoadBalancePolicy | None = None,
    memory: MemoryPolicy | None = None,
    wait_s: float = 300.0,
    snapshot: LoadSnapshot | None = None,
    figures: chi.WorkerFigures | None = None,
) -> RoundResult:
    """Measure the batches from `since_batch` on (the collection phase; without it the last
    `last_batches`), or take `snapshot`, measured elsewhere; decide one round; carry out
    its moves, timing the move phase."""
    if snapshot is None:
        query = mover.query
        if query is None or mover.last_boundary is None:
            raise RuntimeError("no batch has completed yet")
        newest = mover.last_boundary
        first = max(0, newest - last_batches + 1) if since_batch is None else since_batch
        batch_ids = range(first, newest + 1)
        snapshot = measure(mover.internals, query, mover.bins, batch_ids, checkpoint=checkpoint)
    executors, bins, assignment = collect_loads(snapshot, memory_limit_bytes)
    source = chi.DRIVER
    if figures is not None and chi.unusable(figures) is None:
        cores = {e.executor: e.cores for e in snapshot.executors.values()}
        executors, bins = chi.with_worker_figures(executors, bins, figures, cores)
        source = chi.WORKERS
    if policy == "memory":
        decision = memory_round(executors, bins, assignment, memory)
    else:
        decision = balance_round(executors, bins, assignment, balance)
    migration = None
    started = time.monotonic()
    if decision.moves:
        migration = mover.migrate(
            decision.target_assignment, strategy, batch_size=batch_size, prewarm=PREWARM_DEFAULT
        )
        migration.kind = f"policy-{policy}"
        mover.wait(migration, wait_s)
    took = time.monotonic() - started
    return RoundResult(policy, snapshot, decision, migration, took, source)


def worker_figures_of(document: Any) -> chi.WorkerFigures | None:
    """The workers' counts in a `GET /v1/loads` answer (None: none, or no answer)."""
    if document is None:
        return None
    workers = ServedLoads.model_validate(document).workers
    if workers is None:
        return None
    triples = ((b.bin, b.rows, b.busy_seconds) for b in workers.bins)
    return chi.figures_of(triples, workers.window_seconds, workers.age_seconds)


# The loads a round decides on, given the longest age (seconds) a measurement may have: None
# when there is nothing to measure yet (no batch, bins in motion). `MigrationDriver.shared_snapshot`.
Loads = Callable[[float], LoadSnapshot | None]


@dataclass
class PolicyLoop:
    """Runs rounds in a daemon thread until `stop()`; `on_round` receives each result.

    Rounds follow `schedule` (Flux's collection phase and damping, on `clock`). With
    `loads` (the MigrationDriver's `shared_snapshot`) a round decides on a measurement at
    most one collection phase old instead of measuring itself."""

    mover: BinMover
    policy: str = "rebalance"
    checkpoint: str | None = None
    memory_limit_bytes: int | None = None
    on_round: Callable[[RoundResult], None] | None = None
    balance: LoadBalancePolicy = field(default_factory=LoadBalancePolicy)
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    aimd_config: aimd.AimdConfig | None = None
    loads: Loads | None = None
    worker_figures: Callable[[], chi.WorkerFigures | None] | None = None
    clock: Callable[[], float] = time.monotonic
    schedule: RoundSchedule | None = None
    rounds: list[RoundResult] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _aimd: aimd.AimdState | None = None
    _since_batch: int | None = None  # measuring itself: the collection phase's first batch

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        self._aimd = aimd.AimdState.start(self.aimd_config) if self.aimd_config else None

    @property
    def collection(self) -> LoadBalancePolicy | MemoryPolicy:
        """The policy whose collection-phase lengths (Δmin, first Δ) the rounds follow."""
        return self.memory if self.policy == "memory" else self.balance

    def start(self) -> PolicyLoop:
        self._thread = threading.Thread(target=self._run, daemon=True, name="swivel-policy")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.wait_s()):
            self.round()

    def _schedule(self) -> RoundSchedule:
        if self.schedule is None:
            self.schedule = RoundSchedule.start(self.collection, self.clock())
        return self.schedule

    def wait_s(self) -> float:
        """Seconds until the next round is due (the damped deadline)."""
        return self._schedule().remaining_s(self.clock()) or 0.0

    def round(self) -> float:
        """One round now; the seconds until the next one."""
        schedule = self._schedule()
        started = self.clock()
        try:
            snapshot = None
            if self.loads is not None:
                snapshot = self.loads(schedule.collection_s)
                if snapshot is None:  # no batch yet, or bins in motion: collect on
                    return self._later(schedule, started, schedule.collection_s)
            result = run_round(
                self.mover,
                "memory" if self.policy == "memory" else "rebalance",
                since_batch=self._since_batch,
                checkpoint=self.checkpoint,
                memory_limit_bytes=self.memory_limit_bytes,
                balance=self.balance,
                memory=self.memory,
                snapshot=snapshot,
                figures=self._figures(),
            )
        except Exception as error:  # a failed round is retried one collection phase later
            print(f"swivel: policy round failed: {error}")
            return self._later(schedule, started, schedule.collection_s)
        self.rounds.append(result)
        if self.on_round is not None:
            self.on_round(result)
        ended = self.clock()
        moved = result.decision.moved
        self.schedule = schedule.after_round(
            moved, ended - result.move_phase_s, ended, self.collection
        )
        if moved and self.mover.last_boundary is not None:
            self._since_batch = self.mover.last_boundary + 1
        state = self._aimd
        if self.policy == "aimd" and state is not None and self.aimd_config is not None:
            processing = result.snapshot.window_s
            measured = aimd.overhead(result.move_phase_s, processing)
            self._aimd = aimd.step(state, measured, self.aimd_config)
            return self._later(self.schedule, ended, float(self._aimd.interval_s))
        return self.schedule.remaining_s(ended) or 0.0

    def _figures(self) -> chi.WorkerFigures | None:
        """The workers' counts, None when there are none or they cannot be read (the round
        then decides on the driver's measurement)."""
        if self.worker_figures is None:
            return None
        try:
            return self.worker_figures()
        except Exception as error:  # an unreachable agent must not cost the round
            print(f"swivel: policy round without the workers' counts: {error}")
            return None

    def _later(self, schedule: RoundSchedule, now: float, seconds: float) -> float:
        self.schedule = replace(schedule, round_at=now + seconds)
        return seconds


def start_policy_loop(
    mover: BinMover,
    policy: str,
    *,
    checkpoint: str | None = None,
    memory_limit_bytes: int | None = None,
    on_round: Callable[[RoundResult], None] | None = None,
    loads: Loads | None = None,
    worker_figures: Callable[[], chi.WorkerFigures | None] | None = None,
) -> PolicyLoop:
    """The embedded-mode entry point (`swivel run --policy NAME`); `loads`: the
    MigrationDriver's `shared_snapshot` (one measurement for the loop and the agent);
    `worker_figures`: the workers' counts from the agent, used when fresh."""
    # Policy rounds are seconds apart, not batches: bound the interval to 10 s .. 10 min.
    bounded = aimd.AimdConfig(min_interval_s=10.0, max_interval_s=600.0, decrease_step=5.0)
    config = bounded if policy == "aimd" else None
    loop = PolicyLoop(
        mover,
        policy,
        checkpoint=checkpoint,
        memory_limit_bytes=memory_limit_bytes,
        on_round=on_round,
        aimd_config=config,
        loads=loads,
        worker_figures=worker_figures,
    )
    return loop.start()
