"""Driver actions for bin moves and rescales (the driver channel of docs/control-protocol.md)
and the progress reports that flow back to the agent.

Actions (`GET /v1/driver/actions`, oldest first by `seq`):

    {"seq": 4, "action": "move-bins", "planId": "p-3",
     "moves": [{"bins": [3, 5], "to": "1"}],
     "migration": {"strategy": "batched", "batchSize": 4, "gapBatches": 0, "prewarm": true},
     "plan": {"strategy": "batched", "initial": ["0", "1", ...],
              "steps": [{"handOver": [{"from": "0", "to": "1", "bins": [3, 5]}]}], ...}}
    {"seq": 5, "action": "request-executors", "planId": "p-4", "executors": 3,
     "migration": {...}, "plan": {...}}       # rescale: scale out and move bins, or drain + kill
    {"seq": 6, "action": "kill-executors", "planId": "p-5", "executors": ["2"]}

Progress (`POST /v1/driver/migration`), after every boundary of a running migration:

    {"planId": "p-3", "phase": "Running", "binsMoved": 1, "binsTotal": 2, "step": 1,
     "steps": 2, "landedElsewhere": [], "retries": 0, "metaTopology": {...}}

The agent builds the action it queues for an accepted Reconfiguration
(`swivel.jobs.agent.driver_actions.driver_action`), with the migration plan it made once
from the placement the driver reported (`plan`, `MigrationPlan.to_dict`);
`MigrationActions.handle` carries it out in the driver as given (a control thread: a
rescale blocks until executors registered and bins moved). Nothing is planned here: a plan
whose placement is gone fails with the bins that differ (`controllers/resuming.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from swivel.controllers.errors import PlanningError
from swivel.controllers.migration import MigrationPlan
from swivel.jobs.agent.driver_actions import MIGRATION_ACTIONS
from swivel.jobs.migration.executor import BinMover
from swivel.jobs.migration.migrations import PREWARM_DEFAULT, Migration

Reporter = Callable[[dict[str, Any]], None]


def progress_report(plan_id: str | None, migration: Migration) -> dict[str, Any]:
    body = migration.to_dict()
    body.pop("plan", None)
    return {"planId": plan_id, **body}


class MigrationActions:
    """Carries out driver actions with a `BinMover`; reports progress through `report`."""

    def __init__(self, mover: BinMover, report: Reporter | None = None) -> None:
        self.mover = mover
        self.report = report
        self.plan_ids: dict[str, str] = {}  # migration id -> plan id
        mover.on_progress = self._forward

    def _forward(self, body: dict[str, Any]) -> None:
        if self.report is not None:
            body = {k: v for k, v in body.items() if k != "plan"}
            self.report({"planId": self.plan_ids.get(str(body.get("id"))), **body})

    def handle(self, action: Mapping[str, Any], *, block: bool = False) -> bool:
        """Carry out `action` if it is one of `MIGRATION_ACTIONS` (False: not ours). Rescales run in
        a thread unless `block`."""
        kind = action.get("action")
        if kind not in MIGRATION_ACTIONS:
            return False
        if block:
            self._run(action)
        else:
            threading.Thread(
                target=self._run, args=(action,), daemon=True, name="swivel-migration"
            ).start()
        return True

    def _run(self, action: Mapping[str, Any]) -> Migration | None:
        plan_id = str(action.get("planId") or "")
        try:
            if action["action"] == "kill-executors":
                self.mover.internals.kill_executors([str(e) for e in action["executors"]])
                return None
            plan = MigrationPlan.from_dict(action.get("plan") or {})
            remember = lambda m: self.plan_ids.__setitem__(m.id, plan_id)  # noqa: E731
            prewarm = bool((action.get("migration") or {}).get("prewarm", PREWARM_DEFAULT))
            if action["action"] == "move-bins":
                migration = self.mover.submit(
                    plan, kind="move-bins", on_submit=remember, prewarm=prewarm
                )
                return self.mover.wait(migration, 900)
            return self.mover.rescale(
                plan, int(action["executors"]), on_submit=remember, prewarm=prewarm
            )
        except PlanningError as error:  # no plan in the action (an older agent's)
            self._fail(plan_id, f"the action carries no migration plan to carry out: {error}")
        except Exception as error:
            self._fail(plan_id, str(error))
        return None

    def _fail(self, plan_id: str, message: str) -> None:
        if self.report is not None:
            self.report({"planId": plan_id, "phase": "Failed", "message": message})
