"""Policies from `spec.policies` as a kopf timer: every automatic change is an object.

One timer per StreamJob ticks every few seconds; each enabled policy runs when its own
`intervalSeconds` has passed (kopf timer intervals are fixed at registration, a policy's is
in the spec). A policy observes the agent's statistics, calls the pure decision in
`swivel.controllers` (Flux `balance_round` / `memory_round`, Drizzle `aimd.step`) and, when
it decides to move bins, creates a Reconfiguration labelled `swivel.dev/automatic=true`
with `swivel.dev/policy=<name>`, owned by the job. Nothing is created while another
reconfiguration of the job is in flight, so a policy never piles up work behind itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import kopf

from swivel.api.base import API_GROUP, API_VERSION
from swivel.api.reconfiguration import BinMove, JobRef, ReconfigurationSpec
from swivel.api.streamjob import StreamJob
from swivel.controllers import aimd
from swivel.controllers.flux import (
    BinLoad,
    ExecutorLoad,
    LoadBalancePolicy,
    MemoryPolicy,
    RoundDecision,
    balance_round,
    memory_round,
)
from swivel.operator import events, metrics
from swivel.operator.agents import AgentUnreachable, Loads
from swivel.operator.clusters import ApiFailure
from swivel.operator.contexts import OperatorContext
from swivel.operator.rendering import AUTOMATIC_LABEL, JOB_LABEL, Owner, quantity_bytes

POLICY_LABEL = f"{API_GROUP}/policy"


def decide_rebalance(job: StreamJob, loads: Loads) -> RoundDecision:
    spec = job.spec.policies.rebalance
    policy = LoadBalancePolicy(
        imbalance_threshold=spec.imbalance_threshold,
        receiver_max_utilisation=max(spec.receiver_max_utilisation, 1e-9),
        min_collection_s=float(spec.interval_seconds),
        initial_collection_s=float(spec.interval_seconds),
    )
    return balance_round(_executors(job, loads), _bins(loads), loads.assignment, policy)


def decide_memory(job: StreamJob, loads: Loads) -> RoundDecision:
    spec = job.spec.policies.memory
    fill = spec.limit_fraction
    policy = MemoryPolicy(
        shed_above_fill=fill,
        receive_up_to_fill=fill * 0.9,
        min_collection_s=float(spec.interval_seconds),
        initial_collection_s=float(spec.interval_seconds),
    )
    return memory_round(_executors(job, loads), _bins(loads), loads.assignment, policy)


def _executors(job: StreamJob, loads: Loads) -> list[ExecutorLoad]:
    limit = quantity_bytes(job.spec.executor.memory)
    return [
        ExecutorLoad(
            executor=str(e["executor"]),
            busy_s=float(e.get("busySeconds", 0.0)),
            window_s=float(e.get("windowSeconds", 1.0)),
            memory_bytes=int(e.get("memoryBytes", 0)),
            memory_limit_bytes=int(e.get("memoryLimitBytes", limit)),
        )
        for e in loads.executors
    ]


def _bins(loads: Loads) -> list[BinLoad]:
    return [
        BinLoad(
            bin=int(b["bin"]),
            executor=str(b["executor"]),
            records=int(b.get("records", 0)),
            state_bytes=int(b.get("stateBytes", 0)),
        )
        for b in loads.bins
    ]


def moves_of(decision: RoundDecision) -> list[BinMove]:
    """Group a round's moves by receiving executor (one BinMove per receiver)."""
    by_target: dict[str, list[int]] = {}
    for move in decision.moves:
        by_target.setdefault(move.target, []).append(move.bin)
    return [BinMove(bins=sorted(bins), to=target) for target, bins in sorted(by_target.items())]


def automatic_reconfiguration(
    owner: Owner, policy: str, moves: list[BinMove], now: datetime
) -> dict[str, Any]:
    spec = ReconfigurationSpec(job_ref=JobRef(name=owner.name), moves=moves)
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "Reconfiguration",
        "metadata": {
            "name": f"{owner.name}-{policy}-{now.strftime('%Y%m%d%H%M%S')}",
            "namespace": owner.namespace,
            "labels": {JOB_LABEL: owner.name, AUTOMATIC_LABEL: "true", POLICY_LABEL: policy},
            "ownerReferences": [{**owner.reference(), "controller": False}],
        },
        "spec": spec.to_manifest(),
    }


def next_aimd(job: StreamJob, loads: Loads, state: aimd.AimdState | None) -> aimd.AimdState:
    spec = job.spec.policies.aimd
    config = aimd.AimdConfig(
        lower_overhead=spec.lower_overhead,
        upper_overhead=spec.upper_overhead,
        min_interval_s=spec.min_interval_ms / 1000,
        max_interval_s=spec.max_interval_ms / 1000,
    )
    state = state or aimd.AimdState.start(config)
    measured = aimd.overhead(loads.coordination_seconds, loads.processing_seconds)
    return aimd.step(state, measured, config)


async def run_policies(ctx: OperatorContext, body: Mapping[str, Any], memo: Any) -> list[str]:
    """Run the due policies of one job; returns the names of Reconfigurations created."""
    from swivel.operator.streamjobs import active_reconfiguration, owner_of, parse_job

    job = parse_job(body)
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
    last: dict[str, datetime] = (
        memo.setdefault("policy_runs", {}) if hasattr(memo, "setdefault") else {}
    )
    intervals = {
        "memory": policies.memory.interval_seconds,
        "rebalance": policies.rebalance.interval_seconds,
        "aimd": policies.rebalance.interval_seconds,
    }
    due = [
        name
        for name, on in enabled.items()
        if on and (name not in last or (now - last[name]).total_seconds() >= intervals[name])
    ]
    if not due or await active_reconfiguration(ctx, owner.namespace, owner.name):
        return []
    address = await ctx.job_address(owner.namespace, owner.name)
    if address is None:
        return []
    try:
        loads = await ctx.agents.loads(address)
    except AgentUnreachable:
        return []
    if loads is None:
        return []
    created: list[str] = []
    for name in due:
        last[name] = now
        metrics.RECONCILES.labels("streamjob", f"policy-{name}").inc()
        if name == "aimd":
            state = next_aimd(job, loads, memo.get("aimd") if hasattr(memo, "get") else None)
            if hasattr(memo, "__setitem__"):
                memo["aimd"] = state
            events.emit(body, "AimdInterval", f"coordination interval {state.interval_s:.2f}s")
            continue
        decision = decide_memory(job, loads) if name == "memory" else decide_rebalance(job, loads)
        if not decision.moved or created:
            continue
        recon = automatic_reconfiguration(owner, name, moves_of(decision), now)
        try:
            await ctx.cluster.create(recon)
        except ApiFailure as failure:
            if failure.status != 409:
                raise
            continue
        created.append(recon["metadata"]["name"])
        events.emit(body, "PolicyReconfiguration", f"{name}: {recon['metadata']['name']}")
    return created


def register(registry: kopf.OperatorRegistry, ctx: OperatorContext) -> None:
    def any_policy(spec: Mapping[str, Any], **_: Any) -> bool:
        policies = spec.get("policies") or {}
        return any((policies.get(p) or {}).get("enabled") for p in ("rebalance", "memory", "aimd"))

    @kopf.timer(
        API_GROUP, API_VERSION, "streamjobs",
        interval=ctx.intervals.policies, when=any_policy, registry=registry,
    )  # fmt: skip
    async def streamjob_policies(body: kopf.Body, memo: Any, **_: Any) -> None:
        await run_policies(ctx, body, memo)
