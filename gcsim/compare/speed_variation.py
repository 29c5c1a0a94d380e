"""The machine's speed common to every worker of an iteration, from the workers' own CPU clocks.

On a shared VM the CPU-seconds a partition takes rise and fall for every worker at once, in stretches
of iterations (docs/validation/README.md, finding 22: in the 34 ``uncoded-a`` calibration runs
committed by 2026-12-05 the per-iteration common part of ``log(CPU per partition)`` has a standard
deviation of 0-13.4 %, median 7.5 %, of the order of the spread between the workers of one iteration, and a lag-1 autocorrelation of 0.47 up to
the :data:`MAX_LAG1` clip). Drawing every partition
independently from the pooled values keeps the spread but loses that it is shared: an iteration in a
slow stretch is slow for all workers, so the order statistic a coded scheme waits for moves with it.

Model (a one-way random-effects decomposition with an AR(1) iteration effect; Searle, Casella &
McCulloch, Variance Components, 1992, §3.5; Box & Jenkins, Time Series Analysis, §3.2.4)::

    log c[t, w] = mu + a_t + e[t, w],   a_t stationary AR(1) (sd_a, lag1),   e i.i.d. (sd_e)

with ``c[t, w]`` the CPU-seconds per partition of worker ``w`` in iteration ``t`` (``compute_cpu_s /
n_partitions`` of the rows that sent). Estimates, with ``m_t`` the mean of the ``k_t`` rows' logs:

* ``sd_e² = Σ (log c - m_t)² / Σ (k_t - 1)`` (the within-iteration mean square);
* ``sd_a² = var(m_t) - sd_e² · mean(1 / k_t)`` (``m_t`` carries ``e``'s mean besides ``a_t``);
* ``lag1 = cov(m_t, m_{t+1}) / sd_a²`` over consecutive iterations (``e`` is independent between
  iterations, so the lag-1 covariance of ``m`` is that of ``a``), clipped to ``[0, MAX_LAG1]``.

The calibration takes each iteration's factor ``exp(m_t - mean m)`` out of the rows' partition CPU
(:func:`remove_iteration_factor`, which keeps each worker's own deviation whole and the mean as it was)
before the per-partition distribution is formed, and the simulator multiplies every worker's partition
work in iteration ``t`` by a fresh AR(1) factor with the estimated ``sd_a`` and ``lag1``
(``workload.speed_variation``, :func:`gcsim.stragglers.speed_factors`), so each part is counted once and
the shared part is shared again. The per-call CPU is left as measured and not multiplied (5-15 % of a
call's work).

Caveats: each (run, scheme) is centred on its own mean, which biases ``sd_a`` and ``lag1`` low in short
runs (lag1 0.67 for a true 0.77 at 40 iterations, 0.75 at 190); only the rows that sent enter the fit,
so calibrating a coded scheme on itself leaves its cancelled (slow) rows out; the pooled ``sd_e``
assumes one per-worker spread for every partition count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gcsim.compare.estimators import finished_partition_cpu_s

#: the largest lag-1 autocorrelation estimated (an AR(1) at 1 would never return to its mean)
MAX_LAG1 = 0.95
#: fewest iterations with >= 2 finished rows for an estimate
MIN_ITERATIONS = 10


@dataclass(frozen=True)
class SpeedMoments:
    """What one (run, scheme) contributes to the pooled estimate (sums over its iterations with at
    least two finished rows; logs of CPU-seconds per partition).

    Attributes:
        n_iterations: iterations used, ``N``.
        ss_between: ``Σ_t (m_t - mean m)²``.
        ss_within: ``Σ_{t,w} (log c - m_t)²``; df_within: ``Σ_t (k_t - 1)``.
        inv_k_sum: ``Σ_t 1 / k_t``.
        lag_products: ``Σ (m_t - mean m)(m_{t+1} - mean m)`` over consecutive iterations both used;
            n_lag_pairs: how many such pairs.
    """

    n_iterations: int
    ss_between: float
    ss_within: float
    df_within: int
    inv_k_sum: float
    lag_products: float
    n_lag_pairs: int


@dataclass(frozen=True)
class SpeedVariationFit:
    """The pooled estimate (module docstring).

    Attributes:
        sd: standard deviation of the common log-factor ``a_t`` (0 when the estimate is negative or
            there were too few iterations); lag1: its lag-1 autocorrelation in ``[0, MAX_LAG1]``.
        sd_within: standard deviation of the per-worker part ``e``.
        n_iterations: iterations the estimate used (0: none, ``sd`` is then 0).
    """

    sd: float
    lag1: float
    sd_within: float
    n_iterations: int

    def spec(self) -> dict | None:
        """``workload.speed_variation`` of a scenario (``{sd, lag1}``), or None when ``sd`` is 0."""
        if not self.sd > 0:
            return None
        return {"sd": round(float(self.sd), 6), "lag1": round(float(self.lag1), 6)}

    def describe(self) -> str:
        """One line for notes and the calibrated YAML's comments."""
        if self.n_iterations == 0:
            return "machine speed per iteration: not measured (no CPU clocks, or too few iterations)"
        return (f"machine speed per iteration (workers' CPU clocks, {self.n_iterations} iterations): the part every "
                f"worker shares has a stationary sd of {self.sd * 100:.1f} % (log scale) and lag-1 autocorrelation "
                f"{self.lag1:.2f}" + (" (the clip)" if self.lag1 >= MAX_LAG1 else "")
                + f"; each worker's own part sd {self.sd_within * 100:.1f} %")


