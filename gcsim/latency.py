"""Latency distributions (seconds): pydantic specs and the samplers built from them.

A spec is a mapping discriminated on ``dist``:

* any continuous distribution of :mod:`scipy.stats` by name with its shape parameters and optional
  ``loc``/``scale`` (``{dist: pareto, b: 2.5, scale: 0.02}``, ``{dist: expon, scale: 0.1}``,
  ``{dist: lognorm, s: 0.5, scale: 0.1}``, ``weibull_min``, ``gamma``, ...); its support must lie in
  ``[0, inf)`` (these are durations);
* ``{dist: constant, value: 0.1}``;
* ``{dist: shifted_expon, shift: 0.05, scale: 0.1}`` – ``shift + Exp(mean=scale)``, the model of Lee,
  Lam, Pedarsani, Papailiopoulos, Ramchandran, "Speeding Up Distributed Machine Learning Using
  Codes", IEEE Trans. Inf. Theory 2018, §II (there ``shift`` scales with the load);
* ``{dist: bimodal, p: 0.1, delay: 1.0, base: <spec or omitted = 0>}`` – ``base + delay·Bernoulli(p)``
  (with probability ``p`` add ``delay``), the Bernoulli straggler model;
* ``{dist: mixture, components: [{weight: 0.9, spec: ...}, ...]}`` – weights sum to 1;
* ``{dist: empirical, file: x.csv, column: seconds}`` or ``{dist: empirical, values: [...]}`` –
  resampled uniformly with replacement (the bootstrap distribution of the measured values), times an
  optional ``scale`` (default 1). A relative ``file`` is resolved against the scenario file's folder.

Sampling is by inversion: every distribution maps ``n_uniforms`` independent U(0,1) numbers to one
draw (:meth:`Distribution.from_uniform`). Callers that need common random numbers (the simulator,
the real executor) draw the uniforms from their own keyed streams and transform them in bulk;
:meth:`Distribution.sample` is the plain ``rng`` interface.

Errors: specs raise :class:`gcsim.validation.SpecFieldError` inside pydantic validation;
:func:`gcsim.validation.config_error_from_validation` turns every validation error into a one-line
:class:`gcsim.errors.ConfigError` naming the field path.
"""

from __future__ import annotations

import difflib
import math
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationInfo, model_validator

#: Names of the non-scipy kinds.
SPECIAL_KINDS = ("constant", "shifted_expon", "bimodal", "mixture", "empirical")
from gcsim.validation import (MISSING, TAG_PREFIX, GivenLabel as _GivenRepr, NonNegFinite, PosFinite, Probability,
                              SpecFieldError, config_error_from_validation)


# ============================================================================ specs
class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConstantSpec(_Spec):
    """``{dist: constant, value: v}``: always ``v`` seconds."""

    dist: Literal["constant"] = "constant"
    value: NonNegFinite


class ShiftedExponSpec(_Spec):
    """``{dist: shifted_expon, shift: a, scale: b}``: ``a + Exp(mean=b)`` seconds (Lee et al. 2018, §II)."""

    dist: Literal["shifted_expon"] = "shifted_expon"
    shift: NonNegFinite = 0.0
    scale: PosFinite


class BimodalSpec(_Spec):
    """``{dist: bimodal, p, delay, base}``: ``base + delay·Bernoulli(p)`` seconds (base omitted = 0)."""

    dist: Literal["bimodal"] = "bimodal"
    p: Probability
    delay: NonNegFinite
    base: Optional["DistSpec"] = None


class MixtureComponent(_Spec):
    """One component of a mixture: its ``weight`` (> 0) and ``spec``."""

    weight: PosFinite
    spec: "DistSpec"


class MixtureSpec(_Spec):
    """``{dist: mixture, components: [{weight, spec}, ...]}``: draw a component by weight (weights sum to 1)."""

    dist: Literal["mixture"] = "mixture"
    components: list[MixtureComponent] = Field(min_length=1)

    @model_validator(mode="after")
    def _weights_sum_to_one(self):
        total = sum(c.weight for c in self.components)
        if abs(total - 1.0) > 1e-6:
            raise SpecFieldError("components", "weights summing to 1", round(total, 9))
        return self


