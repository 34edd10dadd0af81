"""A local Spark standalone cluster (master + workers) from the pip package's `spark-class`,
for the cluster tests and the migration benchmarks.

    with LocalCluster(workers=2) as cluster:
        spark = cluster.session(executors=2)
        ...

Everything runs on ephemeral ports with its work and log directories under one temporary
folder, and `stop()` ends only the processes this object started (their process groups).

No orphans when the Python process goes away without `stop()`:

- each daemon is started with `PR_SET_PDEATHSIG` = SIGTERM (Linux): the kernel signals the
  JVM when the thread that started it dies, even on SIGKILL of the interpreter; the JVM's
  shutdown hooks run (a worker kills its executors);
- `atexit` and SIGTERM / SIGINT / SIGHUP handlers (installed from the main thread at the
  first `start()`) stop every running cluster and then chain to the handler that was there
  before (a default disposition is restored and the signal re-raised, so the exit status
  still says "killed by SIGTERM");
- a `start()` that fails (a daemon exits early, the workers time out) stops what it
  started before it raises: callers start a cluster before their `try`, and `__exit__`
  does not run when `__enter__` raises.

Start clusters from a long-lived thread (the main thread): the death signal follows the
thread that forked the daemon. Sizing for a
2-core / 24 GiB machine: each worker offers 2 cores and 4 GiB, executors take 1 core and
1 GiB, so worker 0 hosts the first two executors.

Standalone mode launches as many executors as cores allow, so the app is started while only
`initial_workers` workers are up and its executor limit is pinned at once with
`requestTotalExecutors(executors)`; the other workers join afterwards as spare capacity,
which a later `requestTotalExecutors(n + 1)` (a rescale) uses. `killExecutors` lowers the
target, so a killed executor is not replaced.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from swivel.jobs.control.connection import get_json

_PR_SET_PDEATHSIG = 1
_running: set[LocalCluster] = set()  # started, not stopped (strong: stop them at exit)
_install_lock = threading.Lock()


def _libc_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_prctl = _libc_prctl()  # looked up before any fork: the child only calls it


def die_with_parent(parent: int) -> Any:
    """A `preexec_fn`: the child gets SIGTERM when the thread that forked it dies."""

    def setup() -> None:
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return setup


def stop_all() -> None:
    """Stop every cluster started in this process and not stopped yet."""
    for cluster in list(_running):
        with contextlib.suppress(Exception):
            cluster.stop(grace_s=5.0)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    stop_all()
    previous = _previous.get(signum, signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
    elif previous == signal.SIG_DFL:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # die of the signal, as without the handler
    # SIG_IGN: it was ignored before, keep running


_previous: dict[int, Any] = {}  # signal -> the handler before ours
_registered: list[Any] = []


def _install_cleanup() -> None:
    """`atexit` + signal handlers that chain, once per process (signals: main thread only)."""
    with _install_lock:
        if _previous or stop_all in _registered:
            return
        _registered.append(stop_all)
        atexit.register(stop_all)
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous = signal.getsignal(signum)
            if previous is None or previous == signal.SIG_IGN:
                continue  # installed from C, or ignored on purpose (nohup): leave it
            _previous[signum] = previous
            signal.signal(signum, _on_signal)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass(eq=False)  # hashed by identity: the registry of running clusters holds it
class LocalCluster:
    """Master + `workers` workers on 127.0.0.1; start with `start()` or as a context manager."""

    workers: int = 2
    worker_cores: int = 2
    worker_memory: str = "4g"
    root: Path | None = None
    master_port: int = 0
    master_ui_port: int = 0
    _processes: list[_Process] = field(default_factory=list)
    _owns_root: bool = False
    _started_workers: int = 0

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://127.0.0.1:{self.master_ui_port}"

    def _spawn(self, name: str, *args: str) -> _Process:
        assert self.root is not None
        log = self.root / f"{name}.log"
        env = dict(os.environ)
        env["SPARK_HOME"] = str(spark_home())
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env["SPARK_LOG_DIR"] = str(self.root / "logs")
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        env["SPARK_DAEMON_MEMORY"] = "256m"
        spark_class = str(spark_home() / "bin" / "spark-class")
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [spark_class, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: stop() ends exactly it
                preexec_fn=die_with_parent(os.getpid()),  # noqa: PLW1509 (prctl only)
            )
        process = _Process(name, popen, log)
        self._processes.append(process)
        return process

    def start(self, initial_workers: int | None = None, timeout: float = 60.0) -> LocalCluster:
        """Start the master and `initial_workers` (default: all) workers; wait until alive."""
        _install_cleanup()
        _running.add(self)
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="swivel-cluster-"))
            self._owns_root = True
        self.root.mkdir(parents=True, exist_ok=True)
        self.master_port = self.master_port or free_port()
        self.master_ui_port = self.master_ui_port or free_port()
        count = self.workers if initial_workers is None else initial_workers
        try:
            self._spawn(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.master_port),
                "--webui-port", str(self.master_ui_port),
            )  # fmt: skip
            for _ in range(count):
                self.add_worker(wait=False)
            self.wait_for_workers(count, timeout)
        except BaseException:  # a daemon exited early, timed out, Ctrl-C: no half cluster
            self.stop(grace_s=5.0)
            raise
        return self

    def add_worker(self, wait: bool = True, timeout: float = 60.0) -> None:
        """Start one more worker (spare capacity for a scale-out)."""
        assert self.root is not None
        index = self._started_workers
        self._started_workers += 1
        work = self.root / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        self._spawn(
            f"worker-{index}",
            "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1",
            "--port", str(free_port()),
            "--webui-port", str(free_port()),
            "--cores", str(self.worker_cores),
            "--memory", self.worker_memory,
            "--work-dir", str(work),
            self.master_url,
        )  # fmt: skip
        if wait:
            self.wait_for_workers(self._started_workers, timeout)

    def master_state(self) -> dict[str, Any]:
        return dict(get_json(f"{self.master_ui}/json/", timeout=5))

    def alive_workers(self) -> int:
        try:
            state = self.master_state()
        except (OSError, ValueError):  # not up yet; a starting UI can answer 200 with no body
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def wait_for_workers(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() < count:
            for process in self._processes:
                if process.popen.poll() is not None:
                    tail = process.log.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"{process.name} exited early:\n{tail}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.alive_workers()} of {count} workers alive")
            time.sleep(0.25)

    def session(
        self,
        executors: int = 2,
        *,
        app_name: str = "swivel-cluster",
        bins: int = 8,
        conf: dict[str, str] | None = None,
    ) -> Any:
        """A SparkSession on this cluster with exactly `executors` executors registered.

        The UI runs on an ephemeral port (the REST task list verifies moves)."""
        from pyspark.sql import SparkSession

        assert self.root is not None, "start() the cluster first"
        os.environ["PYSPARK_PYTHON"] = sys.executable
        builder = (
            SparkSession.builder.master(self.master_url)
            .appName(app_name)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.memory", "1g")
            .config("spark.executor.memory", "1g")
            .config("spark.executor.cores", "1")
            .config("spark.ui.enabled", "true")
            .config("spark.ui.port", str(free_port()))
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(bins))
            .config("spark.default.parallelism", "2")
            .config("spark.pyspark.python", sys.executable)
            .config("spark.sql.adaptive.enabled", "false")
            .config("spark.local.dir", str(self.root / "driver-local"))
        )
        for key, value in (conf or {}).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        from swivel.jobs.spark_internals import SparkInternals

        internals = SparkInternals(spark)
        internals.request_total_executors(executors)
        internals.wait_for_executors(executors, timeout=90.0)
        return spark

    def pids(self) -> list[int]:
        """The daemons' process ids (each leads its own process group)."""
        return [p.popen.pid for p in self._processes]

    def stop(self, grace_s: float = 15.0) -> None:
        """End the processes this cluster started (their own process groups), newest first."""
        _running.discard(self)
        for process in reversed(self._processes):
            # the group too when its leader is gone: a worker's executors live in it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.popen.pid, signal.SIGTERM)
        for process in reversed(self._processes):
            try:
                process.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.popen.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):  # the rest still runs
                    process.popen.wait(timeout=5)
        for process in self._processes:  # stragglers of a group whose leader is gone
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.popen.pid, signal.SIGKILL)
        self._processes.clear()
        if self._owns_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start() if not self._processes else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
