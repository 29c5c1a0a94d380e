"""What a measured run specified, read from its ``config.yaml`` / ``meta.json`` / ``summary.csv``:
message sizes, scheme parameters, the cores its workers shared, when its cancelled workers stopped,
and whether two runs can stand for each other (same ``n``). Copied into the calibrated scenario, never
estimated (:mod:`gcsim.compare.calibrate`)."""

from __future__ import annotations

import numpy as np

from gcsim.compare.rundir import RunDir
from gcsim.errors import ConfigError, RunDirError


def message_bytes(run: RunDir) -> tuple[float, float]:
    """``(gradient_bytes, model_bytes)`` of a run: meta.json's keys of those names when the executor
    recorded the actual sizes, else ``config.yaml`` ``workload.*`` (else its top level); model_bytes
    defaults to gradient_bytes. Raises RunDirError naming config.yaml when gradient_bytes is absent."""
    wl = run.config.get("workload") if isinstance(run.config.get("workload"), dict) else {}

    def pick(key):
        for src in (run.meta, wl, run.config):
            v = src.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 0:
                return float(v)
        return None
    g = pick("gradient_bytes")
    if g is None:
        raise RunDirError(f"{run.path / 'config.yaml'}: workload.gradient_bytes: expected the gradient message size "
                          f"in bytes, got {wl.get('gradient_bytes', 'missing')!r}")
    mb = pick("model_bytes")
    return g, (g if mb is None else mb)


def scheme_spec(run: RunDir, scheme: str) -> dict:
    """``{name, s, m, seed}`` of ``scheme`` in a run: the matching ``config.yaml`` ``schemes`` entry
    (by label or name; a real run's single ``scheme`` entry also works), else summary.csv's s and m."""
    entries = run.config.get("schemes")
    if entries is None and run.config.get("scheme") is not None:
        entries = [run.config["scheme"]]
    for e in entries or []:
        if isinstance(e, str):
            e = {"name": e}
        if isinstance(e, dict) and scheme in (e.get("label"), e.get("name")):
            out = {"name": str(e.get("name", scheme)), "s": int(e.get("s", 0)), "m": int(e.get("m", 1)),
                   "seed": int(e.get("seed", 0))}
            if e.get("label") and e.get("label") != out["name"]:
                out["label"] = str(e["label"])
            return out
    row = run.scheme_row(scheme)
    return {"name": scheme, "s": int(row["s"]), "m": int(row["m"]), "seed": 0}


def recorded_cores(run: RunDir) -> float | None:
    """Cores the run's workers shared as recorded: a real run's ``meta.json`` ``usable_cpus`` (CPU
    affinity) or ``host_cpus`` (the machine's CPU count), else ``config.yaml`` ``workload.cores``;
    None when none is a number > 0."""
    wl = run.config.get("workload") if isinstance(run.config.get("workload"), dict) else {}
    for v in (run.meta.get("usable_cpus"), run.meta.get("host_cpus"), wl.get("cores")):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < np.inf:
            return float(v)
    return None


def run_cores(run: RunDir) -> float | None:
    """:func:`recorded_cores`, or None when unknown or when ``n_workers <= cores`` (no contention)."""
    v = recorded_cores(run)
    return None if v is None or run.n_workers <= v else v


def cancel_granularity(run: RunDir) -> str:
    """When the run's cancelled workers stopped: ``config.yaml`` ``cancel_granularity``, else (runs
    recorded before the field existed) ``partition`` for a real run (its workers check for a cancel
    between partitions) and ``immediate`` for a simulated one."""
    v = run.config.get("cancel_granularity")
    if v in ("immediate", "partition"):
        return v
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


__all__ = ["cancel_granularity", "message_bytes", "recorded_cores", "require_same_n", "run_cores", "scheme_spec"]
