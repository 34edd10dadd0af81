"""The bad-input corpus of test_bad_input.py: StreamJobs and Reconfigurations as a user can
apply them to a cluster (issue 11 §3, §5), built in code.

Each case is one request to the API server: a StreamJob or a Reconfiguration to create, or
a merge patch of a running StreamJob's spec. Unlike the CLI's corpus (tests/unit/cli/
bad_input_corpus.py, whose helpers and function references this reuses), every input here
is already JSON: kubectl (or a client library) parsed the user's YAML before sending it, so
bytes that are not UTF-8 or YAML alias bombs never reach the API server. What does reach it
is JSON of every shape the schema may or may not catch, which the sandbox API server admits
or refuses as a real one with the generated CRD would, and the rest reaches the operator.

Bodies are sent as raw JSON text: a 5 000-digit integer or a 2 000-deep value cannot be
serialized by `json.dumps` (int's digit limit, the recursion limit), so they are spliced in
as text where the placeholders `BIG` and `deep(n)` stand.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from tests.unit.cli.bad_input_corpus import JOB, RECONF, REFS, remover, run_compile_cases, setter

Target = Literal["streamjobs", "reconfigurations", "edit"]
BIG_DIGITS = "9" * 5000
BIG = "@@BIG@@"  # spliced in as a 5 000-digit integer
SENTINEL = "sentinel"  # the running job every case must leave alone
DATE_NAME = "2001-12-25"  # a job name YAML 1.1 reads as a date


def deep(depth: int) -> str:
    """A placeholder `encode` replaces with a JSON object `depth` deep."""
    return f"@@DEEP-{depth}@@"


def encode(document: Any) -> bytes:
    """`document` as the JSON a client sends, with the placeholders spliced in as text
    (NaN and Infinity stay the non-standard literals Python's encoder writes)."""
    text = json.dumps(document, allow_nan=True)
    text = text.replace(f'"{BIG}"', BIG_DIGITS)
    return re.sub(
        r'"@@DEEP-(\d+)@@"', lambda m: '{"a": ' * int(m[1]) + "1" + "}" * int(m[1]), text
    ).encode()


@dataclass(frozen=True)
class Case:
    """One request. `field`: the field a clean answer names (the API server's cause or the
    operator's `field: reason`). `valid`: the input is in fact fine (a name YAML reads as a
    date), and a clean answer is the object handled as any other."""

    name: str
    target: Target
    body: dict[str, Any]  # the object (create) or the merge patch (edit)
    field: str
    valid: bool = False

    def document(self, object_name: str, job: str) -> dict[str, Any]:
        """The request body, named `object_name`; a Reconfiguration without a jobRef of its
        own (the default one's) points at `job`."""
        body = json.loads(json.dumps(self.body))
        if self.target == "edit":
            return body
        metadata = body.setdefault("metadata", {})
        if isinstance(metadata, dict) and "name" not in metadata:
            metadata["name"] = object_name
        spec = body.get("spec")
        if self.target == "reconfigurations" and isinstance(spec, dict):
            ref = spec.get("jobRef")
            if isinstance(ref, dict) and ref.get("name") == "fraud-detection":
                ref["name"] = job
        return body


def _copy(document: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(document))
    copied.pop("metadata", None)
    return copied


def job_with(*edits: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    document = _copy(JOB)
    for edit in edits:
        edit(document)
    return document


def reconf_with(*edits: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    document = _copy(RECONF)
    for edit in edits:
        edit(document)
    return document


def moves(*items: dict[str, Any]) -> dict[str, Any]:
    return reconf_with(
        setter("spec", {"jobRef": {"name": "fraud-detection"}, "moves": list(items)})
    )


def operators(edit: Callable[[list[dict[str, Any]]], None]) -> dict[str, Any]:
    """A merge patch of the running job's operators (a merge patch replaces a list whole)."""
    listed: list[dict[str, Any]] = json.loads(json.dumps(JOB["spec"]["dataflow"]["operators"]))
    edit(listed)
    return {"spec": {"dataflow": {"operators": listed}}}


def _set(index: int, key: str, value: Any) -> Callable[[list[dict[str, Any]]], None]:
    def edit(listed: list[dict[str, Any]]) -> None:
        listed[index][key] = value

    return edit


OPS = "spec.dataflow.operators"
UPDATE = "spec.functionUpdates[0]"


def _manifest(data: bytes | None) -> dict[str, Any] | None:
    """The object kubectl would send for these bytes, or None when it could not read them."""
    try:
        document = yaml.safe_load(data or b"")
    except (yaml.YAMLError, RecursionError, UnicodeDecodeError):
        return None
    return document if isinstance(document, dict) and "spec" in document else None


def streamjob_cases() -> Iterator[Case]:
    """StreamJobs to create: the schema catches types and ranges, the operator the rest."""
    job = "streamjobs"
    yield Case("empty spec", job, {"spec": {}}, "spec.dataflow")
    yield Case("no spec", job, job_with(remover("spec")), "spec")
    yield Case("spec a list", job, job_with(setter("spec", [1, 2])), "spec")
    yield Case("spec a string", job, job_with(setter("spec", "run it")), "spec")
    yield Case("operators empty", job, job_with(setter(f"{OPS}", [])), OPS)
    yield Case("operators a mapping", job, job_with(setter(OPS, {"a": 1})), OPS)
    yield Case("operator a string", job, job_with(setter(f"{OPS}[1]", "parse")), f"{OPS}[1]")
    yield Case("bins 48", job, job_with(setter("spec.dataflow.bins", 48)), "spec.dataflow.bins")
    yield Case(
        "bins a string", job, job_with(setter("spec.dataflow.bins", "16")), "spec.dataflow.bins"
    )
    yield Case("bins 5000 digits", job, job_with(setter("spec.dataflow.bins", BIG)), "spec")
    yield Case("rows NaN", job, job_with(setter("spec.source.rowsPerSecond", math.nan)), "spec")
    yield Case(
        "rows 1e308",
        job,
        job_with(setter("spec.source.rowsPerSecond", 1e308)),
        "spec.source.rowsPerSecond",
    )
    yield Case(
        "rows Infinity", job, job_with(setter("spec.source.rowsPerSecond", math.inf)), "spec"
    )
    yield Case(
        "executors 0",
        job,
        job_with(setter("spec.executor.instances", 0)),
        "spec.executor.instances",
    )
    yield Case(
        "executors 1.5",
        job,
        job_with(setter("spec.executor.instances", 1.5)),
        "spec.executor.instances",
    )
    yield Case(
        "unknown kind", job, job_with(setter(f"{OPS}[1].kind", "teleport")), f"{OPS}[1].kind"
    )
    yield Case(
        "unknown source",
        job,
        job_with(setter("spec.source.kind", "carrier-pigeon")),
        "spec.source.kind",
    )
    yield Case(
        "parallelism -1",
        job,
        job_with(setter(f"{OPS}[1].parallelism", -1)),
        f"{OPS}[1].parallelism",
    )
    yield Case(
        "operator name unicode", job, job_with(setter(f"{OPS}[1].name", "pärse")), f"{OPS}[1].name"
    )
    yield Case(
        "function unicode",
        job,
        job_with(setter(f"{OPS}[1].function", "swivel.jobs.examples.fraud:pärse")),
        f"{OPS}[1].function",
    )
    yield Case(
        "function a number", job, job_with(setter(f"{OPS}[1].function", 5)), f"{OPS}[1].function"
    )
    yield Case("inputs a number", job, job_with(setter(f"{OPS}[1].inputs", 5)), f"{OPS}[1].inputs")
    yield Case(
        "input unknown", job, job_with(setter(f"{OPS}[1].inputs", ["nobody"])), f"{OPS}[1].inputs"
    )
    yield Case("duplicate operator", job, job_with(setter(f"{OPS}[2].name", "parse")), OPS)
    yield Case("self loop", job, job_with(setter(f"{OPS}[1].inputs", ["payments", "parse"])), OPS)
    yield Case("params 2000 deep", job, job_with(setter(f"{OPS}[1].params", deep(2000))), "spec")
    yield Case(
        "params 100 deep", job, job_with(setter(f"{OPS}[1].params", deep(100))), f"{OPS}[1].params"
    )
    yield Case(
        "params NaN", job, job_with(setter(f"{OPS}[2].params", {"threshold": math.nan})), "spec"
    )
    yield Case(
        "job name 60 long", job, {**job_with(), "metadata": {"name": "j" * 60}}, "metadata.name"
    )
    yield Case(
        "job name with dots", job, {**job_with(), "metadata": {"name": "a.b.c"}}, "metadata.name"
    )
    yield Case(
        "job name unicode", job, {**job_with(), "metadata": {"name": "jöb"}}, "metadata.name"
    )
    yield Case(
        "image refused tag",
        job,
        job_with(setter("spec.image", "evil.example/x:latest")),
        "spec.image",
    )
    yield Case("image a list", job, job_with(setter("spec.image", ["a"])), "spec.image")
    yield Case(
        "sparkConf secret",
        job,
        job_with(setter("spec.sparkConf", {"spark.kubernetes.driver.secrets.admin": "/x"})),
        "spec.sparkConf",
    )
    yield Case(
        "sparkConf a number",
        job,
        job_with(setter("spec.sparkConf", {"spark.x": 5})),
        "spec.sparkConf",
    )
    yield Case(
        "sparkConf unicode key",
        job,
        job_with(setter("spec.sparkConf", {"spark.kubernetes.driver.secrets.ädmin": "/x"})),
        "spec.sparkConf",
    )
    yield Case("sink unknown", job, job_with(setter("spec.sink.kind", "void")), "spec.sink.kind")
    yield Case(
        "trigger negative",
        job,
        job_with(setter("spec.trigger.intervalMs", -1)),
        "spec.trigger.intervalMs",
    )
    yield Case(
        "volume size not a quantity",
        job,
        job_with(setter("spec.checkpoint", {"volumeSize": "lots"})),
        "spec.checkpoint.volumeSize",
    )
    yield Case(
        "memory not a quantity",
        job,
        job_with(setter("spec.executor.memory", "a lot")),
        "spec.executor.memory",
    )
    for i, ref in enumerate(REFS):
        yield Case(
            f"job function {ref}",
            job,
            job_with(setter(f"{OPS}[1].function", ref)),
            f"{OPS}[1].function",
        )
        if i >= 7:
            break
    for compile_case in run_compile_cases():
        document = _manifest(compile_case.job)
        if document is None:
            continue  # bytes that are not a manifest never reach an API server
        yield Case(f"dataflow: {compile_case.name}", job, _copy(document), OPS)
    yield Case(
        "date as job name", job, {**job_with(), "metadata": {"name": DATE_NAME}}, "metadata.name"
    )


def reconfiguration_cases() -> Iterator[Case]:
    """Reconfigurations of the running sentinel job (or of none)."""
    rec = "reconfigurations"
    yield Case("empty spec", rec, {"spec": {}}, "spec.jobRef")
    yield Case("no spec", rec, reconf_with(remover("spec")), "spec")
    yield Case(
        "jobRef a string", rec, reconf_with(setter("spec.jobRef", "sentinel")), "spec.jobRef"
    )
    yield Case(
        "job missing",
        rec,
        reconf_with(setter("spec.jobRef", {"name": "nobody"})),
        "spec.jobRef.name",
    )
    yield Case(
        "job named like a date missing",
        rec,
        reconf_with(setter("spec.jobRef", {"name": "2001-13-45"})),
        "spec.jobRef.name",
    )
    yield Case("nothing to do", rec, reconf_with(setter("spec.functionUpdates", [])), "spec")
    yield Case(
        "unknown operator",
        rec,
        reconf_with(setter(f"{UPDATE}.operator", "nobody")),
        f"{UPDATE}.operator",
    )
    yield Case(
        "operator unicode",
        rec,
        reconf_with(setter(f"{UPDATE}.operator", "dëtector")),
        f"{UPDATE}.operator",
    )
    yield Case(
        "operator updated twice",
        rec,
        reconf_with(
            lambda d: d["spec"]["functionUpdates"].append(dict(d["spec"]["functionUpdates"][0]))
        ),
        "spec.functionUpdates[2]",
    )
    yield Case(
        "source gets a function",
        rec,
        reconf_with(
            setter(
                "spec.functionUpdates",
                [{"operator": "payments", "function": "swivel.jobs.examples.fraud:parse"}],
            )
        ),
        f"{UPDATE}.function",
    )
    yield Case(
        "update a string",
        rec,
        reconf_with(setter("spec.functionUpdates", ["combine"])),
        f"{UPDATE}",
    )
    yield Case(
        "params a list", rec, reconf_with(setter(f"{UPDATE}.params", [1])), f"{UPDATE}.params"
    )
    yield Case("params 2000 deep", rec, reconf_with(setter(f"{UPDATE}.params", deep(2000))), "spec")
    yield Case(
        "params 100 deep",
        rec,
        reconf_with(setter(f"{UPDATE}.params", deep(100))),
        f"{UPDATE}.params",
    )
    yield Case(
        "params NaN", rec, reconf_with(setter(f"{UPDATE}.params", {"threshold": math.nan})), "spec"
    )
    yield Case(
        "params 5000 digits",
        rec,
        reconf_with(setter(f"{UPDATE}.params", {"threshold": BIG})),
        "spec",
    )
    yield Case(
        "unknown scheduler", rec, reconf_with(setter("spec.scheduler", "quantum")), "spec.scheduler"
    )
    yield Case(
        "stateTransform os:system",
        rec,
        reconf_with(setter(f"{UPDATE}.stateTransform", "os:system")),
        f"{UPDATE}.stateTransform",
    )
    for ref in REFS[:8]:
        yield Case(
            f"reconf function {ref}",
            rec,
            reconf_with(setter(f"{UPDATE}.function", ref)),
            f"{UPDATE}.function",
        )
    yield Case(
        "same bin moved twice",
        rec,
        moves({"bins": [3], "to": "1"}, {"bins": [3], "to": "0"}),
        "spec.moves[1].bins[0]",
    )
    yield Case("bin listed twice", rec, moves({"bins": [3, 3], "to": "1"}), "spec.moves[0].bins")
    yield Case("bin out of range", rec, moves({"bins": [99], "to": "1"}), "spec.moves[0].bins")
    yield Case("negative bin", rec, moves({"bins": [-1], "to": "1"}), "spec.moves[0].bins")
    yield Case("bin 5000 digits", rec, moves({"bins": [BIG], "to": "1"}), "spec")
    yield Case("bin 2^63", rec, moves({"bins": [2**63], "to": "1"}), "spec.moves[0].bins")
    yield Case("bins empty", rec, moves({"bins": [], "to": "1"}), "spec.moves[0].bins")
    yield Case("move to unknown executor", rec, moves({"bins": [3], "to": "7"}), "spec.moves[0].to")
    yield Case(
        "move to unicode executor", rec, moves({"bins": [3], "to": "ëxecutor"}), "spec.moves[0].to"
    )
    yield Case(
        "moves a mapping", rec, reconf_with(setter("spec.moves", {"bins": [1]})), "spec.moves"
    )
    yield Case(
        "rescale 0",
        rec,
        reconf_with(setter("spec.rescale", {"executors": 0})),
        "spec.rescale.executors",
    )
    yield Case(
        "rescale 5000 digits", rec, reconf_with(setter("spec.rescale", {"executors": BIG})), "spec"
    )
    yield Case(
        "rescale a string",
        rec,
        reconf_with(setter("spec.rescale", {"executors": "three"})),
        "spec.rescale.executors",
    )
    yield Case(
        "coordination NaN",
        rec,
        reconf_with(setter("spec.coordination", {"intervalSeconds": math.nan})),
        "spec",
    )
    yield Case(
        "coordination 1e-300",
        rec,
        reconf_with(setter("spec.coordination", {"intervalSeconds": 1e-300})),
        "spec.coordination.intervalSeconds",
    )
    yield Case(
        "migration batch 0",
        rec,
        reconf_with(setter("spec.migration", {"batchSize": 0})),
        "spec.migration.batchSize",
    )


def edit_cases() -> Iterator[Case]:
    """Merge patches of a running StreamJob that the operator must refuse (the schema lets
    them through, or refuses them itself), leaving the running driver as it was."""
    edit = "edit"
    yield Case("bins 48", edit, {"spec": {"dataflow": {"bins": 48}}}, "spec.dataflow.bins")
    yield Case(
        "function refused",
        edit,
        operators(_set(1, "function", "swivel.jobs.examples.fraud:pd.read_pickle")),
        f"{OPS}[1].function",
    )
    yield Case(
        "function os:system",
        edit,
        operators(_set(4, "function", "os:system")),
        f"{OPS}[4].function",
    )
    yield Case("unknown input", edit, operators(_set(1, "inputs", ["nobody"])), f"{OPS}[1].inputs")
    yield Case("cycle", edit, operators(_set(1, "inputs", ["payments", "combine"])), OPS)
    yield Case("operators emptied", edit, {"spec": {"dataflow": {"operators": []}}}, OPS)
    yield Case(
        "sparkConf secret",
        edit,
        {"spec": {"sparkConf": {"spark.kubernetes.executor.secrets.admin": "/x"}}},
        "spec.sparkConf",
    )
    yield Case(
        "executors 0", edit, {"spec": {"executor": {"instances": 0}}}, "spec.executor.instances"
    )
    yield Case("spec null", edit, {"spec": None}, "spec")
    yield Case("params 2000 deep", edit, operators(_set(2, "params", deep(2000))), "spec")


def cases() -> list[Case]:
    return [*streamjob_cases(), *reconfiguration_cases(), *edit_cases()]
