"""How every command reports bad input: one `field: reason` line each, exit status 2."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from swivel.api.errors import SpecError

BAD_INPUT = 2


def fail(error: SpecError, source: str = "") -> NoReturn:
    where = f"{source}: " if source else ""
    for problem in error.problems:
        click.echo(f"error: {where}{problem}", err=True)
    sys.exit(BAD_INPUT)
