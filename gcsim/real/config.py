"""A real run's configuration: what the run IS (a narrowed :class:`gcsim.scenario.Scenario`) and how
it is executed (:class:`RealConfig`, training and Ray options), held together by :class:`RealRunSpec`.

One source for each value (issue 11):

* the **scenario** (default ``scenarios/real_default.yaml``, written to the run directory as
  ``config.yaml``) holds the number of workers, iterations, seed, straggler specification,
  straggler-work policy (``cancel`` / ``carry-over``) and one ``schemes`` entry (the scheme, its ``s``,
  ``m`` and construction seed). ``--workers``, ``--s``, ``--m``, ``--seed``, ``--policy`` and
  ``--iterations`` override them (:func:`resolve_config`). Its ``workload.compute``, ``network`` and
  ``master`` fields describe a simulated cluster and are not used here: a real run measures those times;
* :class:`RealConfig` (``real.yaml``) holds the rest: batch size, learning rate, model, data directory,
  Ray address, timeouts, workers per process, ...

Run directories written before issue 11 repeat the run facts in ``real.yaml``
(:data:`LEGACY_RUN_KEYS`); :func:`split_legacy_keys` accepts them when they agree with ``config.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from gcsim.errors import ConfigError, SchemeError
from gcsim.scenario import Scenario, SchemeSpec
from gcsim.validation import NonNegInt, PosInt, config_error_from_validation  # noqa: F401  (NonNegInt: re-exported)

#: The scenario used when ``--scenario`` is not given.
DEFAULT_SCENARIO_NAME = "real_default.yaml"

#: The run facts a real run takes from its (narrowed) scenario: name (as :class:`RealRunSpec` and the
#: ``real.yaml`` of older runs call it) -> the ``config.yaml`` field path.
RUN_FACT_PATHS = {"scheme": "schemes.0.name", "n_workers": "n_workers", "s": "schemes.0.s", "m": "schemes.0.m",
                  "scheme_seed": "schemes.0.seed", "seed": "seed", "iterations": "iterations", "policy": "policy"}
#: ``real.yaml`` keys of runs written before issue 11: the run facts, repeated from ``config.yaml``.
LEGACY_RUN_KEYS = tuple(RUN_FACT_PATHS)
#: The run facts :func:`resolve_config` overrides, each with the name its errors give: the ``gcsim real``
#: option (``scheme_seed`` has none: it is set from Python only).
RUN_FACT_OPTIONS = {"n_workers": "--workers", "s": "--s", "m": "--m", "scheme_seed": "scheme_seed",
                    "seed": "--seed", "iterations": "--iterations", "policy": "--policy"}


def _field_type(model: type[BaseModel], name: str):
    """``model``'s declared type of field ``name`` with its constraints, as one annotated type."""
    info = model.model_fields[name]
    return Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation


#: The run-fact overrides, typed as the scenario declares them (no second declaration of their ranges).
_RunFactOverrides = create_model(
    "RunFactOverrides", __config__=ConfigDict(extra="forbid"),
    n_workers=(_field_type(Scenario, "n_workers"), None), s=(_field_type(SchemeSpec, "s"), None),
    m=(_field_type(SchemeSpec, "m"), None), scheme_seed=(_field_type(SchemeSpec, "seed"), None),
    seed=(_field_type(Scenario, "seed"), None), iterations=(_field_type(Scenario, "iterations"), None),
    policy=(_field_type(Scenario, "policy"), None))


