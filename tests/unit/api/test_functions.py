"""The function allow-list (issue 11 §1): a reference resolves only to a function defined in
an allowed module, at admission (`check_reference`, reads source, imports nothing) and in
the workers (`resolve`, imports the allowed module and checks the objects)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from swivel.api.errors import SpecError
from swivel.api.functions import (
    PREFIXES_ENV,
    AllowList,
    FunctionRefused,
    check_reference,
    prefixes_from_env,
    spec_problems,
)
from swivel.api.manifests import load_reconfiguration, load_streamjob, load_yaml, parse_manifest
from swivel.api.reconfiguration import Reconfiguration
from swivel.api.streamjob import StreamJob
from swivel.jobs.runtime.functions import resolve

ROOT = Path(__file__).resolve().parents[3]
FRAUD = ROOT / "examples" / "fraud-detection"
EXAMPLES = AllowList(prefixes=("swivel.jobs.examples",))  # the default
# The tests' list (tests/conftest.py): the default plus the probes, which no default allows.
TESTS = AllowList(prefixes=("swivel.jobs.examples", "swivel.jobs.testing"))

# Every bypass the issue found, and more: each must be refused by both checks, even under
# the tests' wider list.
BYPASSES = [
    "swivel.jobs.testing.probes:os.system",  # a module object imported by an allowed module
    "swivel.jobs.examples.fraud:pd.read_pickle",
    "swivel.jobs.examples.fraud:pd.DataFrame.to_csv",  # a class of another module
    "swivel.jobs.examples.fraud:np.load",
    "swivel.jobs.examples.labels:time.sleep",
    "swivel.jobs.examples.labels:emits",  # `from x import y`: defined elsewhere
    "swivel.jobs.testing.probes:labelled",  # imported from swivel.jobs.examples.labels
    "swivel.jobs.examples.fraud:math.ceil",
    "swivel.jobs.examples.fraud:Any",
    "swivel.jobs.examples.fraud:parse.__globals__",
    "swivel.jobs.examples.fraud:parse.__class__",
    "swivel.jobs.examples.fraud:parse.__init__",
    "swivel.jobs.examples.fraud:parse.__call__",
    "swivel.jobs.examples.fraud:__builtins__",
    "swivel.jobs.examples.fraud:__loader__.load_module",
    "swivel.jobs.examples.fraud:_expensive_scores",  # private
    "swivel.jobs.examples:fraud",  # a submodule, not a function
    "swivel.jobs.examples.fraud:parse.__code__",
    "os:system",
    "builtins:eval",
    "subprocess:run",
    "swivel.jobs:runtime",
    "swivel.jobs.examplesX:parse",  # a prefix match not on a module boundary
    "swivel.jobs.examples__init__:parse",
    "swivel.jobs.examples.__init__:parse",
    "swivel.jobs.examples.nope:parse",  # a module the allowed package does not have
    "swivel.jobs.examples.fraud:nothing",
]


@pytest.mark.parametrize("ref", BYPASSES)
def test_every_bypass_is_refused_at_admission_and_in_the_workers(ref: str) -> None:
    with pytest.raises(FunctionRefused) as admitted:
        check_reference(ref, TESTS, "spec.x", missing_ok=False)
    assert admitted.value.field == "spec.x"
    with pytest.raises(FunctionRefused):
        resolve(ref, TESTS, "spec.x")


@pytest.mark.parametrize(
    "ref",
    [
        "swivel.jobs.examples.fraud:parse",
        "swivel.jobs.examples.fraud:customer_model",
        "swivel.jobs.examples.fraud:rescale_customer_state",
        "swivel.jobs.examples.labels:labelled",
    ],
)
def test_the_examples_resolve(ref: str) -> None:
    check_reference(ref, EXAMPLES, missing_ok=False)
    function = resolve(ref, EXAMPLES)
    assert function.__module__ == ref.partition(":")[0]


@pytest.mark.parametrize(
    "ref",
    [
        "swivel.jobs.testing.probes:counting",
        "swivel.jobs.testing.probes:mark_transformed",
        "swivel.jobs.testing.probes:parity",
        "swivel.jobs.testing.probes:logged",
    ],
)
def test_the_probes_resolve_only_where_the_testing_package_is_allowed(ref: str) -> None:
    check_reference(ref, TESTS, missing_ok=False)
    assert resolve(ref, TESTS).__module__ == "swivel.jobs.testing.probes"
    with pytest.raises(FunctionRefused, match="is not allowed"):
        check_reference(ref, EXAMPLES, missing_ok=False)
    with pytest.raises(FunctionRefused):
        resolve(ref, EXAMPLES)


def test_the_default_allows_the_examples_and_refuses_the_probes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What an installation runs unless its chart says otherwise (the tests widen it)."""
    monkeypatch.delenv(PREFIXES_ENV, raising=False)
    allow = AllowList()
    assert allow.prefixes == ("swivel.jobs.examples",)
    with pytest.raises(FunctionRefused) as refused:
        check_reference("swivel.jobs.testing.probes:counting", field="spec.f", missing_ok=False)
    assert refused.value.field == "spec.f"
    assert refused.value.reason.startswith(
        "'swivel.jobs.testing.probes:counting' is not allowed; allowed: functions defined in "
        "modules under [swivel.jobs.examples] (SWIVEL_FUNCTION_PREFIXES)"
    )
    check_reference("swivel.jobs.examples.labels:labelled", missing_ok=False)
    with pytest.raises(FunctionRefused):
        resolve("swivel.jobs.testing.probes:counting", AllowList())
    assert callable(resolve("swivel.jobs.examples.labels:labelled", AllowList()))


