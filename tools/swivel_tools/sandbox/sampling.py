"""A poor man's sampling profiler for the sandbox's processes (py-spy is not installed).

    python -m swivel_tools.sandbox.sampling --out FILE [--every 0.005] -- -m MODULE [ARGS...]

runs MODULE like `python -m` would, with a daemon thread that looks at every thread's stack
every `--every` seconds (`sys._current_frames`) and counts the stacks that are busy (not
parked in the event loop's selector, a lock or a queue). FILE gets the collapsed stacks
(`frame;frame;... count`, the input of flame-graph tools), rewritten every few seconds and
at exit, so a process stopped by a signal still leaves its profile. `summary(FILE)` reads
one back: the busy samples by innermost function and by any function on the stack.
Sampling holds the GIL for a moment per tick: expect a few percent of overhead.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import contextlib
import cProfile
import pstats
import runpy
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

IDLE_LEAVES = frozenset(
    {
        "select",
        "poll",
        "epoll",
        "wait",
        "acquire",
        "_wait_for_tstate_lock",
        "get",
        "sleep",
        "accept",
        "recv_into",
        "readinto",
        "_worker",
        "run_forever",
    }
)
FLUSH_EVERY_S = 5.0


def _stack(frame: FrameType | None) -> list[str]:
    names: list[str] = []
    while frame is not None:
        code = frame.f_code
        names.append(f"{Path(code.co_filename).stem}:{code.co_name}")
        frame = frame.f_back
    names.reverse()
    return names


class Sampler:
    def __init__(self, out: Path, every: float) -> None:
        self.out, self.every = out, every
        self.counts: collections.Counter[str] = collections.Counter()
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()
        atexit.register(self.stop)

    def _run(self) -> None:
        me = threading.get_ident()
        flushed = time.monotonic()
        while not self._stop.wait(self.every):
            self.ticks += 1
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                stack = _stack(frame)
                if stack and stack[-1].split(":", 1)[1] not in IDLE_LEAVES:
                    self.counts[";".join(stack)] += 1
            if time.monotonic() - flushed > FLUSH_EVERY_S:
                self.flush()
                flushed = time.monotonic()

    def flush(self) -> None:
        lines = [f"# ticks {self.ticks} every {self.every}"]
        lines += [f"{stack} {count}" for stack, count in self.counts.most_common()]
        self.out.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def stop(self) -> None:
        self._stop.set()
        self.flush()


class Tracer:
    """Deterministic profiling (cProfile) of every thread, written as one pstats file at exit.

    The stack sampler is biased towards the moments a thread releases the GIL (socket
    writes, polls); this one counts every call, at the cost of running 1.5-2x slower."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.profiles: list[cProfile.Profile] = []

    def start(self) -> None:
        def boot(*_: object) -> None:  # the first call in a new thread: profile that thread
            profile = cProfile.Profile()
            self.profiles.append(profile)
            profile.enable()

        threading.setprofile(boot)
        main = cProfile.Profile()
        self.profiles.append(main)
        main.enable()
        atexit.register(self.stop)

    def stop(self) -> None:
        for profile in self.profiles:
            profile.disable()
        stats = pstats.Stats(self.profiles[0])
        for profile in self.profiles[1:]:
            with contextlib.suppress(TypeError):  # a thread that never called anything
                stats.add(profile)
        stats.dump_stats(str(self.out))


def summary(path: Path, top: int = 25, match: str = "") -> str:
    """The busy samples of a profile by innermost function and by function on the stack."""
    own: collections.Counter[str] = collections.Counter()
    anywhere: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        stack, count_text = line.rsplit(" ", 1)
        if match and match not in stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        own[frames[-1]] += count
        for name in set(frames):
            anywhere[name] += count
    out = [f"busy samples: {total}", "innermost:"]
    out += [f"  {c:7d} {100 * c / max(total, 1):5.1f}%  {n}" for n, c in own.most_common(top)]
    out.append("on the stack:")
    out += [f"  {c:7d} {100 * c / max(total, 1):5.1f}%  {n}" for n, c in anywhere.most_common(top)]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--every", type=float, default=0.005)
    parser.add_argument("--trace", action="store_true", help="cProfile every thread instead")
    parser.add_argument("--summary", action="store_true", help="print the summary of --out")
    parser.add_argument("--match", default="", help="only stacks containing this (--summary)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- -m MODULE [ARGS...]")
    args = parser.parse_args(argv)
    if args.summary:
        print(summary(args.out, match=args.match))
        return
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if len(command) < 2 or command[0] != "-m":
        parser.error("expected -- -m MODULE [ARGS...]")
    module, rest = command[1], command[2:]
    if args.trace:
        Tracer(args.out).start()
    else:
        Sampler(args.out, args.every).start()
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
