"""How fast the operator reacts: Reconfiguration applied -> plan delivered to the agent.

    python benchmarks/operator_reaction.py [--jobs 1,100@5,100] [--reconfigurations 20]
        [--rate R] [--keep-completed] [--profile sample|trace] [--workdir DIR] [--output json]

What runs (all on this machine, no Spark):

- the sandbox API server as a subprocess (`python -m swivel_tools.sandbox --crds`, no
  kubelet);
- the real operator as a subprocess, started the way `swivel sandbox up` starts it:
  `python -m swivel_tools.sandbox.network --map network.json -- operator --all-namespaces
  --standalone --metrics-port P` (production intervals: health 10 s, reconfiguration
  follow-up 2 s); it reaches each agent through the Service name
  `http://JOB-driver.NS.svc:8470`, which the map resolves to the agent's local port;
- one real agent per job (`create_app(Hub(...), token)`, the app `swivel agent` serves, with
  its durable state directory), all on 127.0.0.1 ports in one thread of this process. Each
  is started once the operator created the job's driver pod, with the token from the job's
  Secret and the job from its ConfigMap, as the pod's agent container would be;
- this process also plays the kubelet (the driver pod's status is set to Running) and the
  job's side of the agent: a "driver" reports a first batch (the agent turns ready) and a
  "worker" long-polls the agent's control channel (`Hub.watch`, what `/v1/control/watch`
  serves), acknowledges each new function version and reports the batch complete, so
  plans complete and the next reconfiguration of the job is not refused as busy.

Per job count (a fresh namespace each): create the StreamJobs, wait until all are Ready,
then run rounds: each round creates one Reconfiguration (a `functionUpdates` params change)
per job, one create call after the other, and waits until all are Completed. The reaction
of one Reconfiguration is the agent's `acceptedAt` for its plan (the agent's clock, after
validation, planning and the fsync of its state) minus the moment the create call returned
(the same clock: the agents run in this process). Reconciles/s is the growth of the
operator's `swivel_operator_reconciles_total` (all handlers: create/update/timers) over the
rounds' window, divided by its length. Goal: p99 <= 1 s for 1 and for 100 jobs.

By default each round's Reconfigurations are deleted once Completed, so every round meets
the same namespace (the steady state). `--keep-completed` keeps them, as users keep them
(the audit trail): the operator lists only one job's Reconfigurations (by the label
`swivel.dev/job`), so the rounds stay flat as they accumulate (docs/operator.md,
"Reaction benchmark").

`--jobs` takes scenarios, `COUNT` (at `--rate`, default a burst) or `COUNT@RATE`, run one
after the other (e.g. `1,100@5,100`), each in its own namespace, its jobs deleted at its
end. The report has, per Reconfiguration, the CPU ms of the sandbox, the operator and this
process, and the API requests by client (the sandbox's `GET /sandbox/requests`).
`--profile sample|trace` profiles the sandbox and the operator
(`swivel_tools.sandbox.sampling`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from aiohttp import web
from kubernetes import client

from swivel.api.manifests import parse_manifest
from swivel.api.sparkconf import rendered
from swivel.api.streamjob import StreamJob
from swivel.jobs.agent.app import create_app
from swivel.jobs.agent.auth import tls_context
from swivel.jobs.agent.hub import Hub
from swivel.jobs.agent.store import StateStore
from swivel.operator.credentials import JobCredentials
from swivel_tools.sandbox import kubeconfig
from swivel_tools.sandbox.kubelet import die_with_parent
from swivel_tools.sandbox.network import NetworkMap

ROOT = Path(__file__).resolve().parents[1]
GROUP, VERSION = "swivel.dev", "v1alpha1"
AGENT_PORT = 8470
GOAL_P99_MS = 1000.0
DEFAULT_JOBS = (1, 100)
DEFAULT_RECONFIGURATIONS = 20
T = TypeVar("T")


def wait_for(check: Callable[[], T | None], timeout: float, what: str, every: float = 0.05) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f}s: {what}")
        time.sleep(every)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


# -- the processes: sandbox API server and the operator ---------------------------------------


class Processes:
    """The sandbox and the operator as subprocesses of this one, stopped in reverse order."""

    def __init__(self, workdir: Path, *, profile: str = "") -> None:
        self.workdir, self.profile = workdir, profile
        self.network_file = workdir / "network.json"
        self.kubeconfig = workdir / "kubeconfig"
        self.operator_log = workdir / "operator.log"
        self.metrics_port = free_port()
        self._children: list[subprocess.Popen[bytes]] = []
        self.url = ""

    def _spawn(self, argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
        # python -m M ... -> python -m swivel_tools.sandbox.sampling ... -- -m M ...
        if self.profile:
            trace = ["--trace"] if self.profile == "trace" else []
            out = log.with_suffix(".pstats" if trace else ".samples")
            argv = [argv[0], "-m", "swivel_tools.sandbox.sampling", *trace, "--out", str(out), "--",
                    *argv[1:]]  # fmt: skip
        with log.open("ab") as output:
            child = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
            )
        self._children.append(child)
        return child

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SWIVEL_")}
        env.pop("KUBECONFIG", None)
        env["PYTHONUNBUFFERED"] = "1"
        ready = self.workdir / "sandbox.ready"
        sandbox = self._spawn(
            [sys.executable, "-m", "swivel_tools.sandbox", "--crds", "--ready-file", str(ready)],
            self.workdir / "sandbox.log",
            env,
        )

        def started() -> dict[str, Any] | None:
            if sandbox.poll() is not None:
                raise RuntimeError(f"the sandbox exited ({sandbox.returncode}); see its log")
            with contextlib.suppress(OSError, ValueError):
                state: dict[str, Any] = json.loads(ready.read_text(encoding="utf-8"))
                if "error" in state:
                    raise RuntimeError(f"the sandbox: {state['error']}")
                return state
            return None

        self.url = str(wait_for(started, 30, "the sandbox API server")["url"])
        kubeconfig.write(self.kubeconfig, self.url)
        NetworkMap().save(self.network_file)
        operator = [
            sys.executable, "-m", "swivel_tools.sandbox.network", "--map", str(self.network_file),
            "--", "operator", "--all-namespaces", "--standalone",
            "--metrics-port", str(self.metrics_port),
        ]  # fmt: skip
        self.operator = self._spawn(
            operator, self.operator_log, {**env, "KUBECONFIG": str(self.kubeconfig)}
        )

        def serving() -> bool:
            if self.operator.poll() is not None:
                raise RuntimeError(f"the operator exited ({self.operator.returncode})")
            with contextlib.suppress(OSError):
                self.reconciles()
                return True
            return False

        wait_for(serving, 60, "the operator's metrics endpoint", every=0.1)

    def reconciles(self) -> dict[str, float]:
        """`swivel_operator_reconciles_total` by `resource/handler`, scraped from the operator."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        counts: dict[str, float] = {}
        for line in text.splitlines():
            match = re.match(r"^swivel_operator_reconciles_total\{(.*)\} (\S+)$", line)
            if match:
                labels = dict(re.findall(r'(\w+)="([^"]*)"', match[1]))
                counts[f"{labels.get('resource')}/{labels.get('handler')}"] = float(match[2])
        return counts

    def requests(self) -> dict[str, int]:
        """The sandbox's request counts by `client verb resource` (`GET /sandbox/requests`)."""
        try:
            with urllib.request.urlopen(f"{self.url}/sandbox/requests", timeout=5) as response:
                counts: dict[str, int] = json.loads(response.read())
        except OSError:  # a sandbox without the endpoint (an older one)
            return {}
        return counts

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) used so far by the sandbox, the operator and this process."""
        ticks = os.sysconf("SC_CLK_TCK")
        used: dict[str, float] = {}
        for role, child in zip(("sandbox", "operator"), self._children, strict=False):
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()
                used[role] = (int(fields[11]) + int(fields[12])) / ticks
        usage = os.times()
        used["bench"] = usage.user + usage.system  # the agents and the client
        return used

    def stop(self) -> None:
        for child in reversed(self._children):
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signal.SIGTERM)
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait(5)
        self._children.clear()


# -- the agents, one real agent app per job on one loop -----------------------------------------


@dataclass
class Agent:
    namespace: str
    job: str
    hub: Hub
    runner: web.AppRunner
    port: int
    worker: asyncio.Task[None] | None = None
    acks: int = 0


class AgentFleet:
    """Real agent apps on 127.0.0.1 ports, on a loop in a thread of this process."""

    def __init__(self, workdir: Path, network_file: Path) -> None:
        self.workdir, self.network_file = workdir, network_file
        self.agents: dict[tuple[str, str], Agent] = {}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="agents", daemon=True)
        self._thread.start()
        self._pids = iter(range(200_000, 300_000))

    def call(self, coroutine: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def start(self, namespace: str, job: StreamJob, credentials: JobCredentials) -> int:
        agent = self.call(self._start(namespace, job, credentials))
        self.agents[(namespace, job.name)] = agent
        services = {
            f"{a.job}-driver.{a.namespace}": {AGENT_PORT: a.port} for a in self.agents.values()
        }
        NetworkMap(services).save(self.network_file)
        return int(agent.port)

    async def _start(self, namespace: str, job: StreamJob, credentials: JobCredentials) -> Agent:
        state = self.workdir / "agents" / namespace / job.name
        hub = Hub(job.spec, job.name, store=StateStore(state))
        runner = web.AppRunner(create_app(hub, credentials.token), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=_server_tls(state, credentials))
        await site.start()
        port = int(runner.addresses[0][1])
        agent = Agent(namespace, job.name, hub, runner, port)
        # The driver: its first batch has started, so the agent reports ready (/readyz 200).
        hub.record_progress({"batchId": 0, "event": "started", "at": time.time()})
        operators = [op.name for op in job.spec.dataflow.operators]
        agent.worker = asyncio.create_task(self._work(agent, next(self._pids), operators))
        return agent

    async def _work(self, agent: Agent, pid: int, operators: list[str]) -> None:
        """One worker process hosting every operator: switch to each new version at once."""
        hub, since, batch = agent.hub, 0, 0
        while True:
            body = await hub.watch(since, pid, operators, 20.0)
            if body is None:
                continue
            since = int(json.loads(body)["revision"])
            plan = hub.active_plan
            if plan is None:
                continue
            now = time.time()
            acks = [
                {"pid": pid, "operator": op, "version": version, "at": now, "batchId": batch}
                for op, version in plan.targets.items()
            ]
            hub.record_acks(acks)
            agent.acks += len(acks)
            # The batch that ran the new version ends: the transition retires.
            hub.record_progress({"batchId": batch, "event": "completed", "at": now})
            batch += 1
            hub.record_progress({"batchId": batch, "event": "started", "at": now})

    def accepted_at(self, namespace: str, job: str, plan_id: str) -> tuple[str, float] | None:
        """(plan name, the agent's acceptedAt in epoch seconds) of a plan the agent holds."""

        async def look() -> tuple[str, float] | None:
            record = self.agents[(namespace, job)].hub.plan(plan_id)
            if record is None or record.timings.accepted_at is None:
                return None
            return record.name, record.timings.accepted_at

        found: tuple[str, float] | None = self.call(look())
        return found

    def stop(self, namespace: str) -> None:
        """Stop the agents of one namespace."""
        gone = [key for key in self.agents if key[0] == namespace]

        async def stop_some() -> None:
            for key in gone:
                agent = self.agents[key]
                if agent.worker is not None:
                    agent.worker.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await agent.worker
                await agent.runner.cleanup()

        self.call(stop_some(), timeout=60)
        for key in gone:
            del self.agents[key]

    def close(self) -> None:
        async def stop_all() -> None:
            for agent in self.agents.values():
                if agent.worker is not None:
                    agent.worker.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await agent.worker
                await agent.runner.cleanup()

        with contextlib.suppress(Exception):
            self.call(stop_all())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


# -- the measurement ------------------------------------------------------------------------------


@dataclass
class Sample:
    reconfiguration: str
    job: str
    round: int
    created_at: float  # the create call returned (epoch seconds)
    accepted_at: float | None = None  # the agent accepted its plan

    @property
    def reaction_ms(self) -> float | None:
        if self.accepted_at is None:
            return None
        return (self.accepted_at - self.created_at) * 1000.0


@dataclass
class Phase:
    jobs: int
    samples: list[Sample] = field(default_factory=list)
    ready_s: float = 0.0
    window_s: float = 0.0
    reconciles: dict[str, float] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    rate: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        reactions = [s.reaction_ms for s in self.samples if s.reaction_ms is not None]
        result: dict[str, Any] = {
            "n": len(reactions),
            "expected": len(self.samples),
            "delivered": len(reactions) == len(self.samples),
        }
        if reactions:
            result.update(
                p50_ms=round(percentile(reactions, 50), 1),
                p95_ms=round(percentile(reactions, 95), 1),
                p99_ms=round(percentile(reactions, 99), 1),
                max_ms=round(max(reactions), 1),
                min_ms=round(min(reactions), 1),
            )
        rounds = sorted({s.round for s in self.samples})
        result["round_p50_ms"] = [
            round(
                percentile(
                    [
                        s.reaction_ms
                        for s in self.samples
                        if s.round == r and s.reaction_ms is not None
                    ]
                    or [math.nan],
                    50,
                ),
                1,
            )
            for r in rounds
        ]
        total = sum(self.reconciles.values())
        result["reconciles"] = {k: int(v) for k, v in sorted(self.reconciles.items()) if v}
        result["window_s"] = round(self.window_s, 2)
        result["reconciles_per_s"] = round(total / self.window_s, 1) if self.window_s else None
        result["ready_s"] = round(self.ready_s, 2)
        result["cpu_s"] = {k: round(v, 1) for k, v in self.cpu_s.items()}
        if self.samples:
            per = len(self.samples)
            result["cpu_ms_per_reconfiguration"] = {
                k: round(1000 * v / per, 1) for k, v in self.cpu_s.items()
            }
            # API round trips per Reconfiguration, by client (kopf: kopf's own watches,
            # patches and Events; OpenAPI-Generator: the operator's Cluster door;
            # swivel-bench: this benchmark's creates, polls and deletes), over the rounds.
            by_client: dict[str, float] = {}
            for key, count in self.requests.items():
                who, verb = key.split(" ")[:2]
                if count and verb != "watch":
                    by_client[who] = by_client.get(who, 0) + count
            result["api_requests_per_reconfiguration"] = {
                k: round(v / per, 2) for k, v in sorted(by_client.items())
            }
            result["api_requests"] = {k: v for k, v in sorted(self.requests.items()) if v}
        result["rate_per_s"] = self.rate or "burst"
        return result


class Bench:
    def __init__(
        self,
        processes: Processes,
        fleet: AgentFleet,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.processes, self.fleet = processes, fleet
        self.say = progress or (lambda _message: None)
        self._phases = 0
        configuration = client.Configuration()
        configuration.host = processes.url
        configuration.api_key = {"BearerToken": kubeconfig.TOKEN}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        self.api: Any = client.ApiClient(configuration)
        self.api.user_agent = "swivel-bench"  # told apart from the operator in request counts
        self.core: Any = client.CoreV1Api(self.api)
        self.custom: Any = client.CustomObjectsApi(self.api)

    def close(self) -> None:
        self.api.close()

    @staticmethod
    def job_body(name: str) -> dict[str, Any]:
        path = ROOT / "examples" / "fraud-detection" / "streamjob.yaml"
        body: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
        body["metadata"] = {"name": name}
        return body

    @staticmethod
    def reconfiguration_body(name: str, job: str, round_: int) -> dict[str, Any]:
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Reconfiguration",
            "metadata": {"name": name, "labels": {"bench.swivel.dev/round": str(round_)}},
            "spec": {
                "jobRef": {"name": job},
                "scheduler": "fries",
                "functionUpdates": [
                    {"operator": "combine", "params": {"rule": "both", "round": round_}}
                ],
            },
        }

    def _list(self, namespace: str, plural: str, **kwargs: Any) -> list[dict[str, Any]]:
        found = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, **kwargs
        )
        items: list[dict[str, Any]] = found["items"]
        return items

    def provision(self, namespace: str, jobs: Sequence[str], timeout: float) -> None:
        """Play kubelet: once a job's driver pod exists, start its agent and mark it Running."""
        missing = set(jobs)
        deadline = time.monotonic() + timeout
        while missing:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no driver pod within {timeout:.0f}s for {sorted(missing)}")
            pods = {p.metadata.name for p in self.core.list_namespaced_pod(namespace).items}
            for job in sorted(missing):
                if f"{job}-driver" not in pods:
                    continue
                secret = self.core.read_namespaced_secret(f"{job}-agent-token", namespace)
                credentials = JobCredentials.of_secret({"data": secret.data})
                assert credentials is not None
                config = self.core.read_namespaced_config_map(f"{job}-job", namespace)
                with rendered():  # the operator's rendering: its own Spark keys pass
                    spec = parse_manifest(yaml.safe_load(config.data["job.yaml"]), StreamJob)
                self.fleet.start(namespace, spec, credentials)
                self.core.patch_namespaced_pod_status(
                    f"{job}-driver", namespace, {"status": {"phase": "Running"}}
                )
                missing.discard(job)
            if missing:
                time.sleep(0.1)

    def wait_ready(self, namespace: str, count: int, timeout: float) -> None:
        def ready() -> bool:
            items = self._list(namespace, "streamjobs")
            return len(items) == count and all(_condition(i, "Ready") == "True" for i in items)

        wait_for(ready, timeout, f"{count} StreamJobs Ready in {namespace}", every=0.2)

    def run_phase(
        self,
        count: int,
        reconfigurations: int,
        *,
        delete_completed: bool,
        round_timeout: float,
        rate: float = 0.0,
    ) -> Phase:
        phase = Phase(count)
        self._phases += 1  # a namespace per phase, even for the same job count
        namespace = f"bench-{count}-{self._phases}-{os.getpid() % 10_000}"
        self.core.create_namespace({"metadata": {"name": namespace}})
        jobs = [f"job-{i:03d}" for i in range(count)]
        started = time.monotonic()
        for job in jobs:
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, "streamjobs", self.job_body(job)
            )
        self.provision(namespace, jobs, timeout=60 + count)
        self.wait_ready(namespace, count, timeout=60 + count)
        phase.ready_s = time.monotonic() - started
        self.say(f"{count} job(s) Ready after {phase.ready_s:.1f} s")
        before, window_start = self.processes.reconciles(), time.monotonic()
        cpu_before = self.processes.cpu_seconds()
        requests_before = self.processes.requests()
        phase.rate = rate
        next_at = time.monotonic()
        for round_ in range(reconfigurations):
            batch: list[Sample] = []
            round_start = time.monotonic()
            for job in jobs:
                if rate:
                    next_at += 1.0 / rate
                    time.sleep(max(0.0, next_at - time.monotonic()))
                name = f"{job}-r{round_}"
                body = self.reconfiguration_body(name, job, round_)
                self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, "reconfigurations", body
                )
                batch.append(Sample(name, job, round_, time.time()))
            self._complete(namespace, round_, batch, round_timeout)
            phase.samples.extend(batch)
            reactions = [s.reaction_ms for s in batch if s.reaction_ms is not None]
            self.say(
                f"  round {round_}: {time.monotonic() - round_start:.1f} s, reaction p50 "
                f"{percentile(reactions or [math.nan], 50):.0f} ms, max "
                f"{max(reactions or [math.nan]):.0f} ms"
            )
            if delete_completed:
                self.custom.delete_collection_namespaced_custom_object(
                    GROUP, VERSION, namespace, "reconfigurations",
                    label_selector=f"bench.swivel.dev/round={round_}",
                )  # fmt: skip
        phase.window_s = time.monotonic() - window_start
        after = self.processes.reconciles()
        phase.reconciles = {k: v - before.get(k, 0.0) for k, v in after.items()}
        cpu_after = self.processes.cpu_seconds()
        phase.cpu_s = {k: v - cpu_before.get(k, 0.0) for k, v in cpu_after.items()}
        requests_after = self.processes.requests()
        phase.requests = {k: v - requests_before.get(k, 0) for k, v in requests_after.items()}
        self.retire(namespace, count)
        return phase

    def retire(self, namespace: str, count: int) -> None:
        """Delete the phase's StreamJobs (the operator's finalizer cleans up) and stop their
        agents, so the next phase meets an operator with no health timers left over."""
        self.custom.delete_collection_namespaced_custom_object(
            GROUP, VERSION, namespace, "streamjobs"
        )
        wait_for(
            lambda: not self._list(namespace, "streamjobs"),
            60 + count,
            f"the StreamJobs of {namespace} deleted",
            every=0.5,
        )
        self.fleet.stop(namespace)

    def _complete(self, namespace: str, round_: int, batch: list[Sample], timeout: float) -> None:
        """Wait until every Reconfiguration of the round is Completed; note acceptedAt."""
        pending = {s.reconfiguration: s for s in batch}
        selector = f"bench.swivel.dev/round={round_}"

        def done() -> bool:
            for item in self._list(namespace, "reconfigurations", label_selector=selector):
                sample = pending.get(item["metadata"]["name"])
                status = item.get("status") or {}
                if sample is None or status.get("phase") != "Completed":
                    if status.get("phase") == "Failed":
                        raise RuntimeError(f"{item['metadata']['name']}: {status.get('message')}")
                    continue
                found = self.fleet.accepted_at(namespace, sample.job, status["agentPlanId"])
                if found is not None and found[0] == sample.reconfiguration:
                    sample.accepted_at = found[1]
                del pending[sample.reconfiguration]
            return not pending

        # Polled every 0.5 s: the poll lists the round's objects, which loads the sandbox on
        # the same cores; reactions are timed by the agents, not by this poll.
        wait_for(done, timeout, f"round {round_} Completed ({len(pending)} left)", every=0.5)


