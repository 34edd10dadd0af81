"""Generate the values table of the chart's README from the `# --` comments in values.yaml.

The comment format is helm-docs' (https://github.com/norwoodj/helm-docs), so helm-docs can
take over at any time; this script only needs PyYAML. A comment starting with `# --`
describes the key right below it (continuation lines are plain `#` lines). A documented key
whose value is a mapping is listed whole (like `resources`), so every leaf is covered by
itself or by a documented ancestor; tests/chart checks that and that the README is current.

    python charts/swivel/hack/values_table.py           # print the table
    python charts/swivel/hack/values_table.py --write   # update README.md in place
    python charts/swivel/hack/values_table.py --check   # exit 1 if README.md is stale
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- values-table:begin -->", "<!-- values-table:end -->"
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?:\s|$)")


def documented_keys(text: str) -> dict[str, str]:
    """Dotted key path → description, in file order."""
    described: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = [stripped.removeprefix("# --").strip()]
            continue
        if stripped.startswith("#"):
            if pending is not None:
                pending.append(stripped.removeprefix("#").strip())
            continue
        match = KEY_LINE.match(line)
        if not match:
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        if pending is not None:
            described[".".join(key for _, key in stack)] = " ".join(pending)
            pending = None
    return described


def lookup(values: dict[str, Any], path: str) -> Any:
    node: Any = values
    for key in path.split("."):
        node = node[key]
    return node


def leaf_paths(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        return [p for key, sub in node.items() for p in leaf_paths(sub, f"{prefix}{key}.")]
    return [prefix.removesuffix(".")]


def type_name(value: Any) -> str:
    for python_type, name in ((bool, "bool"), (int, "int"), (str, "string"), (list, "list")):
        if isinstance(value, python_type):
            return name
    return "object"


def table(values_yaml: str) -> str:
    values = yaml.safe_load(values_yaml)
    rows = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    for path, description in documented_keys(values_yaml).items():
        value = lookup(values, path)
        default = json.dumps(value, separators=(",", ":")).replace("|", "\\|")
        rows.append(f"| `{path}` | {type_name(value)} | `{default}` | {description} |")
    return "\n".join(rows) + "\n"


def readme_with_table(readme: str, values_yaml: str) -> str:
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table(values_yaml)}{END}{tail}"


def main(argv: list[str]) -> int:
    values_yaml = (CHART / "values.yaml").read_text(encoding="utf-8")
    readme_path = CHART / "README.md"
    readme = readme_path.read_text(encoding="utf-8")
    if "--write" in argv:
        readme_path.write_text(readme_with_table(readme, values_yaml), encoding="utf-8")
    elif "--check" in argv:
        if readme_with_table(readme, values_yaml) != readme:
            print(
                "charts/swivel/README.md is stale: run charts/swivel/hack/values_table.py --write"
            )
            return 1
    else:
        print(table(values_yaml), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
