"""The worker's control client follows the agent URL of the query it serves."""

from __future__ import annotations

import socket

import pytest

from swivel.jobs.control import client as control


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_reused_worker_follows_a_new_agent_url(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = f"http://127.0.0.1:{_closed_port()}", f"http://127.0.0.1:{_closed_port()}"
    control.reset()
    try:
        monkeypatch.setenv(control.ENV_URL, first)
        one = control.get_client()
        assert one is not None and one.base_url == first
        assert control.get_client() is one  # the same query: the same client
        monkeypatch.setenv(control.ENV_URL, second)
        two = control.get_client()
        assert two is not None and two is not one and two.base_url == second
        monkeypatch.delenv(control.ENV_URL)
        assert control.get_client() is None
    finally:
        control.reset()
