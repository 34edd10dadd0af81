"""The configuration channel: versions, the snapshot workers run, and its long-poll.

The configuration itself (versions, operators, history, the transition, pinned batches)
lives in the agent's one `DurableState`, which the hub owns and saves as a whole; this part
decides how it is shown to workers. Every publication bumps the snapshot revision, prunes
the history no batch can need, saves, renders the snapshot once and wakes every
`GET /v1/control/watch` at once: waiting is an asyncio Event replaced at each publication,
so all long-polls share one pre-serialised body. Everything runs on the event loop: no
locks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

from swivel.jobs.agent.metrics import AgentMetrics
from swivel.jobs.agent.store import DurableState
from swivel.jobs.agent.workers import Worker
from swivel.protocol.snapshots import Snapshot


class ConfigChannel:
    def __init__(
        self,
        state: DurableState,
        save: Callable[[], None],
        metrics: AgentMetrics,
        clock: Callable[[], float],
    ) -> None:
        self._state, self._save, self._metrics, self._clock = state, save, metrics, clock
        self._changed = asyncio.Event()
        self.snapshot, self.snapshot_body = self._render()

    def _render(self) -> tuple[Snapshot, bytes]:
        state = self._state
        pinned_configs = {
            cv: state.history[cv]
            for cv in set(state.pinned_batches.values())
            if cv != state.config_version and cv in state.history
        }
        snapshot = Snapshot(
            config_version=state.config_version,
            operators=state.operators,
            revision=state.revision,
            transition=state.transition,
            pinned_batches=dict(state.pinned_batches),
            pinned_configs=pinned_configs,
        )
        return snapshot, json.dumps(snapshot.to_wire(), separators=(",", ":")).encode()

    def publish(self) -> None:
        """Make the state's configuration the workers' snapshot: durable first, then shown."""
        self._state.revision += 1
        self._prune_history()
        self._save()
        self.snapshot, self.snapshot_body = self._render()
        self._metrics.config_version.set(self._state.config_version)
        woken, self._changed = self._changed, asyncio.Event()
        woken.set()

    async def watch(self, since: int, worker: Worker | None, timeout: float) -> bytes | None:
        """The snapshot body once its revision differs from `since`, else None on timeout.
        A `worker` blocked here counts as alive (`watching`) and is seen when it returns."""
        if worker is not None:
            worker.watching += 1
        try:
            changed = self._changed
            if self._state.revision == since and timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout)
            if self._state.revision == since:
                return None
            self._metrics.control_messages.inc()
            return self.snapshot_body
        finally:
            if worker is not None:
                worker.watching -= 1
                worker.last_seen = self._clock()

    def version_at(self, at: float) -> int:
        """The configuration version in force at `at` (0/unknown time: the current one)."""
        if not at:
            return self._state.config_version
        times = self._state.accepted_at
        earlier = [cv for cv, accepted in times.items() if accepted <= at]
        return max(earlier) if earlier else min(times)

    def _prune_history(self) -> None:
        state = self._state
        keep = {state.config_version, *state.batch_versions.values()}
        if state.transition is not None:
            keep.add(state.transition.from_config_version)
        state.history = {cv: ops for cv, ops in state.history.items() if cv in keep}
