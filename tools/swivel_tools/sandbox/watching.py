"""`?watch=true`: a chunked stream of JSON lines, one event per line, as the real server sends.

- From a `resourceVersion`: every retained event after it, then live ones. Older than the
  retained history: HTTP 200 with a single `ERROR` event holding a 410 `Expired` Status
  (what kopf and the `kubernetes` client's `Watch` expect), then the end of the stream.
- Without one (or `0`, or `sendInitialEvents=true`): synthetic `ADDED` events for what
  exists now, then live ones; with `sendInitialEvents` a bookmark annotated
  `k8s.io/initial-events-end` marks the end of the initial state.
- `allowWatchBookmarks=true`: `BOOKMARK` events carrying only the current
  resourceVersion, periodically and about 2 s before `timeoutSeconds` ends the stream
  (as kube-apiserver does), so clients can resume without a relist.
- Selectors apply to both sides of a change: an object that stops matching arrives as
  `DELETED`, one that starts matching as `ADDED`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from swivel_tools.sandbox import tables
from swivel_tools.sandbox.errors import ApiError
from swivel_tools.sandbox.registry import Registry
from swivel_tools.sandbox.resources import Endpoint
from swivel_tools.sandbox.store import StoredEvent, Subscription

JsonObject = dict[str, Any]
Matcher = Callable[[JsonObject], bool]

DEFAULT_TIMEOUT_SECONDS = 1800.0  # the real server picks 30-60 min when none is asked for
BOOKMARK_BEFORE_TIMEOUT_SECONDS = 2.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class WatchRequest:
    endpoint: Endpoint
    resource_version: str | None = None
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    allow_bookmarks: bool = False
    send_initial_events: bool = False
    labels: str | None = None
    fields: str | None = None
    as_table: bool = False  # kubectl get -w: each object as a one-row Table


def translate(event: StoredEvent, matches: Matcher, endpoint: Endpoint) -> JsonObject | None:
    """The event a selector-filtered watcher sees, or None if it sees nothing."""
    now = event.type != "DELETED" and matches(event.object)
    before = event.previous is not None and matches(event.previous)
    if event.type == "DELETED":
        now, before = False, matches(event.object)
    if now and before:
        kind = "MODIFIED"
    elif now:
        kind = "ADDED"
    elif before:
        kind = "DELETED"
    else:
        return None
    return {"type": kind, "object": endpoint.present(event.object)}


def bookmark(endpoint: Endpoint, resource_version: int, *, initial_end: bool = False) -> JsonObject:
    metadata: JsonObject = {"resourceVersion": str(resource_version)}
    if initial_end:
        metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {
        "type": "BOOKMARK",
        "object": {
            "kind": endpoint.type.kind,
            "apiVersion": endpoint.api_version,
            "metadata": metadata,
        },
    }


def _start_version(raw: str | None) -> int | None:
    """None means "start from the current state"; a number means "replay after it"."""
    if raw in (None, "", "0"):
        return None
    try:
        return int(str(raw))
    except ValueError:
        raise ApiError(400, "BadRequest", f"invalid resource version: {raw!r}") from None


async def stream(
    request: web.Request, registry: Registry, watch: WatchRequest, bookmark_interval: float
) -> web.StreamResponse:
    endpoint = watch.endpoint
    matches = registry.selector(endpoint, watch.labels, watch.fields)  # 400s before streaming
    since = None if watch.send_initial_events else _start_version(watch.resource_version)
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)

    async def send(event: JsonObject) -> None:
        if watch.as_table and event["type"] in ("ADDED", "MODIFIED", "DELETED"):
            event = {**event, "object": tables.render(registry, event["object"])}
        await response.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")

    subscription = registry.watch(endpoint)
    try:
        # Snapshot and subscription are taken on the same loop turn: no event falls between.
        if since is None:
            items, seen = registry.list(endpoint, watch.labels, watch.fields)
            backlog = [{"type": "ADDED", "object": obj} for obj in items]
        else:
            try:
                events = registry.store.events_after(since, endpoint.key, endpoint.scope or None)
            except ApiError as error:
                await send({"type": "ERROR", "object": error.status()})
                return response
            backlog = [e for e in (translate(ev, matches, endpoint) for ev in events) if e]
            seen = max([since, *(ev.resource_version for ev in events)])
        for event in backlog:
            await send(event)
        if watch.send_initial_events and watch.allow_bookmarks:
            await send(bookmark(endpoint, seen, initial_end=True))
        await _follow(
            send,
            subscription=subscription,
            matches=matches,
            watch=watch,
            seen=seen,
            bookmark_interval=bookmark_interval,
            registry=registry,
        )
    except ConnectionResetError:
        pass  # the client went away (a disconnect while waiting cancels the handler instead)
    finally:
        subscription.close()
    return response


async def _follow(
    send: Callable[[JsonObject], Awaitable[None]],
    *,
    subscription: Subscription,
    matches: Matcher,
    watch: WatchRequest,
    seen: int,
    bookmark_interval: float,
    registry: Registry,
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + watch.timeout_seconds
    pre_timeout = deadline - BOOKMARK_BEFORE_TIMEOUT_SECONDS
    next_bookmark = min(loop.time() + bookmark_interval, pre_timeout)
    while (now := loop.time()) < deadline:
        wake = min(deadline, next_bookmark) if watch.allow_bookmarks else deadline
        event = await subscription.next(timeout=max(wake - now, 0))
        if event is not None:
            if event.resource_version <= seen:
                continue
            seen = event.resource_version
            shown = translate(event, matches, watch.endpoint)
            if shown is not None:
                await send(shown)
            continue
        if watch.allow_bookmarks and loop.time() >= next_bookmark:
            if not subscription.pending():
                seen = max(seen, registry.store.resource_version)
            await send(bookmark(watch.endpoint, seen))
            after = loop.time() + bookmark_interval
            next_bookmark = after if loop.time() >= pre_timeout else min(after, pre_timeout)
