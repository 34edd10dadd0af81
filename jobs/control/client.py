"""The control client inside every PySpark Python worker: snapshots in, acks out.

PySpark forks Python workers from one daemon and reuses them across tasks, so the client is
a module-level singleton started lazily on first use in each process and guarded by
`os.getpid()`: a forked child never shares its parent's threads or sockets. It never blocks
the data path: `current()` reads the newest snapshot from memory; a daemon thread
long-polls the agent (`GET /v1/control/watch`) and another posts batched acknowledgements
(`POST /v1/control/acks`). Only the first call in a process fetches synchronously, with a
short timeout, so a freshly forked worker never starts on a stale configuration; and
`refresh()`, which the wrappers call at the first check of every Spark task
(`swivel.jobs.runtime.freshness`), asks the agent synchronously for anything newer: the
long-poll may be broken or late, a read at a task's start is not (docs/runtime.md, "Tags").
The acks' queue and their thread are `swivel.jobs.control.ack_sender`.

Standard library and the protocol's snapshot model (`swivel.protocol.snapshots`) only: every
Python worker imports this module, and its operator wrappers load pydantic anyway.

Its credential is the workers' (`SWIVEL_AGENT_TOKEN` in an executor: the agent accepts it on
the enrol, watch and acks routes only, docs/agent.md), plus a secret of this process's own
that it enrols for (`swivel.jobs.control.identity`: a worker's code cannot speak for another
worker, and a forked child enrols anew); with `SWIVEL_AGENT_CA` (the job's CA, PEM) the agent
is reached over HTTPS and its certificate verified against that CA alone.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator

from swivel.jobs.control import counting
from swivel.jobs.control.ack_sender import MAX_BACKOFF_S, AckSender
from swivel.jobs.control.arming import ARMED, PROCESSED, armed_version
from swivel.jobs.control.connection import Connection, agent_tls_context
from swivel.jobs.control.identity import WorkerIdentity, identity_problem, secret_headers
from swivel.protocol.snapshots import Snapshot

__all__ = ["ControlClient", "RefreshError", "agent_tls_context", "get_client", "working_on"]

ENV_URL = "SWIVEL_AGENT_URL"
ENV_TOKEN = "SWIVEL_AGENT_TOKEN"
ENV_CA = "SWIVEL_AGENT_CA"
WATCH_TIMEOUT_S = 20.0
FIRST_FETCH_TIMEOUT_S = 0.5
REFRESH_ATTEMPT_TIMEOUT_S = 1.0  # one synchronous GET /v1/control/watch?timeout=0
# How long `refresh` keeps retrying before it gives up and the task fails (Spark retries
# the task; a batch that still fails is replayed from the checkpoint, pinned): a worker must
# not run a batch on a snapshot that may miss a transition another worker already ran.
REFRESH_DEADLINE_S = float(os.environ.get("SWIVEL_REFRESH_DEADLINE_S", "10"))

log = logging.getLogger(__name__)


class RefreshError(RuntimeError):
    """The agent could not be asked for its newest snapshot within the refresh deadline."""


class ControlClient:
    """Receives snapshots and sends acks for one worker process."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        pid: int | None = None,
        watch_timeout_s: float = WATCH_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
        counter: Callable[[], counting.WorkCounter] = counting.counter,
    ) -> None:
        """`counter`: where the counts it reports come from (the process's, which the
        wrappers count into; a test gives its own, which no other client drains)."""
        self.base_url = base_url
        self._identity = WorkerIdentity(pid)
        self._token = token
        self._ca = os.environ.get(ENV_CA) or None
        self._watch_timeout_s = watch_timeout_s
        self._clock = clock
        self._snapshot: Snapshot | None = None
        self.received_at = 0.0  # clock() when the newest snapshot arrived (measurements)
        self._changed = threading.Condition()
        self._operators: set[str] = set()
        self._stopped = threading.Event()
        self._acks = AckSender(self._connect, self._identity, self._stopped, clock, counter)
        self._threads: list[threading.Thread] = []
        self._watch_connection: Connection | None = None
        self._refresh_connection: Connection | None = None
        self._refresh_lock = threading.Lock()

    @property
    def pid(self) -> int:
        """The worker id the agent knows this process by: its pid unless the agent gave it
        another (the pid was taken); the pid it would propose before it enrolled."""
        held = self._identity.held()
        return held[0] if held is not None else self._identity.proposed

    # -- the data path: cheap, never blocks on the network ---------------------------------

    def current(self) -> Snapshot | None:
        return self._snapshot

    def register(self, operator: str) -> None:
        """Say this process hosts `operator`; sent with the next watch call."""
        if operator not in self._operators:
            self._operators = self._operators | {operator}
            snapshot = self._snapshot
            if snapshot is not None:
                self._arm(snapshot, (operator,))

    def ack(
        self,
        operator: str,
        version: int,
        config_version: int,
        partition: int | None = None,
        batch_id: int | None = None,
        *,
        kind: str = PROCESSED,
        at: float | None = None,
    ) -> None:
        """Queue 'this process switched `operator` to `version`' (`kind`: arming.py, `at`:
        when; now by default); duplicates are dropped (ack_sender.py)."""
        if operator not in self._operators:
            self._operators = self._operators | {operator}
        self._acks.add((operator, version, config_version, kind), partition, batch_id, at)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, first_fetch_timeout_s: float = FIRST_FETCH_TIMEOUT_S) -> None:
        """Fetch once synchronously (bounded), then run the watch and ack threads."""
        connection = self._connect()
        try:
            self._watch_once(connection, first_fetch_timeout_s, 0)
        except (OSError, http.client.HTTPException, ValueError) as error:
            log.debug("first snapshot fetch failed: %s", error)
        finally:
            connection.close()
        for name, target in (("watch", self._watch_loop), ("acks", self._acks.run)):
            thread = threading.Thread(target=target, name=f"swivel-control-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 1.0) -> None:
        """For tests and clean shutdowns; workers simply exit."""
        self._stopped.set()
        if self._watch_connection is not None:
            self._watch_connection.abort()
        self._acks.wake()
        for thread in self._threads:
            thread.join(timeout)
        if self._refresh_connection is not None:
            self._refresh_connection.close()

    def wait_for_revision(self, revision: int, timeout: float) -> Snapshot | None:
        """Block until a snapshot at `revision` or later arrived (tests, the driver)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._snapshot is None or self._snapshot.revision < revision:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)
            return self._snapshot

    def refresh(self, deadline_s: float = REFRESH_DEADLINE_S) -> Snapshot | None:
        """Ask the agent now for a snapshot newer than ours (`GET /v1/control/watch` with
        `timeout=0`: one round trip, answered at once with the snapshot or 304) and return
        the newest one held.

        The data path calls this at the first check of every task: whatever the agent
        published before the call is then in memory, whether or not the long-poll delivered
        it. Failures are retried (a new connection each time, backing off) until
        `deadline_s`, then `RefreshError`: the caller must not go on with a snapshot that
        may be stale while a transition could be in flight.
        """
        deadline = time.monotonic() + deadline_s
        backoff = 0.02
        with self._refresh_lock:  # one data-path thread per process; kept safe anyway
            while True:
                remaining = deadline - time.monotonic()
                try:
                    if self._refresh_connection is None:
                        self._refresh_connection = self._connect()
                    timeout = max(0.05, min(REFRESH_ATTEMPT_TIMEOUT_S, remaining))
                    self._watch_once(self._refresh_connection, timeout, 0)
                    return self._snapshot
                except (OSError, http.client.HTTPException, ValueError) as error:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise RefreshError(
                            f"no answer from the agent at {self.base_url} for "
                            f"{deadline_s:g} s: {error}"
                        ) from error
                    time.sleep(min(backoff, remaining))
                    backoff = min(backoff * 2, 0.5)

    # -- background threads ---------------------------------------------------------------

    def _connect(self) -> Connection:
        """A new keep-alive connection to the agent: one per thread that calls it."""
        return Connection(self.base_url, self._token, self._ca)

    def _watch_once(self, connection: Connection, timeout_s: float, wait_s: float) -> None:
        since = self._snapshot.revision if self._snapshot is not None else 0
        identity = self._identity.ensure(connection, timeout_s)
        query = urllib.parse.urlencode(
            {
                "since": since,
                "pid": identity[0],
                "operators": ",".join(sorted(self._operators)),
                "timeout": wait_s,
            }
        )
        path = f"/v1/control/watch?{query}"
        status, body = connection.request("GET", path, timeout_s, headers=secret_headers(identity))
        if identity_problem(status, body):
            self._identity.lost(identity)  # the agent forgot us, or the id is another's: enrol
        if status == 200:
            snapshot = Snapshot.model_validate_json(body)
            with self._changed:
                held = self._snapshot
                # The watch thread and `refresh` both install: an answer to an older request
                # must not replace a newer snapshot the other one installed meanwhile (an
                # agent that lost its state, revision going back, is still followed).
                if (
                    held is not None
                    and held.revision != since
                    and held.revision > snapshot.revision
                ):
                    return
                self._snapshot = snapshot
                self.received_at = self._clock()
                self._changed.notify_all()
            self._arm(snapshot, self._operators)
        elif status != 304:
            raise OSError(f"watch answered {status}: {body[:200]!r}")

    def _arm(self, snapshot: Snapshot, operators: Iterable[str]) -> None:
        """Ack 'armed' for the operators this process is switched for on receipt (arming.py).

        Runs after the snapshot is in memory: a wrapper that marks itself busy later reads
        this snapshot at its check, so "not busy now" means "every later record is new".
        """
        for operator in operators:
            version = armed_version(snapshot, operator, busy=is_busy(operator))
            if version is not None:
                self.ack(operator, version, snapshot.config_version, kind=ARMED)

    def _watch_loop(self) -> None:
        connection = self._watch_connection = self._connect()
        backoff = 0.05
        while not self._stopped.is_set():
            try:
                wait = self._watch_timeout_s
                self._watch_once(connection, wait + 5.0, wait)
                backoff = 0.05
            except (OSError, http.client.HTTPException, ValueError) as error:
                log.debug("watch failed, retrying in %.2fs: %s", backoff, error)
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        connection.close()


# -- which operators this process is running an Arrow batch of right now ---------------------

_busy: dict[str, int] = {}


def is_busy(operator: str) -> bool:
    return _busy.get(operator, 0) > 0


@contextlib.contextmanager
def working_on(operator: str) -> Iterator[None]:
    """Mark one check-and-process step of `operator` (the wrapper enters it *before* reading
    the snapshot, so the watch thread never arms an operator mid-batch; see `_arm`)."""
    _busy[operator] = _busy.get(operator, 0) + 1
    try:
        yield
    finally:
        _busy[operator] -= 1


# -- the per-process singleton ---------------------------------------------------------------

_client: ControlClient | None = None
_client_pid: int | None = None
_lock = threading.Lock()


def _forget_parent_client() -> None:
    # The parent's threads do not exist in the child, and its lock may have been held
    # at fork time: start from nothing.
    global _client, _client_pid, _lock
    _client, _client_pid, _lock = None, None, threading.Lock()
    _busy.clear()


os.register_at_fork(after_in_child=_forget_parent_client)


def get_client() -> ControlClient | None:
    """This process's client, started on first use; None when no agent is configured.

    A Python worker outlives queries (PySpark reuses workers), so when the agent URL in the
    environment changes (a new query with its own agent) the old client is stopped and a
    new one started.
    """
    global _client, _client_pid
    pid = os.getpid()
    url = os.environ.get(ENV_URL)
    if _client_pid == pid and (_client.base_url if _client else None) == (url or None):
        return _client
    with _lock:
        current_url = _client.base_url if _client is not None else None
        if _client_pid != pid or current_url != (url or None):
            if _client is not None and _client_pid == pid:
                _client.stop(timeout=0.2)
            client = None
            counting.counter().drain()  # counts of an earlier query are not the new agent's
            if url:
                client = ControlClient(url, os.environ.get(ENV_TOKEN), pid=pid)
                client.start()
            _client, _client_pid = client, pid
    return _client


def current(operator: str | None = None) -> Snapshot | None:
    """The newest snapshot this process has seen (None without an agent)."""
    client = get_client()
    if client is None:
        return None
    if operator is not None:
        client.register(operator)
    return client.current()


def refresh(operator: str | None = None) -> Snapshot | None:
    """Ask the agent synchronously for its newest snapshot (`ControlClient.refresh`; raises
    `RefreshError`); None without an agent."""
    client = get_client()
    if client is None:
        return None
    if operator is not None:
        client.register(operator)
    return client.refresh()


def ack(
    operator: str,
    version: int,
    config_version: int,
    partition: int | None = None,
    batch_id: int | None = None,
    *,
    at: float | None = None,
) -> None:
    client = get_client()
    if client is not None:
        client.ack(operator, version, config_version, partition, batch_id, at=at)


def reset() -> None:
    """Stop and forget this process's client (tests; a job restarting in-process)."""
    global _client, _client_pid
    with _lock:
        if _client is not None and _client_pid == os.getpid():
            _client.stop()
        _client, _client_pid = None, None
