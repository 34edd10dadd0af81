"""Kubernetes-style status conditions (metav1.Condition), and the one pure way to set one.

A condition's lastTransitionTime changes only when its status changes: that is what lets
`kubectl wait --for=condition=Ready` and Argo CD read them reliably, so `set_condition`
is the only place that builds the list.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import datetime

from pydantic import Field

from swivel.api.base import ApiModel

REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


class ConditionStatus(enum.StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    type: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9]*$", max_length=316)
    status: ConditionStatus
    reason: str = Field(pattern=REASON_PATTERN, max_length=1024)
    message: str = Field(default="", max_length=32768)
    last_transition_time: datetime
    observed_generation: int | None = Field(default=None, ge=0)


def set_condition(
    conditions: Sequence[Condition],
    new: Condition,
) -> tuple[Condition, ...]:
    """Replace the condition of `new.type`, keeping its transition time if status is unchanged."""
    result: list[Condition] = []
    replaced = False
    for old in conditions:
        if old.type != new.type:
            result.append(old)
            continue
        replaced = True
        if old.status == new.status:
            new = new.model_copy(update={"last_transition_time": old.last_transition_time})
        result.append(new)
    if not replaced:
        result.append(new)
    return tuple(result)


def find_condition(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)
