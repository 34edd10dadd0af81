"""One keep-alive HTTP(S) connection from a worker (or the driver) to the agent: the job
side's one transport. The driver's reads of Spark's own REST APIs (the UI's, a standalone
master's) go through it too (`get_json`).

Standard library only: every Python worker imports it (through `swivel.jobs.control.client`).
With the job's CA (PEM) the agent is verified against that CA alone.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import urllib.parse
from collections.abc import Mapping
from typing import Any


class Connection:
    """One keep-alive HTTP connection to the agent, reopened after any failure."""

    def __init__(self, base_url: str, token: str | None, ca: str | None = None) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"SWIVEL_AGENT_URL must be http(s)://host:port, got {base_url!r}")
        self._host = parsed.hostname
        self._tls = agent_tls_context(ca) if parsed.scheme == "https" else None
        self._port = parsed.port or (443 if self._tls else 80)
        self._prefix = parsed.path.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._conn: http.client.HTTPConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        timeout: float,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, bytes]:
        headers = {**self._headers, **(headers or {})}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            if self._conn is None and self._tls is not None:
                self._conn = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout, context=self._tls
                )
            elif self._conn is None:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            else:
                self._conn.timeout = timeout
                if self._conn.sock is not None:
                    self._conn.sock.settimeout(timeout)
            self._conn.request(method, self._prefix + path, body=payload, headers=headers)
            response = self._conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def abort(self) -> None:
        """From another thread: wake a request blocked in a long-poll."""
        conn = self._conn
        sock = conn.sock if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def get_json(url: str, timeout: float) -> Any:
    """The JSON document at `url` (no token); OSError when unreachable or not a 200."""
    parsed = urllib.parse.urlsplit(url)
    base = urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, "", "", ""))
    path = urllib.parse.urlunsplit(("", "", parsed.path or "/", parsed.query, ""))
    connection = Connection(base, None)
    try:
        status, body = connection.request("GET", path, timeout)
    except http.client.HTTPException as error:  # a malformed or cut answer: as unreachable
        raise OSError(f"GET {url}: {type(error).__name__}: {error}") from error
    finally:
        connection.close()
    if status != 200:
        raise OSError(f"GET {url} answered {status}")
    return json.loads(body)


def agent_tls_context(ca: str | None) -> ssl.SSLContext:
    """Verify the agent against the job's CA (PEM) alone; the system's CAs without one."""
    return ssl.create_default_context(cadata=ca) if ca else ssl.create_default_context()
