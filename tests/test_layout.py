"""Layout checks of issue 11: the package's import graph has no cycle (every import counted, also
the ones inside functions), and the shared validation module is the one source of field types and
of pydantic-error translation."""

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
