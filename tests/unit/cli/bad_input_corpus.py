"""The bad-input corpus of tests/unit/cli/test_bad_input.py, built in code (issue 11 §3).

~120 manifests for `swivel plan` (bytes that are not UTF-8, YAML nested 2 000 deep, alias
bombs, 5 000-digit integers, dates where names go, the same bin moved twice, function
references outside the allow-list, ...), ~40 schedule files for `swivel check-schedule`,
and dataflows `swivel run` must refuse before Spark starts.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
FRAUD = ROOT / "examples" / "fraud-detection"
JOB = yaml.safe_load((FRAUD / "streamjob.yaml").read_text(encoding="utf-8"))
RECONF = yaml.safe_load((FRAUD / "reconfiguration.yaml").read_text(encoding="utf-8"))
# Ours: `error: [file: ]field: reason`; click's own usage errors name the parameter the same
# way: `Error: Invalid value for '--job': File '...' is a directory.`
FIELD_REASON = re.compile(r"^(error|Error): (\S.*): \S", re.MULTILINE)
DEEP = 2000


@dataclass(frozen=True)
class Case:
    """One hostile input: the bytes of each file (None: the good example), or a path."""

    name: str
    job: bytes | None = None
    reconf: bytes | None = None
    valid: bool = False  # a valid result (exit 0) is the right answer
    exit_code: int | None = None  # another exit status is the right answer (1: not serializable)
    path: str | None = None  # use this path instead of writing the job file


def dump(document: Any) -> bytes:
    text = yaml.safe_dump(document, sort_keys=False, width=1 << 30)
    text = re.sub(r"NESTED-(\d+)", lambda m: "{a: " * int(m[1]) + "1" + "}" * int(m[1]), text)
    return text.encode()


def job_with(edit: Callable[[dict[str, Any]], None]) -> bytes:
    document = json.loads(json.dumps(JOB))
    edit(document)
    return dump(document)


def reconf_with(edit: Callable[[dict[str, Any]], None]) -> bytes:
    document = json.loads(json.dumps(RECONF))
    edit(document)
    return dump(document)


def setter(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(document: dict[str, Any]) -> None:
        *parents, last = re.split(r"\.(?![^\[]*\])", path)
        node: Any = document
        for part in parents:
            node = _step(node, part)
        if "[" in last:
            name, index = last[:-1].split("[")
            _step(node, name)[int(index)] = value
        else:
            node[last] = value

    return edit


def _step(node: Any, part: str) -> Any:
    if "[" in part:
        name, index = part[:-1].split("[")
        return node[name][int(index)]
    return node.setdefault(part, {})


def remover(path: str) -> Callable[[dict[str, Any]], None]:
    def edit(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = document
        for part in parents:
            node = node[part]
        del node[last]

    return edit


GOOD_JOB = (FRAUD / "streamjob.yaml").read_bytes()
GOOD_RECONF = (FRAUD / "reconfiguration.yaml").read_bytes()
BIG = "9" * 5000
REFS = [
    "os:system",
    "builtins:eval",
    "swivel.jobs.testing.probes:os.system",
    "swivel.jobs.examples.fraud:pd.read_pickle",
    "swivel.jobs.examples.fraud:pd.DataFrame.to_csv",
    "swivel.jobs.examples.fraud:np.load",
    "swivel.jobs.examples.labels:emits",
    "swivel.jobs.examples.labels:time.sleep",
    "swivel.jobs.examples.fraud:parse.__globals__",
    "swivel.jobs.examples.fraud:parse.__class__",
    "swivel.jobs.examples.fraud:_expensive_scores",
    "swivel.jobs.examplesX:parse",
    "swivel.jobs.examples.nope:parse",
    "swivel.jobs.examples:fraud",
    "swivel.jobs.examples.fraud:math.ceil",
]


def plan_cases() -> Iterator[Case]:
    # Bytes that are not UTF-8 text, and encodings with and without a byte-order mark.
    text = GOOD_JOB.decode()
    yield Case(
        "latin-1 name",
        job=GOOD_JOB.replace(b"fraud-detection", "fraud-d\xe9tection".encode("latin-1")),
    )
    yield Case("latin-1 comment", job="# caf\xe9\n".encode("latin-1") + GOOD_JOB)
    yield Case("utf-16 with BOM", job=text.encode("utf-16"), valid=True)
    yield Case("utf-16-be with BOM", job=codecs.BOM_UTF16_BE + text.encode("utf-16-be"), valid=True)
    yield Case("utf-16-le without BOM", job=text.encode("utf-16-le"))
    yield Case("utf-32 with BOM", job=text.encode("utf-32"), valid=True)
    yield Case("utf-8 with BOM", job=codecs.BOM_UTF8 + GOOD_JOB, valid=True)
    yield Case("BOM only", job=codecs.BOM_UTF8)
    yield Case("random bytes", job=bytes(range(256)) * 4)
    yield Case("NUL bytes", job=GOOD_JOB.replace(b"spec:", b"spec:\x00"))
    yield Case("control characters", job=GOOD_JOB.replace(b"spec:", b"spec:\x07\x1b"))
    yield Case("lone surrogate escape", job=b'name: "\\ud800"\n')
    yield Case("empty file", job=b"")
    yield Case("whitespace only", job=b"  \n\t\n")
    yield Case("comment only", job=b"# nothing\n")
    yield Case("over the size bound", job=GOOD_JOB + b"#" + b"x" * (1024 * 1024) + b"\n")
    yield Case("reconfiguration not UTF-8", reconf=b"\xff\xfe\xfa" + GOOD_RECONF)
    yield Case(
        "reconfiguration utf-16 without BOM", reconf=GOOD_RECONF.decode().encode("utf-16-be")
    )
    # YAML that is deep, bombed, broken or of the wrong shape.
    yield Case("flow sequences 2000 deep", job=b"[" * DEEP + b"]" * DEEP)
    yield Case("flow mappings 2000 deep", job=b"{a: " * DEEP + b"1" + b"}" * DEEP)
    yield Case(
        "block mappings 2000 deep",
        job="".join(f"{' ' * i}a:\n" for i in range(DEEP)).encode() + b" " * DEEP + b"b: 1\n",
    )
    yield Case(
        "deep params 2000", job=job_with(setter("spec.dataflow.operators[1].params", _nest(DEEP)))
    )
    yield Case(
        "deep params 100", job=job_with(setter("spec.dataflow.operators[1].params", _nest(100)))
    )
    yield Case(
        "deep reconf params",
        reconf=reconf_with(setter("spec.functionUpdates[0].params", _nest(DEEP))),
    )
    yield Case("billion laughs", job=_laughs())
    yield Case("unclosed bracket", job=b"spec: [1, 2\n")
    yield Case("tab indentation", job=b"spec:\n\tdataflow: {}\n")
    yield Case("bad indentation", job=b"spec:\n  a: 1\n b: 2\n")
    yield Case("two documents", job=GOOD_JOB + b"---\n" + GOOD_JOB)
    yield Case("a list", job=b"- 1\n- 2\n")
    yield Case("a scalar", job=b"hello\n")
    yield Case("python object tag", job=b"spec: !!python/object/apply:os.system ['true']\n")
    yield Case("unknown tag", job=b"spec: !swivel 1\n")
    yield Case("binary tag", job=b"metadata: {name: !!binary aGVsbG8=}\n")
    yield Case("set tag", job=b"spec: !!set {a, b}\n")
    yield Case("complex key", job=b"? [a, b]\n: 1\n")
    yield Case("mapping as key", job=b"{a: 1}: 2\n")
    yield Case("integer keys", job=b"1: 2\n3: 4\n")
    yield Case("undefined alias", job=b"spec: *nothing\n")
    yield Case("duplicate anchors", job=b"a: &x 1\nb: &x 2\nspec: *x\n")
    yield Case("merge key of a scalar", job=b"spec:\n  <<: 1\n")
    # Numbers and dates where names and counts go.
    yield Case("5000-digit bins", job=GOOD_JOB.replace(b"bins: 16", b"bins: " + BIG.encode()))
    yield Case(
        "5000-digit executors", job=GOOD_JOB.replace(b"instances: 2", b"instances: " + BIG.encode())
    )
    yield Case("5000-digit hex", job=GOOD_JOB.replace(b"bins: 16", b"bins: 0x" + b"f" * 5000))
    yield Case(
        "5000-digit float",
        job=GOOD_JOB.replace(b"rowsPerSecond: 200", b"rowsPerSecond: " + BIG.encode() + b".5"),
    )
    yield Case("1e400 rows", job=GOOD_JOB.replace(b"rowsPerSecond: 200", b"rowsPerSecond: 1e400"))
    yield Case("nan interval", job=GOOD_JOB.replace(b"intervalMs: 1000", b"intervalMs: .nan"))
    yield Case("inf interval", job=GOOD_JOB.replace(b"intervalMs: 1000", b"intervalMs: .inf"))
    yield Case("negative bins", job=GOOD_JOB.replace(b"bins: 16", b"bins: -16"))
    yield Case("bins as string", job=GOOD_JOB.replace(b"bins: 16", b"bins: sixteen"))
    yield Case("bins as bool", job=GOOD_JOB.replace(b"bins: 16", b"bins: true"), valid=True)
    yield Case("bins as list", job=GOOD_JOB.replace(b"bins: 16", b"bins: [16]"))
    yield Case(
        "impossible date as name",
        job=job_with(setter("metadata.name", None)).replace(b"name: null", b"name: 2001-13-45"),
        valid=True,
    )
    yield Case(
        "date as name",
        job=job_with(setter("metadata.name", None)).replace(b"name: null", b"name: 2001-12-25"),
        valid=True,
    )
    yield Case(
        "timestamp as operator name",
        job=GOOD_JOB.replace(b"name: parse", b"name: 2001-12-14t21:59:43.10-05:00"),
    )
    yield Case("name 10 000 long", job=job_with(setter("metadata.name", "a" * 10_000)))
    yield Case("name with newline", job=job_with(setter("metadata.name", "a\nb")))
    yield Case("name as list", job=job_with(setter("metadata.name", ["a"])))
    # Wrong shapes and kinds.
    yield Case("kind is a number", job=job_with(setter("kind", 5)))
    yield Case("kind is another", job=job_with(setter("kind", "Deployment")))
    yield Case("kind is a huge list", job=job_with(setter("kind", list(range(10_000)))))
    yield Case("apiVersion is a list", job=job_with(setter("apiVersion", ["x"])))
    yield Case("apiVersion is another group", job=job_with(setter("apiVersion", "apps/v1")))
    yield Case("spec missing", job=job_with(remover("spec")))
    yield Case("spec null", job=job_with(setter("spec", None)))
    yield Case("spec a list", job=job_with(setter("spec", [1, 2])))
    yield Case("dataflow missing", job=job_with(remover("spec.dataflow")))
    yield Case("operators a mapping", job=job_with(setter("spec.dataflow.operators", {"a": 1})))
    yield Case("operators null", job=job_with(setter("spec.dataflow.operators", None)))
    yield Case("operator a string", job=job_with(setter("spec.dataflow.operators[1]", "parse")))
    yield Case("inputs an integer", job=job_with(setter("spec.dataflow.operators[1].inputs", 5)))
    yield Case("input a number", job=job_with(setter("spec.dataflow.operators[1].inputs", [5])))
    yield Case(
        "unknown operator kind", job=job_with(setter("spec.dataflow.operators[1].kind", "teleport"))
    )
    yield Case("unknown field", job=job_with(setter("spec.surprise", 1)))
    yield Case("params a list", job=job_with(setter("spec.dataflow.operators[1].params", [1])))
    yield Case(
        "function not a string", job=job_with(setter("spec.dataflow.operators[1].function", 5))
    )
    yield Case(
        "function with spaces", job=job_with(setter("spec.dataflow.operators[1].function", "a b:c"))
    )
    # References outside the allow-list, in the job and in the reconfiguration.
    for ref in REFS:
        yield Case(
            f"job function {ref}", job=job_with(setter("spec.dataflow.operators[1].function", ref))
        )
    for ref in REFS[:8]:
        yield Case(
            f"reconf function {ref}",
            reconf=reconf_with(setter("spec.functionUpdates[0].function", ref)),
        )
    yield Case(
        "reconf stateTransform os:system",
        reconf=reconf_with(setter("spec.functionUpdates[0].stateTransform", "os:system")),
    )
    # Reconfigurations the job cannot carry out.
    yield Case(
        "same bin moved twice", reconf=_moves([{"bins": [3], "to": "1"}, {"bins": [3], "to": "0"}])
    )
    yield Case("bin listed twice", reconf=_moves([{"bins": [3, 3], "to": "1"}]))
    yield Case("bin out of range", reconf=_moves([{"bins": [99], "to": "1"}]))
    yield Case("negative bin", reconf=_moves([{"bins": [-1], "to": "1"}]))
    yield Case(
        "5000-digit bin",
        reconf=_moves([{"bins": [1], "to": "1"}]).replace(b"- 1\n", b"- " + BIG.encode() + b"\n"),
    )
    yield Case("moves a mapping", reconf=reconf_with(setter("spec.moves", {"bins": [1]})))
    yield Case(
        "unknown operator", reconf=reconf_with(setter("spec.functionUpdates[0].operator", "nobody"))
    )
    yield Case(
        "operator updated twice",
        reconf=reconf_with(
            lambda d: d["spec"]["functionUpdates"].append(dict(d["spec"]["functionUpdates"][0]))
        ),
    )
    yield Case("empty reconfiguration", reconf=reconf_with(setter("spec.functionUpdates", [])))
    yield Case("rescale 0", reconf=reconf_with(setter("spec.rescale", {"executors": 0})))
    yield Case(
        "rescale 5000 digits",
        reconf=reconf_with(setter("spec.rescale", {"executors": 7})).replace(
            b"executors: 7", b"executors: " + BIG.encode()
        ),
    )
    yield Case("unknown scheduler", reconf=reconf_with(setter("spec.scheduler", "quantum")))
    yield Case("jobRef missing", reconf=reconf_with(remover("spec.jobRef")))
    yield Case("reconf is a job", reconf=GOOD_JOB)
    yield Case("job is a reconf", job=GOOD_RECONF)
    yield Case(
        "coordination nan",
        reconf=reconf_with(setter("spec.coordination", {"intervalSeconds": float("nan")})),
    )
    # Paths that are not files.
    yield Case("job path is a directory", path=str(FRAUD))
    yield Case("job path does not exist", path=str(FRAUD / "missing.yaml"))
    yield Case("job path is /dev/null", path="/dev/null")


def _nest(depth: int) -> str:
    """A placeholder `dump` replaces with a flow mapping `depth` deep (a serializer would
    itself recurse that deep)."""
    return f"NESTED-{depth}"


def _laughs() -> bytes:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    return ("\n".join(lines) + "\nspec: *a9\n").encode()


def _moves(moves: list[dict[str, Any]]) -> bytes:
    def edit(document: dict[str, Any]) -> None:
        document["spec"] = {"jobRef": {"name": "fraud-detection"}, "moves": moves}

    return reconf_with(edit)


def schedule_cases() -> Iterator[Case]:
    update = b'{"event": "update", "operator": "A", "from": 1, "to": 2}\n'
    process = b'{"event": "process", "record": "r1", "operator": "A", "version": 1}\n'
    good = update + process
    yield Case("valid", job=good, valid=True)
    yield Case("utf-8 BOM", job=codecs.BOM_UTF8 + good, valid=True)
    yield Case("empty", job=b"", valid=True)
    yield Case("latin-1", job=good.replace(b"r1", "r\xe9".encode("latin-1")))
    yield Case("utf-16", job=good.decode().encode("utf-16"))
    yield Case("random bytes", job=bytes(range(256)))
    yield Case("NUL byte", job=good.replace(b"r1", b"r\x00"))
    yield Case("json array 2000 deep", job=b"[" * DEEP + b"]" * DEEP + b"\n")
    yield Case("json array 100000 deep", job=b"[" * 100_000 + b"]" * 100_000 + b"\n")
    yield Case("json object 2000 deep", job=b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"\n")
    yield Case("deep value in an event", job=process.replace(b'"r1"', b"[" * DEEP + b"]" * DEEP))
    yield Case(
        "deep extra field",
        job=process.replace(b"{", b'{"x": ' + b"[" * DEEP + b"]" * DEEP + b", ", 1),
    )
    yield Case("unclosed object", job=b'{"event": "update"\n')
    yield Case("trailing garbage", job=update.rstrip() + b" xyz\n")
    yield Case("a list", job=b"[1, 2]\n")
    yield Case("a string", job=b'"update"\n')
    yield Case("null", job=b"null\n")
    yield Case("unknown event", job=b'{"event": "teleport"}\n')
    yield Case("event missing", job=b'{"operator": "A"}\n')
    yield Case("event a number", job=b'{"event": 5}\n')
    yield Case("version a string", job=process.replace(b'"version": 1', b'"version": "1"'))
    yield Case("version a float", job=process.replace(b'"version": 1', b'"version": 1.5'))
    yield Case("version a bool", job=process.replace(b'"version": 1', b'"version": true'))
    yield Case(
        "version 5000 digits", job=process.replace(b'"version": 1', b'"version": ' + BIG.encode())
    )
    yield Case("version 1e400", job=process.replace(b'"version": 1', b'"version": 1e400'))
    yield Case("version NaN", job=process.replace(b'"version": 1', b'"version": NaN'))
    yield Case("version Infinity", job=process.replace(b'"version": 1', b'"version": Infinity'))
    yield Case(
        "negative version", job=process.replace(b'"version": 1', b'"version": -1'), valid=True
    )
    yield Case("record a list", job=process.replace(b'"r1"', b"[1]"))
    yield Case("operator null", job=process.replace(b'"operator": "A"', b'"operator": null'))
    yield Case("update from > to", job=update.replace(b'"to": 2', b'"to": 0') + process, valid=True)
    yield Case("txn a string", job=update.replace(b"}", b', "txn": "x"}'))
    yield Case("txn 5000 digits", job=update.replace(b"}", b', "txn": ' + BIG.encode() + b"}"))
    yield Case("duplicate keys", job=b'{"event": "update", "event": "process"}\n')
    yield Case("lone surrogate", job=process.replace(b'"r1"', b'"\\ud800"'), valid=True)
    mixed = (
        update
        + update.replace(b'"A"', b'"B"')
        + process
        + process.replace(b'"A"', b'"B"').replace(b'"version": 1', b'"version": 2')
    )
    yield Case(
        "lone surrogate in a violation", job=mixed.replace(b'"r1"', b'"\\ud800"'), exit_code=1
    )
    yield Case("a violation", job=mixed, exit_code=1)
    yield Case(
        "very long line",
        job=b'{"event": "process", "record": "'
        + b"r" * 2_000_000
        + b'", "operator": "A", "version": 1}\n',
        valid=True,
    )
    yield Case("path is a directory", path=str(FRAUD))
    yield Case("path does not exist", path=str(FRAUD / "missing.jsonl"))


def run_compile_cases() -> Iterator[Case]:
    """Dataflows `swivel run` refuses before Spark starts (exit 2, `field: reason`)."""

    def ops(operators: list[dict[str, Any]]) -> bytes:
        return job_with(setter("spec.dataflow.operators", operators))

    source = {"name": "payments", "kind": "source"}
    sink = {"name": "alerts", "kind": "sink", "inputs": ["parse"]}
    parse = {
        "name": "parse",
        "inputs": ["payments"],
        "function": "swivel.jobs.examples.fraud:parse",
    }
    yield Case("no sink", job=ops([source, parse]))
    yield Case("no source", job=ops([parse, sink]))
    yield Case("two sources", job=ops([source, {"name": "more", "kind": "source"}, parse, sink]))
    yield Case(
        "a cycle",
        job=ops(
            [
                source,
                {**parse, "inputs": ["payments", "back"]},
                {"name": "back", "inputs": ["parse"], "function": parse["function"]},
                sink,
            ]
        ),
    )
    yield Case("unknown input", job=ops([source, {**parse, "inputs": ["nobody"]}, sink]))
    yield Case(
        "map without function", job=ops([source, {"name": "parse", "inputs": ["payments"]}, sink])
    )
    yield Case(
        "keyed without key",
        job=ops(
            [
                source,
                parse,
                {
                    "name": "k",
                    "kind": "keyed",
                    "inputs": ["parse"],
                    "function": "swivel.jobs.examples.fraud:customer_model",
                },
                {**sink, "inputs": ["k"]},
            ]
        ),
    )
    yield Case(
        "hash edge without key",
        job=ops(
            [source, {**parse, "inputs": [{"from": "payments", "partitioning": "hash"}]}, sink]
        ),
    )
    yield Case(
        "sink feeds an operator",
        job=ops(
            [
                source,
                parse,
                sink,
                {"name": "after", "inputs": ["alerts"], "function": parse["function"]},
            ]
        ),
    )
    yield Case(
        "function refused",
        job=ops([source, {**parse, "function": "swivel.jobs.testing.probes:os.system"}, sink]),
    )
    yield Case(
        "function not defined",
        job=ops([source, {**parse, "function": "swivel.jobs.examples.fraud:nothing"}, sink]),
    )
    yield Case("manifest not UTF-8", job=b"\xff\xfe\xfa\xfb")
    yield Case("manifest 2000 deep", job=b"[" * DEEP + b"]" * DEEP)
