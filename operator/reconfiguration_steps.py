"""One step's hold on a Reconfiguration: its fresh body and the writes a step makes.

`Step` is what every stage of `reconfigurations.step` (admission, submit, follow) writes
through: `decide` turns a `Decision` into the new status (`reconciling.apply_decision`),
patches it straight away, posts an Event when the phase or the reason changes and counts
finished ones in the metrics; `remember_plan_id` writes the agent's plan id annotation.
It lives apart from the stages so that the one place a Reconfiguration's status, Events
and metrics are written can be read (and kept single-writer) on its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from swivel.api.base import API_GROUP
from swivel.api.phases import FINAL_PHASES
from swivel.api.reconfiguration import ReconfigurationStatus
from swivel.operator import events, metrics
from swivel.operator.clusters import Ref
from swivel.operator.contexts import OperatorContext
from swivel.operator.joblabels import missing_job_label
from swivel.operator.phases import Phase, Reason
from swivel.operator.reconciling import Decision, apply_decision

PLAN_ID_ANNOTATION = f"{API_GROUP}/agent-plan-id"


class Step:
    """One run over one Reconfiguration: its fresh body, and writing decisions back."""

    def __init__(self, ctx: OperatorContext, obj: dict[str, Any]) -> None:
        self.ctx, self.obj = ctx, obj
        self.ref = Ref.of(obj)
        metadata = obj["metadata"]
        self.generation = metadata.get("generation")
        try:
            self.status = ReconfigurationStatus.model_validate(obj.get("status") or {})
        except ValidationError:
            self.status = ReconfigurationStatus()

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def plan_id(self) -> str | None:
        annotated = (self.obj["metadata"].get("annotations") or {}).get(PLAN_ID_ANNOTATION)
        return annotated or self.status.agent_plan_id

    async def decide(self, decision: Decision) -> None:
        before = self.status
        created = self.obj["metadata"].get("creationTimestamp")
        after = apply_decision(
            before,
            decision,
            now=self.ctx.clock(),
            generation=self.generation,
            requested_at=datetime.fromisoformat(created) if created else None,
        )
        if after.to_manifest() == before.to_manifest():
            return
        self.obj = await self.ctx.cluster.patch(
            self.ref, {"status": after.to_manifest()}, status=True
        )
        self.ctx.known.wrote(self.obj)
        self.status = after
        if before.phase is not after.phase or _reason(before) != decision.reason.value:
            warning = after.phase is Phase.FAILED or decision.reason is Reason.AGENT_UNREACHABLE
            events.emit(self.obj, decision.reason.value, decision.message, warning=warning)
        if after.phase in FINAL_PHASES and before.phase not in FINAL_PHASES:
            kind = after.kind or "unknown"
            metrics.RECONFIGURATIONS.labels(after.phase.value, kind).inc()
            if after.phase is Phase.FAILED:
                metrics.FAILURES.labels("reconfiguration", decision.reason.value).inc()

    async def remember_plan_id(self, plan_id: str, job: str) -> None:
        """The plan id annotation, and the job label if missing: one metadata write."""
        metadata: dict[str, Any] = {"annotations": {PLAN_ID_ANNOTATION: plan_id}}
        labels = missing_job_label(self.obj, job)
        if labels:
            metadata["labels"] = labels
        self.obj = await self.ctx.cluster.patch(self.ref, {"metadata": metadata})
        self.ctx.known.wrote(self.obj)


def _reason(status: ReconfigurationStatus) -> str | None:
    """The reason of the last decision (its `Succeeded` condition): an Event is posted when
    the phase or the reason changes, not for every new progress message."""
    for condition in status.conditions:
        if condition.type == "Succeeded":
            return condition.reason
    return None
