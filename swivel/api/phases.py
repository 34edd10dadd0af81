"""The lifecycles every process reports, and which of their phases are final.

A Reconfiguration (the custom resource's `status.phase`, written by the operator), the
agent's plan of it (`GET /v1/plans/{id}`) and the driver's bin migration (its reports to
the agent) each move through phases, and each ends in Completed or Failed: nothing follows
those. Whoever asks "is it over?" (the operator's queue, indexes and policies, the agent
and its clients, embedded mode) asks `FINAL_PHASES`, with an enum member or with the raw
string of a document alike (the enums are StrEnums, equal to their values).

The transitions themselves belong to each lifecycle's owner (operator/phases.py for the
Reconfiguration, jobs/agent/plans.py for the plan); both refuse a step they do not have
with `IllegalTransitionError`.
"""

from __future__ import annotations

import enum

FINAL_PHASES: frozenset[str] = frozenset({"Completed", "Failed"})


# A Reconfiguration's `status.phase` (operator/phases.py draws the lifecycle). No docstring:
# pydantic would copy it into the CRD's schema.
class ReconfigurationPhase(enum.StrEnum):
    PENDING = "Pending"
    QUEUED = "Queued"
    PLANNED = "Planned"
    APPLYING = "Applying"
    COMPLETED = "Completed"
    FAILED = "Failed"


class PlanPhase(enum.StrEnum):
    """The agent's plan of a Reconfiguration (jobs/agent/plans.py draws the lifecycle)."""

    ACCEPTED = "Accepted"
    APPLYING = "Applying"
    COMPLETED = "Completed"
    FAILED = "Failed"


class IllegalTransitionError(ValueError):
    """A step a lifecycle does not have: a bug that would otherwise write a confusing
    phase fails loudly instead."""
