"""Decompose a measured time grid into what the schemes can act on, and write it as a scenario.

Model (times in seconds; ``T[t, w]`` worker ``w``'s time at iteration ``t`` with load ``d`` partitions)::

    T[t, w] = d · c · scale[w] · (slowdown if slow[t, w] else 1) + D[t, w]

* ``c · scale[w]`` – per-worker base speed (persistent heterogeneity): ``base[w]`` is the worker's
  smallest time over its normal-regime iterations, ``c = min_w base[w] / d`` the fastest worker's
  per-partition compute, ``scale[w] = base[w] / min base`` (scenario ``workload.compute`` and
  ``stragglers.worker_scale``). This part is **load-proportional**: a scheme giving a worker ``d``
  partitions multiplies it by ``d``.
* ``D`` – the **load-independent** delay, the excess ``T − base[w]`` over the normal-regime iterations,
  pooled over workers and fitted by :mod:`gcsim.fit.families` (scenario ``stragglers.delay``). When
  more than ``2/T`` of the excesses are exactly 0 (held or rounded values) the delay is a mixture of
  an atom at 0 with that weight and the fitted family.
* the **regime** – :mod:`gcsim.fit.regime`; when present its ``p_enter``/``p_leave`` and
  ``slowdown = median over slow iterations of (T − median D) / base[w]`` go to ``stragglers.persistent``.
* a **shared speed** – when the workers' times move together from iteration to iteration (an
  iteration effect in ``log T``, F-test p < :data:`SHARED_P`), a factor ``f_t`` common to every worker
  of iteration ``t``: ``log T[t, w] = mu_w + a_t + e[t, w]`` with ``a_t`` a stationary AR(1) (a one-way
  random-effects decomposition, Searle, Casella & McCulloch, Variance Components, 1992, §3.5, as
  :mod:`gcsim.compare.speed_variation` does for CPU clocks). The times are divided by the shrunken
  estimate ``f_t = exp(λ_t (m_t − mean m))`` (``λ_t = sd_a² / (sd_a² + sd_e²/k_t)``, the best linear
  unbiased predictor) before the rest is fitted, and ``sd_a``, ``lag1`` go to
  ``workload.speed_variation``, which the simulator applies to the compute. Without it the model draws
  every worker independently and overstates the slowest worker of an iteration (a review,
  2026-12-05: Alibaba PAI job 3, +8 % on uncoded's mean, +20 % on its p95).

A trace measured at one load cannot tell a load-proportional tail from a load-independent one; this
decomposition assumes the base is load-proportional and the excess is not (the case where gradient
coding can pay off; Lee et al., IEEE Trans. Inf. Theory 2018, and the field notes). The scenario's
comments say so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import yaml

from gcsim.fit.families import FAMILIES, FamilyFit, fit_all
from gcsim.fit.regime import RegimeFit, fit_regime
from gcsim.fit.traceio import Trace


@dataclass
class FitResult:
    """Everything :func:`fit_trace` found.

    Attributes:
        trace: the trace read.
        load: partitions per worker-iteration in the trace (1 for CSV).
        base: float64 ``(W,)`` per-worker base seconds.
        compute_s: per-partition compute seconds of the fastest worker (``c``).
        worker_scale: float64 ``(W,)`` ``base / min(base)``.
        regime: the regime fit; ``slowdown`` its slowdown (None when not present).
        delays: float64: pooled excesses over the base (normal-regime iterations), zeros included.
        zero_fraction: fraction of ``delays`` equal to 0; ``atom`` whether the spec has an atom at 0.
        fits: family fits to the positive delays, best AIC first.
        delay_spec: the scenario's ``stragglers.delay`` mapping.
        scenario_text: the commented scenario YAML.
        notes: what was trimmed, assumed or found wanting, one sentence each.
        shared: the speed shared by the workers of an iteration (:class:`SharedSpeed`), or None when
            not significant; ``base``, ``delays`` and the fits are then of the times divided by it.
    """

    trace: Trace
    load: int
    base: np.ndarray
    compute_s: float
    worker_scale: np.ndarray
    regime: RegimeFit
    slowdown: float | None
    delays: np.ndarray
    zero_fraction: float
    atom: bool
    fits: list[FamilyFit]
    delay_spec: dict
    scenario_text: str = ""
    notes: list[str] = field(default_factory=list)
    shared: "SharedSpeed | None" = None

    @property
    def best(self) -> FamilyFit:
        return self.fits[0]


#: an iteration effect in log time is modelled (workload.speed_variation) when its F-test p is below this
SHARED_P = 1e-3
#: the largest lag-1 autocorrelation written (speed_variation.lag1 must stay below 1)
SHARED_MAX_LAG1 = 0.95


@dataclass(frozen=True)
class SharedSpeed:
    """The factor shared by every worker of an iteration (module docstring).

    Attributes:
        sd: stationary sd of ``a_t`` (log scale). lag1: its lag-1 autocorrelation (per trace row),
        clipped to ``[0, SHARED_MAX_LAG1]``. sd_within: sd of ``e`` (log scale). p: the F-test's p-value.
        factor: float64 ``(T,)`` the shrunken ``f_t`` the times were divided by.
    """

    sd: float
    lag1: float
    sd_within: float
    p: float
    factor: np.ndarray


def shared_speed(x: np.ndarray, normal: np.ndarray) -> SharedSpeed | None:
    """Estimate the iteration effect of ``log x`` over the ``normal`` cells (module docstring).

    Args:
        x: float64 ``(T, W)`` times, seconds, > 0. normal: bool ``(T, W)``, the cells to estimate from.
    Returns:
        :class:`SharedSpeed`, or None when the effect is not significant (p >= :data:`SHARED_P`), its
        variance estimate is not positive, or fewer than 10 iterations have two normal cells.
    """
    from scipy import stats

    L = np.log(x)
    k_all = normal.sum(axis=1)
    mu = np.array([L[normal[:, w], w].mean() if normal[:, w].any() else 0.0 for w in range(x.shape[1])])
    Lc = np.where(normal, L - mu[None, :], np.nan)
    use = k_all >= 2
    if use.sum() < 10:
        return None
    k = k_all[use].astype(float)
    m = np.nanmean(Lc[use], axis=1)
    within = float(np.nansum((Lc[use] - m[:, None]) ** 2) / (k - 1).sum())
    between = float(m.var(ddof=1))
    sd_a2 = between - within * float(np.mean(1.0 / k))
    if within <= 0 or sd_a2 <= 0:
        return None
    p = float(stats.f.sf(between / (within * float(np.mean(1.0 / k))), use.sum() - 1, (k - 1).sum()))
    if p >= SHARED_P:
        return None
    mc = m - m.mean()
    lag1 = float(np.clip(np.mean(mc[:-1] * mc[1:]) / sd_a2, 0.0, SHARED_MAX_LAG1)) if len(mc) > 2 else 0.0
    lam = sd_a2 / (sd_a2 + within / k)
    factor = np.ones(x.shape[0])
    factor[use] = np.exp(lam * mc)
    return SharedSpeed(sd=float(np.sqrt(sd_a2)), lag1=lag1, sd_within=float(np.sqrt(within)), p=p, factor=factor)


def _r(v: float) -> float:
    return float(f"{float(v):.6g}")


def fit_trace(trace: Trace, *, families=FAMILIES, slow_threshold: float = 1.5, name: str | None = None) -> FitResult:
    """Fit the decomposition of the module docstring to ``trace`` and build the scenario text.

    Raises:
        RunDirError: a trace whose loads vary between worker-iterations, or with fewer than 10 positive
            excesses to fit (e.g. constant times).
    """
    from gcsim.errors import RunDirError

    x = trace.times
    T = x.shape[0]
    if trace.loads is not None and len(np.unique(trace.loads)) > 1:
        raise RunDirError(f"{trace.path}: column 'n_partitions': expected one load for every worker-iteration "
                          f"(read one scheme), got {sorted(np.unique(trace.loads).tolist())}")
    load = int(trace.loads.flat[0]) if trace.loads is not None else 1
    regime = fit_regime(x, slow_threshold)
    shared = shared_speed(x, ~regime.slow if regime.present else np.ones_like(regime.slow))
    if shared is not None:  # the shared factor out: the rest is fitted on what each worker does alone
        x = x / shared.factor[:, None]
        regime = fit_regime(x, slow_threshold)
    normal = ~regime.slow if regime.present else np.ones_like(regime.slow)
    base = np.array([x[normal[:, w], w].min() if normal[:, w].any() else x[:, w].min() for w in range(x.shape[1])])
    excess = (x - base[None, :])[normal]
    scale_tol = 1e-9 * max(float(base.max()), 1e-12)
    zeros = excess <= scale_tol
    zero_fraction = float(zeros.mean())
    positive = excess[~zeros]
    if len(positive) < 10:
        raise RunDirError(f"{trace.path}: durations: expected times that vary (at least 10 above their worker's "
                          f"minimum), got {len(positive)}")
    fits = fit_all(positive, families)
    atom = zero_fraction > 2.0 / T
    spec = fits[0].spec
    if atom:
        spec = {"dist": "mixture", "components": [
            {"weight": _r(zero_fraction), "spec": {"dist": "constant", "value": 0.0}},
            {"weight": _r(1.0 - _r(zero_fraction)), "spec": spec}]}
    slowdown = None
    if regime.present:
        med_d = float(np.median(excess))
        rows, cols = np.nonzero(regime.slow)
        slowdown = max(1.0, float(np.median((x[rows, cols] - med_d) / base[cols])))
    c = float(base.min()) / load
    notes = list(trace.notes) + trace_notes(trace)
    poor = poor_fit_note(fits[0], positive)
    if poor is not None:
        notes.append(poor)
    res = FitResult(trace=trace, load=load, base=base, compute_s=c, worker_scale=base / base.min(), regime=regime,
                    slowdown=slowdown, delays=excess, zero_fraction=zero_fraction, atom=atom, fits=fits,
                    delay_spec=spec, notes=notes, shared=shared)
    res.scenario_text = scenario_yaml(res, name)
    return res


#: a note when more than this fraction of the times repeat their worker's previous value
REPEATED_NOTE_FRACTION = 0.2
#: a note when the median time is above this many seconds (a unit that was not given)
LONG_MEDIAN_S = 100.0


def trace_notes(trace: Trace) -> list[str]:
    """What the trace itself makes doubtful, one sentence each: times that repeat their worker's
    previous value (held or smoothed samples, not independent measurements: the AIC margins and KS
    p-values below then overstate the evidence), and a median time so long that the unit was likely
    not seconds (``--unit-s``)."""
    x = np.asarray(trace.times, dtype=float)
    notes = []
    repeated = float(np.mean(x[1:] == x[:-1])) if x.shape[0] > 1 else 0.0
    if repeated > REPEATED_NOTE_FRACTION:
        notes.append(f"{repeated:.0%} of the times repeat their worker's previous value (held or smoothed samples): "
                     f"they are fitted as independent, so the AIC margins and KS p-values overstate the evidence")
    median = float(np.median(x))
    if median > LONG_MEDIAN_S:
        notes.append(f"the median time is {median:.4g} s per worker-iteration ({trace.unit_s:g} s per trace unit): "
                     f"if the trace is in milliseconds or normalised, give --unit-s (with no network in the scenario "
                     f"the ranking does not depend on it, but added gradient_bytes and a network would)")
    return notes


#: the best family "fits poorly" below this KS p-value ...
POOR_FIT_KS_P = 1e-3
#: ... or when its 99.9th percentile is more than this many times the largest delay measured
POOR_FIT_TAIL_RATIO = 3.0


def poor_fit_note(best: FamilyFit, delays: np.ndarray) -> str | None:
    """A note when even the best family (lowest AIC) does not describe the delays: a KS p-value below
    :data:`POOR_FIT_KS_P`, or a 99.9th percentile beyond :data:`POOR_FIT_TAIL_RATIO` × the largest delay
    measured (a tail the data never showed, which a simulation then draws: e.g. a wide lognormal
    component fitted to delays that are a fixed 1 s with probability 0.1). None when the fit holds.

    Args:
        best: the chosen fit. delays: ``(N,)`` the positive delays it was fitted to, seconds.
    """
    from gcsim.fit.families import frozen

    p999 = float(frozen(best).ppf(0.999))
    largest = float(np.max(delays))
    bad_ks, bad_tail = best.ks_p < POOR_FIT_KS_P, p999 > POOR_FIT_TAIL_RATIO * largest
    if not (bad_ks or bad_tail):
        return None
    why = []
    if bad_ks:
        why.append(f"KS D = {best.ks_d:.3f}, p = {best.ks_p:.1e}")
    if bad_tail:
        why.append(f"its 99.9th percentile, {p999:.3g} s, is {p999 / largest:.0f} x the largest delay measured "
                   f"({largest:.3g} s)")
    return (f"no candidate family describes these delays well: the best, {best.family}, fits poorly ("
            + "; ".join(why) + "). Look at qq.png before trusting the simulated tail; a scenario with "
            "stragglers.replay (the trace's own delays) or a hand-written delay spec (e.g. {dist: bimodal, p, "
            "delay} for fixed injected delays) may describe it better")


def _flow(data) -> str:
    return yaml.safe_dump(data, default_flow_style=True, width=10_000, sort_keys=False).strip()


def scenario_name(path: str) -> str:
    """A scenario name from a trace path: ``fit-<stem>`` with characters outside ``[A-Za-z0-9_.-]`` as '_',
    cut to the scenario name's limit (:data:`gcsim.scenario.MAX_NAME_LENGTH`)."""
    from pathlib import Path

    from gcsim.scenario import MAX_NAME_LENGTH
    stem = Path(path.rstrip("/")).name.rsplit(".csv", 1)[0] or "trace"
    return ("fit-" + re.sub(r"[^A-Za-z0-9_.-]", "_", stem))[:MAX_NAME_LENGTH]


