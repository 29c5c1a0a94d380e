"""Scenario files: what is simulated (workers, schemes, workload, network, stragglers, policy).

A scenario is a YAML mapping validated by :class:`Scenario` (pydantic, unknown keys are errors).
:func:`load_scenario` turns every problem – unreadable or empty file, bad YAML, a key given twice,
unknown key, wrong type, out-of-range value, unknown distribution, scheme parameters the scheme
refuses, a scheme too big for memory, missing or malformed empirical file – into one
:class:`~gcsim.errors.ConfigError` whose one-line message names the field path (e.g.
``stragglers.delay.dist``), the allowed values and the given value.

Scheme ``label`` (optional, to run one scheme twice) must be a plain name (letters, digits, '_', '.',
'-') that is not another scheme's CLI name.

Example (all times in seconds, sizes in bytes)::

    name: heavy_tail
    n_workers: 12
    iterations: 1000
    seed: 1
    schemes:
      - {name: uncoded}
      - {name: gc-fr, s: 2}
    workload: {gradient_bytes: 44.7e+6, model_bytes: 44.7e+6, compute: {dist: constant, value: 0.05}}
    network: {latency_s: 0.001, bandwidth_bytes_per_s: 1.25e9}
    stragglers:
      delay: {dist: pareto, b: 2.5, scale: 0.02}
      slowdown: null
      persistent: {p_enter: 0.02, p_leave: 0.2, slowdown: 3.0}
      worker_scale: null
    policy: cancel
    cancel_latency_s: 0.001
    master: {decode_s: {dist: constant, value: 0.002}}
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, ValidationInfo, model_validator

from gcsim.streams import MAX_WORKERS
from gcsim.errors import ConfigError, SchemeError
from gcsim.latency import ConstantSpec, DistSpec
from gcsim.validation import (GivenLabel as _GivenLabel, NonNegFinite, NonNegInt, Policy, PosFinite, PosInt, Probability,
                              SpecFieldError)
from gcsim.validation import config_error_from_validation as _config_error

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: Longest scenario name (it names run directories: ``<name>-<UTC timestamp>``).
MAX_NAME_LENGTH = 100


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SchemeSpec(_Model):
    """One scheme to run: CLI ``name``, its ``s``, ``m`` and construction ``seed``; ``label`` names it
    in outputs (default: ``name``; needed only to run one scheme twice with other parameters)."""

    name: str
    s: NonNegInt = 0
    m: PosInt = 1
    seed: NonNegInt = 0
    label: Optional[str] = None

    @property
    def key(self) -> str:
        """The name used in outputs (``label`` or ``name``)."""
        return self.label or self.name


class Workload(_Model):
    """What a worker computes and sends: ``gradient_bytes`` (full gradient message), ``model_bytes``
    (model the master broadcasts), ``compute``: seconds to compute ONE partition's gradient.

    ``cores``: None (default) – every worker has a core of its own and ``compute`` is wall-clock
    seconds; a number – the workers share that many cores (processor sharing, :mod:`gcsim.sim.cpu`):
    while ``A`` workers compute, each progresses at ``min(1, cores / A)``, and ``compute`` (and
    ``call_overhead``) are CPU-seconds on an idle core. A fraction is an effective capacity (cores
    partly taken by other processes). Injected delays and transfers use no CPU.

    ``scheduler`` (with ``cores``): how the cores are shared. ``processor-sharing`` – every computing
    worker at the same rate ``min(1, cores / A)`` (:mod:`gcsim.sim.cpu`); ``per-core`` – one run queue
    per core as Linux's scheduler keeps them (:mod:`gcsim.sim.runqueues`): a worker stays on its core,
    the workers of one core share it, so with 3 on 2 cores one runs at full speed and two at half
    (docs/validation/README.md, findings 23–24; ``floor(cores)`` queues, at least one, of ``cores / k``
    each, so a fraction of a core is spread over the whole ones). ``gcsim calibrate`` writes ``per-core``
    for a real run; a hand-written scenario defaults to ``processor-sharing``.

    ``call_overhead`` (needs ``cores``): optional CPU-seconds per worker-iteration besides the partitions
    (loading the weights, encoding the message(s)), spent after the last partition, before the
    message(s) leave; None = 0.

    ``background`` (needs ``cores``): CPU the workers' host gives to other, higher-priority processes
    (:class:`Background`); None = the workers have all ``cores``.

    ``speed_variation``: the machine's speed, common to every worker, varying from iteration to
    iteration (:class:`SpeedVariation`); None = the same speed in every iteration.

    ``speed_drift``: how far the CPU speed of the run being predicted may lie from the speed
    ``compute`` describes (:class:`SpeedDrift`); ``gcsim simulate`` then gives each scheme's mean a
    95 % prediction range. None = no range (the mean alone).
    """

    gradient_bytes: NonNegFinite
    model_bytes: NonNegFinite = 0.0
    compute: DistSpec
    cores: Optional[PosFinite] = None
    scheduler: Literal["processor-sharing", "per-core"] = "processor-sharing"
    call_overhead: Optional[DistSpec] = None
    background: Optional["Background"] = None
    speed_variation: Optional["SpeedVariation"] = None
    speed_drift: Optional["SpeedDrift"] = None


class SpeedDrift(_Model):
    """How far, one standard deviation as a fraction, the mean CPU speed of the run being predicted may
    differ from the speed ``workload.compute`` was measured at: a shared VM's speed wanders by 5–9 %
    between runs minutes apart (docs/validation/README.md, findings 15–16 and 25), so a prediction made
    from one run carries that much uncertainty besides the simulation's own.

    ``sd``: the standard deviation (0.06 = 6 %; 0: no drift, the range is the simulation's sampling error
    alone); ``dof``: degrees of freedom of its estimate, at least 1 (Student's t quantile for the 95 %
    range; None = known, the normal quantile 1.96). The range is for the expected (long-run) mean: one
    run of a few hundred iterations adds its own straggler luck on top, and the model's own error
    (1–3 % on our VM, docs/validation/README.md) is not in it. ``gcsim calibrate`` writes
    both, measured on the calibration run(s) (:func:`gcsim.compare.pipeline.calibration_speed_cv`,
    :func:`~gcsim.compare.pipeline.calibration_speed_dof`). ``gcsim simulate`` simulates every scheme
    twice more with the workers' CPU work (``compute``, ``call_overhead``) scaled by ``1 - sd`` and
    ``1 + sd`` (the same seed: common random
    numbers) and reports ``mean ± hypot(t·(mean₊ − mean₋)/2, 1.96·se)`` (:mod:`gcsim.sim.drift`)."""

    sd: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]
    dof: Optional[Annotated[float, Field(ge=1, allow_inf_nan=False)]] = None


class SpeedVariation(_Model):
    """The machine's speed, common to every worker of an iteration and drifting over iterations.

    In iteration ``t`` every worker's partition work (``compute``; not ``call_overhead``) is multiplied
    by ``f_t = exp(a_t - sd²/2)``, where ``a_t`` is a stationary Gaussian AR(1) series: ``a_0 ~ N(0,
    sd²)``, ``a_t = lag1·a_{t-1} + sqrt(1 - lag1²)·sd·z_t`` (Box & Jenkins, Time Series Analysis,
    §3.2.4), so ``E[f_t] = 1`` and the mean work is unchanged.

    ``sd``: the stationary standard deviation of ``log f_t`` (0.08: the factor lies mostly within
    about ±8 % of 1; consecutive iterations differ by ``sd·sqrt(2(1 - lag1))``, less when ``lag1`` is
    high); ``lag1``: correlation of ``a_t`` with ``a_{t-1}`` in ``[0, 1)``, default 0 (independent
    iterations; 0.8: slow and fast stretches of ~10 iterations); ``seed``: the stream of the series
    (default: the scenario's ``seed``; the comparator gives each paired replication its own). A shared
    VM's CPU runs faster and slower in stretches: every worker's clock then shows the same excess in
    the same iterations, which independent per-partition draws cannot give (docs/validation/README.md,
    finding 22). ``gcsim calibrate`` measures ``sd`` and ``lag1`` from the workers' CPU clocks
    (:mod:`gcsim.compare.speed_variation`)."""

    sd: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
    lag1: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = 0.0
    seed: Optional[Annotated[StrictInt, Field(ge=0, lt=2**32)]] = None


class Background(_Model):
    """CPU taken from the workers by normal-priority processes on their host: the master (the Ray
    driver), Ray's daemons and any other program. Ray runs its workers at niceness 15, so those
    processes get what they ask for first (CFS weights 1024 vs 36) and the workers share
    ``max(cores - background, cores × 36/1060)`` (:mod:`gcsim.sim.cpu`). Two parts, drawn once per
    iteration:

    * ``per_iteration_cpu_s``: CPU-seconds of work each iteration brings to the other processes
      (dispatching the calls, moving the weights and replies through Ray, the master's bookkeeping),
      run at priority from the iteration's start on up to ``burst_cores`` cores until done (None: 0);
    * ``per_payload_byte_cpu_s``: CPU-seconds per byte of the iteration's worker payloads (every
      message of the iteration: ``gradient_bytes × payload_fraction``), added to
      ``per_iteration_cpu_s`` and run the same way: Ray's processes move each reply through the
      object store, so a scheme that sends half the bytes (CCE with m = 2) brings them half the work
      (measured: 100-150 ms per iteration for six 755 KB replies, 46-50 ms for six 378 KB ones;
      docs/validation/README.md). None: 0;
    * ``wait`` / ``finish``: a steady rate in cores while the master waits for a decodable set / while
      it decodes and updates the model (another program, the master's polling; None: 0 / the
      ``wait`` draw).

    A real run measures the sum per phase (``other_cpu_wait_s`` / ``other_cpu_finish_s``,
    :mod:`gcsim.real.hostcpu`); ``gcsim calibrate`` splits the wait phase's into the two parts by
    regressing it on the phase's length (:func:`gcsim.compare.calibrate.background_cores`)."""

    wait: Optional[DistSpec] = None
    finish: Optional[DistSpec] = None
    per_iteration_cpu_s: Optional[DistSpec] = None
    per_payload_byte_cpu_s: Optional[NonNegFinite] = None
    burst_cores: PosFinite = 1.0


class Network(_Model):
    """Every message costs ``latency_s + bytes / bandwidth_bytes_per_s`` seconds (no contention).

    ``dispatch``: optional seconds, drawn per worker-iteration, from the moment the worker may take the
    iteration (the master's start, or later when it is still busy) until it has the model and starts:
    the broadcast as a measured run sees it (issuing the call, scheduling, fetching and deserializing
    the weights), which is neither one constant nor a function of ``model_bytes``. When set it
    replaces ``latency_s + model_bytes / bandwidth_bytes_per_s`` for the model broadcast (gradient
    messages keep the Hockney cost). None (default): the Hockney cost for both.
    """

    latency_s: NonNegFinite = 0.0
    bandwidth_bytes_per_s: Annotated[float, Field(gt=0)] = float("inf")
    dispatch: Optional[DistSpec] = None


class Persistent(_Model):
    """Two-state (normal/slow) Markov chain per worker, advanced once per iteration: a normal worker
    becomes slow with probability ``p_enter``, a slow one recovers with ``p_leave``; while slow its
    compute is multiplied by ``slowdown``. Iteration 0 starts in the stationary law
    ``P(slow) = p_enter / (p_enter + p_leave)``."""

    p_enter: Probability
    p_leave: Annotated[float, Field(gt=0, le=1)]
    slowdown: Annotated[float, Field(ge=1, allow_inf_nan=False)]


class Replay(_Model):
    """Replay a measured trace (:mod:`gcsim.replay`): worker ``w`` at iteration ``t`` takes the trace's
    time for (w, t). ``file``: a ``worker, iteration, duration`` CSV or a gcsim run directory (relative
    paths against the scenario's folder; read by :func:`gcsim.fit.traceio.read_trace` with ``unit_s``,
    ``scheme`` and the ``*_col`` overrides); ``apply``: ``delay`` (added to the additive delay) or
    ``slowdown`` (compute × time / the trace's smallest time); ``rule`` when the run has more
    iterations or workers than the trace: ``error``, ``wrap`` or ``block-bootstrap`` (blocks of
    ``block`` iterations)."""

    file: str
    unit_s: PosFinite = 1.0
    scheme: Optional[str] = None
    worker_col: Optional[str] = None
    iteration_col: Optional[str] = None
    duration_col: Optional[str] = None
    apply: Literal["delay", "slowdown"] = "delay"
    rule: Literal["error", "wrap", "block-bootstrap"] = "error"
    block: PosInt = 20

    @model_validator(mode="after")
    def _readable(self, info: ValidationInfo):
        from gcsim.errors import GcsimError
        from gcsim.latency import resolve_against_scenario
        from gcsim.replay import trace_times
        path = resolve_against_scenario(self.file, info)
        if not path.exists():
            raise SpecFieldError("file", "an existing trace CSV or gcsim run directory", self.file)
        self.file = str(path.resolve())
        try:
            trace_times(self)
        except GcsimError as e:
            raise SpecFieldError("file", "a readable trace", _GivenLabel(str(e))) from None
        return self


class Stragglers(_Model):
    """Straggler model. ``delay``: additive seconds per worker-iteration (load-independent);
    ``slowdown``: factor multiplying compute per worker-iteration; ``persistent``: Markov slow state;
    ``worker_scale``: fixed per-worker compute factors (``n_workers`` floats > 0); ``replay``: a
    measured trace replayed per (worker, iteration) (:class:`Replay`, on top of the others)."""

    delay: Optional[DistSpec] = None
    slowdown: Optional[DistSpec] = None
    persistent: Optional[Persistent] = None
    worker_scale: Optional[list[PosFinite]] = None
    replay: Optional[Replay] = None


class Master(_Model):
    """The master's work after the arrived messages are decodable: ``decode_s`` (decode + update)."""

    decode_s: DistSpec = Field(default_factory=lambda: ConstantSpec(value=0.0))


Workload.model_rebuild()


class Scenario(_Model):
    """A complete scenario (see the module docstring). All times in seconds, sizes in bytes.

    Raises (via :func:`load_scenario` / :meth:`validate_data`): ConfigError naming the field path.
    """

    name: str
    n_workers: Annotated[StrictInt, Field(ge=1, le=MAX_WORKERS)]  # worker indices stay below every stream tag (gcsim.streams)
    iterations: PosInt = 1000
    seed: Annotated[StrictInt, Field(ge=0, lt=2**32)] = 0
    schemes: list[SchemeSpec] = Field(min_length=1)
    workload: Workload
    network: Network = Field(default_factory=Network)
    stragglers: Stragglers = Field(default_factory=Stragglers)
    policy: Policy = "cancel"
    cancel_latency_s: NonNegFinite = 0.0
    #: when a cancelled worker stops: ``immediate`` (at the cancel), or ``partition`` (a worker computing
    #: a partition finishes it first, as the real executor's workers do; one in its delay stops at once).
    cancel_granularity: Literal["immediate", "partition"] = "immediate"
    master: Master = Field(default_factory=Master)

    @model_validator(mode="after")
    def _cross_checks(self):
        if not _NAME_RE.match(self.name) or len(self.name) > MAX_NAME_LENGTH:
            raise SpecFieldError("name", f"letters, digits, '_', '.', '-', at most {MAX_NAME_LENGTH} of them (used in "
                                 f"directory names)", self.name if len(self.name) <= 40 else
                                 _GivenLabel(f"{self.name[:20]!r}... ({len(self.name)} characters)"))
        if self.workload.background is not None and self.workload.cores is None:
            raise SpecFieldError("workload.background", "no background without workload.cores (the cores it "
                                 "takes a share of)", _GivenLabel("a background with cores unset"))
        if self.workload.call_overhead is not None and self.workload.cores is None:
            # the engines model it as CPU work on the shared cores; without them it was silently dropped
            raise SpecFieldError("workload.call_overhead", "workload.cores set with it (call_overhead is CPU work "
                                 "on the cores the workers share: set workload.cores, e.g. 2, or remove "
                                 "call_overhead)", _GivenLabel("a call_overhead with cores unset"))
        if self.workload.scheduler == "per-core" and self.workload.cores is None:
            raise SpecFieldError("workload.scheduler", "per-core only with workload.cores (the cores whose run "
                                 "queues it models)", _GivenLabel("per-core with cores unset"))
        ws = self.stragglers.worker_scale
        if ws is not None and len(ws) != self.n_workers:
            raise SpecFieldError("stragglers.worker_scale", f"a list of n_workers={self.n_workers} factors",
                                 _GivenLabel(f"{len(ws)} factors"))
        rp = self.stragglers.replay
        if rp is not None:
            from gcsim.replay import check_fits
            why = check_fits(rp, self.n_workers, self.iterations)
            if why is not None:
                raise SpecFieldError("stragglers.replay.rule", why, rp.rule)
        seen: set[str] = set()
        for i, spec in enumerate(self.schemes):
            if spec.label is not None:
                check_label(spec, f"schemes.{i}.label")
            if spec.key in seen:
                raise SpecFieldError(f"schemes.{i}.{'label' if spec.label else 'name'}",
                                     "a name not listed before (set 'label' to run a scheme twice)", spec.key)
            seen.add(spec.key)
            check_scheme(spec, self.n_workers, f"schemes.{i}")
        return self

    def build_schemes(self) -> dict:
        """``{label: Scheme}`` for every listed scheme (via :func:`gcsim.schemes.make_scheme`)."""
        from gcsim.schemes import make_scheme
        return {sp.key: make_scheme(sp.name, self.n_workers, sp.s, sp.m, sp.seed) for sp in self.schemes}

    def resolved(self) -> dict:
        """Plain data with every default filled in (what ``config.yaml`` holds; loads back equal)."""
        return self.model_dump(mode="python", exclude_none=False)

    def to_yaml(self) -> str:
        """The resolved scenario as YAML text."""
        return yaml.safe_dump(self.resolved(), sort_keys=False, default_flow_style=None, width=100)


def check_label(spec: SchemeSpec, field: str) -> None:
    """A label names a scheme in outputs and in ``--schemes a,b``: it must be a plain name (letters,
    digits, '_', '.', '-') and not the CLI name of another scheme (``uncoded`` is the speedup baseline).
    Raises SpecFieldError naming ``field``."""
    from gcsim.schemes import scheme_names

    label = spec.label
    allowed = "a name of letters, digits, '_', '.', '-' that is not another scheme's name"
    if not isinstance(label, str) or not _NAME_RE.match(label):
        raise SpecFieldError(field, allowed, label)
    if label != spec.name and label in scheme_names():
        raise SpecFieldError(field, allowed, label)


def check_scheme(spec: SchemeSpec, n_workers: int, field: str) -> None:
    """Build the scheme once to check its parameters.

    Raises:
        SpecFieldError: naming ``field.<param>`` for refused parameters, or ``n_workers`` when the
            scheme does not fit in memory.
    """
    from gcsim.schemes import make_scheme, scheme_names

    names = scheme_names()
    if spec.name not in names:
        raise SpecFieldError(f"{field}.name", f"one of {', '.join(names)}", spec.name)
    try:
        make_scheme(spec.name, n_workers, spec.s, spec.m, spec.seed)
    except MemoryError:
        raise SpecFieldError("n_workers", "a number of workers whose schemes fit in memory (the schemes hold "
                             "n x n coefficients)",
                             _GivenLabel(f"{n_workers} (scheme {spec.name} ran out of memory)")) from None
    except SchemeError as e:
        msg = str(e)
        m = re.match(r"scheme [^:]+: ([A-Za-z_]+): expected (.*), got .*$", msg)
        if m and m.group(1) in ("s", "m", "seed"):
            raise SpecFieldError(f"{field}.{m.group(1)}", f"{m.group(2)} (scheme {spec.name})",
                                 getattr(spec, m.group(1))) from None
        raise SpecFieldError(field, f"parameters scheme {spec.name} accepts with n_workers={n_workers}",
                             _GivenLabel(f"s={spec.s}, m={spec.m} ({msg})")) from None


# ============================================================================ loading
def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file.

    Relative empirical-distribution files are resolved against the scenario's folder.

    Raises:
        ConfigError: one line naming the file or field path, the allowed values and the given value.
    """
    return validate_scenario(read_config_document(path, "scenario"), base_dir=Path(path).parent)


def read_config_document(path: str | Path, field: str) -> Any:
    """The parsed YAML document of a configuration file (a scenario, a sweep, ...), read with the
    bounds of :func:`gcsim.yamlio.read_yaml` (size, depth, aliases) and no key given twice in a mapping.

    Args:
        path: the file.
        field: the name errors give (``scenario``, ``sweep``).
    Returns:
        the document (any YAML value; the caller validates its shape).
    Raises:
        ConfigError: one line naming ``field``: the file is missing, unreadable, not valid YAML (with the
            line), over a bound, or repeats a key (with both lines).
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError(field, "an existing YAML file", str(path))
    from gcsim.yamlio import YamlBoundsError, read_yaml

    try:
        node, data = read_yaml(p)  # bounded: size, depth, aliases
        _check_unique_keys(node)
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(field, "a readable YAML file", f"{path} ({type(e).__name__})") from None
    except YamlBoundsError as e:
        raise ConfigError(field, f"YAML with {e.allowed}", _GivenLabel(f"{str(path)!r}: {e.given}")) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(field, "valid YAML", f"{path}: {getattr(e, 'problem', 'syntax error')}{where}") from None
    return data


def _check_unique_keys(node: Any, path: tuple = (), _seen: set | None = None) -> None:
    """Raise ConfigError at the first mapping key given twice (PyYAML would silently keep the last).
    Each node is visited once (aliases may share or even contain themselves)."""
    seen = set() if _seen is None else _seen
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first_line: dict = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value != "<<":
                key = key_node.value
                if key in first_line:
                    raise ConfigError(".".join(str(x) for x in (*path, key)), "a key given once",
                                      _GivenLabel(f"{key!r} twice (lines {first_line[key]} and "
                                                  f"{key_node.start_mark.line + 1})"))
                first_line[key] = key_node.start_mark.line + 1
                _check_unique_keys(value_node, path + (key,), seen)
            else:
                _check_unique_keys(value_node, path, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique_keys(item, path + (i,), seen)


def validate_scenario(data: Any, base_dir: str | Path | None = None) -> Scenario:
    """Validate already-parsed scenario data. Raises ConfigError (see :func:`load_scenario`)."""
    if data is None:
        raise ConfigError("scenario", "a YAML mapping of scenario fields", _GivenLabel("an empty document"))
    if not isinstance(data, dict):
        shown = repr(data) if len(repr(data)) <= 60 else repr(data)[:57] + "..."
        raise ConfigError("scenario", "a YAML mapping of scenario fields",
                          _GivenLabel(f"a {type(data).__name__}, {shown}"))  # the value, not only its type (review)
    try:
        return Scenario.model_validate(data, context={"base_dir": None if base_dir is None else str(base_dir)})
    except ValidationError as e:
        raise config_error_from_validation(e) from None


def config_error_from_validation(exc: ValidationError, prefix: str | None = None, root=Scenario) -> ConfigError:
    """:func:`gcsim.validation.config_error_from_validation` with the scenario as the root model."""
    return _config_error(exc, prefix=prefix, root=root)
