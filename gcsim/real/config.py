"""Options of a real run (``gcsim real``) and their resolution against a scenario file.

The scenario (:mod:`gcsim.scenario`, default ``scenarios/real_default.yaml``) supplies what the
simulator also reads: the number of workers, iterations, seed, the straggler specification, the
straggler-work policy (``cancel`` / ``carry-over``) and, for the chosen scheme, ``s`` and ``m`` (its
entry in ``schemes``). Command-line options override them. The scenario's ``workload.compute``,
``network`` and ``master`` fields describe a simulated cluster and are not used here: a real run
measures those times.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from gcsim.errors import ConfigError, SchemeError
from gcsim.validation import NonNegInt, PosInt, config_error_from_validation

#: The scenario used when ``--scenario`` is not given.
DEFAULT_SCENARIO_NAME = "real_default.yaml"



class RealConfig(BaseModel):
    """Every option of a real run, fully resolved (what ``real.yaml`` in the run directory holds).

    Attributes (times in seconds):
        scheme: scheme CLI name (:func:`gcsim.schemes.scheme_names`).
        n_workers, s, m, scheme_seed: scheme parameters (``n`` workers = ``k`` partitions).
        iterations: SGD steps to run (iterations 0 .. iterations-1).
        batch_size: global mini-batch ``B``, split into ``k`` near-equal partition slices, so an exact
            scheme's decoded gradient is the gradient of the mean loss over all ``B`` images.
        lr, momentum, weight_decay: ``torch.optim.SGD`` parameters.
        eval_every: evaluate on the test set every this many iterations (and after the last).
        eval_samples: test images used (None: the whole test set).
        checkpoint_every: checkpoint every this many iterations (and at the end / on failure).
        model: ``small-cnn`` or ``resnet18`` (:mod:`gcsim.real.model`).
        dtype: the workers' and master's float type (float64 for exactness checks).
        payload_dtype: float type of the coded messages on the wire (encoding itself is float64).
        seed: seeds the model initialisation, the data shards, the slice sampler and the stragglers.
        scenario: the scenario file the stragglers, policy and defaults came from.
        policy: ``cancel`` (interrupt stale work) or ``carry-over`` (let it finish).
        data_dir: directory holding ``cifar-10-batches-py``.
        max_train_samples: use only the first N training images (None: all), for quick runs.
        address: Ray cluster address to join (None: start an embedded Ray).
        ray_num_cpus: logical CPUs of the embedded Ray (None: ``n_workers``, one per actor).
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

    scheme: str
    n_workers: PosInt
    s: NonNegInt = 0
    m: PosInt = 1
    scheme_seed: NonNegInt = 0
    iterations: PosInt = 200
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
    seed: Annotated[StrictInt, Field(ge=0, lt=2**32)] = 0
    scenario: str = ""
    policy: Literal["cancel", "carry-over"] = "cancel"
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


def validate_real_config(values: dict, *, option_names: bool) -> RealConfig:
    """Check run options (from the command line, or a run directory's ``real.yaml`` on resume).

    Args:
        values: :class:`RealConfig` fields.
        option_names: name fields as command-line options (``--batch-size``, ``--workers``) rather
            than as ``real.yaml`` keys (``batch_size``, ``n_workers``).
    Returns:
        the :class:`RealConfig`.
    Raises:
        ConfigError: the first invalid field (field, allowed values, given value), a batch smaller
            than the number of workers (an empty partition slice has no loss and no gradient), or more
            workers per process than workers.
    """
    def name(key: str) -> str:
        if not option_names:
            return key
        return {"n_workers": "--workers"}.get(key, "--" + key.replace("_", "-"))

    try:
        cfg = RealConfig.model_validate(values)
    except ValidationError as e:
        err = config_error_from_validation(e, root=RealConfig)
        raise ConfigError(name(err.field), err.allowed, err.given) from None
    if cfg.workers_per_process != "auto" and cfg.workers_per_process > cfg.n_workers:
        raise ConfigError(name("workers_per_process"), f"'auto' or an integer from 1 to the number of workers "
                          f"n={cfg.n_workers}", cfg.workers_per_process)
    if cfg.batch_size < cfg.n_workers:
        raise ConfigError(name("batch_size"), f"an integer >= the number of workers n={cfg.n_workers} (at least "
                          f"one image per partition slice)", cfg.batch_size)
    return cfg


