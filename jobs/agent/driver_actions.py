"""The queue of boundary actions the agent hands the driver (`GET /v1/driver/actions`).

Actions (restart, move-bins, request-executors, kill-executors, set-coordination) are kept
in the durable state, each with a `seq`, and marked done (`doneAt`) once their outcome
reached the agent, so a restarted driver polling from `since=0` gets exactly the actions it
still has to carry out (docs/control-protocol.md, the driver channel). The queue changes
the state's list in place; the hub saves the state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from swivel.jobs.agent.plans import PlanRecord
from swivel.protocol.answers import DriverAction

# Carried out by MigrationDriver (jobs/migration/driver.py imports it from here: the agent
# must not import the driver's module, which imports pyspark).
COORDINATION_ACTION = "set-coordination"
# What the driver's MigrationDriver carries out (jobs/migration/actions.py), built here from
# an accepted spec: the agent owns the wire form, the driver imports it.
MIGRATION_ACTIONS = ("move-bins", "request-executors", "kill-executors")
DONE = "doneAt"  # agent-side mark in a kept action (durable); never handed out
KEPT_ACTIONS = 100


class DriverActions:
    def __init__(self, actions: list[dict[str, Any]], clock: Callable[[], float]) -> None:
        self._actions = actions  # the durable state's list
        self._clock = clock
        self._changed = asyncio.Event()

    def add(self, action: dict[str, Any]) -> None:
        actions = self._actions
        actions.append({"seq": (actions[-1]["seq"] + 1) if actions else 1, **action})
        # Keep the last KEPT_ACTIONS, and any older one not yet done (never drop an action a
        # restarted driver still has to carry out).
        cut = len(actions) - KEPT_ACTIONS
        actions[:] = [a for i, a in enumerate(actions) if i >= cut or DONE not in a]
        woken, self._changed = self._changed, asyncio.Event()
        woken.set()

    def mark_done(self, which: Callable[[dict[str, Any]], bool]) -> bool:
        """Mark the actions `which` selects done (durable once the caller saves): they are
        never handed out again, so a restarted driver does not carry them out twice."""
        marked = False
        for action in self._actions:
            if DONE not in action and which(action):
                action[DONE] = self._clock()
                marked = True
        return marked

    def settle(self, active: PlanRecord | None) -> bool:
        """Only the active plan's actions can still be pending: the agent queues actions for
        the plan it accepts and marks them done when the plan finishes. A state saved before
        actions were marked (an older agent) gets its finished plans' actions marked here,
        so the first driver after the upgrade does not replay them. True: some marked."""
        return self.mark_done(lambda a: active is None or not of_plan(a, active))

    def kept(self, seq: int) -> bool:
        return any(int(a["seq"]) == seq for a in self._actions)

    def pending(self) -> list[dict[str, Any]]:
        """The actions not yet done, oldest first, as handed out (without the done mark)."""
        return [dict(a) for a in self._actions if DONE not in a]

    async def next(self, since: int, timeout: float) -> dict[str, Any] | None:
        """The oldest action not yet done with seq > `since`, waiting up to `timeout`.

        Done = its outcome reached the agent: the migration report Completed/Failed of its
        plan (move-bins, request-executors), the coordination confirmation
        (set-coordination), the plan finishing (any action of the plan), or the driver's
        `POST /v1/driver/actions/done` (restart, kill-executors). A restarted driver polls
        from `since=0` and gets exactly the actions still to be carried out."""

        def pending() -> dict[str, Any] | None:
            action = next(
                (a for a in self._actions if a["seq"] > since and DONE not in a),
                None,
            )
            return None if action is None else DriverAction.model_validate(action).to_wire()

        if pending() is None and timeout > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)
        return pending()


def of_plan(action: Mapping[str, Any], record: PlanRecord) -> bool:
    """Whether a queued driver action belongs to `record` (a restart by its configuration
    version: it carries no plan id)."""
    if action.get("action") == "restart":
        return action.get("configVersion") == record.to_config_version
    return action.get("planId") == record.id


def driver_action(
    plan_id: str, spec: Mapping[str, Any], plan: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The driver action for a Reconfiguration spec (wire form), None if it moves nothing.
    It carries the migration `plan` made for it (`plan["migration"]`, the steps in Chi's
    hand-over order and the placement they assume): the driver carries it out as given."""
    migration = dict(spec.get("migration") or {})
    steps = dict((plan or {}).get("migration") or {})
    if spec.get("rescale"):
        return {
            "action": "request-executors",
            "planId": plan_id,
            "executors": int(spec["rescale"]["executors"]),
            "migration": migration,
            "plan": steps,
        }
    if spec.get("moves"):
        return {
            "action": "move-bins",
            "planId": plan_id,
            "moves": [{"bins": list(m["bins"]), "to": str(m["to"])} for m in spec["moves"]],
            "migration": migration,
            "plan": steps,
        }
    return None