class EmpiricalSpec(_Spec):
    """``{dist: empirical, file, column}`` or ``{dist: empirical, values}``: resample measured seconds.

    ``file`` is a CSV file (relative paths are resolved against the scenario's folder, passed as the
    validation context ``base_dir``, and stored resolved); ``column`` its column of seconds.
    ``scale`` (> 0, default 1) multiplies every value: e.g. a calibrated ``workload.compute`` moved to
    another partition size (old n / new n) or a machine whose CPU-speed probe differs.
    """

    dist: Literal["empirical"] = "empirical"
    file: Optional[str] = None
    column: str = "seconds"
    values: Optional[list[NonNegFinite]] = None
    scale: PosFinite = 1.0

    @model_validator(mode="after")
    def _one_source(self, info: ValidationInfo):
        if (self.file is None) == (self.values is None):
            raise SpecFieldError("file", "exactly one of 'file' or 'values'",
                                 MISSING if self.file is None else _GivenRepr("both"))
        if self.values is not None:
            if len(self.values) == 0:
                raise SpecFieldError("values", "a non-empty list of seconds", [])
            return self
        path = resolve_against_scenario(self.file, info)
        if not path.is_file():
            raise SpecFieldError("file", "an existing CSV file of measured seconds", self.file)
        self.file = str(path.resolve())
        _read_empirical_column(self.file, self.column)  # validates now; cached for build
        return self


def resolve_against_scenario(file: str, info: ValidationInfo | None) -> Path:
    """``file`` (``~`` expanded) as a path; a relative one is taken against the scenario's folder, the
    validation context's ``base_dir`` (when given). Not resolved further, not checked."""
    base = (info.context or {}).get("base_dir") if info is not None else None
    path = Path(file).expanduser()
    if not path.is_absolute() and base is not None:
        path = Path(base) / path
    return path


def _scipy_continuous_names() -> tuple[str, ...]:
    import scipy.stats as st
    return tuple(sorted(n for n in dir(st) if isinstance(getattr(st, n), st.rv_continuous)))


@lru_cache(maxsize=1)
def scipy_names() -> tuple[str, ...]:
    """Names of every continuous distribution in scipy.stats (cached)."""
    return _scipy_continuous_names()


