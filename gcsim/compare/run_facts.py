"""What a measured run specified, read from its scenario (``config.yaml``, :attr:`RunDir.scenario`) /
``meta.json`` / ``summary.csv``: message sizes, scheme parameters, the cores its workers shared, when its
cancelled workers stopped, and whether two runs can stand for each other (same ``n``). Copied into the
calibrated scenario, never estimated (:mod:`gcsim.compare.calibrate`). Defaults are the scenario
model's (:class:`gcsim.scenario.Scenario`); where a run recorded before a field existed needs another
reading, ``model_fields_set`` tells whether its file gave the field."""

from __future__ import annotations

import numpy as np

from gcsim.compare.rundir import RunDir
from gcsim.errors import ConfigError
from gcsim.scenario import SchemeSpec


def message_bytes(run: RunDir) -> tuple[float, float]:
    """``(gradient_bytes, model_bytes)`` of a run, bytes: meta.json's keys of those names when the
    executor recorded the actual sizes (finite numbers >= 0), else the scenario's ``workload.*``;
    model_bytes is gradient_bytes when neither meta.json nor the file's ``workload`` gives it.
    (A scenario always has ``workload.gradient_bytes``: :func:`gcsim.compare.rundir.read_run_dir`
    refuses a config.yaml without it.)"""
    wl = run.scenario.workload

    def recorded(key):
        v = run.meta.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 0:
            return float(v)
        return None
    g = recorded("gradient_bytes")
    g = float(wl.gradient_bytes) if g is None else g
    mb = recorded("model_bytes")
    if mb is None and "model_bytes" in wl.model_fields_set:
        mb = float(wl.model_bytes)
    return g, (g if mb is None else mb)


def scheme_spec(run: RunDir, scheme: str) -> dict:
    """``{name, s, m, seed[, label]}`` of ``scheme`` in a run: the matching entry of the scenario's
    ``schemes`` (by label or name; ``label`` only when it differs from the name), else summary.csv's
    s and m with the scenario model's scheme seed.

    Raises:
        RunDirError: neither the scenario nor summary.csv has the scheme (:meth:`RunDir.scheme_row`).
    """
    for e in run.scenario.schemes:
        if scheme in (e.label, e.name):
            out = {"name": e.name, "s": int(e.s), "m": int(e.m), "seed": int(e.seed)}
            if e.label and e.label != e.name:
                out["label"] = e.label
            return out
    row = run.scheme_row(scheme)
    return {"name": scheme, "s": int(row["s"]), "m": int(row["m"]), "seed": SchemeSpec.model_fields["seed"].default}


def recorded_cores(run: RunDir) -> float | None:
    """Cores the run's workers shared as recorded: a real run's ``meta.json`` ``usable_cpus`` (CPU
    affinity) or ``host_cpus`` (the machine's CPU count), else the scenario's ``workload.cores``;
    None when none is a number > 0."""
    for v in (run.meta.get("usable_cpus"), run.meta.get("host_cpus"), run.scenario.workload.cores):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < np.inf:
            return float(v)
    return None


def run_cores(run: RunDir) -> float | None:
    """:func:`recorded_cores`, or None when unknown or when ``n_workers <= cores`` (no contention)."""
    v = recorded_cores(run)
    return None if v is None or run.n_workers <= v else v


def run_scheduler(run: RunDir) -> str:
    """The ``workload.scheduler`` a calibration from ``run`` simulates with: a simulated run's own
    setting; for a real run ``per-core`` (the operating system keeps one run queue per core and a
    worker on its core, :mod:`gcsim.sim.runqueues`). Chosen over processor sharing on the 27 model-passes
    committed before the choice (docs/validation/README.md, findings 23 and 24): it reproduces the spread of the
    workers' wall time per CPU second, takes the p95 within 10 % in one more quiet pass and the
    predictions with a neighbour a little closer, and moves the quiet means < 0.1 point on average.
    ``gcsim compare --scheduler processor-sharing`` or the scenario field selects the other model."""
    return "per-core" if run.executor == "real" else run.scenario.workload.scheduler


def cancel_granularity(run: RunDir) -> str:
    """When the run's cancelled workers stopped: the scenario's ``cancel_granularity`` when its file
    gives it, else (runs recorded before the field existed) ``partition`` for a real run (its workers
    check for a cancel between partitions) and ``immediate`` for a simulated one."""
    sc = run.scenario
    if "cancel_granularity" in sc.model_fields_set:
        return sc.cancel_granularity
    return "partition" if run.executor == "real" else "immediate"


def require_same_n(source: RunDir, target: RunDir) -> None:
    """Refuse to predict ``target`` from a calibration on ``source`` with another worker count.

    Raises:
        ConfigError: field ``n``, e.g. ``n: expected 8 (as in calibration run uncoded-…), got 4 (run gc-fr-…)``.
    """
    if source.n_workers != target.n_workers:
        raise ConfigError("n", f"{source.n_workers} (as in calibration run {source.label})",
                          message=f"n: expected {source.n_workers} (as in calibration run {source.label}), "
                                  f"got {target.n_workers} (run {target.label})")


def require_same_executor(first: RunDir, other: RunDir) -> None:
    """Refuse to pool calibration runs of different executors: a simulated run's times are the model's
    output, not a measurement of the machine, and pooled with a real run they would count as a second
    measurement (and narrow the prediction interval's drift).

    Raises:
        ConfigError: field ``calibration runs``, naming both runs and their executors.
    """
    if first.executor != other.executor:
        raise ConfigError("calibration runs", message=(
            f"calibration runs: expected runs of one executor (real or simulated, not both: a simulated run "
            f"is the model's output, not a measurement), got {first.label} ({first.executor}) and "
            f"{other.label} ({other.executor})"))


__all__ = ["cancel_granularity", "message_bytes", "recorded_cores", "require_same_executor", "require_same_n",
           "run_cores", "run_scheduler",
           "scheme_spec"]
