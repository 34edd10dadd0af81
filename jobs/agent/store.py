"""The agent's durable state: what must survive an agent or driver restart.

A reconfiguration is durable once the agent has accepted it (Fries §7.3), so acceptance
writes here before the snapshot is published. Kept: the current configuration and its
version, the configurations a replayed batch may still need, the running transition, every
plan record, the configuration version in force when each recent batch first started, and
the driver actions (each with `doneAt` once carried out: never handed out again). One JSON
document, replaced atomically (temp file, fsync, os.replace): a crash leaves the old state
or the new one, never half of each.

A file that cannot be read back (a disk fault, a hand edit, a format from another version)
is not a crash loop: `StateStore.load` moves it aside to `agent-state.json.corrupt-<time>`,
logs a warning naming both files, notes it in `recovered_from` (the hub counts it in
`swivel_agent_state_recovered_total` and shows it in `GET /v1/config`), and the agent
starts from the job spec, as after a pod restart (docs/agent.md, "A corrupt state file").
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swivel.jobs.agent.plans import PlanRecord
from swivel.protocol.snapshots import (
    OperatorConfig,
    Transition,
    operators_from_wire,
    operators_to_wire,
)

ENV_STATE_DIR = "SWIVEL_AGENT_STATE_DIR"
STATE_FILE = "agent-state.json"
FORMAT = 1
KEPT_BATCHES = 256  # replays re-run the last batch or two; keep a generous window
# What a document that is not a state raises while it is read back.
CORRUPT = (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError)
log = logging.getLogger(__name__)


@dataclass
class DurableState:
    """Mutable, owned by the hub; everything the agent must not forget."""

    config_version: int
    operators: dict[str, OperatorConfig]
    revision: int = 1
    history: dict[int, dict[str, OperatorConfig]] = field(default_factory=dict)
    accepted_at: dict[int, float] = field(default_factory=dict)  # config version -> time
    transition: Transition | None = None
    plans: dict[str, PlanRecord] = field(default_factory=dict)
    active_plan: str | None = None
    batch_versions: dict[int, int] = field(default_factory=dict)  # batch id -> config version
    pinned_batches: dict[int, int] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)

    def remember_batch(self, batch_id: int, config_version: int) -> None:
        self.batch_versions[batch_id] = config_version
        for old in sorted(self.batch_versions)[:-KEPT_BATCHES]:
            del self.batch_versions[old]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "configVersion": self.config_version,
            "revision": self.revision,
            "operators": operators_to_wire(self.operators),
            "history": {str(cv): operators_to_wire(ops) for cv, ops in self.history.items()},
            "acceptedAt": {str(cv): at for cv, at in self.accepted_at.items()},
            "transition": None if self.transition is None else self.transition.to_wire(),
            "plans": [plan.to_state() for plan in self.plans.values()],
            "activePlan": self.active_plan,
            "batchVersions": {str(b): cv for b, cv in self.batch_versions.items()},
            "pinnedBatches": {str(b): cv for b, cv in self.pinned_batches.items()},
            "actions": self.actions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DurableState:
        if data.get("format") != FORMAT:
            raise ValueError(f"unknown agent state format {data.get('format')!r}")
        transition = data.get("transition")
        return cls(
            config_version=int(data["configVersion"]),
            revision=int(data["revision"]),
            operators=operators_from_wire(data["operators"]),
            history={int(cv): operators_from_wire(ops) for cv, ops in data["history"].items()},
            accepted_at={int(cv): float(at) for cv, at in data["acceptedAt"].items()},
            transition=None if transition is None else Transition.model_validate(transition),
            plans={p["id"]: PlanRecord.from_state(p) for p in data["plans"]},
            active_plan=data.get("activePlan"),
            batch_versions={int(b): int(cv) for b, cv in data["batchVersions"].items()},
            pinned_batches={int(b): int(cv) for b, cv in data["pinnedBatches"].items()},
            actions=list(data["actions"]),
        )


class StateStore:
    """Reads and atomically replaces the state document in one directory."""

    def __init__(self, directory: Path, clock: Callable[[], float] = time.time) -> None:
        self.directory = Path(directory)
        self.path = self.directory / STATE_FILE
        self._clock = clock
        self.recovered_from: Path | None = None  # where a corrupt state file was moved

    def load(self) -> DurableState | None:
        """The saved state; None when there is none, or when it was corrupt (then moved
        aside, see the module docstring). OSError (unreadable) is left to the caller."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise TypeError(f"a JSON {type(data).__name__}, not an object")
            return DurableState.from_json(data)
        except CORRUPT as error:
            aside = self.path.with_name(f"{STATE_FILE}.corrupt-{int(self._clock())}")
            os.replace(self.path, aside)
            self.recovered_from = aside
            log.warning(
                "agent state %s is corrupt (%s: %.200s); moved it to %s and starting from "
                "the job spec (docs/agent.md, 'A corrupt state file')",
                self.path, type(error).__name__, error, aside,
            )  # fmt: skip
            return None

    def save(self, state: DurableState) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        payload = json.dumps(state.to_json(), separators=(",", ":")).encode()
        fd, temp = tempfile.mkstemp(prefix=".agent-state-", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(payload)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, self.path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
