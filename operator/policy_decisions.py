"""What a policy decides, as data: the pure half of the policy timer.

Each function turns a StreamJob and the agent's latest `Loads` into a decision -- a Flux
round's bin moves (`decide_rebalance`, `decide_memory`), the next Drizzle AIMD interval and
whether it moved enough to propose (`next_aimd`, `interval_change_due`), whether the loads
are too old to act on (`stale_after_s`) -- or into the Reconfiguration object a decision
becomes, with the measured inputs in its annotation (`automatic_reconfiguration`,
`round_inputs`). They live apart from the timer (operator/policies.py), which only fetches
loads, reports why it did not act and creates the object, so that the decisions are tested
with plain values and no kopf, cluster or agent.

A Flux round decides on the workers' own counts (rows and busy time per bin over the agent's
window of seconds, Chi §5; `controllers.worker_loads`) when the loads carry fresh ones, and
on the driver's measurement otherwise; the annotation says which (`loadSource`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from swivel.api.base import API_GROUP, API_VERSION
from swivel.api.reconfiguration import (
    BinMove,
    CoordinationSpec,
    JobRef,
    ReconfigurationSpec,
)
from swivel.api.streamjob import StreamJob
from swivel.controllers import aimd
from swivel.controllers import worker_loads as chi
from swivel.controllers.flux import (
    BinLoad,
    ExecutorLoad,
    LoadBalancePolicy,
    MemoryPolicy,
    RoundDecision,
    balance_round,
    memory_round,
)
from swivel.operator.agents import Loads
from swivel.operator.jobconfigs import quantity_bytes
from swivel.operator.naming import AUTOMATIC_LABEL, JOB_LABEL, Owner

POLICY_LABEL = f"{API_GROUP}/policy"
INPUTS_ANNOTATION = f"{API_GROUP}/policy-inputs"
# AIMD proposes a new coordination interval only when it differs from the one in force by
# more than this fraction: each proposal is an object and a driver action, and Drizzle's
# smoothed overhead still wobbles a little inside its band.
AIMD_CHANGE_THRESHOLD = 0.2
# Loads older than this (or than 3 coordination intervals / 2 policy intervals, whichever
# is longest) describe a job that may have changed: a policy waits for a fresh measurement.
STALE_LOADS_S = 120.0


def flux_policy(job: StreamJob, name: str) -> LoadBalancePolicy | MemoryPolicy:
    """The Flux policy (`memory` or `rebalance`) the spec describes; `intervalSeconds` is
    its minimum (and first) collection phase, Flux's Δmin."""
    policies = job.spec.policies
    if name == "memory":
        fill = policies.memory.limit_fraction
        interval = float(policies.memory.interval_seconds)
        return MemoryPolicy(
            shed_above_fill=fill,
            receive_up_to_fill=fill * 0.9,
            min_collection_s=interval,
            initial_collection_s=interval,
        )
    spec = policies.rebalance
    interval = float(spec.interval_seconds)
    return LoadBalancePolicy(
        imbalance_threshold=spec.imbalance_threshold,
        receiver_max_utilisation=max(spec.receiver_max_utilisation, 1e-9),
        min_collection_s=interval,
        initial_collection_s=interval,
    )


def decide_rebalance(job: StreamJob, loads: Loads) -> RoundDecision:
    policy = flux_policy(job, "rebalance")
    assert isinstance(policy, LoadBalancePolicy)
    executors, bins, _ = flux_inputs(job, loads)
    return balance_round(executors, bins, loads.assignment, policy)


def decide_memory(job: StreamJob, loads: Loads) -> RoundDecision:
    policy = flux_policy(job, "memory")
    assert isinstance(policy, MemoryPolicy)
    executors, bins, _ = flux_inputs(job, loads)
    return memory_round(executors, bins, loads.assignment, policy)


def worker_figures(loads: Loads) -> chi.WorkerFigures | None:
    """The workers' counts the loads carry, as the pure planner reads them."""
    workers = loads.workers
    if workers is None:
        return None
    triples = ((b.bin, b.rows, b.busy_seconds) for b in workers.bins)
    return chi.figures_of(triples, workers.window_seconds, workers.age_seconds)


def flux_inputs(job: StreamJob, loads: Loads) -> tuple[list[ExecutorLoad], list[BinLoad], str]:
    """A round's executors and bins, and where their records and busy time came from: the
    workers' fresh counts (`chi.WORKERS`) or the driver's measurement (`chi.DRIVER`)."""
    executors, bins = _executors(job, loads), _bins(loads)
    figures = worker_figures(loads)
    if figures is None or chi.unusable(figures) is not None:
        return executors, bins, chi.DRIVER
    cores = {str(e["executor"]): int(e.get("cores", 1)) for e in loads.executors}
    executors, bins = chi.with_worker_figures(executors, bins, figures, cores)
    return executors, bins, chi.WORKERS


