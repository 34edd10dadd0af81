"""The Reconfiguration lifecycle as data: phases, the allowed transitions, and the reasons.

```
Pending ──► Queued ──► Planned ──► Applying ──► Completed
   │  ▲        │  ▲       │  │        ▲  │
   │  └────────┘  └───────┘  │        │  └───► Failed
   ├──────────────┴──────────┴────────┼──────► Failed
   └──────────────┴───────────────────┘  (admitted and accepted in one step)
```
Pending: waiting for its job (`JobNotFound`) or not looked at yet. Queued: valid, waiting
for another reconfiguration of the same job. Planned: planned (status.plan), being sent to
the agent (stays here while the agent is unreachable; an admitted reconfiguration whose
submission succeeds goes from Pending/Queued to Applying in one status write, its plan
with it). Applying: the agent accepted it (the
agent's plan id is in the `swivel.dev/agent-plan-id` annotation). Completed and Failed are
final (`swivel.api.phases.FINAL_PHASES`). Every transition the handlers make goes through `transition()`, so a bug that would
skip a phase fails loudly instead of writing a confusing status.
"""

from __future__ import annotations

import enum

from swivel.api.phases import IllegalTransitionError
from swivel.api.phases import ReconfigurationPhase as Phase

__all__ = [
    "ACTIVE",
    "TRANSITIONS",
    "WAITING",
    "Phase",
    "Reason",
    "parse_phase",
    "transition",
]

TRANSITIONS: frozenset[tuple[Phase, Phase]] = frozenset(
    {
        (Phase.PENDING, Phase.PENDING),
        (Phase.PENDING, Phase.QUEUED),
        (Phase.PENDING, Phase.PLANNED),
        (Phase.PENDING, Phase.FAILED),
        (Phase.PENDING, Phase.APPLYING),  # admitted, planned and accepted in one step
        (Phase.QUEUED, Phase.QUEUED),
        (Phase.QUEUED, Phase.PENDING),  # the job went away while waiting
        (Phase.QUEUED, Phase.PLANNED),
        (Phase.QUEUED, Phase.FAILED),
        (Phase.QUEUED, Phase.APPLYING),
        (Phase.PLANNED, Phase.PLANNED),  # the agent is unreachable: retry
        (Phase.PLANNED, Phase.QUEUED),  # the agent is busy with a plan we did not send
        (Phase.PLANNED, Phase.APPLYING),
        (Phase.PLANNED, Phase.FAILED),
        (Phase.APPLYING, Phase.APPLYING),
        (Phase.APPLYING, Phase.COMPLETED),
        (Phase.APPLYING, Phase.FAILED),
    }
)
ACTIVE: frozenset[Phase] = frozenset({Phase.PLANNED, Phase.APPLYING})
WAITING: frozenset[Phase] = frozenset({Phase.PENDING, Phase.QUEUED})


class Reason(enum.StrEnum):
    """Condition and Event reasons of a Reconfiguration."""

    JOB_NOT_FOUND = "JobNotFound"
    JOB_DELETED = "JobDeleted"
    JOB_INVALID = "JobInvalid"
    INVALID = "InvalidReconfiguration"
    QUEUED = "Queued"
    AGENT_BUSY = "AgentBusy"
    PLANNED = "Planned"
    AGENT_UNREACHABLE = "AgentUnreachable"
    REJECTED = "RejectedByAgent"
    APPLYING = "Applying"
    COMPLETED = "Completed"
    PLAN_FAILED = "PlanFailed"
    PLAN_LOST = "PlanLost"


def transition(current: Phase, target: Phase) -> Phase:
    if (current, target) not in TRANSITIONS:
        raise IllegalTransitionError(f"{current.value} -> {target.value} is not a lifecycle step")
    return target


def parse_phase(value: object) -> Phase:
    try:
        return Phase(str(value))
    except ValueError:
        return Phase.PENDING