def _finished_logs(workers: pd.DataFrame) -> pd.DataFrame:
    """``iteration``, ``log_cpu`` of the rows that sent and carry a CPU clock (empty without one;
    :func:`gcsim.compare.estimators.finished_partition_cpu_s`)."""
    per = finished_partition_cpu_s(workers)
    ok = np.isfinite(per)
    return pd.DataFrame({"iteration": workers["iteration"].to_numpy()[ok].astype(int), "log_cpu": np.log(per[ok])})


def iteration_log_factors(workers: pd.DataFrame) -> pd.Series:
    """``m_t - mean m`` per iteration with at least two finished rows (index: iteration): the log of
    the factor by which iteration ``t``'s work per partition exceeded the run's typical one.

    Args:
        workers: workers.csv rows of one scheme (columns ``iteration``, ``status``, ``n_partitions``,
            ``compute_cpu_s``), already restricted to the iterations wanted.
    Returns:
        float Series (empty when the rows carry no CPU clock).
    """
    logs = _finished_logs(workers)
    g = logs.groupby("iteration")["log_cpu"]
    m = g.mean()[g.size() >= 2]
    return (m - m.mean()) if len(m) else m


def speed_moments(workers: pd.DataFrame) -> SpeedMoments:
    """The sums of :class:`SpeedMoments` from one scheme's rows (``workers`` as in
    :func:`iteration_log_factors`)."""
    logs = _finished_logs(workers)
    g = logs.groupby("iteration")["log_cpu"]
    k = g.size()
    keep = k[k >= 2].index
    logs = logs[logs["iteration"].isin(keep)]
    if logs.empty:
        return SpeedMoments(0, 0.0, 0.0, 0, 0.0, 0.0, 0)
    g = logs.groupby("iteration")["log_cpu"]
    m, k = g.mean(), g.size()
    within = logs["log_cpu"].to_numpy() - g.transform("mean").to_numpy()
    dev = m - m.mean()
    nxt = dev.reindex(dev.index + 1).to_numpy()
    pair = np.isfinite(nxt)
    return SpeedMoments(n_iterations=int(len(m)), ss_between=float((dev ** 2).sum()),
                        ss_within=float((within ** 2).sum()), df_within=int((k - 1).sum()),
                        inv_k_sum=float((1.0 / k).sum()), lag_products=float((dev.to_numpy()[pair] * nxt[pair]).sum()),
                        n_lag_pairs=int(pair.sum()))


