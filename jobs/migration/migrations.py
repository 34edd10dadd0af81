"""What a migration is while it runs: its moves' outcomes, the per-batch record of which
executor served each bin, and the progress document built from both.

These are plain records, apart from `BinMover` (jobs/migration/executor.py) which fills
them in, because their readers -- the driver's action handler, the Flux policies, the
benchmark harness -- only wait on a `Migration` and read its progress; they never step one.
`Migration.to_dict` is the progress document the driver posts to the agent
(`POST /v1/driver/migration`, docs/control-protocol.md); its `handOver` is the order the
executor actually carried out (per step: giver -> taker, the bins, the first batch planned
to run them on the taker, which landed and which were served elsewhere).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from swivel.api.reconfiguration import MigrationSpec
from swivel.controllers.metatopology import MetaTopology
from swivel.controllers.migration import MigrationPlan, Move

# The product's default for a migration the user did not say how to carry out (a
# Reconfiguration without spec.migration.prewarm, the driver's own policy rounds): the
# Reconfiguration model owns it. BinMover's own API moves plainly unless asked.
PREWARM_DEFAULT = MigrationSpec().prewarm


@dataclass
class MoveOutcome:
    move: Move
    attempts: int = 0
    issued_at_batch: int | None = None  # boundary after which it was (last) re-pointed
    status: str = "pending"  # pending | issued | landed | elsewhere | failed
    served_by: str | None = None
    verified_in_batch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "bin": self.move.bin,
            "from": self.move.source,
            "to": self.move.target,
            "status": self.status,
            "servedBy": self.served_by,
            "attempts": self.attempts,
            "batch": self.verified_in_batch,
        }


@dataclass
class BatchRecord:
    """Which executor served each bin in one batch (from the task list)."""

    batch_id: int
    served: dict[int, str]
    duplicates: tuple[int, ...]  # bins with more than one successful task in the batch
    task_ms: dict[int, float] = field(default_factory=dict)  # bin -> its task's duration


@dataclass
class Migration:
    id: str
    plan: MigrationPlan
    meta_topology: MetaTopology | None = None
    kind: str = "move-bins"
    phase: str = "Pending"  # Pending | Running | Completed | Failed
    step: int = 0  # steps applied so far
    started_at: float | None = None
    finished_at: float | None = None
    first_batch: int | None = None
    last_batch: int | None = None
    outcomes: dict[int, MoveOutcome] = field(default_factory=dict)
    message: str = ""
    done: threading.Event = field(default_factory=threading.Event)
    # The boundary (batch id) after which each step was applied; None: a step an earlier
    # driver carried out (a resumed plan starts after it).
    step_batches: list[int | None] = field(default_factory=list)
    # Prewarm (Megaphone's state ahead of the switch): asked for; the bins switched onto a
    # copy loaded ahead; why the remaining steps moved the plain way ("" while none did)
    prewarm: bool = False
    prewarmed: set[int] = field(default_factory=set)
    prewarm_fallback: str = ""
    prewarm_ms: list[float] = field(default_factory=list)  # per switched step, its loads
    # per switched step, its top-up at the boundary: the slowest target's ms and how each
    # copy was brought to the switch's version (StepPrewarm.topup)
    topups: list[dict[str, Any]] = field(default_factory=list)
    # per step applied by this driver, how long the boundary that applied it took (ms, the
    # hook from its call to its return, inside the switching batch's foreachBatch, so part
    # of that batch's duration): the part of its latency that is the switch itself
    boundary_ms: list[float] = field(default_factory=list)
    # of which waiting for the mover's lock (held by the verifier between batches)
    boundary_lock_ms: list[float] = field(default_factory=list)
    # boundaries a loaded step did not switch at: their batch compacted a file source's
    # log (jobs/migration/source_log.py), so it switched one batch later
    switches_deferred: list[int] = field(default_factory=list)

    @property
    def moved(self) -> int:
        return sum(1 for o in self.outcomes.values() if o.status == "landed")

    @property
    def total(self) -> int:
        return len(self.plan.moves)

    @property
    def landed_elsewhere(self) -> list[MoveOutcome]:
        return [o for o in self.outcomes.values() if o.status in ("elsewhere", "failed")]

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    # -- transitions (BinMover makes them, at a boundary or on its verifier) ------------

    def begin(self, steps_done: int, batch_id: int) -> None:
        """Running from the boundary after `batch_id`; its first `steps_done` steps were
        carried out by an earlier driver (a resumed plan): their moves count as landed."""
        for step in self.plan.steps[:steps_done]:
            for move in step.moves:
                self.outcomes[move.bin].status = "landed"
                self.outcomes[move.bin].served_by = move.target
        self.step, self.step_batches = steps_done, [None] * steps_done
        self.phase = "Running"
        self.started_at = time.monotonic()
        self.first_batch = batch_id + 1

    def complete(self, batch_id: int) -> None:
        """Every move settled by batch `batch_id`; those served elsewhere are named."""
        self.finished_at = time.monotonic()
        self.last_batch = batch_id
        self.phase = "Completed"
        if self.landed_elsewhere:
            bins = [o.move.bin for o in self.landed_elsewhere]
            self.message = f"bins {bins} were served elsewhere than planned (reported)"
        self.done.set()

    def fail(self, reason: str) -> None:
        """Failed before its first step: nothing moved."""
        self.phase, self.message = "Failed", reason
        self.finished_at = time.monotonic()
        self.done.set()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "phase": self.phase,
            "strategy": str(self.plan.strategy),
            "step": self.step,
            "steps": self.plan.step_count,
            "binsMoved": self.moved,
            "binsTotal": self.total,
            "firstBatch": self.first_batch,
            "lastBatch": self.last_batch,
            "durationS": self.duration_s,
            "landedElsewhere": [o.to_dict() for o in self.landed_elsewhere],
            "retries": sum(max(0, o.attempts - 1) for o in self.outcomes.values()),
            "message": self.message,
            "handOver": self.hand_over(),
            "binsPrewarmed": len(self.prewarmed),
            "prewarmFallback": self.prewarm_fallback or None,
            "plan": self.plan.to_dict(),
            "metaTopology": self.meta_topology.to_dict() if self.meta_topology else None,
        }

    def hand_over(self) -> list[dict[str, Any]]:
        """The hand-overs carried out so far, in the order they were made (module doc)."""
        executed: list[dict[str, Any]] = []
        for index, boundary in enumerate(self.step_batches):
            for hand_over in self.plan.steps[index].hand_overs:
                outcomes = [self.outcomes[b] for b in hand_over.bins]
                executed.append({
                    "step": index + 1,
                    "from": hand_over.giver,
                    "to": hand_over.taker,
                    "bins": list(hand_over.bins),
                    "batch": None if boundary is None else boundary + 1,
                    "landed": [o.move.bin for o in outcomes if o.status == "landed"],
                    "elsewhere": [
                        o.move.bin for o in outcomes if o.status in ("elsewhere", "failed")
                    ],
                })  # fmt: skip
        return executed


class MigrationError(RuntimeError):
    pass
