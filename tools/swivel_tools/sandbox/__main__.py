"""`python -m swivel_tools.sandbox`: run the sandbox API server in the foreground until SIGTERM.

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

from swivel_tools.sandbox.errors import ApiError
from swivel_tools.sandbox.registry import Registry
from swivel_tools.sandbox.resources import CRD_KEY, Endpoint
from swivel_tools.sandbox.server import DEFAULT_BOOKMARK_INTERVAL, Component, serve
from swivel_tools.sandbox.store import DEFAULT_HISTORY_LIMIT


def _report(ready_file: Path | None, state: dict[str, object]) -> None:
    if ready_file is not None:
        staging = ready_file.with_name(f".{ready_file.name}.tmp")
        staging.write_text(json.dumps(state), encoding="utf-8")
        staging.replace(ready_file)


def install_crds(registry: Registry) -> list[str]:
    """The Swivel CRDs, generated from the models (as the chart and `up` install them)."""
    from swivel.api.crds import KINDS, crd

    found = registry.catalogue.get(CRD_KEY)
    assert found is not None
    installed = []
    for kind in KINDS:
        body = crd(kind)
        try:
            registry.create(Endpoint.of(found), body)
        except ApiError as error:
            if error.code != 409:
                raise
        installed.append(body["metadata"]["name"])
    return installed


async def _run(args: argparse.Namespace) -> None:
    host, port, ready_file = args.host, args.port, args.ready_file
    components: list[Component] = []
    kubelet = None
    if args.kubelet_root is not None:
        from swivel_tools.sandbox.kubelet import Kubelet

        kubelet = Kubelet(args.kubelet_root)
        components.append(kubelet)
    try:
        running = await serve(
            host,
            port,
            history_limit=args.history,
            bookmark_interval=args.bookmark_interval,
            components=components,
        )
    except OSError as error:
        _report(ready_file, {"error": f"cannot listen on {host}:{port}: {error}"})
        raise
    if args.crds:
        install_crds(running.registry)
    operator = None
    if args.operator:
        from swivel_tools.sandbox.operating import OperatorProcess

        root = args.kubelet_root or Path(".")
        operator = OperatorProcess(
            running.url,
            root / "network.json",
            args.operator_log or root / "operator.log",
            kubeconfig_path=root / "operator.kubeconfig",
        )
        operator.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    logging.info("swivel sandbox API server listening on %s", running.url)
    state: dict[str, object] = {
        "pid": os.getpid(),
        "host": host,
        "port": running.port,
        "url": running.url,
    }
    if kubelet is not None:
        state["kubeletRoot"] = str(kubelet.root)
    if operator is not None:
        state["operatorLog"] = str(operator.log)
    _report(ready_file, state)
    try:
        await stop.wait()
    finally:
        logging.info("swivel sandbox API server stopping")
        if operator is not None:
            await operator.stop()
        await running.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m swivel_tools.sandbox", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--ready-file", type=Path, help="write pid/port here once listening")
    parser.add_argument("--history", type=int, default=DEFAULT_HISTORY_LIMIT,
                        help="watch events retained; older resourceVersions get 410")  # fmt: skip
    parser.add_argument("--bookmark-interval", type=float, default=DEFAULT_BOOKMARK_INTERVAL)
    parser.add_argument("--detach", action="store_true", help="fork into the background")
    parser.add_argument("--kubelet-root", type=Path, help="run pods; their files go here")
    parser.add_argument("--crds", action="store_true", help="install the Swivel CRDs")
    parser.add_argument("--operator", action="store_true", help="run `swivel operator` too")
    parser.add_argument("--operator-log", type=Path, help="default: KUBELET_ROOT/operator.log")
    args = parser.parse_args(argv)
    if args.detach:
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run(args))


if __name__ == "__main__":
    main()
