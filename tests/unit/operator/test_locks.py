"""`OperatorContext.lock`: one lock per key while in use, none kept for keys nobody uses."""

from __future__ import annotations

import asyncio
import gc

from swivel.operator.contexts import OperatorContext
from tests.fakes_agent import TestingAgentLink


class _NoCluster:
    """Never called: the locks need no Kubernetes."""


def _context() -> OperatorContext:
    return OperatorContext(cluster=_NoCluster(), agents=TestingAgentLink())  # type: ignore[arg-type]


def test_holders_of_one_key_are_serialized_and_share_the_lock() -> None:
    ctx = _context()
    order: list[str] = []

    async def hold(who: str) -> None:
        async with ctx.lock("reconfiguration/ns/a"):
            order.append(f"{who} in")
            await asyncio.sleep(0.01)
            order.append(f"{who} out")

    async def main() -> None:
        await asyncio.gather(hold("first"), hold("second"))

    asyncio.run(main())
    assert order == ["first in", "first out", "second in", "second out"]


def test_a_lock_nobody_holds_or_awaits_is_dropped() -> None:
    ctx = _context()

    async def main() -> None:
        for i in range(1000):  # objects that came and finished
            async with ctx.lock(f"reconfiguration/ns/r{i}"):
                assert len(ctx._locks) >= 1
        async with ctx.lock("job/uid"):
            gc.collect()
            assert list(ctx._locks) == ["job/uid"]  # only the one in use
            assert ctx.lock("job/uid").locked()  # the same lock while held

    asyncio.run(main())
    gc.collect()
    assert len(ctx._locks) == 0
