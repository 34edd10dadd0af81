"""Reading a recorded schedule: JSON lines -> the checker's events, with line-numbered errors.

One event per line, in any order (workers append to their own files and the agent
concatenates them, jobs/control/recording.py):

    {"event": "update", "operator": "A", "from": 1, "to": 2, "txn": 0}
    {"event": "process", "record": "r7", "operator": "A", "version": 2, "state": 2}

`txn` and `state` are optional (`null` counts as absent); unknown extra fields are ignored.
Their meaning is the checker's (controllers/checker.py); this module only reads them, apart
from the checker, because reading is where the input's faults are -- bytes that are not
UTF-8, lines that are not JSON or nested past `json`'s limit, fields of the wrong type --
and every one must become `ScheduleError(line, reason)` rather than a traceback, while the
common well-formed line must stay cheap at a million lines. `iter_events` streams, so the
checker holds only the distinct observations, never the whole file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from swivel.controllers.checker import Event, ProcessEvent
from swivel.controllers.update_history import ScheduleError, UpdateEvent

__all__ = ["iter_events", "parse_schedule"]


def iter_events(lines: Iterable[str | bytes]) -> Iterator[Event]:
    """Parse JSON lines lazily; blank lines are skipped but still counted for line numbers.

    Lines may be bytes so that a reader can hand over raw lines and still learn *which* line
    is not UTF-8. Unknown extra fields are ignored so that producers may add timestamps or
    worker ids. Written as one loop because at a million lines every call per line shows.
    """
    for number, raw in enumerate(lines, start=1):
        text = _decode(raw, number).strip() if isinstance(raw, bytes) else raw.strip()
        if number == 1:
            text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
        if not text:
            continue
        try:
            value, end = _scan_json(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json's limit
            value, end = None, -1
        if end != len(text):
            value = _load_json_strictly(text, number)
        if type(value) is not dict:
            raise ScheduleError(number, f"expected a JSON object, got {_json_type(value)}")
        yield _event_from_object(value, number)


def parse_schedule(lines: Iterable[str | bytes]) -> list[Event]:
    """All events of a schedule; raises `ScheduleError` naming the first malformed line."""
    return list(iter_events(lines))


_scan_json = json.JSONDecoder().raw_decode


def _decode(raw: bytes, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScheduleError(line, f"not UTF-8 text: {error}") from None


def _load_json_strictly(text: str, line: int) -> Any:
    """The slow path, taken only to word the error the way `json` does."""
    try:
        return json.loads(text)
    except ValueError as error:
        raise ScheduleError(line, f"not JSON: {error}") from None
    except RecursionError:
        raise ScheduleError(line, "not JSON this checker reads: nested too deeply") from None


def _event_from_object(obj: dict[str, Any], line: int) -> Event:
    kind = obj.get("event")
    if kind == "process":
        record, operator, version = obj.get("record"), obj.get("operator"), obj.get("version")
        # Fast path for the overwhelmingly common well-formed line; the slow path below
        # re-reads the fields only to name what is wrong.
        if (
            type(record) is str
            and type(operator) is str
            and type(version) is int
            and record
            and operator
            and "state" not in obj
        ):
            return ProcessEvent(record, operator, version, line)
        state = None if obj.get("state") is None else _int(obj, "state", line)
        return ProcessEvent(
            _name(obj, "record", line),
            _name(obj, "operator", line),
            _int(obj, "version", line),
            line,
            state,
        )
    if kind == "update":
        txn = None if obj.get("txn") is None else _int(obj, "txn", line)
        return UpdateEvent(
            _name(obj, "operator", line), _int(obj, "from", line), _int(obj, "to", line), txn, line
        )
    if "event" not in obj:
        raise ScheduleError(line, "missing field 'event'")
    if not isinstance(kind, str):
        raise ScheduleError(line, f"field 'event' must be a string, got {_json_type(kind)}")
    raise ScheduleError(line, f"unknown event {_shown(kind)} (expected 'update' or 'process')")


def _name(obj: dict[str, Any], field: str, line: int) -> str:
    value = _required(obj, field, line)
    if not isinstance(value, str) or not value:
        raise ScheduleError(
            line, f"field {field!r} must be a non-empty string, got {_shown(value)}"
        )
    return value


def _int(obj: dict[str, Any], field: str, line: int) -> int:
    value = _required(obj, field, line)
    if type(value) is not int:  # bool is an int subclass, and 1.0 is not a version
        raise ScheduleError(line, f"field {field!r} must be an integer, got {_shown(value)}")
    return value


def _required(obj: dict[str, Any], field: str, line: int) -> Any:
    if field not in obj:
        raise ScheduleError(line, f"missing field {field!r}")
    return obj[field]


def _shown(value: object) -> str:
    """A value for an error message: short, and never a failure of its own (a huge integer
    or a deeply nested array has no printable repr)."""
    try:
        text = repr(value) if isinstance(value, str | bool) or value is None else json.dumps(value)
    except (ValueError, TypeError, RecursionError):
        return _json_type(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _json_type(value: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")