def _executors_of(loads: Loads) -> list[ExecutorLoad]:
    """The driver's executors without the job (the annotation's fallback)."""
    return [
        ExecutorLoad(
            executor=str(e["executor"]),
            busy_s=float(e.get("busySeconds", 0.0)),
            window_s=float(e.get("windowSeconds") or 1.0),
        )
        for e in loads.executors
    ]


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
    owner: Owner,
    policy: str,
    moves: list[BinMove],
    now: datetime,
    *,
    coordination: CoordinationSpec | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    spec = ReconfigurationSpec(
        job_ref=JobRef(name=owner.name), moves=moves, coordination=coordination
    )
    metadata: dict[str, Any] = {
        "name": f"{owner.name}-{policy}-{now.strftime('%Y%m%d%H%M%S')}",
        "namespace": owner.namespace,
        "labels": {JOB_LABEL: owner.name, AUTOMATIC_LABEL: "true", POLICY_LABEL: policy},
        "ownerReferences": [{**owner.reference(), "controller": False}],
    }
    if inputs is not None:
        metadata["annotations"] = {
            INPUTS_ANNOTATION: json.dumps(inputs, sort_keys=True, separators=(",", ":"))
        }
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "Reconfiguration",
        "metadata": metadata,
        "spec": spec.to_manifest(),
    }


def measured_inputs(loads: Loads) -> dict[str, Any]:
    """When the loads a decision used were measured, and over which batches."""
    at = loads.measured_at
    return {
        "measuredAt": None
        if at is None
        else datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z"),
        "batches": list(loads.batches),
    }


def round_inputs(
    policy: str, loads: Loads, decision: RoundDecision, job: StreamJob | None = None
) -> dict[str, Any]:
    """What a Flux round saw and decided, for the annotation (a person can redo the sum):
    with `job`, the inputs the round decided on (`flux_inputs`: the workers' counts when
    fresh), else the driver's measurement."""
    if job is not None:
        executors, bins, source = flux_inputs(job, loads)
    else:
        executors, bins, source = _executors_of(loads), _bins(loads), chi.DRIVER
    by_bin = {b.bin: b for b in bins}
    memory = {str(e["executor"]): int(e.get("memoryBytes", 0)) for e in loads.executors}
    workers = loads.workers
    return {
        "policy": policy,
        **measured_inputs(loads),
        "loadSource": source,
        **(
            {
                "workersWindowSeconds": workers.window_seconds,
                "workersAgeSeconds": workers.age_seconds,
            }
            if source == chi.WORKERS and workers is not None
            else {}
        ),
        "executors": {
            e.executor: {
                "utilisation": round(e.utilisation, 4),
                "memoryBytes": memory.get(e.executor, 0),
            }
            for e in executors
        },
        "moves": [
            {
                "bin": m.bin,
                "from": m.source,
                "to": m.target,
                "records": by_bin[m.bin].records if m.bin in by_bin else 0,
                "stateBytes": by_bin[m.bin].state_bytes if m.bin in by_bin else 0,
            }
            for m in decision.moves
        ],
        "pairs": [
            {"donor": p.donor, "receiver": p.receiver, "outcome": p.outcome.value}
            for p in decision.pairs
        ],
        "utilisationAfter": {k: round(v, 4) for k, v in decision.utilisation_after.items()},
    }


def aimd_config(job: StreamJob) -> aimd.AimdConfig:
    spec = job.spec.policies.aimd
    low = max(spec.min_interval_ms, 100) / 1000  # the Reconfiguration field's floor (0.1 s)
    return aimd.AimdConfig(
        lower_overhead=spec.lower_overhead,
        upper_overhead=spec.upper_overhead,
        min_interval_s=low,
        max_interval_s=max(low, spec.max_interval_ms / 1000),
    )


def next_aimd(job: StreamJob, loads: Loads, state: aimd.AimdState | None) -> aimd.AimdState:
    """One Drizzle step on the overhead the driver measured (coordination / total), from the
    interval the driver runs (or the previous state)."""
    config = aimd_config(job)
    if state is None:
        state = aimd.AimdState.start(config, loads.interval_seconds)
    elif loads.interval_seconds is not None:
        state = aimd.AimdState(config.clamp(loads.interval_seconds), state.smoothed_overhead)
    measured = aimd.overhead(loads.coordination_seconds, loads.processing_seconds)
    return aimd.step(state, measured, config)


def interval_change_due(current: float | None, proposed: float) -> bool:
    """Damping: propose a new interval only when it moved by more than the threshold."""
    if current is None or current <= 0:
        return True
    return abs(proposed - current) / current > AIMD_CHANGE_THRESHOLD


def stale_after_s(job: StreamJob, loads: Loads) -> float:
    policies = job.spec.policies
    longest_policy = max(policies.rebalance.interval_seconds, policies.memory.interval_seconds)
    return max(STALE_LOADS_S, 3 * (loads.interval_seconds or 0.0), 2.0 * longest_policy)