def _condition(obj: dict[str, Any], type_: str) -> str | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == type_:
            return str(condition.get("status"))
    return None


@contextlib.contextmanager
def environment(
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    *,
    profile: str = "",
) -> Iterator[Bench]:
    owned = workdir is None
    root = Path(tempfile.mkdtemp(prefix="swivel-reaction-")) if workdir is None else workdir
    processes = Processes(root, profile=profile)
    fleet: AgentFleet | None = None
    bench: Bench | None = None
    try:
        processes.start()
        fleet = AgentFleet(root, processes.network_file)
        bench = Bench(processes, fleet, progress)
        yield bench
    finally:
        if bench is not None:
            bench.close()
        processes.stop()
        if fleet is not None:
            fleet.close()
        if owned:
            shutil.rmtree(root, ignore_errors=True)


def scenario(text: str, rate: float = 0.0) -> tuple[int, float]:
    """`COUNT` (Reconfigurations created at `rate`; 0 = back to back) or `COUNT@RATE`."""
    count, _, given = text.strip().partition("@")
    return int(count), float(given.removesuffix("/s")) if given else rate


def scenario_name(count: int, rate: float) -> str:
    return f"{count}@{rate:g}/s" if rate else str(count)


def run_benchmark(
    jobs: Sequence[int | tuple[int, float]] = DEFAULT_JOBS,
    reconfigurations: int = DEFAULT_RECONFIGURATIONS,
    *,
    delete_completed: bool = True,
    round_timeout: float = 120.0,
    rate: float = 0.0,
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    profile: str = "",
) -> dict[str, Any]:
    """Run every scenario (a job count, or (job count, creates per second)) in turn against
    one sandbox and one operator; the JSON report, phases keyed by `scenario_name`."""
    phases: dict[str, dict[str, Any]] = {}
    scenarios = [j if isinstance(j, tuple) else (j, rate) for j in jobs]
    with environment(workdir, progress, profile=profile) as bench:
        for count, count_rate in scenarios:
            name = scenario_name(count, count_rate)
            if progress:
                progress(f"{name}: {count} job(s), {reconfigurations} round(s)")
            phase = bench.run_phase(
                count,
                reconfigurations,
                delete_completed=delete_completed,
                round_timeout=round_timeout,
                rate=count_rate,
            )
            phases[name] = phase.summary()
    largest = phases[scenario_name(*max(scenarios, key=lambda s: (s[0], s[1] == 0)))]
    met = all(p.get("p99_ms", math.inf) <= GOAL_P99_MS and p["delivered"] for p in phases.values())
    return {
        "jobs": phases,
        "reconciles_per_s": largest["reconciles_per_s"],
        "goal_p99_ms": GOAL_P99_MS,
        "met": met,
        "reconfigurations_per_job": reconfigurations,
        "delete_completed": delete_completed,
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        f"{'jobs':>9} {'n':>5} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8}"
        f" {'reconciles/s':>13} {'ready s':>8}"
    ]
    for count, p in report["jobs"].items():
        lines.append(
            f"{count:>9} {p['n']:>5} {p.get('p50_ms', math.nan):>8.1f} "
            f"{p.get('p95_ms', math.nan):>8.1f} {p.get('p99_ms', math.nan):>8.1f} "
            f"{p.get('max_ms', math.nan):>8.1f} {p['reconciles_per_s'] or 0:>13.1f} "
            f"{p['ready_s']:>8.1f}"
        )
    verdict = "met" if report["met"] else "NOT met"
    lines.append(f"goal: p99 <= {report['goal_p99_ms']:.0f} ms for every job count: {verdict}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default=",".join(map(str, DEFAULT_JOBS)),
                        help="scenarios, comma-separated: COUNT (at --rate) or COUNT@RATE, "
                        "e.g. 1,100@5,100 (default 1,100)")  # fmt: skip
    parser.add_argument("--reconfigurations", type=int, default=DEFAULT_RECONFIGURATIONS,
                        help="rounds: Reconfigurations per job (default 20)")  # fmt: skip
    parser.add_argument("--keep-completed", action="store_true",
                        help="keep each round's Reconfigurations (default: delete them)")  # fmt: skip
    parser.add_argument("--rate", type=float, default=0.0,
                        help="Reconfigurations created per second (default 0: each round's "
                        "back to back, a burst)")  # fmt: skip
    parser.add_argument("--output", choices=("table", "json"), default="table")
    parser.add_argument("--workdir", type=Path, help="keep logs and agent state here")
    parser.add_argument("--profile", choices=("sample", "trace"), default="",
                        help="profile the sandbox and the operator "
                        "(swivel_tools.sandbox.sampling): stack samples into "
                        "WORKDIR/{sandbox,operator}.samples, or cProfile of every thread into "
                        "WORKDIR/{sandbox,operator}.pstats")  # fmt: skip
    args = parser.parse_args(argv)
    counts = [scenario(c, args.rate) for c in args.jobs.split(",") if c.strip()]
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    report = run_benchmark(
        counts,
        args.reconfigurations,
        delete_completed=not args.keep_completed,
        workdir=args.workdir,
        progress=say,
        rate=args.rate,
        profile=args.profile,
    )
    print(json.dumps(report, indent=2) if args.output == "json" else table(report))


def _server_tls(state: Path, credentials: JobCredentials) -> ssl.SSLContext | None:
    """The agent's HTTPS context from the certificate in the job's Secret, as the pod's
    agent container serves it (None: a Secret without one, plain HTTP)."""
    if not credentials.tls:
        return None
    assert credentials.cert_pem and credentials.key_pem
    state.mkdir(parents=True, exist_ok=True)
    (state / "tls.crt").write_text(credentials.cert_pem)
    (state / "tls.key").write_text(credentials.key_pem)
    files = {
        "SWIVEL_AGENT_TLS_CERT": str(state / "tls.crt"),
        "SWIVEL_AGENT_TLS_KEY": str(state / "tls.key"),
    }
    return tls_context(files)


if __name__ == "__main__":
    main()
