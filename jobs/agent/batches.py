"""The micro-batches the driver reported, as the plan ledger and the config channel need them.

Kept in memory only (a restarted agent learns them from the driver's next report; the
durable `batch_versions` in the state covers what must survive). One small object because
three parts ask the same questions: the ledger (which batch may hold old-tagged rows, where
an epoch transition starts), the acks' plausibility check (the latest batch) and the driver
channel (which it updates).
"""

from __future__ import annotations

from dataclasses import dataclass

from swivel.jobs.agent.store import DurableState


@dataclass
class Batches:
    last_started: int | None = None
    last_completed: int | None = None
    # After a plan finished: its transition is retired once this batch ended (None: any).
    retire_after: int | None = None

    def started(self, batch: int) -> None:
        self.last_started = max(batch, self.last_started or batch)

    def completed(self, batch: int) -> None:
        self.last_completed = max(batch, self.last_completed or batch)

    @property
    def driver_seen(self) -> bool:
        """Whether a driver reported any batch to this agent (no driver: nothing to wait for)."""
        return self.last_started is not None or self.last_completed is not None

    def latest(self, state: DurableState) -> int | None:
        """The last batch id the driver reported (kept across agent restarts), None before."""
        seen = [b for b in (self.last_started, self.last_completed) if b is not None]
        seen += [max(state.batch_versions)] if state.batch_versions else []
        return max(seen) if seen else None

    def first_untouched(self) -> int:
        """The first batch id surely not yet running (epoch's applyFromBatch).

        After a `started` report the next batch has not begun; after only a `completed`
        report the following batch may already be running, so the one after it.
        """
        candidates = [0]
        if self.last_started is not None:
            candidates.append(self.last_started + 1)
        if self.last_completed is not None:
            candidates.append(self.last_completed + 2)
        return max(candidates)
