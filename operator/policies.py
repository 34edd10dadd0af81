"""Policies from `spec.policies` as a kopf timer: every automatic change is an object.

One timer per StreamJob ticks every few seconds. The Flux policies (rebalance, memory)
proceed in Flux's rounds (§5.3; `swivel.controllers.flux_phases`): a collection phase,
then a round that moves bins only when the imbalance passes the policy's threshold, then
the move phase -- the Reconfiguration the round created -- timed until it finishes. The
next collection phase is damped (as long as the move phase took, halved after a round
that moved nothing, never below `intervalSeconds`); kopf timer intervals are fixed at
registration, so the timer skips every tick before a policy's deadline, which is kept in
the job's status (`status.policyRounds`, operator/policy_rounds.py) and survives a
restart. AIMD acts once per new measurement; the driver's coordination interval paces it.

A policy reads the driver's latest load measurement from the agent (`GET /v1/loads`
through `AgentLink.loads`): the statistics since the last move phase ended (the driver
restarts its collection when bins have moved; loads the agent received before the move
phase ended are not used). It calls the pure decision in `swivel.controllers` (Flux
`balance_round` / `memory_round`, Drizzle `aimd.step`) and, when it decides to change
something, creates a Reconfiguration labelled `swivel.dev/automatic=true` and
`swivel.dev/policy=<name>`, owned by the job, with the measured inputs in the annotation
`swivel.dev/policy-inputs`: bin `moves` for rebalance and memory,
`coordination.intervalSeconds` for AIMD (only when the interval changes by more than
`AIMD_CHANGE_THRESHOLD`, and once per measurement). Nothing is created while another
reconfiguration of the job is unfinished, so a policy never piles up work behind itself.

A policy that cannot act says why, once per cause, as an Event on the job: `PolicyNoLoads`
(the driver has not measured since it started or bins last moved), `PolicyStaleLoads`,
`PolicyAgentUnreachable`, `PolicyWaiting` (another reconfiguration in flight),
`PolicyCollecting` (the loads predate the last move phase's end), `PolicyDamped` (a move
phase ended: how long the next collection phase is), and `PolicyNoMove` / `AimdHold` when
it looked and decided to leave things as they are.

This module is the timer's acting half (fetch loads, report, create); what a policy decides
and the object it creates are pure functions in operator/policy_decisions.py.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from datetime import datetime
from typing import Any

import kopf

from swivel.api.base import API_GROUP, API_VERSION
from swivel.api.errors import SpecError
from swivel.api.phases import FINAL_PHASES
from swivel.api.reconfiguration import CoordinationSpec
from swivel.api.streamjob import StreamJob
from swivel.controllers import aimd
from swivel.controllers.flux import RoundSchedule
from swivel.operator import events, metrics
from swivel.operator.agents import AgentRejected, AgentUnreachable, Loads
from swivel.operator.clusters import ApiFailure
from swivel.operator.contexts import OperatorContext
from swivel.operator.joblabels import reconfigurations_of
from swivel.operator.naming import Owner
from swivel.operator.policy_decisions import (
    AIMD_CHANGE_THRESHOLD,
    automatic_reconfiguration,
    decide_memory,
    decide_rebalance,
    flux_policy,
    interval_change_due,
    measured_inputs,
    moves_of,
    next_aimd,
    round_inputs,
    stale_after_s,
)
from swivel.operator.policy_rounds import (
    FLUX_POLICIES,
    advanced,
    epoch,
    keep,
    kept_of,
    received_at,
)


class _Status:
    """Events about why policies did not act, once per cause (not every tick)."""

    def __init__(self, body: Mapping[str, Any], memo: Any) -> None:
        self.body = body
        self.seen: MutableMapping[str, str] = (
            memo.setdefault("policy_status", {}) if isinstance(memo, MutableMapping) else {}
        )

    def report(self, scope: str, reason: str, message: str, *, warning: bool = False) -> None:
        if self.seen.get(scope) == reason:
            return
        self.seen[scope] = reason
        events.emit(self.body, reason, message, warning=warning)

    def acted(self, scope: str) -> None:
        self.seen.pop(scope, None)


async def unfinished_reconfiguration(ctx: OperatorContext, owner: Owner) -> str | None:
    """Any Reconfiguration of the job not yet Completed or Failed (Pending and Queued too:
    a policy must not queue work behind work)."""
    for item in await reconfigurations_of(ctx, owner.namespace, owner.name):
        phase = (item.get("status") or {}).get("phase")
        if phase not in FINAL_PHASES:
            return f"{item['metadata']['name']} ({phase or 'new'})"
    return None


def _memo_get(memo: Any, key: str) -> Any:
    return memo.get(key) if isinstance(memo, Mapping) else None


def _memo_set(memo: Any, key: str, value: Any) -> None:
    if isinstance(memo, MutableMapping):
        memo[key] = value


async def _usable_loads(
    ctx: OperatorContext, job: StreamJob, owner: Owner, status: _Status
) -> Loads | None:
    """The agent's loads if a policy may act on them now; else None, and an Event says why."""
    busy = await unfinished_reconfiguration(ctx, owner)
    if busy:
        status.report("job", "PolicyWaiting", f"policies wait: {busy} is not finished")
        return None
    address = await ctx.job_address(owner.namespace, owner.name)
    if address is None:
        return None
    try:
        loads = await ctx.agents.loads(address)
    except AgentUnreachable as error:
        status.report("job", "PolicyAgentUnreachable", f"policies: {error}", warning=True)
        return None
    except (AgentRejected, ValueError) as error:
        status.report("job", "PolicyBadLoads", f"policies: {error}", warning=True)
        return None
    if loads is None:
        status.report(
            "job",
            "PolicyNoLoads",
            "policies wait: the agent has no load measurement (the driver measures after "
            "batches once per coordination interval; none since it started or bins moved)",
        )
        return None
    limit = stale_after_s(job, loads)
    if loads.age_seconds > limit:
        status.report(
            "job",
            "PolicyStaleLoads",
            f"policies wait: the latest load measurement is {loads.age_seconds:.0f}s old "
            f"(more than {limit:.0f}s)",
            warning=True,
        )
        return None
    return loads


