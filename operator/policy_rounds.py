"""Flux's rounds for the operator's policy timer, kept in the StreamJob's status.

The round logic is `swivel.controllers.flux_phases.RoundSchedule` (the same as
`swivel run --policy`); this module only carries it across ticks and restarts. kopf timers
tick at a fixed interval, so a Flux policy's timer skips every tick before its damped
deadline; the deadline and the collection phase live in `status.policyRounds.<policy>`,
written through the one status writer (`jobstatuses.write_job_status`, under the job's
lock), so a restarted operator waits for the same deadline.

A move phase is a policy's automatic Reconfiguration: it starts when the timer creates it
and ends at the first tick that sees it Completed or Failed (or gone), so its length is
timed on the operator's clock to within one tick (`intervals.policies`). Times are epoch
seconds in the schedule and RFC 3339 in the status.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from swivel.api.streamjob import PolicyRound, StreamJob
from swivel.controllers.flux import RoundSchedule
from swivel.operator.contexts import OperatorContext
from swivel.operator.joblabels import reconfigurations_of
from swivel.operator.jobstatuses import freshest, job_lock, write_job_status
from swivel.operator.naming import Owner
from swivel.operator.policy_decisions import flux_policy

FLUX_POLICIES = ("memory", "rebalance")  # memory first: relieving a limit comes before balance


def epoch(moment: datetime) -> float:
    return moment.timestamp()


def _moment(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def schedule_of(kept: PolicyRound) -> RoundSchedule:
    return RoundSchedule(
        collection_s=kept.collection_seconds,
        collecting_since=epoch(kept.collecting_since),
        round_at=None if kept.next_round_at is None else epoch(kept.next_round_at),
        moving_since=None
        if kept.move_phase_started_at is None
        else epoch(kept.move_phase_started_at),
        last_move_phase_s=kept.last_move_phase_seconds,
    )


def kept_of(schedule: RoundSchedule, reconfiguration: str | None = None) -> PolicyRound:
    return PolicyRound(
        collection_seconds=schedule.collection_s,
        collecting_since=datetime.fromtimestamp(schedule.collecting_since, UTC),
        next_round_at=_moment(schedule.round_at),
        move_phase_started_at=_moment(schedule.moving_since),
        last_move_phase_seconds=schedule.last_move_phase_s,
        reconfiguration=reconfiguration if schedule.moving else None,
    )


def kept_rounds(ctx: OperatorContext, body: Mapping[str, Any]) -> dict[str, PolicyRound]:
    """The rounds as the freshest status the operator knows has them, each read on its own
    (one that does not validate counts as absent: the policy starts its rounds afresh)."""
    raw = (freshest(ctx, body).get("status") or {}).get("policyRounds") or {}
    rounds: dict[str, PolicyRound] = {}
    for name, kept in raw.items() if isinstance(raw, Mapping) else ():
        try:
            rounds[str(name)] = PolicyRound.model_validate(kept)
        except ValidationError:
            continue
    return rounds


async def keep(
    ctx: OperatorContext,
    body: Mapping[str, Any],
    name: str,
    schedule: RoundSchedule,
    reconfiguration: str | None = None,
) -> None:
    """Write one policy's round into the job's status (fields it no longer has are
    removed: a merge patch with nulls)."""
    wire = kept_of(schedule, reconfiguration).model_dump(mode="json", by_alias=True)
    async with job_lock(ctx, body):
        await write_job_status(ctx, body, {"policyRounds": {name: wire}})


async def advanced(
    ctx: OperatorContext,
    body: Mapping[str, Any],
    job: StreamJob,
    owner: Owner,
    name: str,
    *,
    now: datetime,
) -> tuple[RoundSchedule, bool]:
    """The policy's schedule at `now`, and whether a move phase ended just now: started
    if the status has none, its move phase ended if its Reconfiguration has finished.
    Any change is written to the status before it is returned."""
    policy = flux_policy(job, name)
    kept = kept_rounds(ctx, body).get(name)
    if kept is None:
        schedule = RoundSchedule.start(policy, epoch(now))
        await keep(ctx, body, name, schedule)
        return schedule, False
    schedule = schedule_of(kept)
    if not schedule.moving:
        return schedule, False
    if kept.reconfiguration and not await _finished(ctx, owner, kept.reconfiguration):
        return schedule, False
    schedule = schedule.move_ended(epoch(now), policy)
    await keep(ctx, body, name, schedule)
    return schedule, True


async def _finished(ctx: OperatorContext, owner: Owner, name: str) -> bool:
    """Completed, Failed or gone: no longer among the job's unfinished Reconfigurations."""
    unfinished = await reconfigurations_of(ctx, owner.namespace, owner.name)
    return all(item["metadata"]["name"] != name for item in unfinished)


def received_at(now: datetime, age_seconds: float) -> float:
    """When the agent received loads `age_seconds` old, on the operator's clock (the
    driver's and the agent's clocks never enter the comparison)."""
    return epoch(now) - age_seconds


__all__ = [
    "FLUX_POLICIES",
    "advanced",
    "epoch",
    "keep",
    "kept_of",
    "kept_rounds",
    "received_at",
    "schedule_of",
]
