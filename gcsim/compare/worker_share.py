"""How many cores the workers actually got while they computed, and a background fitted to it.

Why (docs/validation/README.md, findings 7 and 11): the CPU other processes use while the master
waits (``other_cpu_wait_s``) is not what they take *from the workers*. Part of it is elastic: Ray's
and the master's threads, and other sessions' jobs (the kernel's autogroup shares CPU between
sessions first), run on the cycles the niced workers leave while they sleep in injected delays and
yield them while the workers compute. Charging the whole measured rate as a priority load (what
:class:`gcsim.scenario.Background` ``wait`` means) gives computing workers too little CPU: on the
noisy-neighbour protocol, uncoded measured 1.53 cores of other-process CPU while the master waited,
but its computing workers got 0.60 cores, the coded schemes 0.79-0.93.

The workers' own clocks measure what they got. :func:`worker_cores` inverts the simulator's
processor-sharing model on a trace: the capacity ``C`` such that every computing worker-row,
progressing at ``min(1, C / A(t))`` while ``A(t)`` workers are busy (Kleinrock, J. ACM 14:242, 1967;
:mod:`gcsim.compare.contention`), would have received exactly the CPU-seconds its
``compute_cpu_s`` says. :func:`fit_steady_background` then picks the steady ``wait`` background for
which a simulation of the calibration run (its own straggler draws) gives the same ``C`` with the
same estimator, so the estimator's own bias (busy intervals it cannot see, per-call work) cancels:
indirect inference (Gouriéroux, Monfort & Renault, J. Appl. Econometrics 8:S85, 1993), one
parameter, by Brent's method (``scipy.optimize.brentq``), searched between none and the measured
other-process CPU (what other processes took from the workers cannot exceed what they used; finding 18). Everything else of the calibration (per-partition work, per-call work, the
per-byte burst of Ray moving replies) is kept as measured.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from gcsim.compare.contention import ContentionProfile, busy_intervals

#: tolerance (cores) of the fitted steady background (:func:`fit_steady_background`)
FIT_XTOL_CORES = 1e-3


def worker_cores(workers: pd.DataFrame, max_cores: float, *, min_iteration: int = 0) -> float | None:
    """Cores the run's workers effectively shared while they computed (see the module docstring).

    Args:
        workers: EVERY worker row of one scheme of one run (workers.csv columns; all iterations, the
            busy count ``A(t)`` involves all of them).
        max_cores: the machine's cores (upper end of the search).
        min_iteration: rows of earlier iterations (warm-up) count in ``A(t)`` but not in the match.
    Returns:
        ``C`` in cores, in ``(0, max_cores]``: ``max_cores`` when the workers got at least that
        (uncontended); None when the trace has no worker CPU clocks (``compute_cpu_s``) on rows
        that computed.
    Raises:
        ConfigError: ``max_cores`` not a number > 0 (field ``cores``).
    """
    if "compute_cpu_s" not in workers:
        return None
    iv = busy_intervals(workers)
    cpu = pd.to_numeric(workers["compute_cpu_s"], errors="coerce").to_numpy(float)
    it = pd.to_numeric(workers["iteration"], errors="coerce").to_numpy(float)
    ok = (np.isfinite(cpu) & (cpu > 0) & np.isfinite(iv.part_start_s) & (iv.part_end_s > iv.part_start_s)
          & (it >= min_iteration))
    if not ok.any():
        return None
    target = float(cpu[ok].sum())

    def received(c: float) -> float:
        prof = ContentionProfile(iv, c)
        return float(prof.cpu_seconds(iv.part_start_s[ok], iv.part_end_s[ok], iv.part_weight[ok]).sum())

    hi = float(max_cores)
    if received(hi) <= target * (1 + 1e-9):  # got all it could: uncontended (float rounding aside)
        return hi
    lo = 1e-3 * hi
    if received(lo) >= target:
        return lo
    # received(c) is continuous and non-decreasing in c: one root on the bracket
    return float(brentq(lambda c: received(c) - target, lo, hi, xtol=1e-4, maxiter=60))


@dataclasses.dataclass(frozen=True)
class BackgroundFit:
    """Result of :func:`fit_steady_background`.

    Attributes:
        observed_worker_cores: :func:`worker_cores` of the calibration run.
        simulated_worker_cores: the same of its simulation with the fitted background.
        measured_wait_cores: the steady wait background as measured (other-process CPU while waiting).
        fitted_wait_cores: the fitted one (cores), ``<=`` what the search allowed.
        capped: the fit stopped at its cap (the measured other-process CPU): the simulated workers still
            get more than ``observed_worker_cores``.
    """

    observed_worker_cores: float
    simulated_worker_cores: float
    measured_wait_cores: float
    fitted_wait_cores: float
    capped: bool = False


def fit_steady_background(run, scheme: str, calibration, *, warmup: int = 0,
                          simulate: Callable | None = None,
                          cap_cores: float | None = None) -> tuple[object, BackgroundFit | None]:
    """Refit ``calibration``'s steady ``wait`` background so that the simulated workers of ``run``'s
    ``scheme`` get the cores its measured workers got (module docstring).

    Args:
        run: the calibration run (:class:`gcsim.compare.rundir.RunDir`), a real run with CPU clocks.
        scheme: its scheme label.
        calibration: :class:`gcsim.compare.calibrate.Calibration` from that run, with ``cores`` and a
            measured background.
        warmup: iterations not matched (they still count in the busy profile).
        simulate: ``simulate(scenario, iterations=..., progress=False)`` (default the SimPy engine).
        cap_cores: the most the fit may give (default: ``calibration``'s measured background; a pooled
            calibration passes each run's own).
    Returns:
        ``(calibration, fit)``: the calibration with ``background_wait_cores`` replaced (and a note),
        and the :class:`BackgroundFit`; the calibration unchanged and None when there is nothing to
        fit (no cores, no measured background, no CPU clocks).
    Raises:
        RunDirError: the run's config holds values the scenario refuses.
    """
    from gcsim.compare.scenario_build import build_scenario

    if calibration.cores is None or calibration.background_wait_cores is None:
        return calibration, None
    observed = worker_cores(run.workers_of(scheme), calibration.cores, min_iteration=warmup)
    if observed is None:
        return calibration, None
    if simulate is None:
        from gcsim.sim.engine import simulate
    n_it = int(run.iterations_of(scheme)["iteration"].max()) + 1

    def sim_cores(b: float) -> float:
        cal = dataclasses.replace(calibration, background_wait_cores=float(b))
        res = simulate(build_scenario(run, scheme, cal), iterations=n_it, progress=False)
        got = worker_cores(res.workers, calibration.cores, min_iteration=warmup)
        return float(calibration.cores if got is None else got)

    measured = float(calibration.background_wait_cores)
    # what other processes took from the workers cannot exceed what they used: a fit above the measured
    # CPU would charge to the background a slowdown with another cause (docs/validation/README.md
    # finding 18: over five quiet exponential passes the uncapped fit over-predicted the CPU-bound schemes
    # from `uncoded` by up to 18 %, the measured background by up to 9 %)
    cap = measured if cap_cores is None else float(cap_cores)
    lo, hi = 0.0, min(float(calibration.cores), max(cap, 0.0))
    c_lo = sim_cores(lo)
    if c_lo <= observed or hi <= lo:  # even with no steady background the workers got no more: keep none
        best, c_best = lo, c_lo
    else:
        c_hi = sim_cores(hi)
        if c_hi >= observed:  # the workers got less than even the measured background leaves: keep it
            best, c_best = hi, c_hi
        else:  # simulated worker cores fall as the background grows: Brent's method on the bracket
            best = float(brentq(lambda b: sim_cores(b) - observed, lo, hi, xtol=FIT_XTOL_CORES, maxiter=40))
            c_best = sim_cores(best)
    capped = best >= hi and hi < float(calibration.cores)
    fit = BackgroundFit(observed, c_best, measured, best, capped)
    note = (f"steady background while waiting fitted to the workers' CPU: their clocks say they got "
            f"{observed:.3f} of {calibration.cores:g} cores while computing; the simulation gives "
            f"{c_best:.3f} with {best:.3f} cores of steady background (measured other-process CPU while "
            f"waiting: {measured:.3f} cores; "
            + ("the fit is capped there: other processes cannot take more than they used)" if capped
               else "the difference ran on cycles the workers left idle)"))
    cal = dataclasses.replace(calibration, background_wait_cores=best, notes=tuple(calibration.notes) + (note,),
                              background_fit=fit)
    return cal, fit


def fit_pooled_background(runs, calibration, *, warmup: int = 0, simulate: Callable | None = None,
                          scheme: str | None = None):
    """:func:`fit_steady_background` for a calibration pooled from several runs: each run is fitted
    with the pooled calibration (its first scheme, or ``scheme``) and the fitted steady rates are
    averaged (one run: that run's fit).

    Returns:
        the calibration with the (mean) fitted ``background_wait_cores`` and a note; unchanged when
        no run has anything to fit.
    Raises:
        RunDirError: a run's config holds values the scenario refuses.
    """
    runs = list(runs)
    if len(runs) == 1:
        caps = [None]
    else:  # each run's fit is capped at what other processes used in that run (not the pooled mean)
        from gcsim.compare.calibrate import calibrate

        caps = [calibrate(r, schemes={r.label: [scheme or r.schemes[0]]}, warmup=warmup, use_measured_cpu=True,
                          between_calls=calibration.between_calls).background_wait_cores for r in runs]
    fits = [fit_steady_background(r, scheme or r.schemes[0], calibration, warmup=warmup, simulate=simulate,
                                  cap_cores=cap) for r, cap in zip(runs, caps)]
    if len(fits) == 1:
        return fits[0][0]
    got = [f for _, f in fits if f is not None]
    if not got:
        return calibration
    mean = float(np.mean([f.fitted_wait_cores for f in got]))
    note = ("steady background fitted to the workers' CPU of each calibration run with the pooled calibration "
            "(run: workers' cores observed -> fitted background, measured other-process CPU while waiting: "
            + "; ".join(f"{r.label}: {f.observed_worker_cores:.3f} -> {f.fitted_wait_cores:.3f}, "
                        f"{f.measured_wait_cores:.3f}" for r, (_, f) in zip(runs, fits) if f is not None)
            + f" cores) and averaged: {mean:.3f} cores")
    return dataclasses.replace(calibration, background_wait_cores=mean, notes=tuple(calibration.notes) + (note,),
                               background_fit=None)  # one fit per run; the note gives them


__all__ = ["BackgroundFit", "FIT_XTOL_CORES", "fit_pooled_background", "fit_steady_background", "worker_cores"]
