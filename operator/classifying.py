"""A StreamJob spec edit → the least disruptive action (pure).

`swivel.api.changes.diff_specs` says how disruptive each changed field is; this module turns
the verdict into what the operator does:

| disruption      | action                                                               |
|-----------------|----------------------------------------------------------------------|
| none            | nothing (policies are read by the timers on each run)                |
| live-control    | a Reconfiguration with the changed operators' function/params       |
| live-migration  | a Reconfiguration with a rescale (and function updates, if any)      |
| restart         | graceful restart: the driver pod is replaced, the checkpoint is kept |

Live edits become a Reconfiguration object (labelled automatic, owned by the job, named
after the generation) so a GitOps edit queues, plans and reports exactly like an imperative
one and can be audited with `kubectl get reconfigurations`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from swivel.api.base import API_GROUP, API_VERSION, Disruption
from swivel.api.changes import diff_specs
from swivel.api.reconfiguration import FunctionUpdate, JobRef, ReconfigurationSpec, Rescale
from swivel.api.streamjob import StreamJobSpec
from swivel.operator.naming import AUTOMATIC_LABEL, JOB_LABEL, TRIGGER_LABEL, Owner


@dataclass(frozen=True)
class EditPlan:
    disruption: Disruption
    fields: tuple[str, ...]
    reconfiguration: ReconfigurationSpec | None

    @property
    def restart(self) -> bool:
        return self.disruption is Disruption.RESTART

    def describe(self, generation: int) -> str:
        fields = ", ".join(self.fields) or "no field"
        action = {
            Disruption.NONE: "nothing to do",
            Disruption.LIVE_CONTROL: "live control message",
            Disruption.LIVE_MIGRATION: "live migration",
            Disruption.RESTART: "graceful restart (driver pod replaced, checkpoint kept)",
        }[self.disruption]
        return f"generation {generation}: {self.disruption.label} ({fields}) -> {action}"


def classify(old: StreamJobSpec, new: StreamJobSpec, job: str) -> EditPlan:
    diff = diff_specs(old, new)
    fields = tuple(change.field for change in diff.changes)
    if diff.disruption in (Disruption.NONE, Disruption.RESTART):
        return EditPlan(diff.disruption, fields, None)
    updates = _function_updates(old, new)
    rescale = None
    if old.executor.instances != new.executor.instances:
        rescale = Rescale(executors=new.executor.instances)
    if not updates and rescale is None:  # a live field changed in a way no plan carries
        return EditPlan(Disruption.RESTART, fields, None)
    spec = ReconfigurationSpec(job_ref=JobRef(name=job), function_updates=updates, rescale=rescale)
    return EditPlan(diff.disruption, fields, spec)


def _function_updates(old: StreamJobSpec, new: StreamJobSpec) -> list[FunctionUpdate]:
    before = {op.name: op for op in old.dataflow.operators}
    updates = []
    for op in new.dataflow.operators:
        previous = before[op.name]
        if (op.function, op.params) == (previous.function, previous.params):
            continue
        if op.function is None and previous.function is not None:
            continue  # removing a function is not a live change; diff marks it, caller restarts
        updates.append(FunctionUpdate(operator=op.name, function=op.function, params=op.params))
    return updates


def edit_reconfiguration(
    spec: ReconfigurationSpec, owner: Owner, generation: int
) -> dict[str, Any]:
    """The Reconfiguration object for a live spec edit (deterministic name: idempotent)."""
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": "Reconfiguration",
        "metadata": {
            "name": f"{owner.name}-g{generation}",
            "namespace": owner.namespace,
            "labels": {JOB_LABEL: owner.name, AUTOMATIC_LABEL: "true", TRIGGER_LABEL: "spec-edit"},
            "ownerReferences": [{**owner.reference(), "controller": False}],
        },
        "spec": spec.to_manifest(),
    }
