"""`connection.get_json`: the driver's reads of Spark's REST APIs (the UI's, a standalone
master's) over the job side's one transport; anything but a 200 is an OSError, as an
unreachable server is, so callers that tolerate one tolerate both."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator

import pytest

from swivel.jobs.control.connection import get_json


class _Spark(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        found = self.path.startswith("/api/v1/applications/app-1/")
        body = json.dumps({"path": self.path}).encode() if found else b"not found"
        self.send_response(200 if found else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def spark_ui() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Spark)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_the_document_at_a_url_with_its_path_and_query(spark_ui: str) -> None:
    url = f"{spark_ui}/api/v1/applications/app-1/stages/3?details=true"
    assert get_json(url, timeout=5) == {"path": "/api/v1/applications/app-1/stages/3?details=true"}


def test_an_error_status_is_an_os_error(spark_ui: str) -> None:
    with pytest.raises(OSError, match="answered 404"):
        get_json(f"{spark_ui}/json/", timeout=5)


def test_nobody_listening_is_an_os_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OSError):
        get_json(f"http://127.0.0.1:{port}/json/", timeout=5)


def test_a_malformed_answer_is_an_os_error() -> None:
    """A server that answers something that is not HTTP (http.client's BadStatusLine, not
    an OSError of its own): callers that tolerate an unreachable server tolerate it too."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]

        def answer() -> None:
            client, _ = server.accept()
            with client:
                client.recv(4096)
                client.sendall(b"garbage\r\n\r\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        with pytest.raises(OSError, match="BadStatusLine"):
            get_json(f"http://127.0.0.1:{port}/json/", timeout=5)
        thread.join(timeout=5)
