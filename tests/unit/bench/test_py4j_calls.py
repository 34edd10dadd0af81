"""The py4j diagnostic's keys, read off py4j's text protocol (py4j/protocol.py); the
recording itself runs in the migration bench's smoke test, against a real driver JVM."""

from __future__ import annotations

import pytest

from swivel_tools.bench.py4j_calls import Py4jCalls, command_key, thread_key


@pytest.mark.parametrize(
    ("command", "key"),
    [
        ("c\no42\nannounced\nsroot\nL0\ne\n", "call announced"),
        ("i\njava.util.ArrayList\ne\n", "new ArrayList"),
        ("m\nd\no42\ne\n", "delete"),
        ("r\nu\norg.apache.hadoop\nrj\ne\n", "reflect org.apache.hadoop"),
        (
            "r\nm\npy4j.reflection.TypeUtil\nisInstanceOf\ne\n",
            "reflect-member TypeUtil.isInstanceOf",
        ),
        ("l\nc\no3\no4\ne\n", "list"),
        ("s\ne\n", "other"),
    ],
)
def test_a_command_is_keyed_by_its_kind_and_name(command: str, key: str) -> None:
    assert command_key(command) == key


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("ThreadPoolExecutor-3_1", "ThreadPoolExecutor"),
        ("Thread-12", "Thread"),
        ("swivel-prewarm", "swivel-prewarm"),
        ("MainThread", "MainThread"),
        ("Thread-4 (run)", "Thread (run)"),
    ],
)
def test_a_thread_is_keyed_by_its_role(name: str, key: str) -> None:
    assert thread_key(name) == key


def test_one_recording_at_a_time_and_the_patch_is_removed() -> None:
    from py4j.java_gateway import GatewayClient  # type: ignore[import-untyped]

    original = GatewayClient.send_command
    with Py4jCalls(), pytest.raises(RuntimeError, match="one at a time"), Py4jCalls():
        pass
    assert GatewayClient.send_command is original
