"""The range each scheme's mean iteration time may take on another run of the same machine, whose CPU
speed drifts between runs (``workload.speed_drift``, :class:`gcsim.scenario.SpeedDrift`).

A prediction calibrated on one run assumes that run's CPU speed; a shared VM's speed wanders by 5–9 %
between runs minutes apart (docs/validation/README.md, findings 15, 16 and 25), which moves a CPU-bound
scheme's mean 1:1 and a delay-bound one hardly at all. :func:`mean_ranges` propagates a drift of one
standard deviation ``sd`` through the simulator — the scenario simulated with the workers' CPU work
(``workload.compute`` and ``workload.call_overhead``) scaled by ``1 - sd`` and ``1 + sd``, the same
seed (common random numbers, so only the speed differs) — to first order (the delta method of input uncertainty: Law & Kelton,
*Simulation Modeling and Analysis*, 5th ed., §12.5), and adds the simulated mean's own sampling error
(batch means, §9.5.3) in quadrature. ``gcsim compare`` scores the same construction against measured
runs (:func:`gcsim.compare.pipeline.drift_half_width`; its coverage over the committed passes is in
docs/validation/README.md).

What the range is not: it is for the *expected* (long-run) mean; a single run of a few hundred
iterations adds its own straggler luck (±3–11 % at 200 iterations under the committed straggler
models). The model's own error (1–3 %) is not in it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from gcsim.latency import scaled_spec
from gcsim.scenario import Scenario

#: batches of the simulated iterations for the batch-means standard error of a mean (fewer, of 2
#: iterations each, when there are fewer than 2 x BATCHES iterations)
BATCHES = 20

#: columns of ``prediction_range.csv``
RANGE_COLUMNS = ["scheme", "mean_s", "mean_lo_s", "mean_hi_s", "speed_drift_sd", "speed_drift_dof",
                 "mean_slow_s", "mean_fast_s", "drift_half_width_s", "sampling_se_s", "sampling_dof",
                 "confidence"]


def scale_cpu_work(sc: Scenario, factor: float) -> Scenario:
    """``sc`` on a machine ``factor`` times slower: the workers' CPU work — every partition's
    (``workload.compute``) and every call's (``workload.call_overhead``, when set) — multiplied by
    ``factor``; delays, transfers, the master and the background unchanged (as
    :meth:`gcsim.compare.calibrate.Calibration.at_speed` for ``gcsim compare``).

    Raises:
        ValueError: ``factor`` is not a finite number > 0.
    """
    update = {"compute": scaled_spec(sc.workload.compute, factor)}
    if sc.workload.call_overhead is not None:
        update["call_overhead"] = scaled_spec(sc.workload.call_overhead, factor)
    return sc.model_copy(update={"workload": sc.workload.model_copy(update=update)})


def batch_count(n: int, batches: int = BATCHES) -> int:
    """How many batches :func:`batch_means_se` cuts ``n`` values into: ``batches``, or fewer (of 2 values
    each) for a short series; 0 when there are fewer than 4 values (no standard error)."""
    b = min(int(batches), int(n) // 2)
    return b if b >= 2 else 0


def batch_means_se(x: np.ndarray, batches: int = BATCHES) -> float:
    """Standard error of the mean of the autocorrelated series ``x`` (iteration times, seconds) by
    non-overlapping batch means (Law & Kelton §9.5.3): the standard deviation of the batch means over
    ``sqrt(b)``, ``b = batch_count(len(x), batches)`` (``batches``, fewer for fewer than ``2 × batches``
    values: before, a run that short got no sampling error at all and a range of zero width; review);
    its degrees of freedom are ``b − 1``. NaN with fewer than 4 values."""
    x = np.asarray(x, float)
    b = batch_count(x.size, batches)
    if b == 0:
        return float("nan")
    size = x.size // b
    means = x[: size * b].reshape(b, size).mean(axis=1)
    return float(np.std(means, ddof=1) / np.sqrt(b))


def mean_ranges(sc: Scenario, iterations: pd.DataFrame, simulate: Callable[[Scenario], pd.DataFrame],
                confidence: float = 0.95) -> pd.DataFrame:
    """The prediction range of every scheme's mean iteration time under the scenario's speed drift.

    Args:
        sc: the scenario simulated, with ``workload.speed_drift`` set.
        iterations: its iterations rows (``scheme``, ``duration_s``), as simulated.
        simulate: runs a scenario and returns its iterations rows (the same engine and seed as
            ``iterations``).
        confidence: of the range (0.95).
    Returns:
        One row per scheme, :data:`RANGE_COLUMNS`, seconds: ``mean_lo_s`` / ``mean_hi_s`` = ``mean_s ∓
        hypot(q_t·|mean_slow_s − mean_fast_s| / 2, q_b·sampling_se_s)`` (the lower end at least 0), ``q_t`` the quantile of Student's
        t with ``speed_drift_dof`` degrees of freedom (the normal one when None), ``q_b`` Student's t
        with ``sampling_dof`` (batches − 1, :func:`batch_means_se`), ``mean_slow_s`` /
        ``mean_fast_s`` the means with the work ×(1 + sd) / ×(1 − sd). A scheme with fewer than 4
        iterations has no sampling error (``sampling_se_s`` NaN, ``sampling_dof`` 0): its range is the
        drift's alone, and ``gcsim simulate`` says so.
    Raises:
        ValueError: the scenario has no ``workload.speed_drift``.
    """
    drift = sc.workload.speed_drift
    if drift is None:
        raise ValueError("workload.speed_drift must be set for a prediction range, got None")
    sd = float(drift.sd)
    q = 0.5 + confidence / 2.0
    q_z = float(stats.norm.ppf(q))
    q_t = q_z if drift.dof is None else float(stats.t.ppf(q, float(drift.dof)))
    slow = fast = iterations
    if sd > 0:
        slow, fast = simulate(scale_cpu_work(sc, 1.0 + sd)), simulate(scale_cpu_work(sc, 1.0 - sd))
    rows = []
    for label, g in iterations.groupby("scheme", sort=False):
        label = str(label)
        x = g["duration_s"].to_numpy(float)
        mean = float(x.mean())
        m_slow = float(slow.loc[slow["scheme"].astype(str) == label, "duration_s"].mean())
        m_fast = float(fast.loc[fast["scheme"].astype(str) == label, "duration_s"].mean())
        drift_hw = q_t * abs(m_slow - m_fast) / 2.0
        se, se_dof = batch_means_se(x), max(batch_count(x.size) - 1, 0)
        half = float(np.hypot(drift_hw, stats.t.ppf(q, se_dof) * se)) if np.isfinite(se) else drift_hw
        rows.append({"scheme": label, "mean_s": mean, "mean_lo_s": max(mean - half, 0.0), "mean_hi_s": mean + half,
                     "speed_drift_sd": sd, "speed_drift_dof": np.nan if drift.dof is None else float(drift.dof),
                     "mean_slow_s": m_slow, "mean_fast_s": m_fast, "drift_half_width_s": drift_hw,
                     "sampling_se_s": se, "sampling_dof": se_dof, "confidence": confidence})
    return pd.DataFrame(rows, columns=RANGE_COLUMNS)
