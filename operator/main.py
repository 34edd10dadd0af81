"""Assembling and running the operator: settings, the registry of handlers, the kopf loop.

`build_registry(ctx)` registers every handler on a fresh registry (so tests run several
operators with different fakes in one process); `run(...)` is what `swivel operator` calls.
kopf keeps its bookkeeping in `swivel.dev/*` annotations (not in `status`, which the CRD
schema prunes) and its finalizer is `swivel.dev/finalizer`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import kopf

from swivel.operator import indexes, policies, reconfigurations, streamjobs
from swivel.operator.contexts import OperatorContext

FINALIZER = "swivel.dev/finalizer"


def settings(*, posting_level: int = logging.WARNING) -> kopf.OperatorSettings:
    configured = kopf.OperatorSettings()
    configured.persistence.finalizer = FINALIZER
    configured.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="swivel.dev")
    configured.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="swivel.dev", key="last-handled-configuration"
    )
    configured.posting.level = posting_level
    configured.execution.max_workers = 20
    return configured


def build_registry(
    ctx: OperatorContext, *, connection: kopf.ConnectionInfo | None = None
) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        if connection is not None:
            return connection
        return kopf.login_via_client(**kwargs)

    @kopf.on.cleanup(registry=registry)
    async def close_agent_link(**_: Any) -> None:
        await ctx.agents.close()

    indexes.register(registry)
    streamjobs.register(registry, ctx)
    reconfigurations.register(registry, ctx)
    policies.register(registry, ctx)
    return registry


async def run(
    ctx: OperatorContext,
    *,
    namespaces: list[str],
    clusterwide: bool,
    standalone: bool = True,
    liveness_endpoint: str | None = None,
    connection: kopf.ConnectionInfo | None = None,
    stop_flag: threading.Event | asyncio.Event | None = None,
    ready_flag: threading.Event | asyncio.Event | None = None,
) -> None:
    await kopf.operator(
        registry=build_registry(ctx, connection=connection),
        settings=settings(),
        standalone=standalone,
        namespaces=namespaces,
        clusterwide=clusterwide,
        liveness_endpoint=liveness_endpoint,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