def fit_speed_variation(moments: list[SpeedMoments]) -> SpeedVariationFit:
    """Pool the moments of several (run, scheme)s into :class:`SpeedVariationFit` (module docstring);
    each keeps its own mean (a drift between runs is not speed variation within one)."""
    n = sum(mo.n_iterations for mo in moments)
    df_between = sum(mo.n_iterations - 1 for mo in moments if mo.n_iterations > 0)
    df_within = sum(mo.df_within for mo in moments)
    if n < MIN_ITERATIONS or df_between < 1 or df_within < 1:
        return SpeedVariationFit(0.0, 0.0, 0.0, 0)
    s2e = sum(mo.ss_within for mo in moments) / df_within
    s2m = sum(mo.ss_between for mo in moments) / df_between
    s2a = s2m - s2e * sum(mo.inv_k_sum for mo in moments) / n
    pairs = sum(mo.n_lag_pairs for mo in moments)
    if not s2a > 0:
        return SpeedVariationFit(0.0, 0.0, float(np.sqrt(s2e)), n)
    c1 = sum(mo.lag_products for mo in moments) / pairs if pairs else 0.0
    lag1 = float(np.clip(c1 / s2a, 0.0, MAX_LAG1))
    return SpeedVariationFit(sd=float(np.sqrt(s2a)), lag1=lag1, sd_within=float(np.sqrt(s2e)), n_iterations=n)


def remove_iteration_factor(workers: pd.DataFrame, values: np.ndarray) -> np.ndarray:
    """Take each iteration's shared factor out of the rows' partition CPU-seconds, keeping each worker's
    own part whole.

    A row that sent, with ``log c = m_t + d`` (``d`` its deviation from its iteration's mean of ``k_t``
    rows), becomes ``exp(mean m + d·sqrt(k_t / (k_t − 1)))`` per partition: ``d`` carries only
    ``(1 − 1/k_t)`` of the per-worker variance (the rest went into ``m_t``), which the factor restores, so
    the simulator's per-worker draws keep ``sd_e`` and its speed factor adds ``sd_a``. Other rows of the
    iteration (cancelled, or without a clock) are divided by ``exp(m_t − mean m)``; rows of iterations
    with fewer than two finished rows are kept. The result is scaled back to the total of the finite
    entries, so the mean work is unchanged.

    Args:
        workers: the rows ``values`` is aligned with (``(k,)``; columns as :func:`iteration_log_factors`).
        values: ``(k,)`` the rows' partition CPU-seconds, NaN allowed.
    Returns:
        ``(k,)`` CPU-seconds with the shared factor removed.
    """
    v = np.asarray(values, float)
    log_cpu = np.log(finished_partition_cpu_s(workers))  # NaN: the row did not send or has no clock
    its = workers["iteration"].to_numpy()
    g = pd.Series(log_cpu).groupby(its)  # NaN rows are not counted
    k, m_t = g.count().reindex(its).to_numpy(float), g.transform("mean").to_numpy(float)
    estimated = k >= 2
    if not estimated.any():
        return v.copy()
    m = pd.Series(m_t[estimated]).groupby(its[estimated]).first()
    shift = np.where(estimated, m_t - m.mean(), 0.0)  # log factor per row (0: iteration not estimated)
    # the rows that sent: their own deviation from m_t widened by sqrt(k / (k - 1))
    sent = estimated & np.isfinite(log_cpu)
    widen = np.where(sent, (log_cpu - m_t) * (np.sqrt(k / np.maximum(k - 1.0, 1.0)) - 1.0), 0.0)
    out = v * np.exp(widen - shift)
    ok = np.isfinite(v) & np.isfinite(out)
    total = float(out[ok].sum())
    if ok.any() and total > 0:
        out = out * (float(v[ok].sum()) / total)
    return out


__all__ = ["MAX_LAG1", "MIN_ITERATIONS", "SpeedMoments", "SpeedVariationFit", "fit_speed_variation",
           "iteration_log_factors", "remove_iteration_factor", "speed_moments"]