class RealConfig(BaseModel):
    """How a real run is executed: training and Ray options (what ``real.yaml`` in the run directory
    holds). What the run is (scheme, workers, s, m, seeds, iterations, policy, stragglers) is the
    scenario's (:class:`RealRunSpec`).

    Attributes (times in seconds):
        batch_size: global mini-batch ``B``, split into ``k`` near-equal partition slices, so an exact
            scheme's decoded gradient is the gradient of the mean loss over all ``B`` images.
        lr, momentum, weight_decay: ``torch.optim.SGD`` parameters.
        eval_every: evaluate on the test set every this many iterations (and after the last).
        eval_samples: test images used (None: the whole test set).
        checkpoint_every: checkpoint every this many iterations (and at the end / on failure).
        model: ``small-cnn`` or ``resnet18`` (:mod:`gcsim.real.model`).
        dtype: the workers' and master's float type (float64 for exactness checks).
        payload_dtype: float type of the coded messages on the wire (encoding itself is float64).
        scenario: the scenario file the run's ``config.yaml`` was narrowed from (a record only).
        data_dir: directory holding ``cifar-10-batches-py``.
        max_train_samples: use only the first N training images (None: all), for quick runs.
        address: Ray cluster address to join (None: start an embedded Ray).
        ray_num_cpus: logical CPUs of the embedded Ray (None: the number of workers, one per actor).
        torch_threads: torch intra-op threads per worker and in the master.
        cancel_poll_s: how often an injected delay checks for cancellation.
        connect_timeout_s: longest wait to reach ``address`` (TCP) before a one-line error.
        placement_timeout_s: longest wait for the workers' placement group (one bundle per worker).
        setup_timeout_s: longest wait for every worker actor to start and load its data.
        fetch_timeout_s: longest wait for a used payload once decodable (then its worker is lost).
        worker_cpus: logical CPUs per worker actor (None: the most, at most 1, that lets every
            worker fit on the nodes' CPUs).
        placement: ``spread`` (workers over as many nodes as possible) or ``pack`` (as few as possible).
        workers_per_process: ``K``, logical workers per Ray actor process (``--workers-per-process``):
            an integer ``1 <= K <= n`` or ``auto`` (default: 1 while the workers are at most 16 per
            node, else the fewest per process that keep 16 processes per node;
            :func:`gcsim.real.master.resolve_workers_per_process`). K = 1 is one process per worker;
            K > 1 shares one torch import among K workers (:class:`gcsim.real.worker.WorkerHost`;
            each worker's CPU is then its thread's clock).
    """

    model_config = ConfigDict(extra="forbid")

    batch_size: PosInt = 192
    lr: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 0.05
    momentum: Annotated[float, Field(ge=0, lt=1)] = 0.9
    weight_decay: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    eval_every: PosInt = 50
    eval_samples: Optional[PosInt] = None
    checkpoint_every: PosInt = 50
    model: Literal["small-cnn", "resnet18"] = "small-cnn"
    dtype: Literal["float32", "float64"] = "float32"
    payload_dtype: Literal["float32", "float64"] = "float32"
    scenario: str = ""
    data_dir: str = "data/cifar10"
    max_train_samples: Optional[PosInt] = None
    address: Optional[str] = None
    ray_num_cpus: Optional[PosInt] = None
    torch_threads: PosInt = 1
    cancel_poll_s: Annotated[float, Field(gt=0, le=1)] = 0.005
    connect_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    placement_timeout_s: Annotated[float, Field(gt=0, le=86400)] = 120.0
    setup_timeout_s: Annotated[float, Field(gt=0, le=86400)] = 600.0
    fetch_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 60.0
    worker_cpus: Optional[Annotated[float, Field(gt=0, le=1024)]] = None
    placement: Literal["spread", "pack"] = "spread"
    workers_per_process: Union[PosInt, Literal["auto"]] = "auto"

    @field_validator("workers_per_process", mode="before")
    @classmethod
    def _workers_per_process(cls, v):
        if v == "auto" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            return v
        raise ValueError("'auto' or an integer >= 1")


@dataclass(frozen=True)
class RealRunSpec:
    """One real run, resolved: the narrowed scenario (what the run is) and the options (how it runs).

    Attributes:
        scenario: :class:`gcsim.scenario.Scenario` with exactly one ``schemes`` entry (``config.yaml``).
        options: :class:`RealConfig` (``real.yaml``).

    The run facts are read from the scenario: ``scheme`` (the entry's label or name: what the run
    directory, status and traces call it), ``scheme_name`` (the registered scheme that encodes),
    ``n_workers``, ``s``, ``m``, ``scheme_seed``, ``seed`` (model initialisation, data shards, slice
    sampler, stragglers), ``iterations``, ``policy``.
    """

    scenario: Scenario
    options: RealConfig

    @property
    def entry(self) -> SchemeSpec:
        """The scenario's one ``schemes`` entry."""
        return self.scenario.schemes[0]

    @property
    def scheme(self) -> str:
        return self.entry.key

    @property
    def scheme_name(self) -> str:
        return self.entry.name

    @property
    def n_workers(self) -> int:
        return self.scenario.n_workers

    @property
    def s(self) -> int:
        return self.entry.s

    @property
    def m(self) -> int:
        return self.entry.m

    @property
    def scheme_seed(self) -> int:
        return self.entry.seed

    @property
    def seed(self) -> int:
        return self.scenario.seed

    @property
    def iterations(self) -> int:
        return self.scenario.iterations

    @property
    def policy(self) -> str:
        return self.scenario.policy

    def run_facts(self) -> dict:
        """``{name: value}`` of every :data:`RUN_FACT_PATHS` name (the scheme by its label or name)."""
        return run_facts(self.scenario)

    def flat(self) -> dict:
        """The run facts and every option in one JSON-ready mapping (the shape ``real.yaml`` had
        before issue 11; what the all-reduce ranks receive)."""
        return {**self.run_facts(), **self.options.model_dump(mode="json")}

    def with_iterations(self, iterations: int) -> "RealRunSpec":
        """The same run with another total number of iterations."""
        return RealRunSpec(self.scenario.model_copy(update={"iterations": int(iterations)}), self.options)

    def with_scenario(self, scenario: Scenario) -> "RealRunSpec":
        """The same options with another (narrowed) scenario."""
        return RealRunSpec(scenario, self.options)

    def ray_kwargs(self) -> dict:
        """Keyword arguments of :func:`gcsim.real.runner.ray_session` for this run: ``address``,
        ``num_cpus`` (``ray_num_cpus``, default one per worker) and ``connect_timeout_s``."""
        o = self.options
        return {"address": o.address, "num_cpus": o.ray_num_cpus or self.n_workers,
                "connect_timeout_s": o.connect_timeout_s}