async def run_policies(ctx: OperatorContext, body: Mapping[str, Any], memo: Any) -> list[str]:
    """Run the due policies of one job; returns the names of Reconfigurations created."""
    from swivel.operator.streamjobs import owner_of, parse_job

    try:
        job = parse_job(body)
    except SpecError:
        return []  # the health timer reports the invalid spec
    policies = job.spec.policies
    enabled = {
        "memory": policies.memory.enabled,
        "rebalance": policies.rebalance.enabled,
        "aimd": policies.aimd.enabled,
    }
    if not any(enabled.values()):
        return []
    owner = owner_of(body)
    now = ctx.clock()
    status = _Status(body, memo)
    schedules: dict[str, RoundSchedule] = {}
    for name in FLUX_POLICIES:
        if enabled[name]:
            schedule, ended = await advanced(ctx, body, job, owner, name, now=now)
            if ended:
                _damped(status, name, schedule)
            if schedule.due(epoch(now)):
                schedules[name] = schedule
    due = [*schedules, *(["aimd"] if enabled["aimd"] else [])]
    if not due:
        return []  # every Flux policy is collecting until its damped deadline
    loads = await _usable_loads(ctx, job, owner, status)
    if loads is None:
        return []
    status.acted("job")
    created: list[str] = []
    for name in due:
        if created:
            break  # one reconfiguration at a time per job: the others run on a later tick
        if name == "aimd":
            recon = _aimd(job, owner, loads, memo, now=now, status=status)
        else:
            recon = await _flux_round(
                ctx, body, loads, job=job, owner=owner, name=name,
                schedule=schedules[name], status=status,
            )  # fmt: skip
        metrics.RECONCILES.labels("streamjob", f"policy-{name}").inc()
        if recon is None:
            continue
        try:
            await ctx.cluster.create(recon)
        except ApiFailure as failure:
            if failure.status != 409:
                raise
            continue
        recon_name = recon["metadata"]["name"]
        if name == "aimd":
            _memo_set(memo, "aimd_requested", recon["spec"]["coordination"]["intervalSeconds"])
        else:  # its move phase: timed from now until the Reconfiguration finishes
            await keep(ctx, body, name, schedules[name].move_started(epoch(now)), recon_name)
        created.append(recon_name)
        events.emit(body, "PolicyReconfiguration", f"{name}: {recon_name}")
    return created


def _damped(status: _Status, name: str, schedule: RoundSchedule) -> None:
    status.acted(name)
    status.report(
        name,
        "PolicyDamped",
        f"{name}: the move phase took {schedule.last_move_phase_s or 0.0:.1f}s; "
        f"next round after a collection phase of {schedule.collection_s:.1f}s",
    )


