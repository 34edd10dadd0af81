"""Where a running `swivel run` tells other terminals how to reach its agent.

One small JSON file per job, `$SWIVEL_HOME/embedded/<job>.json` (default `~/.swivel`),
readable only by its owner because it holds the agent's bearer token. `swivel apply` and
`swivel status` look the job up there; an entry whose process has died is stale and ignored.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path


class NoRunningJob(LookupError):  # noqa: N818 - the name is the condition
    """No (live) `swivel run` is registered under the asked name."""


@dataclass(frozen=True)
class RunningJob:
    job: str
    url: str
    token: str
    pid: int  # the `swivel run` process
    manifest: str  # the StreamJob manifest it runs (for local validation)
    state_dir: str
    schedule_dir: str | None = None
    started_at: float = 0.0
    last_plan: str | None = None

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def home() -> Path:
    return Path(os.environ.get("SWIVEL_HOME") or Path.home() / ".swivel")


def _path(job: str) -> Path:
    return home() / "embedded" / f"{job}.json"


def register(entry: RunningJob) -> Path:
    """Write `entry` atomically, mode 0600 (it holds the token)."""
    path = _path(entry.job)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        json.dump(asdict(entry), out, indent=2)
    os.replace(temporary, path)
    return path


def unregister(job: str, pid: int | None = None) -> None:
    """Remove the job's entry (only if it is `pid`'s, when given)."""
    path = _path(job)
    try:
        if pid is not None and _read(path).pid != pid:
            return
        path.unlink()
    except (FileNotFoundError, ValueError):
        return


def remember_plan(job: str, plan_id: str) -> None:
    try:
        entry = lookup(job)
    except NoRunningJob:
        return
    register(replace(entry, last_plan=plan_id))


def _read(path: Path) -> RunningJob:
    try:
        return RunningJob(**json.loads(path.read_text(encoding="utf-8")))
    except (TypeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a registry entry ({error})") from None


def running_jobs() -> list[RunningJob]:
    """Every live registered job, oldest first."""
    folder = home() / "embedded"
    entries = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = _read(path)
        except (OSError, ValueError):
            continue
        if entry.alive():
            entries.append(entry)
    return sorted(entries, key=lambda e: e.started_at or time.time())


def lookup(job: str | None = None) -> RunningJob:
    """The running job named `job`, or the only running job when `job` is None."""
    jobs = running_jobs()
    if job is not None:
        for entry in jobs:
            if entry.job == job:
                return entry
        raise NoRunningJob(f"no `swivel run` of job {job!r} is running (looked in {home()})")
    if len(jobs) == 1:
        return jobs[0]
    if not jobs:
        raise NoRunningJob(f"no `swivel run` is running (looked in {home()})")
    names = ", ".join(e.job for e in jobs)
    raise NoRunningJob(f"several jobs are running ({names}): name one with --job")
