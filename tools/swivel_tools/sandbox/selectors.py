"""Label and field selectors with the grammar of `?labelSelector=` and `?fieldSelector=`.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, joined
by commas (all must hold). Field selectors: `=`, `==`, `!=` on `metadata.name`,
`metadata.namespace` and the few per-kind fields the real server indexes; any other field
is refused with 400, as the real server does, so code relying on one fails here first.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from swivel_tools.sandbox.errors import bad_request

JsonObject = dict[str, Any]
Predicate = Callable[[JsonObject], bool]

_SET_TERM = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQUALITY_TERM = re.compile(r"^\s*([^!=\s]+)\s*(==|=|!=)\s*(\S*)\s*$")
_EXISTS_TERM = re.compile(r"^\s*(!?)\s*([^!=\s()]+)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside `( … )`."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [term for term in terms if term.strip()]


def _label_term(term: str) -> Predicate:
    if match := _SET_TERM.match(term):
        key, operator, raw = match.groups()
        values = {value.strip() for value in raw.split(",") if value.strip()}
        if operator == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    if match := _EQUALITY_TERM.match(term):
        key, operator, value = match.groups()
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    if match := _EXISTS_TERM.match(term):
        negated, key = match.groups()
        if negated:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: {term.strip()!r}")


def label_selector(selector: str | None) -> Predicate:
    """A predicate on whole objects (their `metadata.labels`)."""
    if not selector:
        return lambda obj: True
    terms = [_label_term(term) for term in _split_terms(selector)]

    def matches(obj: JsonObject) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(term(labels) for term in terms)

    return matches


def _field_value(obj: JsonObject, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_selector(selector: str | None, supported: tuple[str, ...] = ()) -> Predicate:
    """A predicate on whole objects; 400 for a field this kind does not index."""
    if not selector:
        return lambda obj: True
    allowed = {"metadata.name", "metadata.namespace", *supported}
    terms: list[Predicate] = []
    for term in _split_terms(selector):
        match = _EQUALITY_TERM.match(term)
        if match is None:
            raise bad_request(f"invalid selector: {selector!r}; can't understand {term.strip()!r}")
        path, operator, value = match.groups()
        if path not in allowed:
            raise bad_request(f"field label not supported: {path}")
        terms.append(_field_term(path, value, negated=operator == "!="))
    return lambda obj: all(term(obj) for term in terms)


def _field_term(path: str, value: str, *, negated: bool) -> Predicate:
    def matches(obj: JsonObject) -> bool:
        return (_field_value(obj, path) == value) != negated

    return matches
