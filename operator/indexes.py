"""What the watch streams showed the operator, so a Reconfiguration step reads no API.

A step used to read its object, its job and its job's siblings from the API server (a GET,
a GET and a LIST before every submit). kopf receives every change of both kinds on its
watch streams anyway; two `@kopf.index`es keep them: the StreamJobs by (namespace, name)
and the unfinished Reconfigurations by (namespace, job) (finished ones are left out:
queueing ignores them, and users keep them by the hundred). kopf calls no handler before
the initial listings are indexed, so a restarted operator queues from the whole picture.

What can lag is the operator's own last write, whose watch event may not have arrived when
the next step (or a sibling's) looks: `Known` keeps what each write answered and prefers it
while its resourceVersion is newer than the indexed one. A miss (a job created a moment
ago, an object that just finished or was deleted) is for the caller to read from the API.
Two plans for one job are still impossible whatever a view shows: the agent answers 409.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import kopf

from swivel.api.base import API_GROUP, API_VERSION
from swivel.api.phases import FINAL_PHASES

Manifest = dict[str, Any]
Key = tuple[str, str]
JOBS = "streamjobs_by_name"  # the indexes' ids: kopf passes them to handlers by these names
RECONFIGURATIONS = "unfinished_reconfigurations_by_job"


def _plain(body: Mapping[str, Any]) -> Manifest:
    """The event's object as a dict (kopf's body is a view; its nested values are the parsed
    event's own, which nothing mutates)."""
    return {key: body[key] for key in body}


def job_of(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("spec") or {}).get("jobRef") or {}).get("name") or "")


def finished(obj: Mapping[str, Any]) -> bool:
    return (obj.get("status") or {}).get("phase") in FINAL_PHASES


def register(registry: kopf.OperatorRegistry) -> None:
    """The two indexes; `async`, as kopf runs a plain function in a thread of its executor
    (a thread hop for every watch event)."""

    @kopf.index(API_GROUP, API_VERSION, "streamjobs", id=JOBS, registry=registry)
    async def streamjobs_by_name(
        body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> Any:
        return {(namespace or "", name): _plain(body)}

    @kopf.index(API_GROUP, API_VERSION, "reconfigurations", id=RECONFIGURATIONS, registry=registry)
    async def unfinished_reconfigurations_by_job(
        body: kopf.Body, namespace: str | None, **_: Any
    ) -> Any:
        if finished(body) or body.get("metadata", {}).get("deletionTimestamp"):
            return {}  # not None: kopf would keep the object's previous entry
        return {(namespace or "", job_of(body)): _plain(body)}


def _version(obj: Mapping[str, Any]) -> int | None:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return None


def _newer(mine: Mapping[str, Any], indexed: Mapping[str, Any]) -> bool:
    """Whether the operator's own write is newer than what the index holds. Versions are
    opaque to clients, but every API server hands out increasing integers; if one does not,
    the index wins (at worst a step sees its own last write late and retries)."""
    a, b = _version(mine), _version(indexed)
    return a is not None and b is not None and a > b


class Known:
    """The indexes kopf keeps (attached from the first handler's kwargs), corrected by the
    operator's own writes. Until attached, every lookup misses (None): callers read the API."""

    def __init__(self) -> None:
        self._jobs: Mapping[Any, Iterable[Manifest]] | None = None
        self._unfinished: Mapping[Any, Iterable[Manifest]] | None = None
        self._written: dict[tuple[str, str, str], Manifest] = {}  # (kind, namespace, name)

    def attach(self, kwargs: Mapping[str, Any]) -> None:
        if self._unfinished is None and RECONFIGURATIONS in kwargs and JOBS in kwargs:
            self._jobs, self._unfinished = kwargs[JOBS], kwargs[RECONFIGURATIONS]

    @property
    def attached(self) -> bool:
        return self._unfinished is not None

    def wrote(self, obj: Mapping[str, Any]) -> None:
        """What a write of the operator answered (the object as the API server stored it)."""
        metadata = obj.get("metadata") or {}
        key = (str(obj.get("kind")), str(metadata.get("namespace")), str(metadata.get("name")))
        self._written[key] = dict(obj)

    def _latest(self, kind: str, indexed: Manifest) -> Manifest:
        metadata = indexed["metadata"]
        key = (kind, metadata["namespace"], metadata["name"])
        mine = self._written.get(key)
        if mine is None:
            return indexed
        if _newer(mine, indexed):
            return mine
        del self._written[key]  # the watch caught up (or someone wrote after us)
        return indexed

    def job(self, namespace: str, name: str) -> Manifest | None:
        """The StreamJob as last seen or written; None when not indexed (yet)."""
        if self._jobs is None:
            return None
        for indexed in self._jobs.get((namespace, name), ()):
            return self._latest("StreamJob", indexed)
        return None

    def reconfigurations_of(self, namespace: str, job: str) -> list[Manifest] | None:
        """The job's unfinished Reconfigurations; None until the indexes are attached."""
        if self._unfinished is None:
            return None
        found = [
            self._latest("Reconfiguration", indexed)
            for indexed in self._unfinished.get((namespace, job), ())
        ]
        names = {obj["metadata"]["name"] for obj in found}
        for key in [k for k in self._written if k[0] == "Reconfiguration" and k[1] == namespace]:
            written = self._written[key]
            if key[2] not in names and job_of(written) == job:
                del self._written[key]  # finished or deleted: the index let it go
        return [obj for obj in found if not finished(obj)]

    def reconfiguration(self, namespace: str, name: str, job: str) -> Manifest | None:
        """One unfinished Reconfiguration of `job`; None when not indexed (finished,
        deleted, or its jobRef changed): the caller reads it from the API."""
        if self._unfinished is None:
            return None
        for indexed in self._unfinished.get((namespace, job), ()):
            if indexed["metadata"]["name"] == name:
                return self._latest("Reconfiguration", indexed)
        return None
