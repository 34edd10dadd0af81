"""The one error shape the planners raise: `field: reason`.

Every planner input problem names where it is, so the CLI, the agent (400/422) and the
operator (conditions, events) can report it the same way; catching `PlanningError`
catches them all.
"""

from __future__ import annotations


class PlanningError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
