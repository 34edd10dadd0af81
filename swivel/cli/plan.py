"""`swivel plan RECONF.yaml --job JOB.yaml`: a dry run showing what would be carried out.

It validates both manifests and the reconfiguration against the job, then prints the MCS
components (heads switch on the control message, the rest follow tags), the data channels
that synchronise, and for rescales and moves the meta-topology and migration steps. It never
imports the functions a manifest names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.tree import Tree

from swivel.api.errors import SpecError
from swivel.api.manifests import load_reconfiguration, load_streamjob
from swivel.api.reconfiguration import validate_against_job
from swivel.cli.errors import fail
from swivel.controllers.planning import ReconfigurationPlan, plan_reconfiguration

_FILE = click.Path(exists=False, dir_okay=False, path_type=Path)


@click.command("plan")
@click.argument("reconfiguration", type=_FILE)
@click.option("--job", "job_path", type=_FILE, required=True, help="The StreamJob manifest.")
@click.option(
    "--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--no-pruning", is_flag=True, help="Fries Alg. 3 instead of Alg. 4 (no MCS pruning).")
def command(reconfiguration: Path, job_path: Path, output: str, no_pruning: bool) -> None:
    """Plan RECONFIGURATION against the job, without running anything."""
    try:
        job = load_streamjob(job_path)
        reconf = load_reconfiguration(reconfiguration)
        validate_against_job(reconf.spec, job.spec)
    except SpecError as error:
        fail(error)
    plan = plan_reconfiguration(job.spec, reconf.spec, pruning=not no_pruning)
    document = {"job": job.name, **plan.to_dict()}
    if output == "json":
        click.echo(json.dumps(document, indent=2))
    else:
        Console(highlight=False).print(_tree(document, plan))


def _tree(document: dict[str, Any], plan: ReconfigurationPlan) -> Tree:
    how = f" via {plan.scheduler.value}" if plan.mcs else ""
    pruning = f" (pruning {'on' if plan.pruning else 'off'})" if plan.mcs else ""
    root = Tree(f"[bold]{document['job']}[/]: {plan.disruption.label}{how}{pruning}")
    if document["components"]:
        mcs = root.add(f"MCS: {len(document['components'])} component(s)")
        for index, component in enumerate(document["components"], 1):
            node = mcs.add(
                f"component {index}: heads {', '.join(component['heads'])} "
                f"switch on the control message"
            )
            node.add(f"operators: {', '.join(component['operators'])}")
            edges = ", ".join(f"{u}->{v}" for u, v in component["edges"]) or "none (no tags needed)"
            node.add(f"tagged edges: {edges}")
        for ancestor, rule in document["pruned"].items():
            mcs.add(f"pruned one-to-many ancestor {ancestor} ({rule} rule)")
    channels = document["channels"]
    if plan.mcs:
        root.add(f"data channels: {channels['mcs']} of {channels['total']} synchronise")
    if document["metaTopology"]:
        _add_meta_topology(root, document["metaTopology"])
    if plan.migration is not None:
        migration = root.add(
            f"migration: {plan.migration.strategy.value}, {len(plan.migration.moved_bins)} bin(s) "
            f"in {plan.migration.step_count} step(s)"
        )
        for index, step in enumerate(plan.migration.steps, 1):
            moves = ", ".join(f"bin {m.bin}: {m.source}->{m.target}" for m in step.moves)
            migration.add(f"step {index}: {moves or 'gap (no moves)'}")
    return root


def _add_meta_topology(root: Tree, meta: dict[str, Any]) -> None:
    node = root.add("meta-topology (executors whose bins do not change collapse away)")
    for instance in meta["instances"]:
        if instance["status"] == "unchanged":
            continue
        roles = [
            r for r, on in (("splits", instance["splits"]), ("merges", instance["merges"])) if on
        ]
        node.add(
            f"executor {instance['executor']} ({instance['status']}"
            f"{', ' + ' and '.join(roles) if roles else ''}): "
            f"{len(instance['binsBefore'])} -> {len(instance['binsAfter'])} bins"
        )
    for edge in meta["stateEdges"]:
        node.add(f"state {edge['from']} -> {edge['to']}: bins {', '.join(map(str, edge['bins']))}")
