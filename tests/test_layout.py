"""Layout checks of issue 11: the package's import graph has no cycle (every import counted, also
the ones inside functions), the shared validation module is the one source of field types and
of pydantic-error translation, and the CLI takes its defaults and choices from the models."""

import ast
from pathlib import Path

import gcsim

ROOT = Path(gcsim.__file__).parent


def _import_graph() -> dict[str, set[str]]:
    """module -> gcsim modules it imports anywhere in its source (``from gcsim.x import y`` counts
    ``gcsim.x.y`` when that is a module, else ``gcsim.x``)."""
    mods = {".".join(p.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in ROOT.rglob("*.py")}
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gcsim"):
                subs = {f"{node.module}.{a.name}" for a in node.names} & mods.keys()
                graph[m] |= subs or ({node.module} & mods.keys())
            elif isinstance(node, ast.Import):
                graph[m] |= {a.name for a in node.names} & mods.keys()
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every back edge found by depth-first search, as the cycle it closes (a package importing its
    own submodules is not a cycle: Python loads the package first)."""
    state, stack, found = {}, [], []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in sorted(graph[u]):
            if v.startswith(u + "."):
                continue
            if state.get(v) == "open":
                found.append(stack[stack.index(v):] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def test_the_import_graph_has_no_cycle():
    graph = _import_graph()
    assert "gcsim.validation" in graph["gcsim.latency"] and "gcsim.scenario" not in graph["gcsim.latency"]
    assert _cycles(graph) == []


def test_cycle_finder_finds_a_cycle():
    # the checker itself: a two-module loop and a three-module loop are reported, a package->child edge is not
    g = {"a": {"b"}, "b": {"a"}, "p": {"p.c"}, "p.c": {"p"}, "x": {"y"}, "y": {"z"}, "z": {"x"}}
    assert sorted(map(tuple, _cycles(g))) == [("a", "b", "a"), ("x", "y", "z", "x")]


def test_validation_owns_the_field_types_and_the_error_translation():
    from gcsim import latency, scenario, validation
    from gcsim.real import config

    for name in ("NonNegFinite", "PosFinite", "Probability"):
        assert getattr(latency, name) is getattr(validation, name) is getattr(scenario, name)
    assert config.NonNegInt is scenario.NonNegInt is validation.NonNegInt
    assert latency.SpecFieldError is scenario.SpecFieldError is validation.SpecFieldError
    for src in ("latency.py", "scenario.py", "real/config.py"):
        text = (ROOT / src).read_text()
        assert "err[\"msg\"]" not in text, src  # no second hand-made translation of pydantic errors


def test_cli_defaults_and_choices_come_from_the_models():
    # gcsim compare / simulate / sweep / advise / calibrate / study / fit / schemes state the defaults of the
    # objects they fill, not copies of them
    import dataclasses

    from gcsim.cli import compare_cmd, simulate_cmd, sweep_cmd
    from gcsim.compare.pipeline import CompareOptions
    from gcsim.compare.verdict import Bands
    from gcsim.real.config import RealConfig
    from gcsim.sim.vector import ENGINES, TRACE_LEVELS
    from gcsim.sweep.run import EXECUTORS

    params = {p.name: p for p in compare_cmd.command.params}
    shared = [f.name for f in dataclasses.fields(CompareOptions) if f.name in params]
    assert len(shared) >= 9
    for name in shared:
        assert params[name].default == getattr(CompareOptions(), name), name
    assert list(params["mode"].type.choices) == ["scenario", "paired"]
    assert (params["mean_band"].default, params["p95_band"].default) == (Bands().mean, Bands().p95)
    sim = {p.name: p for p in simulate_cmd.command.params}
    assert list(sim["engine"].type.choices) == list(ENGINES) and list(sim["trace"].type.choices) == list(TRACE_LEVELS)
    sweep = {p.name: p for p in sweep_cmd.command.params}
    assert list(sweep["executor"].type.choices) == list(EXECUTORS)
    assert sweep["connect_timeout"].default == RealConfig.model_fields["connect_timeout_s"].default
    from gcsim.advise.search import DECODE_CHECKS, OBJECTIVES
    from gcsim.cli import advise_cmd, calibrate_cmd
    from gcsim.cli.options import parameter_default
    from gcsim.compare.scenario_file import write_calibrated_scenario

    adv = {p.name: p for p in advise_cmd.command.params}
    assert list(adv["objective"].type.choices) == list(OBJECTIVES)
    assert list(adv["decode_check"].type.choices) == list(DECODE_CHECKS)
    for name in ("objective", "max_m", "decode_check"):
        assert adv[name].default == parameter_default(advise_cmd.advise, name), name
    cal = {p.name: p for p in calibrate_cmd.command.params}
    assert cal["warmup"].default == parameter_default(write_calibrated_scenario, "warmup")
    # gcsim study: StudyOptions (outputs), CompareOptions (comparison), RealConfig (help of the real-run
    # options, which default to None: RealConfig's default), ProtocolOptions (--protocol)
    from gcsim.cli import fit_cmd, schemes_cmd, study_cmd
    from gcsim.cli.options import field_choices, field_default
    from gcsim.compare.pipeline import DEFAULT_WARMUP
    from gcsim.study.pipeline import StudyOptions
    from gcsim.study.protocol import DEFAULT_MODELS, NEIGHBOUR_SESSIONS, PROTOCOLS, ProtocolOptions

    study = {p.name: p for p in study_cmd.command.params}
    for name in ("out_dir", "runs_root"):
        assert study[name].default == field_default(StudyOptions, name), name
        assert str(field_default(ProtocolOptions, name)) in study["protocol"].help, name
    for name in ("replications", "mode"):
        assert study[name].default == getattr(CompareOptions(), name), name
    assert list(study["mode"].type.choices) == field_choices(CompareOptions, "mode")
    assert f"min({DEFAULT_WARMUP}, " in study["warmup"].help
    for name in ("data_dir", "batch_size", "eval_every"):
        assert study[name].default is None and f"[{field_default(RealConfig, name)}]" in study[name].help, name
    assert list(study["protocol"].type.choices) == list(PROTOCOLS)
    assert all(m in study["protocol"].help for m in DEFAULT_MODELS)
    assert list(study["neighbour_session"].type.choices) == list(NEIGHBOUR_SESSIONS)
    assert study["neighbour_session"].default == field_default(ProtocolOptions, "neighbour_session")
    # gcsim fit: read_trace / fit_trace's defaults, the recognised column names, the families
    from gcsim.fit.families import FAMILIES
    from gcsim.fit.model import fit_trace
    from gcsim.fit.traceio import DURATION_NAMES, ITERATION_NAMES, WORKER_NAMES, read_trace

    fit = {p.name: p for p in fit_cmd.command.params}
    assert fit["unit_s"].default == parameter_default(read_trace, "unit_s")
    assert fit["slow_threshold"].default == parameter_default(fit_trace, "slow_threshold")
    assert ", ".join(FAMILIES) in fit["families"].help
    for name, names in (("worker_col", WORKER_NAMES), ("iteration_col", ITERATION_NAMES),
                        ("duration_col", DURATION_NAMES)):
        assert all(n in fit[name].help for n in names), name
    # gcsim schemes check: make_scheme / verify_scheme's defaults, the payload dtypes the schemes accept
    from gcsim.schemes import make_scheme
    from gcsim.schemes.base import ERROR_TOLERANCE
    from gcsim.schemes.verify import verify_scheme

    chk = {p.name: p for p in schemes_cmd.check.params}
    for name in ("m", "seed", "payload_dtype"):
        assert chk[name].default == parameter_default(make_scheme, name), name
    for name in ("max_patterns", "samples"):
        assert chk[name].default == parameter_default(verify_scheme, name), name
    assert list(chk["payload_dtype"].type.choices) == list(ERROR_TOLERANCE)


def test_option_defaults_of_pydantic_models_dataclasses_and_functions():
    import dataclasses
    from typing import Literal, Optional

    import pytest
    from pydantic import BaseModel

    from gcsim.cli.options import field_choices, field_default, parameter_default

    class M(BaseModel):
        a: int = 3
        b: Literal["x", "y"] = "y"
        c: Optional[Literal["p", "q"]] = None
        need: int

    @dataclasses.dataclass
    class D:
        k: Literal["u", "v"] = "u"
        lst: list = dataclasses.field(default_factory=lambda: [1])

    def f(x, *, y=7):
        return x, y

    assert (field_default(M, "a"), field_default(M, "b"), field_default(D, "k"), field_default(D, "lst")) == (3, "y", "u", [1])
    assert field_choices(M, "b") == ["x", "y"] and field_choices(M, "c") == ["p", "q"] and field_choices(D, "k") == ["u", "v"]
    assert parameter_default(f, "y") == 7
    for bad in (lambda: field_default(M, "need"), lambda: field_default(M, "zz"), lambda: field_default(D, "zz"),
                lambda: parameter_default(f, "x")):
        with pytest.raises(KeyError):
            bad()
    with pytest.raises(TypeError):
        field_choices(M, "a")


def test_no_test_module_imports_another():
    # shared helpers live in tests/factories.py (fixtures in tests/conftest.py), never in a test module
    tests = Path(__file__).resolve().parent
    names = {p.stem for p in tests.glob("test_*.py")}
    found = []
    for p in sorted(tests.glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            found += [f"{p.name} imports {m}" for m in mods if m.split(".")[0] in names]
    assert found == []
