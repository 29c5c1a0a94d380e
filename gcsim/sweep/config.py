"""SWEEP.yaml: a base scenario and a grid of values to sweep over it.

A sweep file is a YAML mapping (unknown keys are errors)::

    name: delay-sweep                 # optional: names runs/sweep/<name>-<UTC timestamp>/ (default: file stem)
    base: ../scenarios/bimodal.yaml   # a scenario file (relative to this file) or an inline scenario mapping
    engine: auto                      # optional: auto | vector | simpy, as `gcsim simulate --engine`
    grid:                             # field -> list of values; points = every combination (first key slowest)
      n: [16, 32, 64]                 # n_workers (either spelling)
      schemes: [uncoded, gc-fr, {name: cce-fr, m: 2}, [gc-cr, gc-mds]]
      s: [0, 1, 3]                    # sets s of every scheme of the point (m likewise)
      stragglers.delay.p: [0.01, 0.05, 0.1]
      seed: [1, 2, 3]

Grid keys: ``n`` / ``n_workers``; ``s`` and ``m`` (set on every scheme of the point, after
``schemes``); ``schemes`` (each value one scheme – a name or a ``{name, s, m, seed, label}`` mapping –
or a list of them simulated together on the same draws; a bare name takes the parameters of the base's
entry of that name, when it has one; without this key every point runs the base's schemes); any other dotted field of the base scenario (``seed``, ``iterations``,
``stragglers.delay.p``, ``workload.compute.value``, ``stragglers.delay`` with whole distribution
mappings as values, ...). A dotted field must exist in the base (a distribution's parameter exists only
when the base uses that distribution; ``name`` and ``schemes.*`` are not sweepable).

One point is one scenario: the base with the point's values set, simulated like ``gcsim simulate`` of
that scenario (same engine choice, same keyed draws, so the same numbers). Values are checked twice:

* at load, each value alone against the base: a value the field itself refuses (``n: [0]``,
  ``stragglers.delay.p: [1.5]``, an unknown scheme name) is a :class:`~gcsim.errors.ConfigError`
  naming ``grid.<key>[<index>]``, and nothing runs;
  So is a value that clashes with a field of the base no grid key sweeps (``n: [4]`` beside a
  ``worker_scale`` of 6 factors, ``workload.cores: [null]`` beside a ``call_overhead``): every point
  with it would be skipped;
* per point, the combination: parameters a scheme refuses (``s >= n``, gc-fr with ``(s+1)`` not dividing
  ``n``, ...) make that scheme's row ``skipped`` with the reason; a point the scenario refuses as a whole
  (two swept fields that clash only together, e.g. ``workload.cores: null`` with a swept
  ``call_overhead``) has every row skipped.
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from gcsim.errors import ConfigError
from gcsim.validation import GivenLabel, NonNegInt, PosInt, SpecFieldError, config_error_from_validation

#: Most points one sweep may have (its rows are held in memory to write sweep.csv).
MAX_POINTS = 1_000_000
#: Values of the sweep file's ``engine`` (those of ``gcsim simulate --engine``).
ENGINES = ("auto", "simpy", "vector")
#: Default parent of sweep run directories.
DEFAULT_SWEEP_ROOT = Path("runs/sweep")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MAX_NAME = 100
#: grid keys that are not scenario paths
_SCHEME_AXES = ("schemes", "s", "m")
#: sweep.csv columns every row has that a grid key may coincide with (then no extra column)
FIXED_AXIS_COLUMNS = ("n", "s", "m", "seed", "iterations")


class SweepFile(BaseModel):
    """The sweep file as written (validated by :func:`validate_sweep`; see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    name: Optional[str] = None
    description: Optional[str] = None
    base: Any
    engine: Literal["auto", "simpy", "vector"] = "auto"
    grid: Annotated[dict[str, Annotated[list[Any], Field(min_length=1)]], Field(min_length=1)]


@dataclass(frozen=True)
class Axis:
    """One grid key.

    Attributes:
        key: the key as written (``n``, ``stragglers.delay.p``, ...).
        kind: ``"path"`` (a scenario field), ``"schemes"``, ``"s"`` or ``"m"``.
        path: the scenario path of a ``path`` axis (``("n_workers",)`` for ``n``); ``()`` otherwise.
        column: its column in sweep.csv (``n`` for ``n_workers``).
        values: the values, in the file's order.
    """

    key: str
    kind: str
    path: tuple
    column: str
    values: tuple


@dataclass
class SweepPlan:
    """A validated sweep: the resolved base scenario (plain data, every default filled in) and the axes.

    Point ``k`` (``0 <= k < total``) takes value ``k``'s mixed-radix digits, the first axis slowest
    (the order of ``itertools.product``).
    """

    name: str
    base: dict
    base_dir: str | None
    axes: tuple[Axis, ...]
    engine: str = "auto"

    @property
    def total(self) -> int:
        """Number of points (the product of the axes' lengths)."""
        return math.prod(len(a.values) for a in self.axes)

    def values(self, k: int) -> tuple:
        """The axis values of point ``k``, in axis order. Raises IndexError outside ``[0, total)``."""
        if not 0 <= k < self.total:
            raise IndexError(f"point {k} outside [0, {self.total})")
        digits = []
        for ax in reversed(self.axes):
            k, r = divmod(k, len(ax.values))
            digits.append(r)
        return tuple(ax.values[i] for ax, i in zip(self.axes, reversed(digits)))

    def point_data(self, k: int) -> dict:
        """The scenario data of point ``k`` (plain data, not yet validated): the base with the point's
        values set; ``schemes`` from the ``schemes`` axis (else the base's; a bare name takes the base's
        entry of that name, :func:`with_base_parameters`), then ``s`` / ``m`` set on every scheme."""
        data = copy.deepcopy(self.base)
        scheme_values = {}
        for ax, v in zip(self.axes, self.values(k)):
            if ax.kind == "path":
                set_path(data, ax.path, copy.deepcopy(v))
            else:
                scheme_values[ax.kind] = v
        if "schemes" in scheme_values:
            data["schemes"] = with_base_parameters(scheme_list(scheme_values["schemes"]), self.base.get("schemes"))
        for key in ("s", "m"):
            if key in scheme_values:
                data["schemes"] = [{**sp, key: scheme_values[key]} for sp in data["schemes"]]
        return data

    def grid(self) -> dict:
        """``{key: [values]}`` as in the file."""
        return {ax.key: list(ax.values) for ax in self.axes}

    def resolved(self) -> dict:
        """What the run directory's ``sweep.yaml`` holds: name, engine, the resolved base inline, grid
        (a sweep file of its own: ``gcsim sweep runs/sweep/<dir>/sweep.yaml`` reruns it)."""
        return {"name": self.name, "engine": self.engine, "base": self.base, "grid": self.grid()}

    def identity(self) -> dict:
        """What must not change between a run and its ``--resume``: the base (its ``name`` aside), the
        grid and the engine, as canonical plain data (YAML round-tripped)."""
        base = {k: v for k, v in self.base.items() if k != "name"}
        return yaml.safe_load(yaml.safe_dump({"base": base, "grid": self.grid(), "engine": self.engine}))

    def columns(self) -> list[str]:
        """sweep.csv's grid-value columns: one per axis whose column is not a fixed one (n, s, m, seed,
        iterations are columns of every row)."""
        return [ax.column for ax in self.axes if ax.column not in FIXED_AXIS_COLUMNS]


# ------------------------------------------------------------------------------------------- paths
def _split(key: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in key.split("."))


def set_path(data: Any, path: tuple, value: Any) -> None:
    """Set ``data[path[0]][path[1]]... = value`` (list components are integers). The path must exist
    (see :func:`resolve_path`)."""
    cur = data
    for part in path[:-1]:
        cur = cur[part]
    cur[path[-1]] = value


def resolve_path(base: dict, key: str, field: str) -> tuple:
    """The path of grid key ``key`` in the resolved base, checked to exist.

    Raises:
        ConfigError: ``field``, naming the keys that exist where the path leaves the base.
    """
    path = _split(key)
    if "" in path:
        raise ConfigError(field, "a dotted field name of the base scenario", key)
    cur: Any = base
    for i, part in enumerate(path):
        where = ".".join(str(p) for p in path[:i]) or "the scenario"
        if isinstance(cur, dict) and isinstance(part, str) and part in cur:
            nxt = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and part < len(cur):
            nxt = cur[part]
        elif isinstance(cur, dict):
            raise ConfigError(field, f"a field of the base scenario ({where} has {', '.join(cur)})",
                              GivenLabel(f"{key!r}"))
        elif cur is None:
            raise ConfigError(field, f"a field of the base scenario ({where} is null there: set it in the base, "
                              f"or sweep {where} with whole mappings)", GivenLabel(f"{key!r}"))
        else:
            raise ConfigError(field, f"a field of the base scenario ({where} is a {type(cur).__name__})",
                              GivenLabel(f"{key!r}"))
        if i < len(path) - 1:
            cur = nxt
    return path


def scheme_list(value: Any) -> list[dict]:
    """A ``schemes`` grid value as a list of scheme mappings: a name -> ``[{name}]``, a mapping ->
    ``[mapping]``, a list -> each item so (items not names or mappings are left for validation)."""
    items = value if isinstance(value, list) else [value]
    return [{"name": it} if isinstance(it, str) else (dict(it) if isinstance(it, dict) else it) for it in items]


def with_base_parameters(schemes: list, base_schemes: Any) -> list:
    """A scheme named by its bare name on the ``schemes`` axis takes the parameters (``s``, ``m``, ``seed``,
    ...) of the base scenario's entry of that name, when the base lists it exactly once: naming cce-fr
    means the base's cce-fr (its ``m: 2``), not a default one (a review, 2026-12-05: cce-fr silently got
    m = 1 and drew exactly on gc-fr). An ``s`` or ``m`` axis still overrides them; a mapping on the axis
    is taken as written."""
    if not isinstance(base_schemes, list):
        return schemes
    out = []
    for sp in schemes:
        if isinstance(sp, dict) and set(sp) == {"name"}:
            same = [b for b in base_schemes if isinstance(b, dict) and b.get("name") == sp["name"]]
            if len(same) == 1:
                sp = {**same[0], **sp}
        out.append(sp)
    return out


def display(value: Any) -> str:
    """A grid value as sweep.csv writes it: numbers and strings as themselves, anything else as compact
    JSON (``{"dist":"expon","scale":0.1}``)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


# ------------------------------------------------------------------------------------------- loading
def load_sweep(path: str | Path) -> SweepPlan:
    """Read and validate a sweep file (module docstring).

    Raises:
        ConfigError: one line naming the field (``grid.s[2]``, ``base.n_workers``, ``engine``, ...),
            the allowed values and the given value.
    """
    from gcsim.scenario import read_config_document

    p = Path(path)
    data = read_config_document(p, "sweep")
    return validate_sweep(data, base_dir=p.parent, default_name=p.stem)


def validate_sweep(data: Any, base_dir: str | Path | None = None, default_name: str = "sweep") -> SweepPlan:
    """Validate parsed sweep data (:func:`load_sweep`); ``base_dir`` resolves a relative ``base`` path
    and an inline base's files. Raises ConfigError (see :func:`load_sweep`)."""
    from gcsim.scenario import Scenario, load_scenario, validate_scenario

    keys = ", ".join(SweepFile.model_fields)
    if data is None:
        raise ConfigError("sweep", f"a YAML mapping with the keys {keys}", GivenLabel("an empty document"))
    if not isinstance(data, dict):
        raise ConfigError("sweep", f"a YAML mapping with the keys {keys}", type(data).__name__)
    unknown = [k for k in data if k not in SweepFile.model_fields]
    if unknown:  # before pydantic, which would report a missing 'grid' first for a misspelt 'grid'
        raise ConfigError(str(unknown[0]), f"one of the keys {keys}", GivenLabel(f"unknown key {unknown[0]!r}"))
    try:
        sf = SweepFile.model_validate(data)
    except ValidationError as e:
        raise config_error_from_validation(e, root=SweepFile) from None
    if "base" not in data:
        raise ConfigError("base", "a scenario file path or an inline scenario mapping", GivenLabel("missing"))

    name = sf.name if sf.name is not None else default_name
    if not _NAME_RE.match(name) or len(name) > _MAX_NAME:
        raise ConfigError("name", f"letters, digits, '_', '.', '-', at most {_MAX_NAME} of them (it names the run "
                          "directory)" + ("" if sf.name is not None else "; the file's name is the default: set name"),
                          name)

    # the base scenario
    bdir = None if base_dir is None else Path(base_dir)
    try:
        if isinstance(sf.base, str):
            bpath = Path(sf.base).expanduser()
            if not bpath.is_absolute() and bdir is not None:
                bpath = bdir / bpath
            if not bpath.is_file():
                raise ConfigError("base", "an existing scenario file (relative paths: from the sweep file's folder) "
                                  "or an inline scenario mapping", sf.base)
            sc: Scenario = load_scenario(bpath)
            bdir = bpath.parent
        elif isinstance(sf.base, dict):
            sc = validate_scenario(sf.base, base_dir=bdir)
        else:
            raise ConfigError("base", "a scenario file path or an inline scenario mapping", sf.base)
    except ConfigError as e:
        if e.field == "base":
            raise
        raise _prefixed(e, "base") from None
    base = sc.resolved()
    base_dir_s = None if bdir is None else str(bdir.resolve())

    if "n" in sf.grid and "n_workers" in sf.grid:
        raise ConfigError("grid.n_workers", "one of n or n_workers (the same field)", GivenLabel("both"))
    for key, values in sf.grid.items():  # a repeated value would simulate the same points again (review)
        seen: dict[str, int] = {}
        for i, v in enumerate(values):
            k = json.dumps(v, sort_keys=True, default=str)
            if k in seen:
                raise ConfigError(f"grid.{key}[{i}]", "values that differ (a repeated one simulates the same points "
                                  "twice, with the same draws)", GivenLabel(f"{display(v)}, as grid.{key}[{seen[k]}]"))
            seen[k] = i
    axes = []
    swept = [(("n_workers",) if key == "n" else _split(key), values) for key, values in sf.grid.items()
             if key not in _SCHEME_AXES]
    for key, values in sf.grid.items():
        field = f"grid.{key}"
        if key in _SCHEME_AXES:
            axes.append(Axis(key, key, (), key, tuple(_check_scheme_axis(key, values))))
            continue
        path = ("n_workers",) if key == "n" else resolve_path(base, key, field)
        if path[0] in ("name", "schemes"):
            raise ConfigError(field, "a scenario field other than name and schemes.* (sweep schemes with the "
                              "schemes, s and m keys)", key)
        column = "n" if path == ("n_workers",) else key
        for i, v in enumerate(values):
            _check_path_value(base, base_dir_s, path, v, f"{field}[{i}]", [(p, vs) for p, vs in swept if p != path])
        axes.append(Axis(key, "path", path, column, tuple(values)))
    total = math.prod(len(a.values) for a in axes)
    if total > MAX_POINTS:
        raise ConfigError("grid", f"at most {MAX_POINTS} points (the product of the lists' lengths)", total)
    return SweepPlan(name=name, base=base, base_dir=base_dir_s, axes=tuple(axes), engine=sf.engine)


def _prefixed(e: ConfigError, prefix: str) -> ConfigError:
    """``e`` with its field under ``prefix`` (``base.stragglers.delay.p``)."""
    if e.allowed is None:
        return ConfigError(prefix, message=f"{prefix}: {e}")
    field = prefix if e.field in ("scenario", "") else f"{prefix}.{e.field}"
    return ConfigError(field, e.allowed, e.given)


def _check_path_value(base: dict, base_dir: str | None, path: tuple, value: Any, field: str,
                      others: list[tuple[tuple, list]] = ()) -> None:
    """One value alone on the base (schemes: just ``uncoded``). When the base refuses it, but the base
    with some value of another axis set as well accepts it (``stragglers.worker_scale: [[1, 1, 1, 1]]``
    beside ``n: [4, 6]`` on a base of n = 6), it depends on the combination and is left to the points
    (found by a review: it was refused). Otherwise an error about the field itself is the user's
    (raised, named ``field``); so is one about a field of the base that no axis sweeps (the value clashes
    with it at every point: ``workload.cores: null`` beside the base's ``call_overhead``, ``n: 4`` beside
    a ``worker_scale`` of 6 factors), raised as ``field: <the scenario's error>``. Others (the clashing
    field is swept too, or it is the schemes) are left to the points.

    Args:
        others: ``(path, values)`` of every other non-scheme axis (``("n_workers",)`` for ``n``)."""
    from gcsim.scenario import validate_scenario

    def refusal(sets: list[tuple[tuple, Any]]) -> ConfigError | None:
        """The scenario's error for the base with ``sets`` applied (schemes: just uncoded), None if valid."""
        probe = copy.deepcopy(base)
        probe["schemes"] = [{"name": "uncoded"}]
        try:
            for p, v in sets:
                set_path(probe, p, copy.deepcopy(v))
        except (KeyError, IndexError, TypeError):  # the other axis's path is not in this probe
            return ConfigError(field, message=f"{field}: no such path")
        try:
            validate_scenario(probe, base_dir=base_dir)
        except ConfigError as err:
            return err
        return None

    e = refusal([(path, value)])
    if e is None or any(refusal([(path, value), (p, v)]) is None for p, vs in others for v in vs):
        return
    target = ".".join(str(p) for p in path)
    if e.field == target or e.field.startswith(target + "."):
        if e.allowed is None:
            raise ConfigError(field, message=f"{field}: {e}") from None
        raise ConfigError(field + e.field[len(target):], e.allowed, e.given) from None
    other = _split(e.field) if e.field and e.field != "scenario" else ()
    if other and other[0] != "schemes" and not any(
            other[:len(p)] == p or p[:len(other)] == other for p, _ in others):
        raise ConfigError(field, message=f"{field}: {display(value)} clashes with the base's {e.field}, which "
                                         f"no grid key sweeps, so every point with it would be skipped: "
                                         f"{e}") from None


def _check_scheme_axis(key: str, values: list) -> list:
    """Check the values of an ``s``, ``m`` or ``schemes`` axis. Raises ConfigError ``grid.<key>[i]...``."""
    from gcsim.scenario import SchemeSpec, check_label
    from gcsim.schemes import scheme_names

    if key in ("s", "m"):
        adapter, allowed = (TypeAdapter(NonNegInt), "an integer >= 0") if key == "s" else \
            (TypeAdapter(PosInt), "an integer >= 1")
        for i, v in enumerate(values):
            try:
                adapter.validate_python(v)
            except ValidationError:
                raise ConfigError(f"grid.{key}[{i}]", allowed, v) from None
        return values
    names = scheme_names()
    for i, v in enumerate(values):
        field = f"grid.schemes[{i}]"
        if isinstance(v, list) and not v:
            raise ConfigError(field, "a scheme name or mapping, or a non-empty list of them", v)
        items = scheme_list(v)
        for j, item in enumerate(items):
            ifield = field if not isinstance(v, list) else f"{field}[{j}]"
            if not isinstance(item, dict):
                raise ConfigError(ifield, "a scheme name or a mapping with the keys name, s, m, seed, label", item)
            try:
                spec = SchemeSpec.model_validate(item)
            except ValidationError as e:
                raise config_error_from_validation(e, prefix=ifield, root=SchemeSpec) from None
            if spec.name not in names:
                raise ConfigError(f"{ifield}.name", f"one of {', '.join(names)}", spec.name)
            if spec.label is not None:
                try:
                    check_label(spec, f"{ifield}.label")
                except SpecFieldError as e:
                    raise ConfigError(e.field, e.allowed, e.given) from None
    return values


__all__ = ["Axis", "DEFAULT_SWEEP_ROOT", "ENGINES", "FIXED_AXIS_COLUMNS", "MAX_POINTS", "SweepFile", "SweepPlan",
           "display", "load_sweep", "resolve_path", "scheme_list", "set_path", "validate_sweep"]
