"""`swivel status`: the live configuration of a job started with `swivel run`.

One row per operator with a function (its function version, function and params, as the
agent publishes them to the workers), the configuration version, a transition in progress,
and the active or last plan.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from swivel.cli.apply import result_table


@click.command("status")
@click.option("--job", "job_name", help="The running job (default: the only one).")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text")
def command(job_name: str | None, output: str) -> None:
    """Show the running job's live configuration per operator and its last plan."""
    from swivel.embedded import registry

    try:
        running = registry.lookup(job_name)
    except registry.NoRunningJob as error:
        raise click.ClickException(str(error)) from None
    config, plan = asyncio.run(_fetch(running))
    if output == "json":
        click.echo(json.dumps({"job": running.job, "config": config, "plan": plan}, indent=2))
        return
    console = Console(highlight=False)
    console.print(config_table(running.job, running.url, config))
    if plan is not None:
        console.print(result_table(plan))
    else:
        console.print("no plan applied yet")


async def _fetch(running: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    from swivel.jobs.agent.client import AgentClient, AgentRejected, AgentUnreachable

    async with AgentClient(running.url, running.token, retries=2) as client:
        try:
            config = await client.get_config()
            plan_id = config.get("activePlan") or running.last_plan
            plan = await client.get_plan(plan_id) if plan_id else None
        except (AgentRejected, AgentUnreachable) as error:
            raise click.ClickException(f"the job's agent: {error}") from None
    return config, plan


def config_table(job: str, url: str, config: dict[str, Any]) -> Table:
    transition = config.get("transition")
    caption = (
        f"transition {transition['id']} ({transition['scheduler']}) in progress"
        if transition
        else "no transition in progress"
    )
    table = Table(
        title=f"{job} at configuration version {config.get('configVersion')} ({url})",
        caption=caption,
    )
    for column in ("operator", "version", "function", "params"):
        table.add_column(column)
    for name, operator in sorted((config.get("operators") or {}).items()):
        params = ", ".join(f"{k}={v}" for k, v in (operator.get("params") or {}).items())
        table.add_row(name, str(operator.get("version")), str(operator.get("function")), params)
    return table
