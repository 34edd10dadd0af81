"""The hub's parts that its two writers from outside share: the plan intake and the driver
channel.

Both change the one durable state (and save it as a whole, store.py) and, with it, the
configuration, the plan ledger, the driver's actions, the latest loads and the batches the
driver reported. `Hub` builds the parts once and hands both writers this one value, so the
two cannot be given different parts, and a part added later is added in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from swivel.jobs.agent.batches import Batches
from swivel.jobs.agent.configuration import ConfigChannel
from swivel.jobs.agent.driver_actions import DriverActions
from swivel.jobs.agent.latest_loads import LatestLoads
from swivel.jobs.agent.ledger import PlanLedger
from swivel.jobs.agent.metrics import AgentMetrics
from swivel.jobs.agent.store import DurableState


@dataclass(frozen=True)
class HubParts:
    state: DurableState
    save: Callable[[], None]  # the whole state, durably (store.py)
    ledger: PlanLedger
    config: ConfigChannel
    actions: DriverActions
    loads: LatestLoads
    batches: Batches
    metrics: AgentMetrics
    clock: Callable[[], float]