def default_scenario_path() -> Path:
    """``scenarios/real_default.yaml`` in the working directory if present, else in the source tree."""
    local = Path("scenarios") / DEFAULT_SCENARIO_NAME
    if local.is_file():
        return local
    return Path(__file__).resolve().parents[2] / "scenarios" / DEFAULT_SCENARIO_NAME


def resolve_config(scheme: str, scenario_path: str | Path | None = None, **overrides):
    """Combine a scenario file and command-line overrides into a checked configuration.

    Args:
        scheme: scheme CLI name.
        scenario_path: scenario YAML (None: :func:`default_scenario_path`).
        **overrides: any :class:`RealConfig` field; ``None`` values mean "not given" and fall back to
            the scenario (``n_workers``, ``iterations``, ``seed``, the scheme entry's ``s``/``m``/``seed``,
            ``policy``) or the field default.
    Returns:
        ``(RealConfig, Scenario)``: the scenario is the one written to ``config.yaml``, narrowed to
        this run (``n_workers``, ``iterations``, ``seed`` and a single ``schemes`` entry updated).
    Raises:
        ConfigError: unreadable scenario, bad option (names the option, allowed values, given value),
            a batch smaller than the number of workers (an empty partition slice), or scheme parameters
            the scheme refuses.
    """
    from gcsim.scenario import SchemeSpec, load_scenario, validate_scenario
    from gcsim.schemes import make_scheme, scheme_names

    path = Path(scenario_path) if scenario_path is not None else default_scenario_path()
    scenario = load_scenario(path)
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - set(RealConfig.model_fields))
    if unknown:
        raise ConfigError("option", f"one of {', '.join(RealConfig.model_fields)}", unknown[0])
    if scheme not in scheme_names():
        raise ConfigError("--scheme", f"one of {', '.join(scheme_names())}", scheme)
    entry = next((sp for sp in scenario.schemes if sp.name == scheme), None)
    values = {
        "scheme": scheme,
        "n_workers": scenario.n_workers, "iterations": scenario.iterations, "seed": scenario.seed,
        "s": entry.s if entry is not None else 0, "m": entry.m if entry is not None else 1,
        "scheme_seed": entry.seed if entry is not None else 0,
        "policy": scenario.policy, "scenario": str(path),
        **given,
    }
    cfg = validate_real_config(values, option_names=True)
    try:
        sch = make_scheme(cfg.scheme, cfg.n_workers, cfg.s, cfg.m, cfg.scheme_seed, payload_dtype=cfg.payload_dtype)
    except SchemeError as e:
        raise ConfigError("--scheme/--workers/--s/--m", "parameters the scheme accepts", f"{e}") from None
    if sch.messages_per_worker != 1:
        raise ConfigError("--scheme", "a scheme with one message per worker (the real executor sends one "
                          "reply per task)", f"{cfg.scheme} with {sch.messages_per_worker} messages per worker")

    data = scenario.resolved()
    stragglers = data["stragglers"]
    if stragglers.get("worker_scale") is not None and len(stragglers["worker_scale"]) != cfg.n_workers:
        raise ConfigError("--workers", f"{len(stragglers['worker_scale'])} (the scenario's "
                          f"stragglers.worker_scale has that many factors)", cfg.n_workers)
    data.update(n_workers=cfg.n_workers, iterations=cfg.iterations, seed=cfg.seed, policy=cfg.policy,
                schemes=[SchemeSpec(name=cfg.scheme, s=cfg.s, m=cfg.m, seed=cfg.scheme_seed).model_dump()])
    narrowed = validate_scenario(data, base_dir=path.parent)
    return cfg, narrowed
