"""A plan's timings, and when its new version is *in effect*, as the agent decides it.

All delays count from the request (the submitter's `requestedAt`, else acceptance):

- **delay** (`delayMs`) = the request -> the new version is *in effect*: every target
  operator has processed records under its new version, and no target will process another
  record under its old one (docs/benchmarks.md). The agent decides the second part from
  what it observes:
  * a target that switches by its own check (a naive target, a Fries head or lone target,
    every epoch or restart target) processes no old record after its switch: its
    last switch;
  * a Fries tag-follower runs old-tagged rows, which its heads wrote before they switched,
    under the old function until those rows are gone. They exist only in micro-batches
    that had started when the last head switched, so the moment is the end of the latest
    such batch (`oldRowsBatch`: the batch the driver last reported started, or the batch a
    head's processed ack names, whichever is later; its `completed` report ends it). If
    that batch had already completed, nothing old is left. An agent no driver reports
    batches to (tests, a driver without the channel) cannot know: it takes the last switch;
  * epoch and restart: the old version ran only in batches (or a query) that ended before
    the first new record, so their delay is the first new record at the last target.
- **armed** (`armedMs`) = the request -> the last switch of a live worker hosting a target
  or a Fries head (it *holds* the new version: from then on every record that enters the
  job runs under the new versions). Reported beside the delay, never instead of it.
- **propagation** (`propagationMs`) = the request -> the new version had processed records
  at every target operator (for a non-head behind a shuffle, when the upstream stage ended).

Pure and standard library only: `swivel.jobs.agent.plans` keeps the record, this the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

BOUNDARY_SCHEDULERS = frozenset({"epoch", "restart"})  # switch between batches / queries


@dataclass(frozen=True)
class Timings:
    """Epoch seconds; the JSON form is RFC 3339 (what the Reconfiguration status holds)."""

    requested_at: float | None = None
    accepted_at: float | None = None
    first_switch_at: float | None = None
    last_switch_at: float | None = None
    completed_at: float | None = None
    propagated_at: float | None = None
    in_effect_at: float | None = None  # set when the plan completes (see the module doc)
    old_rows_ended_at: float | None = None  # the end of `PlanRecord.old_rows_batch`

    @property
    def start(self) -> float | None:
        """The request (the submitter's `requestedAt`, else acceptance): delays count from it."""
        return self.requested_at if self.requested_at is not None else self.accepted_at

    def to_json(self) -> dict[str, str | None]:
        return {
            "requestedAt": _iso(self.requested_at),
            "acceptedAt": _iso(self.accepted_at),
            "firstSwitchAt": _iso(self.first_switch_at),
            "lastSwitchAt": _iso(self.last_switch_at),
            "propagatedAt": _iso(self.propagated_at),
            "inEffectAt": _iso(self.in_effect_at),
            "completedAt": _iso(self.completed_at),
        }


def _iso(at: float | None) -> str | None:
    if at is None:
        return None
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def old_rows_batch_after(
    current: int | None,
    processed_batch: int | None,
    running_batch: int | None,
    completed_batch: int | None,
) -> int | None:
    """The latest batch that may hold old-tagged rows once a head switched: the batch its
    processed ack names or the one the driver last reported started, unless that batch has
    completed already; None when no driver reports batches (nothing to wait for)."""
    if running_batch is None and completed_batch is None:
        return current
    candidates = [b for b in (running_batch, processed_batch) if b is not None]
    if not candidates:
        return current
    latest = max(candidates)
    if completed_batch is not None and latest <= completed_batch:
        return current  # that batch already ended: its old-tagged rows are gone
    return latest if current is None else max(current, latest)


def in_effect(t: Timings, *, boundary: bool, has_targets: bool) -> float | None:
    """The in-effect moment of a plan whose switches are all in `t` (module doc): for a
    boundary scheduler the first new records at the last target; else the latest of the
    last switch, those records and the end of the batch with old-tagged rows. None if a
    target never ran a new record."""
    if has_targets and t.propagated_at is None:
        return None
    if boundary and t.propagated_at is not None:
        # The old version ran only before the batch boundary (or in the old query): a
        # worker whose first task of the new version comes later runs nothing old meanwhile.
        return t.propagated_at
    present = [p for p in (t.last_switch_at, t.propagated_at, t.old_rows_ended_at) if p is not None]
    return max(present) if present else None
