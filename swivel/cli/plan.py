"""`swivel plan RECONF.yaml --job JOB.yaml`: a dry run showing what would be carried out.

It validates both manifests and the reconfiguration against the job, then prints the Fries
MCS (components: heads switch on the control message, the rest follow tags; one-to-many
ancestors pruned and by which rule), the data channels that synchronise, the scheduler
that is the least disruptive consistent one, and for rescales and moves the meta-topology
and migration steps in Chi's hand-over order. It never imports the functions a manifest
names.

The agent plans a running job's migration once, from the placement its driver reported,
with the same function; `--placement` gives a dry run that placement (a JSON list of the
executor serving each bin, or an object bin -> executor, inline or in a file: e.g. a
Reconfiguration's `status.plan.migration.initial`), so it prints the plan the agent would
make. Without it the plan assumes the round-robin placement a fresh job starts from.

A plan Spark cannot carry out consistently under the requested scheduler (`refused`,
decided by `swivel.controllers.planning.refusals`, as the agent and the operator do) is
printed all the same, followed by one `field: reason` line each on stderr and the
suggested scheduler; the exit status is then 2, in both output formats.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from swivel.api.errors import FieldProblem, SpecError
from swivel.api.manifests import load_reconfiguration, load_streamjob
from swivel.api.reconfiguration import validate_against_job
from swivel.cli.errors import BAD_INPUT, fail
from swivel.controllers.planning import ReconfigurationPlan, plan_reconfiguration

_FILE = click.Path(exists=False, dir_okay=False, path_type=Path)


@click.command("plan")
@click.argument("reconfiguration", type=_FILE)
@click.option("--job", "job_path", type=_FILE, required=True, help="The StreamJob manifest.")
@click.option(
    "--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--no-pruning", is_flag=True, help="Fries Alg. 3 instead of Alg. 4 (no MCS pruning).")
@click.option(
    "--placement",
    help="The executor of each bin, as JSON (a list, or an object bin -> executor) or a "
    "JSON file: plan a migration from it, as the agent does from the driver's.",
)
def command(
    reconfiguration: Path, job_path: Path, output: str, no_pruning: bool, placement: str | None
) -> None:
    """Plan RECONFIGURATION against the job, without running anything."""
    try:
        job = load_streamjob(job_path)
        reconf = load_reconfiguration(reconfiguration)
        validate_against_job(reconf.spec, job.spec)
        current = None if placement is None else _placement(placement, job.spec.dataflow.bins)
    except SpecError as error:
        fail(error)
    plan = plan_reconfiguration(
        job.spec, reconf.spec, pruning=not no_pruning, current_assignment=current
    )
    document = {"job": job.name, **plan.to_dict()}
    if output == "json":
        click.echo(json.dumps(document, indent=2))
    else:
        Console(highlight=False).print(_tree(document, plan))
    if plan.refused:
        for refusal in plan.refused:
            click.echo(f"error: {refusal}", err=True)
        click.echo(
            f"error: Spark cannot carry out this plan consistently under "
            f"{plan.scheduler.value}; suggested scheduler: {plan.suggested_scheduler.value}",
            err=True,
        )
        sys.exit(BAD_INPUT)


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
        _add_verdict(root, plan)
    if document["metaTopology"]:
        _add_meta_topology(root, document["metaTopology"])
    if plan.migration is not None:
        migration = root.add(
            f"migration: {plan.migration.strategy.value}, {len(plan.migration.moved_bins)} bin(s) "
            f"in {plan.migration.step_count} step(s)"
        )
        for index, step in enumerate(plan.migration.steps, 1):
            hand_overs = ", ".join(
                f"{h.giver}->{h.taker} bins {', '.join(map(str, h.bins))}" for h in step.hand_overs
            )
            migration.add(f"step {index}: {hand_overs or 'gap (no moves)'}")
    return root


def _placement(value: str, bins: int) -> dict[int, str]:
    """`--placement`: inline JSON or a JSON file; every bin of the job exactly once."""
    text = value
    if not value.lstrip().startswith(("[", "{")):
        try:
            text = Path(value).read_text()
        except OSError as error:
            raise SpecError(
                [FieldProblem("--placement", f"cannot read {value}: {error}")]
            ) from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise SpecError([FieldProblem("--placement", f"not JSON: {error}")]) from None
    pairs = enumerate(data) if isinstance(data, list) else dict(data).items()
    try:
        found = {int(b): str(e) for b, e in pairs}
    except (TypeError, ValueError):
        raise SpecError([FieldProblem("--placement", "bins are integers")]) from None
    if set(found) != set(range(bins)):
        reason = f"give the executor of every bin 0..{bins - 1} (got {len(found)} bins)"
        raise SpecError([FieldProblem("--placement", reason)])
    return found


def _add_verdict(root: Tree, plan: ReconfigurationPlan) -> None:
    """Refusals under the requested scheduler, and the least disruptive consistent one."""
    if plan.refused:
        refused = root.add(f"[bold red]refused under {plan.scheduler.value}[/]")
        for refusal in plan.refused:
            refused.add(Text(f"{refusal.field}: {refusal.reason}"))  # no markup: [...] in reasons
    suggested = plan.suggested_scheduler
    note = (
        "Fries is consistent here"
        if suggested.value == "fries"
        else "a head Fries needs cannot switch consistently in Spark; epoch switches at a "
        "micro-batch boundary"
    )
    root.add(f"suggested scheduler: {suggested.value} ({note})")


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
