"""`SparkInternals.wait_for_executors` against a real HTTP server on 127.0.0.1 standing in
for Spark's status API: a poll the API fails (as the UI's REST does while a busy machine
starts the driver) counts as "not yet", not as the end of the wait (CI of stop 26)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from swivel.jobs.spark_internals import SparkInternals

APP = "app-20261127-0001"


@dataclass
class StatusAPI:
    """Answers `/executors` with `executors`; the first `failures` requests get a 503, the
    next `empty` ones a 200 with no body (a starting UI's answer)."""

    executors: list[dict[str, Any]]
    failures: int = 0
    empty: int = 0
    requests: int = 0
    url: str = ""


def _handler(api: StatusAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            api.requests += 1
            if self.path != f"/api/v1/applications/{APP}/executors":
                self.send_error(404)
            elif api.requests <= api.failures:
                self.send_error(503)
            else:
                starting = api.requests <= api.failures + api.empty
                body = b"" if starting else json.dumps(api.executors).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@dataclass
class _Context:
    uiWebUrl: str  # noqa: N815 (SparkContext's spelling)
    applicationId: str  # noqa: N815


@pytest.fixture
def api() -> Iterator[StatusAPI]:
    api = StatusAPI(executors=[])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()


def _internals(api: StatusAPI) -> SparkInternals:
    """Only the status-API half of SparkInternals: no JVM is needed to read executors."""
    internals = object.__new__(SparkInternals)
    internals.sc = _Context(api.url, APP)
    return internals


def _executor(id_: str) -> dict[str, Any]:
    return {"id": id_, "hostPort": "127.0.0.1:40000", "isActive": True, "totalCores": 1}


def test_failed_polls_count_as_not_yet(api: StatusAPI) -> None:
    api.executors = [{"id": "driver", "hostPort": "127.0.0.1:4040"}, _executor("1"), _executor("0")]
    api.failures, api.empty = 3, 2
    assert _internals(api).wait_for_executors(2, timeout=10.0) == ["0", "1"]
    assert api.requests == 6


def test_a_status_api_that_never_answers_ends_in_a_timeout_naming_it(api: StatusAPI) -> None:
    api.failures = 10**6
    with pytest.raises(TimeoutError, match=r"the status API did not answer .*503.* wanted 2"):
        _internals(api).wait_for_executors(2, timeout=0.5)


def test_a_silent_status_api_is_asked_with_no_more_than_the_time_left(api: StatusAPI) -> None:
    """Each poll's own timeout is capped by the wait's deadline (at least 1 s), so a short
    wait does not overrun by a full 10 s poll."""
    seen: list[float] = []
    internals = _internals(api)

    def executor_ids(timeout: float = 10.0) -> list[str]:
        seen.append(timeout)
        raise TimeoutError()  # no message: the error names its type

    internals.executor_ids = executor_ids  # type: ignore[method-assign]
    with pytest.raises(TimeoutError, match=r"did not answer \(TimeoutError\) after 2.0s"):
        internals.wait_for_executors(2, timeout=2.0)
    assert seen and all(1.0 <= t <= 2.0 for t in seen), seen


def test_too_few_executors_end_in_a_timeout_naming_the_count(api: StatusAPI) -> None:
    api.executors = [_executor("0")]
    with pytest.raises(TimeoutError, match=r"^1 executors after 0.5s, wanted 2$"):
        _internals(api).wait_for_executors(2, timeout=0.5)
