"""A worker's acknowledgements on their way to the agent: queued by the data path, posted
in batches by a daemon thread (`POST /v1/control/acks`, docs/control-protocol.md).

The data path never waits for the network: `add` only queues (a duplicate is dropped), and
the thread gathers the acks of one check (`ACK_WINDOW_S`) into one post. Each ack is sent
with the worker id the agent knows this process by at the moment it is sent, not when it was
queued: the id may change in between (identity.py). It is its own part of the control client
because its failure handling is its own: what the agent refused for good is dropped, anything
else is queued again in front of the newer acks and sent after a backoff.

The same thread reports the worker's counts (`counting.WorkCounter`: rows and busy time per
operator and partition, Chi §5) on the same connection: with the next post of acks, or on
their own once `REPORT_EVERY_S` has passed since the last report, never per batch. The body
is then an object, `{"acks": [...], "counts": [...]}` (`swivel.protocol.acks.AckReport`).
A report whose post failed is sent again with its `seq`, so the agent counts it once.

Standard library only: every Python worker imports it (through `swivel.jobs.control.client`).
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from swivel.jobs.control import counting
from swivel.jobs.control.connection import Connection
from swivel.jobs.control.identity import WorkerIdentity, identity_problem, secret_headers

ACK_WINDOW_S = 0.002  # gather acks from the Arrow batches of one check before posting
MAX_BACKOFF_S = 2.0
MAX_QUEUED_ACKS = 10_000
REPORT_EVERY_S = 1.0  # counts go out at most this often, unless an ack carries them sooner
MAX_UNSENT_REPORTS = 8  # `swivel.protocol.acks.MAX_PENDING_REPORTS`; older ones are dropped
# The agent refused the acks as malformed (400), from this credential (401, 403), or as
# untrue of the job (422): sent again they would be refused again, and hold back the acks
# queued behind them. 409 (a batch the driver has not reported yet) and anything else are
# retried; a 403 or 409 naming `pid` (the agent forgot this worker, or its id is another
# process's) first enrols again (identity.py).
DROPPED_ACK_STATUSES = frozenset({400, 401, 403, 413, 422})
# What makes an ack a duplicate: (operator, function version, configuration version, kind).
AckKey = tuple[str, int, int, str]

log = logging.getLogger(__name__)


class AckSender:
    """The queue of one worker process's acks and the loop that posts them."""

    def __init__(
        self,
        connect: Callable[[], Connection],
        identity: WorkerIdentity,
        stopped: threading.Event,
        clock: Callable[[], float],
        counter: Callable[[], counting.WorkCounter] = counting.counter,
    ) -> None:
        self._connect, self._identity = connect, identity
        self._stopped, self._clock = stopped, clock
        self._acks: list[dict[str, Any]] = []
        self._acked: set[AckKey] = set()
        self._ready = threading.Condition()
        self._counter = counter  # called at each drain: a forked child has its own
        self._unsent: list[dict[str, Any]] = []  # counts reports, oldest first, without pid
        self._seq = int(time.time() * 1000)  # above any seq an earlier holder of the id sent
        self._reported_at = time.monotonic()

    def add(
        self, key: AckKey, partition: int | None, batch_id: int | None, at: float | None
    ) -> None:
        """Queue one ack (`at`: when; now by default); a duplicate of `key` is dropped."""
        if key in self._acked:
            return
        operator, version, config_version, kind = key
        entry = {  # the worker id is added when sent: it may change (identity.py)
            "operator": operator,
            "version": version,
            "configVersion": config_version,
            "partition": partition,
            "batchId": batch_id,
            "at": self._clock() if at is None else at,
            "kind": kind,
        }
        with self._ready:
            self._acked.add(key)
            if len(self._acks) < MAX_QUEUED_ACKS:
                self._acks.append(entry)
            self._ready.notify()

    def wake(self) -> None:
        """Let the loop see `stopped` now rather than at the next ack."""
        with self._ready:
            self._ready.notify_all()

    def _report_due(self) -> bool:
        """Counts wait to go out, and the last report is `REPORT_EVERY_S` old."""
        waiting = bool(self._unsent) or self._counter().pending
        return waiting and time.monotonic() - self._reported_at >= REPORT_EVERY_S

    def _until_report_s(self) -> float:
        """How long to sleep before looking at the counts again: until the next report may
        go, or a whole period when it already may (nothing was pending then)."""
        since = time.monotonic() - self._reported_at
        return max(0.01, REPORT_EVERY_S - since) if since < REPORT_EVERY_S else REPORT_EVERY_S

    def _reports(self) -> list[dict[str, Any]]:
        """The unsent reports plus one of the counts gathered since the last drain."""
        counter = self._counter()
        if counter.pending:
            interval, partitions = counter.drain()
            self._seq += 1
            report = {"seq": self._seq, "intervalSeconds": round(interval, 6)}
            self._unsent.append({**report, "partitions": partitions})
            self._unsent = self._unsent[-MAX_UNSENT_REPORTS:]
        return self._unsent

    def run(self) -> None:
        """The daemon thread: post what is queued until `stopped` is set."""
        connection = self._connect()
        backoff = 0.05
        while not self._stopped.is_set():
            with self._ready:
                while not self._acks and not self._stopped.is_set() and not self._report_due():
                    self._ready.wait(self._until_report_s())
            self._stopped.wait(ACK_WINDOW_S)
            with self._ready:
                batch, self._acks = self._acks, []
            reports = self._reports()
            if not batch and not reports:
                continue
            try:
                held = self._identity.ensure(connection, 5.0)
                sent = [{"pid": held[0], **entry} for entry in batch]
                body: Any = sent
                if reports:
                    body = {"acks": sent, "counts": [{"pid": held[0], **r} for r in reports]}
                status, answer = connection.request(
                    "POST", "/v1/control/acks", 5.0, body, headers=secret_headers(held)
                )
                if identity_problem(status, answer):  # enrol again, then send them again
                    self._identity.lost(held)
                    raise OSError(f"acks answered {status}: {answer[:200]!r}")
                if status in DROPPED_ACK_STATUSES:  # retrying cannot change the answer
                    log.warning("acks refused (%d), dropped: %s", status, answer[:500])
                elif status >= 300:  # 409: not yet (watch first, the driver's batch)
                    raise OSError(f"acks answered {status}: {answer[:200]!r}")
                backoff = 0.05
                self._unsent, self._reported_at = [], time.monotonic()
            except (OSError, http.client.HTTPException) as error:
                log.debug("ack post failed, retrying in %.2fs: %s", backoff, error)
                with self._ready:
                    self._acks = (batch + self._acks)[:MAX_QUEUED_ACKS]
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        connection.close()