def scenario_yaml(res: FitResult, name: str | None = None) -> str:
    """The fitted scenario as YAML text, each fitted field commented with what it was fitted from.

    The text loads with :func:`gcsim.scenario.load_scenario` (checked by :func:`fit_trace`'s callers and
    the tests). Communication is not in a trace: ``gradient_bytes: 0`` (set it to your model's size).
    """
    tr, b = res.trace, res.best
    W, T = tr.n_workers, tr.n_iterations
    unit = (f"seconds ({tr.unit_s:g} s per trace unit)" if tr.loads is None
            else "seconds")
    others = ", ".join(f"{f.family} {f.aic - b.aic:+.1f}" for f in res.fits[1:]) or "none: --families gave one"
    lines = [
        f"# Fitted by `gcsim fit` from {tr.path} ({tr.source}): {T} iterations x {W} workers, times in {unit}.",
        "# Model: time = load x compute x worker_scale x (persistent slowdown if slow) + delay.",
        "# Assumed (one load in the trace cannot tell): the per-worker base scales with the load, the excess "
        "over it does not.",
    ]
    lines += [f"# Note: {n}" for n in res.notes]
    lines += [
        f"name: {name or scenario_name(tr.path)}",
        f"n_workers: {W}          # workers in the trace",
        f"iterations: {T}        # complete iterations in the trace",
        "seed: 0",
        "schemes: [{name: uncoded}]   # `gcsim advise` searches every scheme; list yours to simulate them",
        "workload:",
        "  gradient_bytes: 0.0   # not in the trace: set your gradient's size (bytes) and network: to add "
        "communication",
        f"  # per-partition compute = the fastest worker's smallest normal-regime time / load {res.load}"
        + (" (times divided by the shared speed factor first)" if res.shared is not None else ""),
        f"  compute: {_flow({'dist': 'constant', 'value': _r(res.compute_s)})}",
    ]
    sh = res.shared
    if sh is not None:
        lines += [
            f"  # speed_variation: the workers' times move together from iteration to iteration: a factor shared by "
            f"every worker of an iteration, sd {sh.sd:.3g} on the log scale (each worker's own part {sh.sd_within:.3g}), "
            f"lag-1 autocorrelation {sh.lag1:.3g} between trace rows (F-test p = {sh.p:.1e}); it multiplies the compute",
            "  speed_variation: " + _flow({"sd": _r(sh.sd), "lag1": _r(sh.lag1)}),
        ]
    else:
        lines.append("  # no speed shared by the workers of an iteration (its F-test was not significant)")
    lines += [
        "stragglers:",
        f"  # delay: excess of each time over its worker's smallest normal-regime time, pooled ({len(res.delays)} "
        f"values); family {b.family} chosen by AIC (others: {others}); KS D = {b.ks_d:.3f}, p = {b.ks_p:.2g}",
    ]
    if res.atom:
        lines.append(f"  # {res.zero_fraction:.1%} of the excesses are exactly 0 (held/rounded values): an atom at 0")
    lines.append(f"  delay: {_flow(res.delay_spec)}")
    rg = res.regime
    if res.slowdown is not None:
        lines.append(f"  # persistent: slow = time > {rg.threshold:g} x the worker's median; {rg.reason}; "
                     f"slowdown = median (time - median delay) / base over slow iterations")
        lines.append("  persistent: " + _flow({"p_enter": _r(rg.p_enter), "p_leave": _r(rg.p_leave),
                                               "slowdown": _r(res.slowdown)}))
    else:
        lines.append(f"  # no persistent regime: {rg.reason}")
        lines.append("  persistent: null")
    lines.append("  # worker_scale: each worker's base / the fastest worker's base (persistent heterogeneity)")
    lines.append("  worker_scale: " + _flow([_r(v) for v in res.worker_scale]))
    lines.append("policy: cancel")
    return "\n".join(lines) + "\n"
