"""Objects, the global resourceVersion, a bounded event history and live subscriptions.

Everything the API serves is kept here as plain JSON-like dicts. Every write takes the next
value of one counter, as etcd's revision does for the real API server, so resourceVersions
are comparable across kinds. The history is bounded on purpose: a watch that asks for a
version older than what is retained gets `410 Expired`, which clients must handle (kopf
restarts its watch with a fresh list), so the sandbox exercises that path too.

The store is confined to the server's event loop: no locks, and subscriptions are asyncio
queues filled synchronously on each write, so a subscriber never misses an event between
reading a snapshot and starting to listen.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from swivel_tools.sandbox.errors import expired
from swivel_tools.sandbox.resources import ResourceKey

JsonObject = dict[str, Any]
EventType = Literal["ADDED", "MODIFIED", "DELETED"]
ObjectKey = tuple[str, str]  # (namespace or "", name)

DEFAULT_HISTORY_LIMIT = 2000


@dataclass(frozen=True)
class StoredEvent:
    """One committed write. `previous` lets selector-filtered watches see objects leave."""

    type: EventType
    key: ResourceKey
    namespace: str
    object: JsonObject
    previous: JsonObject | None
    resource_version: int


class Subscription:
    """Live events for one kind (optionally one namespace), in commit order.

    Used by HTTP watches and by in-process components (the planned process kubelet
    subscribes to pods this way). Close it when done, or use `async with`.
    """

    def __init__(self, store: Store, key: ResourceKey | None, namespace: str | None) -> None:
        self._store = store
        self.key = key
        self.namespace = namespace
        self._queue: asyncio.Queue[StoredEvent] = asyncio.Queue()

    def wants(self, event: StoredEvent) -> bool:
        if self.key is not None and event.key != self.key:
            return False
        return self.namespace is None or event.namespace == self.namespace

    def deliver(self, event: StoredEvent) -> None:
        self._queue.put_nowait(event)

    def pending(self) -> bool:
        return not self._queue.empty()

    async def next(self, timeout: float | None = None) -> StoredEvent | None:
        """The next event, or None if none came within `timeout` seconds."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None

    def close(self) -> None:
        self._store.unsubscribe(self)

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *_: object) -> None:
        self.close()

    def __aiter__(self) -> AsyncIterator[StoredEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[StoredEvent]:
        while True:
            event = await self.next()
            if event is not None:
                yield event


class Store:
    def __init__(self, history_limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        self._objects: dict[ResourceKey, dict[ObjectKey, JsonObject]] = {}
        self._history: deque[StoredEvent] = deque()
        self._history_limit = history_limit
        self._subscriptions: set[Subscription] = set()
        self.resource_version = 0
        self.horizon = 0  # versions up to here may have had events that are gone now
        # Indexes for garbage collection: where each uid lives, who names it as owner.
        self._by_uid: dict[str, tuple[ResourceKey, ObjectKey]] = {}
        self._owned_by: dict[str, set[tuple[ResourceKey, ObjectKey]]] = {}

    # Reading. Callers get deep copies: stored objects only change through `write`.

    def get(self, key: ResourceKey, namespace: str, name: str) -> JsonObject | None:
        found = self._objects.get(key, {}).get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list(
        self,
        key: ResourceKey,
        namespace: str | None = None,
        matches: Callable[[JsonObject], bool] | None = None,
    ) -> list[JsonObject]:
        """Copies of the objects of a kind (in a namespace) that `matches` accepts; it sees
        the stored objects, so only what is returned is copied (a label selector over many
        objects costs a scan, not a deep copy of each)."""
        bucket = self._objects.get(key, {})
        return [
            copy.deepcopy(obj)
            for (ns, _), obj in sorted(bucket.items())
            if (namespace is None or ns == namespace) and (matches is None or matches(obj))
        ]

    def count(self, key: ResourceKey, namespace: str | None = None) -> int:
        bucket = self._objects.get(key, {})
        return sum(1 for ns, _ in bucket if namespace is None or ns == namespace)

    def in_namespace(self, namespace: str) -> Iterable[tuple[ResourceKey, JsonObject]]:
        return self.find(lambda obj: obj["metadata"].get("namespace", "") == namespace)

    def find(
        self, predicate: Callable[[JsonObject], bool]
    ) -> Iterable[tuple[ResourceKey, JsonObject]]:
        """Copies of every stored object `predicate` accepts (it sees the stored object)."""
        for key, bucket in list(self._objects.items()):
            for obj in list(bucket.values()):
                if predicate(obj):
                    yield key, copy.deepcopy(obj)

    def has_uid(self, uid: str) -> bool:
        return uid in self._by_uid

    def owned_by(self, owner_uid: str) -> builtins.list[tuple[ResourceKey, JsonObject]]:
        """Copies of the objects whose ownerReferences name `owner_uid`."""
        found = []
        for key, object_key in sorted(self._owned_by.get(owner_uid, ())):
            obj = self._objects.get(key, {}).get(object_key)
            if obj is not None:
                found.append((key, copy.deepcopy(obj)))
        return found

    def is_terminating(self, key: ResourceKey, namespace: str, name: str) -> bool:
        found = self._objects.get(key, {}).get((namespace, name))
        return found is not None and bool(found["metadata"].get("deletionTimestamp"))

    # Writing: one new resourceVersion per write, recorded and broadcast.

    def write(
        self, key: ResourceKey, obj: JsonObject, event_type: EventType, *, owned: bool = False
    ) -> JsonObject:
        """Store (or, for DELETED, drop) `obj`; returns a copy with its new resourceVersion.
        `owned`: the caller built `obj` for this write and never touches it again, so it is
        stored as is (a deep copy less per write)."""
        metadata = obj["metadata"]
        object_key = (metadata.get("namespace", ""), metadata["name"])
        bucket = self._objects.setdefault(key, {})
        previous = bucket.get(object_key)
        self.resource_version += 1
        stored = obj if owned else copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.resource_version)
        if previous is not None:
            self._unindex(key, object_key, previous)
        if event_type == "DELETED":
            bucket.pop(object_key, None)
        else:
            bucket[object_key] = stored
            self._index(key, object_key, stored)
        self._record(
            StoredEvent(event_type, key, object_key[0], stored, previous, self.resource_version)
        )
        return copy.deepcopy(stored)

    def _index(self, key: ResourceKey, object_key: ObjectKey, obj: JsonObject) -> None:
        self._by_uid[obj["metadata"]["uid"]] = (key, object_key)
        for ref in obj["metadata"].get("ownerReferences") or []:
            self._owned_by.setdefault(str(ref.get("uid")), set()).add((key, object_key))

    def _unindex(self, key: ResourceKey, object_key: ObjectKey, obj: JsonObject) -> None:
        self._by_uid.pop(obj["metadata"].get("uid", ""), None)
        for ref in obj["metadata"].get("ownerReferences") or []:
            dependents = self._owned_by.get(str(ref.get("uid")), set())
            dependents.discard((key, object_key))
            if not dependents:
                self._owned_by.pop(str(ref.get("uid")), None)

    def _record(self, event: StoredEvent) -> None:
        self._history.append(event)
        while len(self._history) > self._history_limit:
            self.horizon = self._history.popleft().resource_version
        for subscription in list(self._subscriptions):
            if subscription.wants(event):
                subscription.deliver(event)

    # Watching.

    def subscribe(
        self, key: ResourceKey | None = None, namespace: str | None = None
    ) -> Subscription:
        subscription = Subscription(self, key, namespace)
        self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscriptions.discard(subscription)

    def events_after(
        self, resource_version: int, key: ResourceKey, namespace: str | None
    ) -> builtins.list[StoredEvent]:
        """Retained events newer than `resource_version`; 410 if some may be lost."""
        if resource_version < self.horizon:
            raise expired(resource_version, self.horizon + 1)
        return [
            event
            for event in self._history
            if event.resource_version > resource_version
            and event.key == key
            and (namespace is None or event.namespace == namespace)
        ]
