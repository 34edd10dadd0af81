"""`swivel apply RECONF.yaml`: reconfigure a job started with `swivel run`, and watch it.

The manifest is validated here first, against the job that runs (field-named errors, exit
2, and the job never hears of it); then it goes to the job's agent, whose progress is shown
as workers switch, and the result is one table: delay, first and last switch, workers.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from swivel.api.errors import FieldProblem, SpecError
from swivel.api.manifests import load_reconfiguration, load_streamjob
from swivel.api.reconfiguration import validate_against_job
from swivel.cli.errors import BAD_INPUT, fail

_FILE = click.Path(exists=False, dir_okay=False, path_type=Path)


@click.command("apply")
@click.argument("reconfiguration", metavar="RECONF.yaml", type=_FILE)
@click.option("--job", "job_name", help="The running job (default: the manifest's jobRef).")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds to wait.")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text")
def command(reconfiguration: Path, job_name: str | None, timeout: float, output: str) -> None:
    """Send RECONF.yaml to the running job's agent and follow it until every worker switched."""
    from swivel.embedded import registry

    try:
        reconf = load_reconfiguration(reconfiguration)
    except SpecError as error:
        fail(error, str(reconfiguration))
    try:
        running = registry.lookup(job_name or reconf.spec.job_ref.name)
    except registry.NoRunningJob as error:
        raise click.ClickException(str(error)) from None
    try:
        validate_against_job(reconf.spec, load_streamjob(Path(running.manifest)).spec)
    except SpecError as error:
        fail(error, str(reconfiguration))
    plan = asyncio.run(_submit_and_follow(running, reconf.name, reconf.spec.to_manifest(),
                                          timeout, show_progress=output == "text"))  # fmt: skip
    registry.remember_plan(running.job, plan["id"])
    if output == "json":
        click.echo(json.dumps(plan, indent=2))
    else:
        Console(highlight=False).print(result_table(plan))
    if plan.get("phase") != "Completed":
        sys.exit(1)


async def _submit_and_follow(
    running: Any, name: str, spec: dict[str, Any], timeout: float, show_progress: bool
) -> dict[str, Any]:
    from swivel.jobs.agent.client import AgentClient, AgentRejected, AgentUnreachable

    async with AgentClient(running.url, running.token) as client:
        try:
            plan = await client.submit_plan(name, spec)
        except AgentRejected as error:
            _rejected(error)
        except AgentUnreachable as error:
            raise click.ClickException(f"the job's agent does not answer: {error}") from None
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("workers switched"),
            TimeElapsedColumn(),
            disable=not show_progress,
        )
        with progress:
            task = progress.add_task(f"{plan['id']} ({plan['scheduler']})", total=None)

            def show(document: dict[str, Any]) -> None:
                counts = document.get("progress") or {}
                total = counts.get("workersTotal") or None
                progress.update(
                    task,
                    total=total,
                    completed=counts.get("workersSwitched", 0),
                    description=f"{document['id']} ({document['scheduler']}) {document['phase']}",
                )

            return await client.wait_for_completion(plan["id"], timeout_s=timeout, on_progress=show)


def _rejected(error: Any) -> None:
    if error.status == 409 and error.running_plan:
        raise click.ClickException(
            f"the job is busy with plan {error.running_plan}; try again when it completed"
        )
    if error.status == 409:  # e.g. no placement from the driver yet to plan a migration from
        reasons = "; ".join(str(e.get("reason", "")) for e in error.errors) or "the agent is busy"
        raise click.ClickException(f"{reasons} (try again in a moment)")
    if error.status in (400, 422):
        problems = [FieldProblem(e.get("field", ""), e.get("reason", "")) for e in error.errors]
        for problem in problems:
            click.echo(f"error: {problem}", err=True)
        sys.exit(BAD_INPUT)
    raise click.ClickException(str(error))


def result_table(plan: dict[str, Any]) -> Table:
    """What happened: phase, delay (request -> in effect), armed (request -> the last worker
    holds the new version), first/last switch after acceptance, workers switched."""
    timings = plan.get("timings") or {}
    accepted = _parse(timings.get("acceptedAt"))
    counts = plan.get("progress") or {}
    table = Table(title=f"{plan['id']}: {plan['phase']}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    delay, armed = plan.get("delayMs"), plan.get("armedMs")
    table.add_row("scheduler", str(plan.get("scheduler")))
    table.add_row("delay (in effect)", f"{delay:.1f} ms" if delay is not None else "-")
    table.add_row("armed", f"{armed:.1f} ms" if armed is not None else "-")
    table.add_row("first switch", _after(accepted, timings.get("firstSwitchAt")))
    table.add_row("last switch", _after(accepted, timings.get("lastSwitchAt")))
    table.add_row(
        "workers switched", f"{counts.get('workersSwitched', 0)} of {counts.get('workersTotal', 0)}"
    )
    for operator, state in (counts.get("operators") or {}).items():
        table.add_row(
            f"  {operator}", f"v{state['version']}: {state['switched']} of {state['total']}"
        )
    if plan.get("message"):
        table.add_row("message", str(plan["message"]))
    return table


def _parse(stamp: str | None) -> datetime | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


def _after(accepted: datetime | None, stamp: str | None) -> str:
    at = _parse(stamp)
    if at is None or accepted is None:
        return "-"
    return f"+{(at - accepted).total_seconds() * 1000:.1f} ms ({stamp})"
