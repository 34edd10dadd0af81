"""Starting a `MigrationDriver` in a driver process: the Spark settings it needs, its own
channel to the agent, and the coordination interval a restarted driver takes up again.

`swivel run --master` and the driver pod's `swivel driver` both start it this way; the
driver itself (boundaries, actions, loads) is `swivel.jobs.migration.driver`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from swivel.jobs.control.driver_channel import AgentDriverChannel
from swivel.jobs.migration.driver import DEFAULT_COORDINATION_INTERVAL_S, MigrationDriver


def migration_spark_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """`conf` with what a MigrationDriver needs: the Spark UI on (its REST task list verifies
    moves and measures loads, docs/migration.md) and adaptive execution off (one task per
    bin) unless `conf` says otherwise. `local_session` turns the UI off by default."""
    return {"spark.sql.adaptive.enabled": "false", **conf, "spark.ui.enabled": "true"}


def start_migration_driver(
    spark: Any,
    bins: int,
    query: Callable[[], Any],
    agent_url: str,
    agent_token: str | None,
    *,
    checkpoint: str | None = None,
    coordination_interval_s: float | None = None,
    **options: Any,  # MigrationDriver's other options (mover, measure_loads, ...)
) -> MigrationDriver:
    """A started MigrationDriver beside a JobRuntime, on its own driver channel to the agent
    (`swivel run --master` and the driver pod's `swivel driver` both start it this way).

    Without `coordination_interval_s`, the interval of the agent's last completed
    coordination plan (`coordinationIntervalSeconds` of `GET /v1/config`), else the default: a restarted driver
    keeps what AIMD chose."""
    channel = AgentDriverChannel(agent_url, agent_token)
    interval = coordination_interval_s or agent_coordination_interval(channel)
    return MigrationDriver(
        spark,
        bins,
        query,
        channel,
        checkpoint=checkpoint,
        coordination_interval_s=interval or DEFAULT_COORDINATION_INTERVAL_S,
        **options,
    ).start()


def agent_coordination_interval(channel: AgentDriverChannel) -> float | None:
    """The coordination interval the agent last confirmed (None: none yet, or no answer)."""
    try:
        document = channel.config()
    except (OSError, ValueError):
        return None
    interval = document.get("coordinationIntervalSeconds")
    return float(interval) if isinstance(interval, int | float) and interval > 0 else None
