"""Policies that propose bin moves for a running query (embedded mode runs them in a
thread; the operator runs the same rounds as timers).

- `rebalance`: one Flux load-balancing round (`controllers.flux.balance_round`) over the
  busy time per executor and records per bin of the last batches.
- `memory`: Flux's memory-constrained round (`controllers.flux.memory_round`), state bytes
  per executor against `memory_limit_bytes`.
- `aimd`: Drizzle's AIMD (`controllers.aimd`) on the coordination interval: how many
  seconds pass between two policy rounds, grown when the time spent migrating is a large
  fraction of the batch time and shrunk when it is small.

`run_round` is one round (measure -> decide -> migrate); `PolicyLoop` repeats it with Flux's
damping (`next_collection_s`) or the AIMD interval. `swivel run --policy NAME` starts a
`PolicyLoop` next to the job runtime (`start_policy_loop`).

Beside a `MigrationDriver` (which measures loads for the agent every coordination interval)
the loop does not measure on its own: its `loads` is the driver's `shared_snapshot`, so one
measurement serves the loop and the agent's `/v1/loads` (the operator's policies). A round
takes the driver's latest measurement if it was taken since the previous round, else has
the driver measure (and post) now.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from swivel.controllers import aimd
from swivel.controllers.flux import (
    LoadBalancePolicy,
    MemoryPolicy,
    RoundDecision,
    balance_round,
    memory_round,
    next_collection_s,
)
from swivel.jobs.migration.executor import BinMover
from swivel.jobs.migration.metrics import LoadSnapshot, collect_loads, measure
from swivel.jobs.migration.migrations import Migration

POLICIES = ("rebalance", "memory", "aimd")


@dataclass
class RoundResult:
    policy: str
    snapshot: LoadSnapshot
    decision: RoundDecision
    migration: Migration | None
    move_phase_s: float

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
        }


def run_round(
    mover: BinMover,
    policy: str = "rebalance",
    *,
    last_batches: int = 5,
    checkpoint: str | None = None,
    memory_limit_bytes: int | None = None,
    strategy: str = "batched",
    batch_size: int = 1,
    balance: LoadBalancePolicy | None = None,
    memory: MemoryPolicy | None = None,
    wait_s: float = 300.0,
    snapshot: LoadSnapshot | None = None,
) -> RoundResult:
    """Measure the last `last_batches` batches (or take `snapshot`, measured elsewhere),
    decide one round, carry out its moves."""
    if snapshot is None:
        query = mover.query
        if query is None or mover.last_boundary is None:
            raise RuntimeError("no batch has completed yet")
        newest = mover.last_boundary
        batch_ids = range(max(0, newest - last_batches + 1), newest + 1)
        snapshot = measure(mover.internals, query, mover.bins, batch_ids, checkpoint=checkpoint)
    executors, bins, assignment = collect_loads(snapshot, memory_limit_bytes)
    if policy == "memory":
        decision = memory_round(executors, bins, assignment, memory)
    else:
        decision = balance_round(executors, bins, assignment, balance)
    migration = None
    started = time.monotonic()
    if decision.moves:
        migration = mover.migrate(decision.target_assignment, strategy, batch_size=batch_size)
        migration.kind = f"policy-{policy}"
        mover.wait(migration, wait_s)
    return RoundResult(policy, snapshot, decision, migration, time.monotonic() - started)


# The loads a round decides on, given the longest age (seconds) a measurement may have: None
# when there is nothing to measure yet (no batch, bins in motion). `MigrationDriver.shared_snapshot`.
Loads = Callable[[float], LoadSnapshot | None]


@dataclass
class PolicyLoop:
    """Runs rounds in a daemon thread until `stop()`; `on_round` receives each result.

    With `loads` (the MigrationDriver's `shared_snapshot`) a round decides on a measurement
    at most one interval old instead of measuring itself."""

    mover: BinMover
    policy: str = "rebalance"
    checkpoint: str | None = None
    memory_limit_bytes: int | None = None
    on_round: Callable[[RoundResult], None] | None = None
    balance: LoadBalancePolicy = field(default_factory=LoadBalancePolicy)
    aimd_config: aimd.AimdConfig | None = None
    loads: Loads | None = None
    rounds: list[RoundResult] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _aimd: aimd.AimdState | None = None

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        self._aimd = aimd.AimdState.start(self.aimd_config) if self.aimd_config else None

    def start(self) -> PolicyLoop:
        self._thread = threading.Thread(target=self._run, daemon=True, name="swivel-policy")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        interval = self.balance.initial_collection_s
        while not self._stop.wait(interval):
            interval = self.round(interval)

    def round(self, interval: float) -> float:
        """One round after `interval` seconds; the seconds until the next one."""
        try:
            snapshot = None
            if self.loads is not None:
                snapshot = self.loads(interval)
                if snapshot is None:  # no batch yet, or bins in motion: try again later
                    return interval
            result = run_round(
                self.mover,
                "memory" if self.policy == "memory" else "rebalance",
                checkpoint=self.checkpoint,
                memory_limit_bytes=self.memory_limit_bytes,
                balance=self.balance,
                snapshot=snapshot,
            )
        except Exception as error:  # a failed round is retried next interval
            print(f"swivel: policy round failed: {error}")
            return interval
        self.rounds.append(result)
        if self.on_round is not None:
            self.on_round(result)
        state = self._aimd
        if self.policy == "aimd" and state is not None and self.aimd_config is not None:
            processing = result.snapshot.window_s
            measured = aimd.overhead(result.move_phase_s, processing)
            self._aimd = aimd.step(state, measured, self.aimd_config)
            return float(self._aimd.interval_s)
        return next_collection_s(result.move_phase_s, result.decision.moved, interval, self.balance)


def start_policy_loop(
    mover: BinMover,
    policy: str,
    *,
    checkpoint: str | None = None,
    memory_limit_bytes: int | None = None,
    on_round: Callable[[RoundResult], None] | None = None,
    loads: Loads | None = None,
) -> PolicyLoop:
    """The embedded-mode entry point (`swivel run --policy NAME`); `loads`: the
    MigrationDriver's `shared_snapshot` (one measurement for the loop and the agent)."""
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
    )
    return loop.start()
