"""The mean error of a prediction *in expectation*: the luck of one run's straggler draws removed with a
control variate.

A prediction simulates fresh straggler draws (several replications) and estimates the scheme's expected
iteration time ``E_f``. The run it is scored on drew its own stragglers once: its mean ``ȳ`` of ``N``
iterations carries the luck of those draws. With bimodal stragglers (a 1 s delay with probability 0.1)
a raw mean error's 95 % CI is ±8-11 % at N = 190, too wide to judge a ±5 % band without thousands of
iterations (docs/validation/README.md, findings 4 and 20).

The run's draws are known: gcsim's keyed straggler streams reproduce them from the run's seed
(:mod:`gcsim.stragglers`). Replaying them through the *same* calibrated model (calibrated on another
run, nothing fitted to the target) gives a control ``C_i`` per iteration, a function of the draws only,
whose expectation is the prediction itself, ``E[C] = E_f`` (the replay and the fresh simulations differ
only in the seed). The control-variate estimator of the run's expected iteration time is

    ŷ_cv = ȳ − β (C̄ − E_f),    β = cov(y, C) / var(C)  (fitted on the target's (y_i, C_i) pairs),

consistent for ``E[y]`` whatever the model, with a bias of order ``1/N`` from fitting ``β`` on the same
sample (Lavenberg & Welch, "A perspective on the use of control variables to increase the efficiency of
Monte Carlo simulations", Management Science 27(3), 1981; Nelson, "Control variate remedies", Operations
Research 38(6), 1990; Law & Kelton, *Simulation Modeling and Analysis*, §11.4); for independent
iterations its variance is ``(1 − ρ²)·var(y)/N``, ``ρ`` the correlation of ``y`` and ``C``. The error in
expectation is ``E_f / ŷ_cv − 1``, the quantity the raw mean error ``E_f / ȳ − 1`` estimates, with the
draws' luck taken out.

What it is and is not:

* With ``β ≈ 1`` it is numerically close to the model check's error (``--mode paired``, ``C̄ / ȳ − 1``):
  ``E_f`` nearly cancels. What it adds is the reading – an estimate of the prediction's error in
  expectation, valid also when ``β`` differs from 1 – and an interval for it. ``β`` is near 1 when the
  model's iteration time moves with the draws as the measured one does; the replay's own simulated
  compute noise pulls it below 1 (regression dilution), so ``β < 1`` alone does not fault the model.
* Because ``E_f`` nearly cancels, it scores the model's expected iteration time (what the simulator
  gives with many replications), not the Monte-Carlo error of a prediction made with few replications
  (the ``sim_mean_se_s`` of the protocol's table). ``ŷ_cv`` itself (``observed_mean_s``) carries that
  Monte-Carlo error of ``E_f``; the ratio hardly does.
* What the draws do not fix stays in the residual ``y − βC``: above all the machine's CPU speed, which
  wanders over tens of iterations. The residuals are autocorrelated, so the interval is a circular
  block bootstrap (Politis & Romano, "A circular block-resampling procedure for stationary data",
  1992) with blocks of :data:`BLOCK_ITERATIONS` iterations, not an iid one (2-4 × wider on the
  committed runs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: fewest (observed, control) pairs the estimator is computed from
MIN_PAIRS = 10
#: iterations per block of the circular block bootstrap (the CPU speed's wander lasts tens of
#: iterations: the residuals' lag-10 autocorrelation is 0.3-0.4 on the committed runs)
BLOCK_ITERATIONS = 20
#: a control whose standard deviation is below this fraction of its mean magnitude does not vary (float
#: rounding of a deterministic run): no estimate
_FLAT = 1e-9
#: bootstrap resamples computed at once
_CHUNK = 250


@dataclass(frozen=True)
class ControlVariateError:
    """The mean error in expectation (:mod:`gcsim.compare.control_variate`).

    Attributes:
        value: ``E_f / ŷ_cv − 1`` (dimensionless, 0.05 = +5 %); NaN when it could not be computed.
        lo, hi: its bootstrap percentile confidence interval (the pairs ``(y_i, C_i)`` resampled in
            circular blocks of consecutive iterations, ``β`` refitted in each resample; the simulated
            mean drawn from its normal law, independently).
        beta: the fitted control coefficient ``cov(y, C) / var(C)``.
        rho: the correlation of the observed and replayed iteration times (the variance of the mean falls
            by ``1 − ρ²``); NaN when the observed times do not vary.
        observed_mean_s: ``ŷ_cv``, the run's expected iteration time, seconds (it carries the
            Monte-Carlo error of ``E_f``, which the ratio ``value`` hardly does).
        reason: why there is none (empty when ``value`` was computed), e.g. "in sample".
        asked: False when the options chose no expectation (paired mode, in sample, ``--no-control-variate``);
            True when one was asked for (``reason`` then says why it failed, if it did).
    """

    value: float
    lo: float
    hi: float
    beta: float
    rho: float
    observed_mean_s: float
    reason: str = ""
    asked: bool = True

    @staticmethod
    def missing(reason: str, *, asked: bool = True) -> "ControlVariateError":
        """All NaN, with why (e.g. a run whose recorded delays are not gcsim's draws, or in sample);
        ``asked=False`` when the options chose none."""
        nan = float("nan")
        return ControlVariateError(nan, nan, nan, nan, nan, nan, reason, asked)

    @property
    def failed(self) -> bool:
        """Asked for and not computed (``reason`` says why)."""
        return self.asked and bool(self.reason)

    def as_row(self) -> dict:
        """``validation.csv`` columns: ``err_mean_cv``, ``err_mean_cv_lo``, ``err_mean_cv_hi``,
        ``cv_beta``, ``cv_rho``, ``obs_mean_cv_s`` and ``cv_note`` (why there is none; empty otherwise)."""
        return {"err_mean_cv": self.value, "err_mean_cv_lo": self.lo, "err_mean_cv_hi": self.hi,
                "cv_beta": self.beta, "cv_rho": self.rho, "obs_mean_cv_s": self.observed_mean_s,
                "cv_note": self.reason}


def _block_length(block: int, n: int) -> int:
    """Iterations per bootstrap block: ``block``, at most a third of the ``n`` values, at least 1."""
    return max(1, min(int(block), n // 3))


def _circular_blocks(rng: np.random.Generator, resamples: int, n: int, length: int) -> np.ndarray:
    """int ``(resamples, n)``: indices of a circular block bootstrap, blocks of ``length`` consecutive
    indices (wrapping at ``n``) with uniform starts, cut to ``n``."""
    k = -(-n // length)
    starts = rng.integers(0, n, (resamples, k))
    idx = (starts[:, :, None] + np.arange(length)[None, None, :]) % n
    return idx.reshape(resamples, k * length)[:, :n]


def _checked_inputs(observed_s, control_s, simulated_s, confidence: float, n_resamples: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """``(y, c, e, reason)``: the finite aligned pairs and the finite simulated values as 1-D float
    arrays, and why no estimate can be made from them (empty when one can).

    Raises:
        ValueError: ``observed_s`` and ``control_s`` differ in length, ``confidence`` is not in (0, 1) or
            ``n_resamples < 2``.
    """
    y = np.asarray(observed_s, dtype=float).ravel()
    c = np.asarray(control_s, dtype=float).ravel()
    e = np.asarray(simulated_s, dtype=float).ravel()
    if y.shape != c.shape:
        raise ValueError(f"observed_s and control_s must be aligned, got {y.size} and {c.size} values")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if int(n_resamples) < 2:
        raise ValueError(f"n_resamples must be >= 2, got {n_resamples!r}")
    ok = np.isfinite(y) & np.isfinite(c)
    y, c, e = y[ok], c[ok], e[np.isfinite(e)]
    if y.size < MIN_PAIRS:
        return y, c, e, f"{y.size} paired iterations (at least {MIN_PAIRS} needed)"
    if e.size < 2:
        return y, c, e, f"{e.size} simulated iterations (at least 2 needed)"
    if not np.std(c) > _FLAT * np.mean(np.abs(c)):
        return y, c, e, "the replayed iteration times do not vary"
    return y, c, e, ""


def _estimate(y: np.ndarray, c: np.ndarray, e_f: float) -> tuple[float, float, float]:
    """``(E_f / ŷ_cv − 1, β, ŷ_cv)`` for one sample."""
    var_c = float(np.var(c, ddof=1))
    beta = float(np.cov(y, c, ddof=1)[0, 1] / var_c) if var_c > 0 else 0.0
    y_cv = float(np.mean(y) - beta * (np.mean(c) - e_f))
    return (e_f / y_cv - 1.0 if y_cv > 0 else float("nan")), beta, y_cv


def control_variate_error(observed_s, control_s, simulated_s, *, confidence: float = 0.95,
                          n_resamples: int = 2000, seed: int = 0, block: int = BLOCK_ITERATIONS,
                          simulated_mean_se_s: float | None = None) -> ControlVariateError:
    """The mean error in expectation of a prediction (module docstring).

    Args:
        observed_s: ``(N,)`` the run's iteration times after warm-up, seconds.
        control_s: ``(N,)`` the same iterations simulated with the run's own straggler draws and the
            prediction's calibration (aligned with ``observed_s``), seconds.
        simulated_s: ``(M,)`` the prediction's iteration times (fresh draws, replications pooled), seconds.
        confidence: level of the bootstrap percentile interval, in (0, 1).
        n_resamples: bootstrap resamples, ``>= 2``.
        seed: bootstrap seed.
        block: iterations per block of the circular block bootstrap (``1``: iid resampling); at most
            a third of the pairs.
        simulated_mean_se_s: the standard error of the simulated mean, seconds; None: ``sd / sqrt(M)``,
            the simulated iterations taken as independent. With ``workload.speed_variation`` they are
            not (an AR(1) speed factor): pass the spread of the replication means over ``sqrt(R)``.
    Returns:
        :class:`ControlVariateError`; all NaN, with the reason, when fewer than :data:`MIN_PAIRS` finite
        pairs or 2 simulated values remain, the control does not vary, or ``ŷ_cv`` is not positive.
    Raises:
        ValueError: ``observed_s`` and ``control_s`` differ in length, ``confidence`` is not in (0, 1) or
            ``n_resamples < 2``.
    """
    y, c, e, why = _checked_inputs(observed_s, control_s, simulated_s, confidence, n_resamples)
    if why:
        return ControlVariateError.missing(why)
    value, beta, y_cv = _estimate(y, c, float(e.mean()))
    if not y_cv > 0:
        return ControlVariateError.missing(f"the controlled mean is not positive ({y_cv:.3g} s)")
    rng = np.random.default_rng(seed)
    # the simulated mean's resampling law is normal (M is hundreds to thousands of iterations): its
    # standard error times a normal draw, instead of resampling M values B times
    se = (float(simulated_mean_se_s) if simulated_mean_se_s is not None and np.isfinite(simulated_mean_se_s)
          else float(e.std(ddof=1)) / np.sqrt(e.size))
    e_b = float(e.mean()) + rng.standard_normal(int(n_resamples)) * se
    boot = np.empty(int(n_resamples))
    length = _block_length(block, y.size)
    for start in range(0, boot.size, _CHUNK):  # chunks of resamples bound the (chunk, N) arrays
        stop = min(start + _CHUNK, boot.size)
        i = _circular_blocks(rng, stop - start, y.size, length)
        yb, cb = y[i], c[i]
        my, mc = yb.mean(axis=1), cb.mean(axis=1)
        var_c = ((cb - mc[:, None]) ** 2).sum(axis=1)
        cov = ((yb - my[:, None]) * (cb - mc[:, None])).sum(axis=1)
        beta_b = np.divide(cov, var_c, out=np.zeros_like(cov), where=var_c > 0)
        y_cv_b = my - beta_b * (mc - e_b[start:stop])
        boot[start:stop] = np.where(y_cv_b > 0, e_b[start:stop] / np.where(y_cv_b > 0, y_cv_b, 1.0) - 1.0, np.nan)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.nanquantile(boot, [alpha, 1.0 - alpha])
    rho = float(np.corrcoef(y, c)[0, 1]) if np.std(y) > _FLAT * np.mean(np.abs(y)) else float("nan")
    return ControlVariateError(value=float(value), lo=float(lo), hi=float(hi), beta=beta, rho=rho,
                               observed_mean_s=y_cv)


@dataclass(frozen=True)
class QuantileControlVariateError:
    """A quantile's error in expectation (:func:`control_variate_quantile_error`).

    Attributes:
        value: ``ξ_f / ξ̂_cv − 1`` (dimensionless); NaN when it could not be computed (``reason`` says why).
        lo, hi: its circular-block bootstrap percentile interval.
        beta: the control coefficient, the paired iterations' slope ``cov(y, C) / var(C)``.
        observed_quantile_s: ``ξ̂_cv``, the run's quantile with the draws' luck taken out, seconds.
        reason: why there is none (empty when ``value`` was computed).
        asked: as :class:`ControlVariateError` (False when the options chose none).
    """

    value: float
    lo: float
    hi: float
    beta: float
    observed_quantile_s: float
    reason: str = ""
    asked: bool = True

    @staticmethod
    def missing(reason: str, *, asked: bool = True) -> "QuantileControlVariateError":
        """All NaN, with why (``asked=False`` when the options chose none)."""
        nan = float("nan")
        return QuantileControlVariateError(nan, nan, nan, nan, nan, reason, asked)

    @property
    def failed(self) -> bool:
        """Asked for and not computed (``reason`` says why)."""
        return self.asked and bool(self.reason)

    def as_row(self, name: str = "p95") -> dict:
        """``validation.csv`` columns ``err_<name>_cv``, ``err_<name>_cv_lo``, ``err_<name>_cv_hi``,
        ``cv_<name>_beta``, ``obs_<name>_cv_s`` and ``cv_<name>_note`` (why there is none)."""
        return {f"err_{name}_cv": self.value, f"err_{name}_cv_lo": self.lo, f"err_{name}_cv_hi": self.hi,
                f"cv_{name}_beta": self.beta, f"obs_{name}_cv_s": self.observed_quantile_s,
                f"cv_{name}_note": self.reason}


def control_variate_quantile_error(observed_s, control_s, simulated_s, q: float = 0.95, *,
                                   confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0,
                                   block: int = BLOCK_ITERATIONS) -> QuantileControlVariateError:
    """A quantile's error in expectation: the luck of the run's straggler draws taken out of the run's
    ``q``-quantile with the same control as the mean's (the run's draws replayed through the
    prediction's calibration).

    With ``Q_y`` and ``Q_C`` the ``q``-quantiles of the run's iteration times and of their replay (the same
    draws) and ``ξ_f`` the prediction's (fresh draws, the same model as the replay), the control-variate
    estimator of the run's quantile is

        ξ̂_cv = Q_y − β (Q_C − ξ_f),    β = cov(y, C) / var(C)  (the paired iterations' regression slope)

    (a control variate on a quantile estimator: Hsu & Nelson, "Control variates for quantile
    estimation", Management Science 36(7), 1990); the error is ``ξ_f / ξ̂_cv − 1``. Where the run's draws
    put its p95 – with bimodal stragglers, on which side of the cliff between iterations with and without
    an uncovered 1 s delay – its replay's p95 falls likewise; ``Q_C − ξ_f`` is that luck in the model's
    seconds and ``β`` turns it into the run's. ``β`` is the per-iteration slope, not the covariance of
    the two sample quantiles: a run that drew too few slow iterations to reach the cliff has no resample
    that crosses it, and the quantiles' covariance would then see only the noise within one mode.
    The slope assumes the run's times respond to the draws along one line through both modes; when
    the model's cliff is misplaced the estimate reflects that, which is what it scores. The sample
    quantiles' ``O(1/N)`` bias cancels between ``Q_y`` and ``β·Q_C`` when ``β ≈ 1``. As with the mean, it
    scores the model's quantile, not on which side of a cliff the prediction's own few fresh replications
    happened to put theirs (``ξ_f`` enters both the estimate and the ratio). Quantiles are numpy's
    default (linear interpolation), as in the raw p95 error.

    Args:
        observed_s: ``(N,)`` the run's iteration times after warm-up, seconds.
        control_s: ``(N,)`` the replayed iteration times aligned with ``observed_s``, seconds.
        simulated_s: ``(M,)`` the prediction's iteration times, seconds.
        q: the quantile, in (0, 1).
        confidence, n_resamples, seed, block: as :func:`control_variate_error` (circular blocks of
            ``(y_i, C_i)`` pairs with ``β`` refitted in each; the simulated sample, its replications
            one after another, resampled in circular blocks of the same length, as its iterations are
            autocorrelated with ``workload.speed_variation``).
    Returns:
        :class:`QuantileControlVariateError`; NaN with the reason when fewer than :data:`MIN_PAIRS` pairs
        or 2 simulated values remain, the control does not vary, or ``ξ̂_cv`` is not positive.
    Raises:
        ValueError: ``observed_s`` and ``control_s`` differ in length, ``q`` or ``confidence`` is not in
            (0, 1), or ``n_resamples < 2``.
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    y, c, e, why = _checked_inputs(observed_s, control_s, simulated_s, confidence, n_resamples)
    if why:
        return QuantileControlVariateError.missing(why)
    xi_f = float(np.quantile(e, q))
    beta = _estimate(y, c, float(e.mean()))[1]
    xi_y = float(np.quantile(y, q)) - beta * (float(np.quantile(c, q)) - xi_f)
    if not xi_y > 0:
        return QuantileControlVariateError.missing(f"the controlled quantile is not positive ({xi_y:.3g} s)")
    rng = np.random.default_rng(seed)
    boot = np.empty(int(n_resamples))
    length = _block_length(block, y.size)
    chunk = max(1, min(_CHUNK, int(4e6 // max(e.size, 1))))
    for start in range(0, boot.size, chunk):
        stop = min(start + chunk, boot.size)
        i = _circular_blocks(rng, stop - start, y.size, length)
        yb, cb = y[i], c[i]
        mc = cb.mean(axis=1)
        var_c = ((cb - mc[:, None]) ** 2).sum(axis=1)
        cov = ((yb - yb.mean(axis=1)[:, None]) * (cb - mc[:, None])).sum(axis=1)
        beta_b = np.divide(cov, var_c, out=np.zeros_like(cov), where=var_c > 0)
        xi_b = np.quantile(e[_circular_blocks(rng, stop - start, e.size, _block_length(block, e.size))],
                           q, axis=1)
        est = np.quantile(yb, q, axis=1) - beta_b * (np.quantile(cb, q, axis=1) - xi_b)
        boot[start:stop] = np.where(est > 0, xi_b / np.where(est > 0, est, 1.0) - 1.0, np.nan)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.nanquantile(boot, [alpha, 1.0 - alpha])
    return QuantileControlVariateError(value=xi_f / xi_y - 1.0, lo=float(lo), hi=float(hi), beta=beta,
                                       observed_quantile_s=xi_y)


__all__ = ["BLOCK_ITERATIONS", "MIN_PAIRS", "ControlVariateError", "QuantileControlVariateError",
           "control_variate_error", "control_variate_quantile_error"]