def run_facts(scenario: Scenario) -> dict:
    """The run facts of a narrowed scenario (:data:`RUN_FACT_PATHS`): ``scheme`` is the one entry's
    label or name. Raises ConfigError (field ``schemes``) when the scenario lists more than one scheme."""
    if len(scenario.schemes) != 1:
        raise ConfigError("schemes", "exactly one entry (a real run's config.yaml is narrowed to its scheme)",
                          f"{len(scenario.schemes)} entries")
    e = scenario.schemes[0]
    return {"scheme": e.key, "n_workers": scenario.n_workers, "s": e.s, "m": e.m, "scheme_seed": e.seed,
            "seed": scenario.seed, "iterations": scenario.iterations, "policy": scenario.policy}


def split_legacy_keys(values: dict, scenario: Scenario) -> dict:
    """Accept a ``real.yaml`` written before issue 11, which repeated the run facts.

    Args:
        values: the ``real.yaml`` mapping.
        scenario: the run's ``config.yaml`` (narrowed scenario).
    Returns:
        ``values`` without the :data:`LEGACY_RUN_KEYS` (the :class:`RealConfig` fields only).
    Raises:
        ConfigError: a legacy key whose value differs from ``config.yaml``'s (field: the key; allowed:
            config.yaml's value and its path there).
    """
    facts = run_facts(scenario)
    for key in LEGACY_RUN_KEYS:
        if key in values and values[key] != facts[key]:
            raise ConfigError(key, f"{facts[key]!r} (config.yaml's {RUN_FACT_PATHS[key]}: the run facts live "
                              f"there; real.yaml of older runs repeats them)", values[key])
    return {k: v for k, v in values.items() if k not in LEGACY_RUN_KEYS}


def validate_real_config(values: dict, scenario: Scenario, *, option_names: bool) -> RealRunSpec:
    """Check run options (from the command line, or a run directory's ``real.yaml`` on resume)
    against the run's narrowed scenario.

    Args:
        values: :class:`RealConfig` fields.
        scenario: the narrowed scenario (one ``schemes`` entry).
        option_names: name fields as command-line options (``--batch-size``) rather than as
            ``real.yaml`` keys (``batch_size``).
    Returns:
        the :class:`RealRunSpec`.
    Raises:
        ConfigError: the first invalid field (field, allowed values, given value), a batch smaller
            than the number of workers (an empty partition slice has no loss and no gradient), or more
            workers per process than workers.
    """
    return RealRunSpec(scenario, _validate_options(values, scenario.n_workers, option_names=option_names))


def _validate_options(values: dict, n_workers: int, *, option_names: bool) -> RealConfig:
    """:class:`RealConfig` of ``values`` for a run of ``n_workers`` (see :func:`validate_real_config`)."""
    def name(key: str) -> str:
        if not option_names:
            return key
        if key.endswith("_timeout_s"):  # --connect-timeout, --placement-timeout, ... (seconds)
            key = key.removesuffix("_s")
        return "--" + key.replace("_", "-")

    try:
        options = RealConfig.model_validate(values)
    except ValidationError as e:
        err = config_error_from_validation(e, root=RealConfig)
        raise ConfigError(name(err.field), err.allowed, err.given) from None
    n = n_workers
    if options.workers_per_process != "auto" and options.workers_per_process > n:
        raise ConfigError(name("workers_per_process"), f"'auto' or an integer from 1 to the number of workers "
                          f"n={n}", options.workers_per_process)
    if options.batch_size < n:
        raise ConfigError(name("batch_size"), f"an integer >= the number of workers n={n} (at least "
                          f"one image per partition slice)", options.batch_size)
    return options


