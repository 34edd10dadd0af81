"""A worker process's own identity at the agent: its worker id and the secret only it holds.

Every Python worker of a job holds the same workers' token, so the token cannot tell one
worker from another; without more, one worker's code could ack on behalf of another (say
that a worker which still runs the old function switched). So each process *enrols*
(`POST /v1/control/workers` `{"pid": <its pid>}`, answered `201 {"pid", "secret"}`) and sends
`Swivel-Worker-Secret` with every call that names its id: its watches and its acks. The
agent never gives an id that is taken to another process: the id it answers is the pid when
free, else an unused one above any pid (jobs/agent/workers.py); the worker uses that id.

Fork-safe: PySpark forks Python workers from its daemon, and a forked child is another
worker. The identity remembers the process that enrolled; in any other process it is
forgotten and the child enrols anew (it never presents the parent's secret). When the agent
no longer knows the id (it restarted or forgot a silent worker) or gives it to nobody but
another process, its answer names the `pid` field (409 or 403): `lost` drops the identity and
the next call enrols again.

Standard library only: every Python worker imports this module.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any, Protocol

WORKER_SECRET_HEADER = "Swivel-Worker-Secret"
ENROL_PATH = "/v1/control/workers"
# A stand-in for the agent without identities (the control-overhead benchmark's pump,
# swivel_tools.bench.pump) has no enrol route:
# its workers go on under their pid, without a secret (a real agent refuses their acks).
NO_ENROLMENT_STATUSES = frozenset({404, 405})


class Requester(Protocol):
    def request(
        self,
        method: str,
        path: str,
        timeout: float,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, bytes]: ...


class EnrolmentError(OSError):
    """The agent did not give this process an identity (yet): retried like a network error."""


Held = tuple[int, str | None]  # (worker id, secret; None: an agent without identities)


class WorkerIdentity:
    """This process's (worker id, secret), enrolled on first use; thread-safe."""

    def __init__(self, proposed: int | None = None) -> None:
        self._proposed = proposed  # None: this process's pid (a test may propose another)
        self._lock = threading.Lock()
        self._held: Held | None = None
        self._owner: int | None = None  # the process that enrolled

    @property
    def proposed(self) -> int:
        return os.getpid() if self._proposed is None else self._proposed

    def held(self) -> Held | None:
        """The identity this process enrolled, None before (or in a forked child)."""
        held = self._held
        return held if held is not None and self._owner == os.getpid() else None

    def ensure(self, connection: Requester, timeout: float) -> Held:
        """The identity, enrolling first when this process has none. EnrolmentError when
        the agent refuses (429: its registry is full); network errors as raised."""
        held = self.held()
        if held is not None:
            return held
        with self._lock:
            held = self.held()
            if held is not None:
                return held
            proposed = self.proposed
            status, body = connection.request("POST", ENROL_PATH, timeout, {"pid": proposed})
            if status == 201:
                try:
                    answer = json.loads(body)
                    held = (int(answer["pid"]), str(answer["secret"]))
                except (ValueError, KeyError, TypeError) as error:
                    raise EnrolmentError(f"enrolment answered {body[:200]!r}") from error
            elif status in NO_ENROLMENT_STATUSES:
                held = (proposed, None)
            else:
                raise EnrolmentError(f"enrolment answered {status}: {body[:200]!r}")
            self._held, self._owner = held, os.getpid()
            return held

    def lost(self, held: Held) -> None:
        """The agent no longer takes `held` as ours: enrol again at the next call (unless
        another thread already did)."""
        with self._lock:
            if self._held == held:
                self._held = None


def secret_headers(held: Held) -> dict[str, str]:
    return {WORKER_SECRET_HEADER: held[1]} if held[1] is not None else {}


def identity_problem(status: int, body: bytes) -> bool:
    """Whether an answer says the agent does not take our worker id as ours: a 403 or 409
    naming a `pid` field (not `Authorization`, a role's refusal, nor another field)."""
    if status not in (403, 409):
        return False
    try:
        errors = json.loads(body).get("errors") or []
        fields = [str(error.get("field", "")) for error in errors]
    except (ValueError, AttributeError):
        return False
    return any(field == "pid" or field.endswith(".pid") for field in fields)
