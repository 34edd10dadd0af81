"""Round trips from the bench's Python process into its driver's JVM, per calling thread
and command (`swivel bench migration --py4j-calls`, a diagnostic).

Why: with `--thread-cpu`, the driver JVM's unnamed `Thread-N` threads used ~10-14 s of CPU
over the prewarmed strategy's window against ~1 s in the others'. Those are py4j's: each
answers the calls of one Python thread (pinned-thread mode). /proc cannot say which calls;
this counts them where they are made. py4j sends its commands through
`GatewayClient.send_command` (not a new connection's authentication; a retried command
counts twice), so it is wrapped for the recording's time: per (Python thread, command) the
count and the wall time until the JVM answered. One recording at a time. A call's wall
time includes what the JVM waited for (a Spark job, a lock), so it bounds its CPU rather
than measures it.

Command kinds (py4j's protocol): `call <method>`, `new <class>` (a constructor),
`delete` (a Python proxy's finalizer releasing its Java object), `reflect` (a name looked
up on `jvm.`: each step of `jvm.org.apache...` is one), `list`/`array`/`field`/`view`/
`other`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from py4j.java_gateway import GatewayClient  # type: ignore[import-untyped]

KINDS = {"c": "call", "i": "new", "m": "delete", "r": "reflect", "l": "list", "a": "array"}
KINDS |= {"f": "field", "j": "view"}


def command_key(command: str) -> str:
    """`call <method>`, `new <class>`, `reflect <name>` (a name of a `jvm.a.b.C` path),
    `reflect-member <Class>.<member>` (a static member, looked up before its call), or the
    command's kind (py4j's text protocol: the first line is the kind, a call's third line
    its method, a constructor's second its class, a look-up's second its sub-command)."""
    lines = command.split("\n")
    kind = KINDS.get(lines[0], "other")
    if kind == "call" and len(lines) > 2:
        return f"call {lines[2]}"
    if kind == "new" and len(lines) > 1:
        return f"new {lines[1].rsplit('.', 1)[-1]}"
    if kind == "reflect" and len(lines) > 3 and lines[1] == "m":  # a member of a class
        return f"reflect-member {lines[2].rsplit('.', 1)[-1]}.{lines[3]}"
    if kind == "reflect" and len(lines) > 2:  # a step of a `jvm.a.b.C` path, looked up
        return f"reflect {lines[2]}"
    return kind


def thread_key(name: str) -> str:
    """A Python thread's name without its number or target (`ThreadPoolExecutor-3_1` ->
    `ThreadPoolExecutor`, `Thread-4 (run)` -> `Thread (run)`), so the same role adds up
    across steps. py4j's own finalizer thread (`Thread`) sends every proxy's release,
    whichever thread dropped the proxy."""
    target = re.search(r" \([^)]*\)$", name)
    suffix = target.group(0) if target else ""
    base = name[: len(name) - len(suffix)]
    return (re.sub(r"[-_ ]?\d+(_\d+)?$", "", base) or base) + suffix


class Py4jCalls:
    """Counts the commands sent while it is entered (one recording at a time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], list[float]] = {}
        self._original: Callable[..., Any] | None = None
        self.began = 0.0
        self.wall_s = 0.0

    def __enter__(self) -> Py4jCalls:
        original = GatewayClient.send_command
        if getattr(original, "_py4j_calls", None) is not None:
            raise RuntimeError("another py4j recording is running: one at a time")
        self._original = original
        record = self._record

        def send_command(client: Any, command: str, *args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return original(client, command, *args, **kwargs)
            finally:
                record(command, time.perf_counter() - began)

        send_command._py4j_calls = self  # type: ignore[attr-defined]
        GatewayClient.send_command = send_command
        self.began = time.monotonic()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._original is not None:
            GatewayClient.send_command = self._original
            self._original = None
        self.wall_s = time.monotonic() - self.began

    def _record(self, command: str, seconds: float) -> None:
        key = (thread_key(threading.current_thread().name), command_key(command))
        with self._lock:
            entry = self._counts.setdefault(key, [0, 0.0])
            entry[0] += 1
            entry[1] += seconds

    def report(self, top: int = 25) -> dict[str, Any]:
        """The `top` (thread, command) pairs by count, with their wall ms; totals per
        thread."""
        with self._lock:
            counts = {key: tuple(value) for key, value in self._counts.items()}
        threads: dict[str, list[float]] = {}
        for (thread, _), (count, seconds) in counts.items():
            total = threads.setdefault(thread, [0, 0.0])
            total[0] += count
            total[1] += seconds
        busiest = sorted(counts.items(), key=lambda item: -item[1][0])[:top]
        return {
            "wall_s": round(self.wall_s, 1),
            "calls": sum(int(c) for c, _ in counts.values()),
            "per_thread": {
                thread: {"calls": int(c), "wall_ms": round(s * 1e3)}
                for thread, (c, s) in sorted(threads.items(), key=lambda item: -item[1][0])
            },
            "busiest": [
                {"thread": thread, "command": command, "calls": int(c), "wall_ms": round(s * 1e3)}
                for (thread, command), (c, s) in busiest
            ],
        }
