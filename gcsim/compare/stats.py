"""Statistics that compare simulated with observed iteration times (seconds).

Every comparison is *simulated relative to observed*: a relative error ``(sim - obs) / obs`` of a
statistic (mean, median, 95th and 99th percentile), with a bootstrap confidence interval
(Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13, percentile interval, computed by
``scipy.stats.bootstrap``); the Wasserstein-1 distance divided by the observed mean
(``scipy.stats.wasserstein_distance``); the two-sample Kolmogorov–Smirnov statistic used as an effect
size (``scipy.stats.ks_2samp``; its p-value means little at large n and with autocorrelated
iterations); Kendall's tau between the observed and predicted ordering of schemes
(``scipy.stats.kendalltau``); and the pointwise ECDF confidence band of the observed sample
(Greenwood's formula, ``scipy.stats.ecdf(...).cdf.confidence_interval``). Following Sargent
("Verification and validation of simulation models", J. Simulation 2013) and Law & Kelton
(*Simulation Modeling and Analysis*, §5.6), the verdict uses confidence intervals against pre-set
bands rather than hypothesis tests (see :mod:`gcsim.compare.verdict`).

Quantiles are ``np.quantile`` with its default (linear, Hyndman & Fan type 7) interpolation, the same
as :func:`gcsim.trace.summarize`.

Two modes:

* **unpaired** (scenario-driven): the simulated replications draw their own straggler delays;
  observed ``(N,)`` and simulated ``(M,)`` are resampled independently;
* **paired** (trace-driven): the simulation replays the recorded delays, so simulated ``(R, N)``
  (R replications of the same N iterations) is aligned with observed ``(N,)``; the bootstrap
  resamples iteration indices and uses the same indices for both.

The bootstrap treats iterations as independent; persistent stragglers and carry-over make them
autocorrelated, which narrows the intervals somewhat (a block bootstrap would widen them).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from gcsim.errors import ConfigError

#: name -> quantile level (None = the mean). Relative errors are reported for all of them.
STATISTICS: dict[str, float | None] = {"mean": None, "p50": 0.50, "p95": 0.95, "p99": 0.99}


def _statistic(x: np.ndarray, name: str, axis: int = -1) -> np.ndarray:
    """Mean or quantile ``name`` (key of :data:`STATISTICS`) of ``x`` along ``axis``."""
    q = STATISTICS[name]
    if q is None:
        return np.mean(x, axis=axis)
    return np.quantile(x, q, axis=axis)


@dataclass(frozen=True)
class Estimate:
    """A point estimate with a confidence interval.

    Attributes:
        value: point estimate (for a relative error: dimensionless, 0.05 = +5 %).
        low, high: confidence-interval bounds (``low <= high``; equal to ``value`` when the sample
            has no spread).
        confidence: confidence level of the interval, e.g. 0.95.
    """

    value: float
    low: float
    high: float
    confidence: float = 0.95

    def inside(self, band: float) -> bool:
        """True when the whole interval lies in ``[-band, +band]``."""
        return -band <= self.low and self.high <= band


def _as_sample(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.size < 2 or not np.all(np.isfinite(a)):
        raise ConfigError(name, "at least 2 finite iteration times",
                          f"{a.size} values" if a.size < 2 else "non-finite values")
    return a


def relative_error(observed: Sequence[float], simulated: Sequence[float] | np.ndarray, statistic: str = "mean", *,
                   paired: bool = False, confidence: float = 0.95, n_resamples: int = 2000,
                   seed: int = 0) -> Estimate:
    """Relative error ``(stat(sim) - stat(obs)) / stat(obs)`` with a percentile-bootstrap CI.

    Args:
        observed: observed iteration times, seconds, shape ``(N,)``.
        simulated: simulated iteration times, seconds: ``(M,)`` (unpaired) or ``(R, N)`` (paired:
            R replications of the observed iterations; replications are pooled for the statistic).
        statistic: ``"mean"``, ``"p50"``, ``"p95"`` or ``"p99"`` (:data:`STATISTICS`).
        paired: resample iteration indices jointly (trace-driven mode) instead of each sample alone.
        confidence: confidence level of the interval.
        n_resamples: bootstrap resamples.
        seed: seed of the bootstrap's ``np.random.Generator`` (results are deterministic in it).
    Returns:
        :class:`Estimate` of the relative error (dimensionless).
    Raises:
        ConfigError: unknown ``statistic``, fewer than 2 or non-finite values, a non-positive observed
            statistic, or a paired ``simulated`` whose last axis is not N.
    Source: percentile bootstrap, Efron & Tibshirani (1993) §13.3, via ``scipy.stats.bootstrap``.
    """
    if statistic not in STATISTICS:
        raise ConfigError("statistic", f"one of {', '.join(STATISTICS)}", statistic)
    obs = _as_sample(observed, "observed")
    sim = np.asarray(simulated, dtype=np.float64)
    if paired:
        if sim.ndim == 1:
            sim = sim[None, :]
        if sim.ndim != 2 or sim.shape[1] != obs.size:
            raise ConfigError("simulated", f"shape (R, {obs.size}) for a paired comparison", sim.shape)
    _as_sample(sim.ravel(), "simulated")
    obs_stat = float(_statistic(obs, statistic))
    if not obs_stat > 0:
        raise ConfigError(f"observed {statistic}", "a positive number of seconds", obs_stat)
    point = (float(_statistic(sim.ravel(), statistic)) - obs_stat) / obs_stat
    rng = np.random.default_rng(seed)

    if paired:
        R, N = sim.shape

        def rel(idx, axis=-1):  # idx (..., N) integer resample of iteration indices
            idx = np.asarray(idx, dtype=np.intp)
            o = _statistic(obs[idx], statistic, axis=-1)
            s = np.moveaxis(sim[:, idx], 0, -2)  # (..., R, N)
            s = s.reshape(*s.shape[:-2], R * N)
            return (_statistic(s, statistic, axis=-1) - o) / o

        data = (np.arange(N),)
    else:
        def rel(o, s, axis=-1):
            so = _statistic(o, statistic, axis=axis)
            return (_statistic(s, statistic, axis=axis) - so) / so

        data = (obs, sim.ravel())

    # bound the memory of one vectorised batch to about 4e6 float64 (32 MB)
    batch = max(1, min(n_resamples, int(4e6 // max(sim.size + obs.size, 1))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # degenerate (constant) samples
        res = stats.bootstrap(data, rel, n_resamples=n_resamples, batch=batch, vectorized=True, paired=False,
                              confidence_level=confidence, method="percentile", rng=rng)
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (np.isfinite(low) and np.isfinite(high)):  # no spread at all: the interval is the point
        low = high = point
    return Estimate(point, min(low, point), max(high, point), confidence)


def wasserstein_relative(observed: Sequence[float], simulated: Sequence[float]) -> float:
    """Wasserstein-1 distance between the samples divided by the observed mean (dimensionless).

    W1 is the area between the two empirical CDFs (seconds); dividing by the observed mean makes it
    comparable across schemes. Source: ``scipy.stats.wasserstein_distance`` (Ramdas et al. 2017).
    """
    obs = _as_sample(observed, "observed")
    sim = _as_sample(np.ravel(simulated), "simulated")
    return float(stats.wasserstein_distance(obs, sim) / obs.mean())


def ks_statistic(observed: Sequence[float], simulated: Sequence[float]) -> tuple[float, float]:
    """Two-sample Kolmogorov–Smirnov statistic ``sup |F_obs - F_sim|`` and its p-value.

    Use the statistic as an effect size (0 = identical ECDFs, 1 = disjoint); the p-value assumes
    independent iterations. Source: ``scipy.stats.ks_2samp``.
    """
    res = stats.ks_2samp(_as_sample(observed, "observed"), _as_sample(np.ravel(simulated), "simulated"))
    return float(res.statistic), float(res.pvalue)


@dataclass(frozen=True)
class EcdfBand:
    """Observed ECDF with its pointwise confidence band, evaluated at the sorted observations.

    Attributes:
        x: sorted distinct observed times, seconds, shape ``(u,)``.
        cdf, low, high: ECDF and band at ``x``, shape ``(u,)`` (band filled with the ECDF where
            Greenwood's variance is undefined, i.e. at CDF = 1).
    """

    x: np.ndarray
    cdf: np.ndarray
    low: np.ndarray
    high: np.ndarray


def ecdf_band(observed: Sequence[float], confidence: float = 0.95) -> EcdfBand:
    """Pointwise ECDF confidence band of the observed sample (Greenwood's formula, linear method).

    Source: ``scipy.stats.ecdf(sample).cdf.confidence_interval(confidence)``.
    """
    obs = _as_sample(observed, "observed")
    res = stats.ecdf(obs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ci = res.cdf.confidence_interval(confidence_level=confidence)
    x = res.cdf.quantiles
    cdf = res.cdf.probabilities
    low = np.where(np.isfinite(ci.low.evaluate(x)), ci.low.evaluate(x), cdf)
    high = np.where(np.isfinite(ci.high.evaluate(x)), ci.high.evaluate(x), cdf)
    return EcdfBand(x=x, cdf=cdf, low=np.clip(low, 0, 1), high=np.clip(high, 0, 1))


def ecdf_band_coverage(observed: Sequence[float], simulated: Sequence[float], confidence: float = 0.95) -> float:
    """Fraction of the observed points at which the simulated ECDF lies inside the observed ECDF band.

    1.0 = the simulated CDF never leaves the band. The band is pointwise, so even a perfect model
    falls outside at a few points.
    """
    band = ecdf_band(observed, confidence)
    sim = np.sort(_as_sample(np.ravel(simulated), "simulated"))
    f_sim = np.searchsorted(sim, band.x, side="right") / sim.size
    tol = 1e-12
    return float(np.mean((f_sim >= band.low - tol) & (f_sim <= band.high + tol)))


def quantile_pairs(observed: Sequence[float], simulated: Sequence[float], n_points: int = 99) -> tuple[np.ndarray, np.ndarray]:
    """Matching quantiles for a QQ plot: levels ``1/(n_points+1) .. n_points/(n_points+1)``.

    Returns:
        ``(q_obs, q_sim)``, each ``(n_points,)`` seconds.
    """
    levels = np.arange(1, n_points + 1) / (n_points + 1)
    return np.quantile(np.asarray(observed, float), levels), np.quantile(np.ravel(simulated).astype(float), levels)


@dataclass(frozen=True)
class SampleComparison:
    """Everything the verdict and the report need about one (run, scheme) pair.

    Attributes:
        n_observed, n_simulated: sample sizes after warm-up (simulated: all replications pooled).
        observed, simulated: statistic name -> value in seconds (keys of :data:`STATISTICS`).
        rel_error: statistic name -> :class:`Estimate` of ``(sim - obs)/obs``.
        wasserstein_rel: W1 / observed mean.
        ks_statistic, ks_pvalue: two-sample KS.
        ecdf_coverage: :func:`ecdf_band_coverage`.
        paired: whether the comparison was paired (trace-driven).
    """

    n_observed: int
    n_simulated: int
    observed: dict[str, float]
    simulated: dict[str, float]
    rel_error: dict[str, Estimate]
    wasserstein_rel: float
    ks_statistic: float
    ks_pvalue: float
    ecdf_coverage: float
    paired: bool = False

    def as_row(self) -> dict:
        """Flat dict for ``validation.csv``: ``obs_mean_s``, ``sim_mean_s``, ``err_mean``,
        ``err_mean_lo``, ``err_mean_hi``, ... , ``w1_rel``, ``ks``, ``ks_pvalue``, ``ecdf_coverage``."""
        row: dict = {"n_observed": self.n_observed, "n_simulated": self.n_simulated, "paired": self.paired}
        for k in STATISTICS:
            row[f"obs_{k}_s"] = self.observed[k]
            row[f"sim_{k}_s"] = self.simulated[k]
        for k in STATISTICS:
            e = self.rel_error[k]
            row[f"err_{k}"], row[f"err_{k}_lo"], row[f"err_{k}_hi"] = e.value, e.low, e.high
        row.update(w1_rel=self.wasserstein_rel, ks=self.ks_statistic, ks_pvalue=self.ks_pvalue,
                   ecdf_coverage=self.ecdf_coverage)
        return row


def compare_samples(observed: Sequence[float], simulated: Sequence[float] | np.ndarray, *, paired: bool = False,
                    confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> SampleComparison:
    """Compare one observed sample of iteration times with its simulated counterpart.

    Args:
        observed: ``(N,)`` seconds, warm-up already dropped.
        simulated: ``(M,)`` seconds, or ``(R, N)`` when ``paired``.
        paired, confidence, n_resamples, seed: see :func:`relative_error` (each statistic's bootstrap
            uses ``seed``, so the result is deterministic).
    Returns:
        :class:`SampleComparison`.
    Raises:
        ConfigError: as :func:`relative_error`.
    """
    obs = _as_sample(observed, "observed")
    sim = np.asarray(simulated, dtype=np.float64)
    flat = _as_sample(sim.ravel(), "simulated")
    errs = {k: relative_error(obs, sim, k, paired=paired, confidence=confidence, n_resamples=n_resamples, seed=seed)
            for k in STATISTICS}
    ks, p = ks_statistic(obs, flat)
    return SampleComparison(
        n_observed=int(obs.size), n_simulated=int(flat.size),
        observed={k: float(_statistic(obs, k)) for k in STATISTICS},
        simulated={k: float(_statistic(flat, k)) for k in STATISTICS},
        rel_error=errs, wasserstein_rel=wasserstein_relative(obs, flat), ks_statistic=ks, ks_pvalue=p,
        ecdf_coverage=ecdf_band_coverage(obs, flat, confidence), paired=paired,
    )


@dataclass(frozen=True)
class RankAgreement:
    """Whether the simulator orders schemes (fastest first, by mean) as the observations do.

    Attributes:
        tau: Kendall's tau-b between observed and predicted means (1 = same order, -1 = reversed;
            NaN with fewer than 2 schemes).
        pvalue: its p-value (meaningless for few schemes; reported, not judged).
        observed_order, predicted_order: scheme names, fastest first.
        same_order: no pair in the wrong order (``discordant`` empty): the orders agree but for
            ``predicted_ties``.
        discordant: pairs ``(a, b)`` observed ``a`` faster than ``b`` but predicted slower.
        predicted_ties: pairs ``(a, b)`` observed ``a`` faster than ``b`` and predicted exactly as fast
            (e.g. the same scheme run twice, predicted from one calibration): not a wrong order, but
            not an order either.
    """

    tau: float
    pvalue: float
    observed_order: list[str]
    predicted_order: list[str]
    same_order: bool
    discordant: list[tuple[str, str]] = field(default_factory=list)
    predicted_ties: list[tuple[str, str]] = field(default_factory=list)
    predicted_means: dict[str, float] = field(default_factory=dict)
    observed_means: dict[str, float] = field(default_factory=dict)

    def verdict(self) -> str:
        """``"same order"``, ``"same order but for predicted ties: a = b"``, ``"ORDER DIFFERS"`` or
        ``"ORDER DIFFERS (predicted ties: a = b)"``."""
        ties = ", ".join(f"{a} = {b}" for a, b in self.predicted_ties)
        if not self.same_order:
            return "ORDER DIFFERS" + (f" (predicted ties: {ties})" if ties else "")
        return f"same order but for predicted ties: {ties}" if ties else "same order"

    def observed_text(self) -> str:
        """``observed_order`` fastest first, ``" < "`` between schemes, ``" = "`` between exactly equal
        observed means (e.g. schemes a simulated run computed identically)."""
        return _order_text(self.observed_order, self.observed_means)

    def predicted_text(self) -> str:
        """``predicted_order`` fastest first, ``" < "`` between schemes, ``" = "`` between exactly tied ones."""
        return _order_text(self.predicted_order, self.predicted_means)


def _order_text(order: list[str], means: dict[str, float]) -> str:
    """``order`` joined by ``" < "``, or ``" = "`` where ``means`` are exactly equal."""
    if not order:
        return ""
    out = order[0]
    for a, b in zip(order, order[1:]):
        out += (" = " if means and means.get(a) == means.get(b) else " < ") + b
    return out


def rank_agreement(observed_means: Mapping[str, float], predicted_means: Mapping[str, float]) -> RankAgreement:
    """Kendall tau between observed and predicted per-scheme mean iteration times (seconds).

    Args:
        observed_means, predicted_means: scheme -> mean seconds; must have the same keys.
    Raises:
        ConfigError: when the scheme sets differ.
    Source: Kendall (1938); tau-b via ``scipy.stats.kendalltau``.
    """
    if set(observed_means) != set(predicted_means):
        raise ConfigError("schemes", f"the observed schemes {sorted(observed_means)}", sorted(predicted_means))
    names = list(observed_means)
    obs_order = sorted(names, key=lambda k: observed_means[k])
    pred_order = sorted(names, key=lambda k: (predicted_means[k], observed_means[k]))  # ties: as observed
    if len(names) < 2:
        return RankAgreement(float("nan"), float("nan"), obs_order, pred_order, True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.kendalltau([observed_means[k] for k in names], [predicted_means[k] for k in names])
    discordant = [(a, b) for i, a in enumerate(obs_order) for b in obs_order[i + 1:]
                  if observed_means[a] < observed_means[b] and predicted_means[a] > predicted_means[b]]
    ties = [(a, b) for i, a in enumerate(obs_order) for b in obs_order[i + 1:]
            if observed_means[a] != observed_means[b] and predicted_means[a] == predicted_means[b]]
    return RankAgreement(float(res.statistic), float(res.pvalue), obs_order, pred_order, not discordant,
                         discordant, ties, {k: float(v) for k, v in predicted_means.items()},
                         {k: float(v) for k, v in observed_means.items()})


def drop_warmup(iterations: pd.DataFrame, warmup: int, *, min_left: int = 2) -> pd.DataFrame:
    """Drop the first ``warmup`` iterations of every scheme (and replication, if present).

    Args:
        iterations: rows with at least ``scheme`` and ``iteration`` (gcsim/trace.py ITERATION_COLUMNS);
            an optional ``replication`` column is grouped on too.
        warmup: iterations to drop per group, ``>= 0``.
        min_left: iterations that must remain per group.
    Returns:
        The remaining rows (original order, fresh index).
    Raises:
        ConfigError: ``warmup`` negative, or leaving fewer than ``min_left`` iterations (field
            ``--warmup``).
    """
    if isinstance(warmup, bool) or not isinstance(warmup, (int, np.integer)) or warmup < 0:
        raise ConfigError("--warmup", "an integer >= 0", warmup)
    keys = ["scheme"] + (["replication"] if "replication" in iterations.columns else [])
    rank = iterations.groupby(keys, sort=False)["iteration"].rank(method="first") - 1
    kept = iterations[rank >= warmup]
    sizes = iterations.groupby(keys, sort=False).size()
    short = sizes[sizes - warmup < min_left]
    if len(short):
        raise ConfigError("--warmup", f"at most {int(short.min()) - min_left} (scheme {short.index[0]!s} has "
                          f"{int(short.min())} iterations and needs {min_left} left)", warmup)
    return kept.reset_index(drop=True)


__all__ = ["STATISTICS", "Estimate", "EcdfBand", "RankAgreement", "SampleComparison", "compare_samples",
           "drop_warmup", "ecdf_band", "ecdf_band_coverage", "ks_statistic", "quantile_pairs", "rank_agreement",
           "relative_error", "wasserstein_relative"]
