"""`python -m swivel.sandbox`: run the sandbox API server in the foreground until SIGTERM.

`swivel sandbox up` starts this with `--detach`: the process forks and its first half
exits at once, so the server is nobody's child (no zombie, no "still running" warning in
the launcher) and outlives the terminal. Once listening it writes a ready file (JSON: pid,
host, port, url) atomically, so the launcher learns the ephemeral port without racing for
it; if it cannot start, the ready file says why (`{"error": ...}`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
from pathlib import Path

from swivel.sandbox.server import DEFAULT_BOOKMARK_INTERVAL, serve
from swivel.sandbox.store import DEFAULT_HISTORY_LIMIT


def _report(ready_file: Path | None, state: dict[str, object]) -> None:
    if ready_file is not None:
        staging = ready_file.with_name(f".{ready_file.name}.tmp")
        staging.write_text(json.dumps(state), encoding="utf-8")
        staging.replace(ready_file)


async def _run(
    host: str, port: int, ready_file: Path | None, history: int, bookmarks: float
) -> None:
    try:
        running = await serve(host, port, history_limit=history, bookmark_interval=bookmarks)
    except OSError as error:
        _report(ready_file, {"error": f"cannot listen on {host}:{port}: {error}"})
        raise
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    logging.info("swivel sandbox API server listening on %s", running.url)
    _report(
        ready_file, {"pid": os.getpid(), "host": host, "port": running.port, "url": running.url}
    )
    try:
        await stop.wait()
    finally:
        logging.info("swivel sandbox API server stopping")
        await running.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m swivel.sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--ready-file", type=Path, help="write pid/port here once listening")
    parser.add_argument("--history", type=int, default=DEFAULT_HISTORY_LIMIT,
                        help="watch events retained; older resourceVersions get 410")  # fmt: skip
    parser.add_argument("--bookmark-interval", type=float, default=DEFAULT_BOOKMARK_INTERVAL)
    parser.add_argument("--detach", action="store_true", help="fork into the background")
    args = parser.parse_args(argv)
    if args.detach:
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(
            _run(args.host, args.port, args.ready_file, args.history, args.bookmark_interval)
        )


if __name__ == "__main__":
    main()
