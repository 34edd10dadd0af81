"""`swivel check-schedule`: is a recorded reconfiguration schedule conflict-serializable?

A thin shell around the pure checker (`swivel.controllers.checker`): read lines, print the
verdict, and turn it into the exit code that scripts and CI rely on.
"""

from __future__ import annotations

import json
from typing import IO, Any

import click

from swivel.controllers.checker import (
    FunctionUpdateTransaction,
    Observation,
    ScheduleError,
    Verdict,
    Violation,
    check_schedule,
)
from swivel.controllers.schedule_parsing import iter_events

EXIT_SERIALIZABLE = 0
EXIT_NOT_SERIALIZABLE = 1
EXIT_MALFORMED = 2
SHOWN_VIOLATIONS = 20


@click.command("check-schedule")
@click.argument("schedule", metavar="FILE.jsonl", type=click.File("rb"))
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="A short human verdict, or one JSON object for machines.",
)
@click.pass_context
def command(ctx: click.Context, schedule: IO[bytes], output: str) -> None:
    """Check that every source record saw one configuration: all old or all new.

    FILE.jsonl holds one JSON event per line, in any order ('-' reads stdin):

    \b
      {"event": "update", "operator": "A", "from": 1, "to": 2}
      {"event": "process", "record": "r1", "operator": "A", "version": 1}

    Updates may carry an integer "txn" to group several reconfigurations in sequence.
    A process event on a keyed operator may carry "state": the version the key's state
    was at when the tuple ran on it (an old function on transformed state is a violation).
    Exit status: 0 serializable, 1 not serializable, 2 malformed input.
    """
    try:
        # Bytes, not text: json.loads decodes each line itself, so a stray non-UTF-8 byte
        # is reported with its line number instead of failing the whole read.
        verdict = check_schedule(iter_events(schedule))
    except ScheduleError as error:
        _report_error(error, output)
        ctx.exit(EXIT_MALFORMED)
    if output == "json":
        click.echo(json.dumps(verdict_to_json(verdict)))
    else:
        _echo_human(verdict)
    ctx.exit(EXIT_SERIALIZABLE if verdict.serializable else EXIT_NOT_SERIALIZABLE)


def _report_error(error: ScheduleError, output: str) -> None:
    if output == "json":
        click.echo(json.dumps({"error": {"line": error.line, "reason": error.reason}}))
    else:
        click.echo(f"error: line {error.line}: {error.reason}", err=True)


def verdict_to_json(verdict: Verdict) -> dict[str, Any]:
    """The `--output json` document; its keys are a contract, extend but never rename."""
    return {
        "serializable": verdict.serializable,
        "records": verdict.records,
        "process_events": verdict.process_events,
        "violations": [_violation_to_json(v) for v in verdict.violations],
        "updates": {op: list(versions) for op, versions in verdict.versions.items()},
        "transactions": [_transaction_to_json(t) for t in verdict.transactions],
    }


def _violation_to_json(violation: Violation) -> dict[str, Any]:
    return {
        "record": violation.record,
        "old": [_observation_to_json(o) for o in violation.old],
        "new": [_observation_to_json(o) for o in violation.new],
    }


def _observation_to_json(observation: Observation) -> dict[str, Any]:
    shown: dict[str, Any] = {"operator": observation.operator, "version": observation.version}
    if observation.state:  # the key's state was read at this version, not the function run
        shown["state"] = True
    return shown


def _transaction_to_json(transaction: FunctionUpdateTransaction) -> dict[str, Any]:
    steps = {s.operator: {"from": s.from_version, "to": s.to_version} for s in transaction.steps}
    return {"txn": transaction.txn, "updates": steps}


def _echo_human(verdict: Verdict) -> None:
    if verdict.serializable:
        click.echo(
            f"serializable: each of {verdict.records} record(s) saw a single configuration "
            f"({_describe_transactions(verdict.transactions)})"
        )
        return
    click.echo(
        f"NOT serializable: {len(verdict.violations)} of {verdict.records} record(s) mix "
        f"configurations ({_describe_transactions(verdict.transactions)})"
    )
    for violation in verdict.violations[:SHOWN_VIOLATIONS]:
        click.echo(f"  {_printable(violation.describe())}")
    hidden = len(verdict.violations) - SHOWN_VIOLATIONS
    if hidden > 0:
        click.echo(f"  ... and {hidden} more (--output json lists them all)")


def _printable(text: str) -> str:
    """Record ids come from JSON, which can spell a lone surrogate (`"\\ud800"`) that no
    terminal encoding can print: show it escaped instead of failing on it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _describe_transactions(transactions: tuple[FunctionUpdateTransaction, ...]) -> str:
    if not transactions:
        return "no update events, so nothing conflicts"
    described = [
        ", ".join(f"{s.operator} {s.from_version}->{s.to_version}" for s in t.steps)
        for t in transactions
    ]
    if len(described) == 1:
        return _printable(f"1 update transaction: {described[0]}")
    joined = " then ".join(f"[{d}]" for d in described)
    return _printable(f"{len(described)} update transactions: {joined}")