async def _flux_round(
    ctx: OperatorContext,
    body: Mapping[str, Any],
    loads: Loads,
    *,
    job: StreamJob,
    owner: Owner,
    name: str,
    schedule: RoundSchedule,
    status: _Status,
) -> dict[str, Any] | None:
    """One Flux round at its deadline: on statistics of this collection phase only; a
    round that moves nothing shortens the next collection phase (damping)."""
    now = ctx.clock()
    if not schedule.covers(received_at(now, loads.age_seconds)):
        status.report(
            name,
            "PolicyCollecting",
            f"{name} waits: the latest loads predate the end of the last move phase",
        )
        return None
    recon = _flux(name, job, owner, loads, now=now, status=status, schedule=schedule)
    if recon is None:
        await keep(ctx, body, name, schedule.without_moves(epoch(now), flux_policy(job, name)))
    return recon


def _flux(
    name: str,
    job: StreamJob,
    owner: Owner,
    loads: Loads,
    *,
    now: datetime,
    status: _Status,
    schedule: RoundSchedule,
) -> dict[str, Any] | None:
    decision = decide_memory(job, loads) if name == "memory" else decide_rebalance(job, loads)
    if not decision.moved:
        outcomes = sorted({p.outcome.value for p in decision.pairs}) or ["fewer than 2 executors"]
        status.report(name, "PolicyNoMove", f"{name}: no bin moves ({'; '.join(outcomes)})")
        return None
    status.acted(name)
    inputs = {
        **round_inputs(name, loads, decision, job),
        "collectionSeconds": round(schedule.collection_s, 3),  # the phase this round ended
        "collectingSince": kept_of(schedule).collecting_since.isoformat().replace("+00:00", "Z"),
    }
    return automatic_reconfiguration(owner, name, moves_of(decision), now, inputs=inputs)


def _aimd(
    job: StreamJob, owner: Owner, loads: Loads, memo: Any, *, now: datetime, status: _Status
) -> dict[str, Any] | None:
    if loads.measured_at is not None and _memo_get(memo, "aimd_measured_at") == loads.measured_at:
        return None  # one AIMD step per measurement: the same overhead never counts twice
    _memo_set(memo, "aimd_measured_at", loads.measured_at)
    before: aimd.AimdState | None = _memo_get(memo, "aimd")
    state = next_aimd(job, loads, before)
    _memo_set(memo, "aimd", state)
    current = loads.interval_seconds
    if current is None:
        current = _memo_get(memo, "aimd_requested")
    proposed = round(state.interval_s, 3)
    overhead = aimd.overhead(loads.coordination_seconds, loads.processing_seconds)
    if not interval_change_due(current, proposed):
        status.report(
            "aimd",
            "AimdHold",
            f"aimd: coordination interval stays {current:.2f}s (overhead {overhead:.3f}, "
            f"proposal {proposed:.2f}s within {AIMD_CHANGE_THRESHOLD:.0%})",
        )
        return None
    status.acted("aimd")
    inputs = {
        "policy": "aimd",
        **measured_inputs(loads),
        "coordinationSeconds": loads.coordination_seconds,
        "processingSeconds": loads.processing_seconds,
        "overhead": round(overhead, 6),
        "smoothedOverhead": state.smoothed_overhead,
        "fromIntervalSeconds": current,
        "toIntervalSeconds": proposed,
        "band": [job.spec.policies.aimd.lower_overhead, job.spec.policies.aimd.upper_overhead],
    }
    coordination = CoordinationSpec(interval_seconds=proposed)
    return automatic_reconfiguration(
        owner, "aimd", [], now, coordination=coordination, inputs=inputs
    )


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    def any_policy(spec: Mapping[str, Any], **_: Any) -> bool:
        policies = spec.get("policies") or {}
        return any((policies.get(p) or {}).get("enabled") for p in ("rebalance", "memory", "aimd"))

    @kopf.timer(
        API_GROUP, API_VERSION, "streamjobs",
        interval=ctx.intervals.policies, when=any_policy, registry=registry,
    )  # fmt: skip
    async def streamjob_policies(body: kopf.Body, memo: Any, **kwargs: Any) -> None:
        ctx.known.attach(kwargs)
        await run_policies(ctx, body, memo)