EXAMPLE_MANIFESTS = sorted((ROOT / "examples").glob("*/*.yaml"))


@pytest.mark.parametrize(
    "path", EXAMPLE_MANIFESTS, ids=[str(p.relative_to(ROOT)) for p in EXAMPLE_MANIFESTS]
)
def test_every_example_manifest_runs_under_the_default_allow_list(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user runs examples/ on an installation with the default list: every function
    reference there must be allowed by it and installed (the probes are not)."""
    monkeypatch.delenv(PREFIXES_ENV, raising=False)
    document = load_yaml(path)
    model = {"StreamJob": StreamJob, "Reconfiguration": Reconfiguration}[document["kind"]]
    spec = parse_manifest(document, model).spec
    assert spec_problems(spec, missing_ok=False) == []


def test_prefixes_match_on_module_boundaries_only() -> None:
    allow = AllowList(prefixes=("acme.functions.",))  # a trailing dot is the same prefix
    assert allow.prefixes == ("acme.functions",)
    assert allow.allows_module("acme.functions")
    assert allow.allows_module("acme.functions.fraud")
    assert not allow.allows_module("acme.functionsX")
    assert not allow.allows_module("acme.functionsX.fraud")
    assert not allow.allows_module("acme")


def test_the_allow_list_comes_from_the_installation() -> None:
    assert prefixes_from_env({}) == ("swivel.jobs.examples",)
    assert prefixes_from_env({PREFIXES_ENV: ""}) == ()  # entry points only
    assert prefixes_from_env({PREFIXES_ENV: " acme.fn. , swivel.jobs.examples "}) == (
        "acme.fn",
        "swivel.jobs.examples",
    )
    for bad in ("acme fn", "acme..fn", ".", "os;rm"):
        with pytest.raises(FunctionRefused) as refused:
            prefixes_from_env({PREFIXES_ENV: bad})
        assert refused.value.field == PREFIXES_ENV


def test_a_refusal_shows_the_allow_list_in_effect() -> None:
    allow = AllowList(prefixes=("acme.fn", "swivel.jobs.examples"))
    with pytest.raises(FunctionRefused) as refused:
        check_reference("os:system", allow, "spec.dataflow.operators[1].function")
    assert str(refused.value) == (
        "spec.dataflow.operators[1].function: 'os:system' is not allowed; allowed: functions "
        "defined in modules under [acme.fn, swivel.jobs.examples] (SWIVEL_FUNCTION_PREFIXES), "
        "or entry points of group 'swivel.functions' [none installed]"
    )


MODULE = """
import os
import functools
from os import system
from os.path import join as joined

def plain(df):
    return df

double = lambda df: df  # a lambda assigned here is defined here

class Model:
    def method(self, df):
        return df

    @staticmethod
    def static(df):
        return df

    @classmethod
    def klass(cls, df):
        return cls.__name__

    class Inner:
        @staticmethod
        def deep(df):
            return df

    borrowed = staticmethod(os.getcwd)

class Frame(dict):
    pass

@functools.wraps(plain)
def wrapped(df):  # wraps copies __module__ from plain: still defined here
    return df

faked = functools.wraps(plain)(os.getcwd) if False else None

def rebound(df):
    return df

rebound = os.getcwd  # rebinding after the def: the last binding wins at import

def sneaky(df):
    return df

globals()["sneaky"] = os.getcwd  # invisible to the syntax: only the workers can see it

async def coroutine(df):
    return df

if True:
    def conditional(df):
        return df
"""


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AllowList]:
    package = tmp_path / "acme_fn"
    package.mkdir()
    (package / "__init__.py").write_text("import os\nos.environ['ACME_INIT_RAN'] = '1'\n")
    monkeypatch.delenv("ACME_INIT_RAN", raising=False)
    (package / "mod.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield AllowList(prefixes=("acme_fn",))
    for name in [m for m in sys.modules if m.startswith("acme_fn")]:
        del sys.modules[name]


@pytest.mark.parametrize(
    "name",
    [
        "plain",
        "double",
        "Model.method",
        "Model.static",
        "Model.klass",
        "Model.Inner.deep",
        "wrapped",
        "conditional",
    ],
)
def test_functions_defined_in_the_module_pass_admission(acme: AllowList, name: str) -> None:
    check_reference(f"acme_fn.mod:{name}", acme, missing_ok=False)
    assert "acme_fn" not in sys.modules  # admission read the source, ran nothing
    assert "ACME_INIT_RAN" not in os.environ


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("os", "which is not a function defined there"),
        ("system", "which is not a function defined there"),
        ("joined", "which is not a function defined there"),
        ("Model", "which is a class (not a function)"),
        ("Frame", "which is a class (not a function)"),
        ("Frame.keys", "is not defined in class 'Frame'"),  # inherited from dict
        ("Model.borrowed", "which is not a function defined there"),
        ("rebound", "which is not a function defined there"),
        ("coroutine", "which is not a function defined there"),
        ("plain.x", "which is not a class defined in"),
        ("missing", "is not defined in module 'acme_fn.mod'"),
    ],
)
def test_admission_refuses_what_is_not_defined_there(acme: AllowList, name: str, why: str) -> None:
    with pytest.raises(FunctionRefused) as refused:
        check_reference(f"acme_fn.mod:{name}", acme, "f", missing_ok=False)
    assert why in refused.value.reason
    assert "acme_fn" not in sys.modules


def test_the_workers_accept_functions_defined_there_and_nothing_else(acme: AllowList) -> None:
    for name in ("plain", "double", "Model.method", "Model.static", "Model.Inner.deep", "wrapped"):
        assert callable(resolve(f"acme_fn.mod:{name}", acme))
    klass = resolve("acme_fn.mod:Model.klass", acme)
    assert klass(None) == "Model"  # bound to the class it is defined in
    # `sneaky` looks like a def to the syntax; the module rebinds it when imported, and the
    # workers' check sees the object: defence in depth.
    check_reference("acme_fn.mod:sneaky", acme, missing_ok=False)
    for name in (
        "sneaky",
        "rebound",
        "os",
        "system",
        "joined",
        "Model",
        "Frame",
        "Frame.keys",
        "Model.borrowed",
        "coroutine",
    ):
        with pytest.raises(FunctionRefused):
            resolve(f"acme_fn.mod:{name}", acme)


def test_a_module_that_fails_to_import_is_a_refusal_in_the_workers(
    acme: AllowList, tmp_path: Path
) -> None:
    (tmp_path / "acme_fn" / "broken.py").write_text("def f(df):\n    return df\n1 / 0\n")
    check_reference("acme_fn.broken:f", acme, missing_ok=False)  # admission runs nothing
    with pytest.raises(FunctionRefused, match=r"cannot import module 'acme_fn\.broken'"):
        resolve("acme_fn.broken:f", acme)


def test_a_missing_package_is_deferred_only_where_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    allow = AllowList(prefixes=("not_installed_here",))
    check_reference("not_installed_here.fn:score", allow)  # the operator's image may lack it
    with pytest.raises(FunctionRefused, match="not installed"):
        check_reference("not_installed_here.fn:score", allow, missing_ok=False)  # the agent
    with pytest.raises(FunctionRefused, match="cannot import"):
        resolve("not_installed_here.fn:score", allow)


def test_admission_never_imports_an_allowed_module() -> None:
    code = (
        "import sys\n"
        "from swivel.api.functions import AllowList, check_reference\n"
        "check_reference('swivel.jobs.examples.fraud:parse', AllowList(), missing_ok=False)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('swivel.jobs', 'pandas'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_manifests_are_checked_when_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PREFIXES_ENV, raising=False)  # the default list, named in the refusal
    text = (FRAUD / "streamjob.yaml").read_text()
    path = tmp_path / "job.yaml"
    path.write_text(text.replace("fraud:combine", "fraud:pd.DataFrame.to_csv"))
    with pytest.raises(SpecError) as refused:
        load_streamjob(path)
    (problem,) = refused.value.problems
    assert problem.field == "spec.dataflow.operators[4].function"
    assert "'swivel.jobs.examples.fraud:pd.DataFrame.to_csv' reaches 'pd'" in problem.reason
    assert "allowed: functions defined in modules under [swivel.jobs.examples]" in problem.reason

    reconf = (FRAUD / "reconfiguration.yaml").read_text()
    path = tmp_path / "reconf.yaml"
    path.write_text(reconf + "    stateTransform: os:system\n")
    spec = load_reconfiguration(FRAUD / "reconfiguration.yaml").spec
    assert spec_problems(spec) == []


def test_a_reconfiguration_names_each_refused_reference() -> None:
    from swivel.api.reconfiguration import ReconfigurationSpec

    spec = ReconfigurationSpec.model_validate(
        {
            "jobRef": {"name": "j"},
            "functionUpdates": [
                {"operator": "a", "function": "swivel.jobs.examples.labels:time.sleep"},
                {"operator": "b", "stateTransform": "os:system"},
                {"operator": "c", "function": "swivel.jobs.examples.fraud:parse"},
            ],
        }
    )
    fields = [p.field for p in spec_problems(spec, EXAMPLES)]
    assert fields == ["spec.functionUpdates[0].function", "spec.functionUpdates[1].stateTransform"]