def default_scenario_path() -> Path:
    """``scenarios/real_default.yaml`` in the working directory if present, else in the source tree."""
    local = Path("scenarios") / DEFAULT_SCENARIO_NAME
    if local.is_file():
        return local
    return Path(__file__).resolve().parents[2] / "scenarios" / DEFAULT_SCENARIO_NAME


def resolve_config(scheme: str, scenario_path: str | Path | None = None, **overrides: Any) -> RealRunSpec:
    """Combine a scenario file and command-line overrides into a checked run.

    Args:
        scheme: scheme CLI name.
        scenario_path: scenario YAML (None: :func:`default_scenario_path`).
        **overrides: run facts (``n_workers``, ``s``, ``m``, ``scheme_seed``, ``seed``, ``iterations``,
            ``policy``: they replace the scenario's, and its entry for ``scheme``) or :class:`RealConfig`
            fields; ``None`` values mean "not given" (the scenario's value, or the field default).
    Returns:
        :class:`RealRunSpec`: the scenario narrowed to this run (``n_workers``, ``iterations``,
        ``seed``, ``policy`` and a single ``schemes`` entry set; written to ``config.yaml``) and the options.
    Raises:
        ConfigError: unreadable scenario, bad option (names the option, allowed values, given value),
            a batch smaller than the number of workers (an empty partition slice), or scheme parameters
            the scheme refuses.
    """
    from gcsim.scenario import load_scenario, validate_scenario
    from gcsim.schemes import make_scheme, scheme_names

    path = Path(scenario_path) if scenario_path is not None else default_scenario_path()
    scenario = load_scenario(path)
    given = {k: v for k, v in overrides.items() if v is not None}
    known = [*RUN_FACT_OPTIONS, *RealConfig.model_fields]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError("option", f"one of {', '.join(known)}", unknown[0])
    if scheme not in scheme_names():
        raise ConfigError("--scheme", f"one of {', '.join(scheme_names())}, or allreduce (the all-reduce "
                          f"baseline)", scheme)
    facts_given = {k: v for k, v in given.items() if k in RUN_FACT_OPTIONS}
    try:
        _RunFactOverrides.model_validate(facts_given)
    except ValidationError as e:
        err = config_error_from_validation(e, root=_RunFactOverrides)
        raise ConfigError(RUN_FACT_OPTIONS.get(err.field, err.field), err.allowed, err.given) from None
    entry = next((sp for sp in scenario.schemes if sp.name == scheme), None)
    facts = {"n_workers": scenario.n_workers, "iterations": scenario.iterations, "seed": scenario.seed,
             "policy": scenario.policy, "s": entry.s if entry is not None else 0,
             "m": entry.m if entry is not None else 1, "scheme_seed": entry.seed if entry is not None else 0,
             **facts_given}
    n = facts["n_workers"]
    spec_entry = SchemeSpec(name=scheme, s=facts["s"], m=facts["m"], seed=facts["scheme_seed"])
    options = {"scenario": str(path), **{k: v for k, v in given.items() if k not in RUN_FACT_OPTIONS}}
    opts = _validate_options(options, n, option_names=True)  # they name the option
    try:
        sch = make_scheme(scheme, n, spec_entry.s, spec_entry.m, spec_entry.seed, payload_dtype=opts.payload_dtype)
    except SchemeError as e:
        raise ConfigError("--scheme/--workers/--s/--m", "parameters the scheme accepts", f"{e}") from None
    if sch.messages_per_worker != 1:
        raise ConfigError("--scheme", "a scheme with one message per worker (the real executor sends one "
                          "reply per task)", f"{scheme} with {sch.messages_per_worker} messages per worker")

    data = scenario.resolved()
    worker_scale = data["stragglers"].get("worker_scale")
    if worker_scale is not None and len(worker_scale) != n:
        raise ConfigError("--workers", f"{len(worker_scale)} (the scenario's stragglers.worker_scale has one "
                          f"factor per worker; for another n, list that many factors there, or delete the line)", n)
    data.update(n_workers=n, iterations=facts["iterations"], seed=facts["seed"], policy=facts["policy"],
                schemes=[spec_entry.model_dump()])
    return RealRunSpec(validate_scenario(data, base_dir=path.parent), opts)


__all__ = ["DEFAULT_SCENARIO_NAME", "LEGACY_RUN_KEYS", "RUN_FACT_OPTIONS", "RUN_FACT_PATHS", "RealConfig",
           "RealRunSpec", "default_scenario_path", "resolve_config", "run_facts", "split_legacy_keys",
           "validate_real_config"]