class ScipySpec(BaseModel):
    """``{dist: <scipy.stats continuous name>, <shape params>, loc, scale}``.

    The parameters are the distribution's shape parameters (all required) plus optional ``loc``
    (default 0) and ``scale`` (default 1, must be > 0); the support must lie in ``[0, inf)``.
    """

    model_config = ConfigDict(extra="allow")
    dist: str

    @model_validator(mode="after")
    def _check(self):
        name = self.dist
        if name not in scipy_names():
            close = difflib.get_close_matches(name, list(SPECIAL_KINDS) + list(scipy_names()), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise SpecFieldError(
                "dist", f"one of {', '.join(SPECIAL_KINDS)} or a continuous scipy.stats distribution "
                f"name (expon, pareto, lognorm, weibull_min, gamma, ...){hint}", name)
        import scipy.stats as st
        rv = getattr(st, name)
        shapes = [s.strip() for s in rv.shapes.split(",")] if rv.shapes else []
        allowed = shapes + ["loc", "scale"]
        params = dict(self.model_extra or {})
        for key, val in params.items():
            if key not in allowed:
                raise SpecFieldError(key, f"a parameter of {name} ({', '.join(allowed)})", _GivenRepr(f"unknown key {key!r}"))
            if isinstance(val, bool):
                raise SpecFieldError(key, "a number", val)
            if not isinstance(val, (int, float)):
                try:
                    val = float(val)
                except (TypeError, ValueError):
                    raise SpecFieldError(key, "a number", val) from None
            if not math.isfinite(float(val)):
                raise SpecFieldError(key, "a finite number", val)
            params[key] = float(val)
            setattr(self, key, float(val))
        for sh in shapes:
            if sh not in params:
                raise SpecFieldError(sh, f"a number (shape parameter of {name})", MISSING)
        if params.get("scale", 1.0) <= 0:
            raise SpecFieldError("scale", "a number > 0 (seconds)", params["scale"])
        if not bool(rv._argcheck(*[params[s] for s in shapes])):
            raise SpecFieldError(shapes[0] if len(shapes) == 1 else ",".join(shapes),
                                 f"valid shape parameters of scipy.stats.{name}", [params[s] for s in shapes])
        lo = float(rv(**params).support()[0])
        if not lo >= 0:
            raise SpecFieldError("loc" if "loc" in params else "dist",
                                 "a distribution with support in [0, inf) (durations in seconds)",
                                 _GivenRepr(f"{name} with support from {lo}"))
        return self

    def params(self) -> dict[str, float]:
        """Shape parameters, loc and scale as floats."""
        return {k: float(v) for k, v in (self.model_extra or {}).items()}


def _dist_tag(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        value = {"dist": getattr(value, "dist", None)}
    if not isinstance(value, dict):
        return None
    kind = value.get("dist")
    if not isinstance(kind, str):
        return None
    return TAG_PREFIX + (kind if kind in SPECIAL_KINDS else "scipy")


DistSpec = Annotated[
    Union[
        Annotated[ConstantSpec, Tag(TAG_PREFIX + "constant")],
        Annotated[ShiftedExponSpec, Tag(TAG_PREFIX + "shifted_expon")],
        Annotated[BimodalSpec, Tag(TAG_PREFIX + "bimodal")],
        Annotated[MixtureSpec, Tag(TAG_PREFIX + "mixture")],
        Annotated[EmpiricalSpec, Tag(TAG_PREFIX + "empirical")],
        Annotated[ScipySpec, Tag(TAG_PREFIX + "scipy")],
    ],
    Discriminator(_dist_tag, custom_error_type="dist_kind",
                  custom_error_message="expected a mapping with a 'dist' key naming the distribution"),
]
"""A latency distribution spec (seconds), discriminated on ``dist``."""

BimodalSpec.model_rebuild()
MixtureComponent.model_rebuild()
MixtureSpec.model_rebuild()

AnySpec = Union[ConstantSpec, ShiftedExponSpec, BimodalSpec, MixtureSpec, EmpiricalSpec, ScipySpec]


@lru_cache(maxsize=64)
def _read_empirical_column(file: str, column: str) -> np.ndarray:
    import pandas as pd
    try:
        df = pd.read_csv(file)
    except Exception as e:  # pandas raises several types for unreadable CSV
        raise SpecFieldError("file", "a readable CSV file", f"{file} ({type(e).__name__})") from None
    if column not in df.columns:
        raise SpecFieldError("column", f"one of the columns of {Path(file).name} ({', '.join(map(str, df.columns))})", column)
    raw = df[column]
    vals = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    problem = _column_problem(raw.to_numpy(dtype=object), vals)
    if problem is not None:
        raise SpecFieldError("column", f"a non-empty column of finite seconds >= 0 in {Path(file).name}",
                             _GivenRepr(f"column {column!r} with {problem}"))
    vals.setflags(write=False)
    return vals


def _column_problem(raw: np.ndarray, vals: np.ndarray) -> str | None:
    """What makes a column of measured seconds unusable (None if nothing): no rows, or the first bad
    cell (empty, non-numeric, non-finite, negative) with its line in the file (header = line 1)."""
    if len(vals) == 0:
        return "no rows"
    bad = np.flatnonzero(~np.isfinite(vals) | (vals < 0))
    if len(bad) == 0:
        return None
    i = int(bad[0])
    line = i + 2
    cell = raw[i]
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return f"an empty cell on line {line}"
    if math.isnan(vals[i]):
        return f"non-numeric value {str(cell)!r} on line {line}"
    if not math.isfinite(vals[i]):
        return f"non-finite value {vals[i]} on line {line}"
    return f"negative value {vals[i]:g} on line {line}"


# ============================================================================ samplers
class Distribution:
    """A sampler of non-negative durations (seconds, float64), sampled by inversion.

    Subclasses set ``n_uniforms`` (U(0,1) numbers consumed per draw) and implement
    :meth:`from_uniform` and :meth:`mean`.
    """

    n_uniforms: int = 1

    def from_uniform(self, u: np.ndarray) -> np.ndarray:
        """Map uniforms ``(..., n_uniforms)`` in [0, 1) to draws ``(...)`` (seconds, float64)."""
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size) -> np.ndarray:
        """``size`` i.i.d. draws (int or shape tuple) in seconds, float64."""
        shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        return self.from_uniform(rng.random(shape + (self.n_uniforms,)))

    def mean(self) -> float:
        """Expected value in seconds (``inf`` where it diverges)."""
        raise NotImplementedError


class ConstantDistribution(Distribution):
    """Always ``value`` seconds (consumes no uniforms)."""

    n_uniforms = 0

    def __init__(self, value: float):
        self.value = float(value)

    def from_uniform(self, u):
        return np.full(np.shape(u)[:-1], self.value, dtype=np.float64)

    def mean(self):
        return self.value


class ScipyDistribution(Distribution):
    """A frozen continuous scipy.stats distribution; draws ``ppf(U)``."""

    def __init__(self, name: str, params: dict[str, float]):
        import scipy.stats as st
        self.name, self.params = name, dict(params)
        self.frozen = getattr(st, name)(**params)
        # rv_continuous.ppf computes, where 0 < q < 1 and the arguments are valid, ``_ppf(q, *shapes) *
        # scale + loc`` on the arguments broadcast to q and flattened (argsreduce); the checks, the
        # masks and the scatter around it cost more than the inversion. With the arguments checked once
        # here, from_uniform makes that same call directly (bit for bit the same numbers) whenever
        # every q is inside (0, 1), and calls ppf otherwise.
        d = self.frozen.dist
        try:
            shapes, loc, scale = d._parse_args(*self.frozen.args, **self.frozen.kwds)
            shapes = tuple(np.asarray(s) for s in shapes)
            ok = bool(np.all(d._argcheck(*shapes))) and float(scale) > 0 and float(loc) == float(loc)
        except Exception:  # a private API that changed: the public path only
            ok = False
        self._direct = (d, shapes, np.asarray(loc), np.asarray(scale)) if ok else None

    def from_uniform(self, u):
        q = np.asarray(u)[..., 0]
        if self._direct is not None and q.size and q.min() > 0.0 and q.max() < 1.0:
            d, shapes, loc, scale = self._direct
            flat = q.ravel()
            out = d._ppf(flat, *(np.broadcast_to(s, flat.shape) for s in shapes))
            out = out * np.broadcast_to(scale, flat.shape) + np.broadcast_to(loc, flat.shape)
            return np.asarray(out, dtype=np.float64).reshape(q.shape)
        return np.asarray(self.frozen.ppf(q), dtype=np.float64)

    def mean(self):
        return float(self.frozen.mean())


class ShiftedExponDistribution(Distribution):
    """``shift + Exp(mean=scale)``; inversion ``shift - scale·log(1-U)`` (Lee et al. 2018, §II)."""

    def __init__(self, shift: float, scale: float):
        self.shift, self.scale = float(shift), float(scale)

    def from_uniform(self, u):
        return self.shift - self.scale * np.log1p(-u[..., 0])

    def mean(self):
        return self.shift + self.scale


class BimodalDistribution(Distribution):
    """``base + delay·1[U < p]``: with probability ``p`` add ``delay`` seconds."""

    def __init__(self, p: float, delay: float, base: Distribution | None):
        self.p, self.delay = float(p), float(delay)
        self.base = base if base is not None else ConstantDistribution(0.0)
        self.n_uniforms = self.base.n_uniforms + 1

    def from_uniform(self, u):
        nb = self.base.n_uniforms
        return self.base.from_uniform(u[..., :nb]) + self.delay * (u[..., nb] < self.p)

    def mean(self):
        return self.base.mean() + self.p * self.delay


class MixtureDistribution(Distribution):
    """Component ``c`` with probability ``weights[c]`` (first uniform), then that component's draw."""

    def __init__(self, weights: list[float], components: list[Distribution]):
        w = np.asarray(weights, dtype=np.float64)
        self.weights = w / w.sum()
        self.cum = np.cumsum(self.weights)
        self.cum[-1] = 1.0
        self.components = components
        self.n_uniforms = 1 + max(c.n_uniforms for c in components)

    def from_uniform(self, u):
        which = np.searchsorted(self.cum, u[..., 0], side="right")
        out = np.empty(u.shape[:-1], dtype=np.float64)
        for c, comp in enumerate(self.components):
            mask = which == c
            if np.any(mask):
                out[mask] = comp.from_uniform(u[mask][..., 1:1 + comp.n_uniforms])
        return out

    def mean(self):
        return float(sum(w * c.mean() for w, c in zip(self.weights, self.components)))


class EmpiricalDistribution(Distribution):
    """Uniform resampling (with replacement) of measured ``values`` (seconds): draw
    ``values[floor(U · len(values))]``, i.e. the bootstrap distribution of the sample (Efron, Ann.
    Statist. 7, 1979)."""

    def __init__(self, values: np.ndarray):
        self.values = np.asarray(values, dtype=np.float64)

    def from_uniform(self, u):
        idx = np.minimum((u[..., 0] * len(self.values)).astype(np.int64), len(self.values) - 1)
        return self.values[idx]

    def mean(self):
        return float(self.values.mean())


def build_distribution(spec: AnySpec | dict | None) -> Distribution:
    """Build the sampler of a spec (a validated spec model, or a raw mapping validated here).

    ``None`` gives the constant 0 distribution.

    Raises:
        ConfigError: for a malformed raw mapping (field path relative to the spec).
    """
    if spec is None:
        return ConstantDistribution(0.0)
    if isinstance(spec, dict):
        spec = parse_spec(spec)
    if isinstance(spec, ConstantSpec):
        return ConstantDistribution(spec.value)
    if isinstance(spec, ShiftedExponSpec):
        return ShiftedExponDistribution(spec.shift, spec.scale)
    if isinstance(spec, BimodalSpec):
        return BimodalDistribution(spec.p, spec.delay, None if spec.base is None else build_distribution(spec.base))
    if isinstance(spec, MixtureSpec):
        return MixtureDistribution([c.weight for c in spec.components],
                                   [build_distribution(c.spec) for c in spec.components])
    if isinstance(spec, EmpiricalSpec):
        values = np.asarray(spec.values) if spec.values is not None else _read_empirical_column(spec.file, spec.column)
        return EmpiricalDistribution(values * spec.scale)
    if isinstance(spec, ScipySpec):
        return ScipyDistribution(spec.dist, spec.params())
    raise TypeError(f"not a distribution spec: {spec!r}")


def scaled_spec(spec: AnySpec, factor: float) -> AnySpec:
    """The same distribution with every value multiplied by ``factor`` (> 0): the seconds of a machine
    ``factor`` times slower. ``constant``: ``value``; ``shifted_expon``: ``shift`` and ``scale``;
    ``bimodal``: ``delay`` and ``base``; ``mixture``: every component; ``empirical``: ``scale``; a
    scipy.stats distribution: ``loc`` and ``scale`` (``X = loc + scale·Y``).

    Raises:
        ValueError: ``factor`` is not a finite number > 0, naming it.
    """
    f = float(factor)
    if not (np.isfinite(f) and f > 0):
        raise ValueError(f"factor must be a finite number > 0, got {factor!r}")
    if isinstance(spec, ConstantSpec):
        return spec.model_copy(update={"value": spec.value * f})
    if isinstance(spec, ShiftedExponSpec):
        return spec.model_copy(update={"shift": spec.shift * f, "scale": spec.scale * f})
    if isinstance(spec, BimodalSpec):
        return spec.model_copy(update={"delay": spec.delay * f,
                                       "base": None if spec.base is None else scaled_spec(spec.base, f)})
    if isinstance(spec, MixtureSpec):
        return spec.model_copy(update={"components": [c.model_copy(update={"spec": scaled_spec(c.spec, f)})
                                                      for c in spec.components]})
    if isinstance(spec, EmpiricalSpec):
        return spec.model_copy(update={"scale": spec.scale * f})
    if isinstance(spec, ScipySpec):
        params = spec.params()
        params["scale"] = params.get("scale", 1.0) * f
        if "loc" in params:
            params["loc"] *= f
        return ScipySpec.model_validate({"dist": spec.dist, **params})
    raise TypeError(f"not a distribution spec: {spec!r}")


def parse_spec(data: Any, field: str = "dist", base_dir: str | Path | None = None) -> AnySpec:
    """Validate a raw mapping as a distribution spec.

    Raises:
        ConfigError: naming ``field`` + the bad sub-field, the allowed values and the given value.
    """
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(DistSpec).validate_python(data, context={"base_dir": base_dir})
    except ValidationError as e:
        raise config_error_from_validation(e, prefix=field, root=DistSpec) from None
