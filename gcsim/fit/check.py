"""Does a fitted scenario reproduce the trace it came from? ``gcsim fit``'s self-check.

The model of :mod:`gcsim.fit.model` draws every worker's delay independently from one family fitted to
the excesses pooled over the workers, with at most a speed factor shared by the workers of an
iteration. A trace can break these assumptions: some workers straggle more than others (their delays
are not one pool), and the workers of an iteration can be slow together in ways one factor on the
compute does not capture. Either changes the order statistic a synchronous step waits for: with
n workers, ``uncoded``'s iteration time is the maximum of the n times. This module compares that
maximum in the trace with the same maximum simulated from the fitted scenario, and splits the gap into
three parts by resampling the trace itself (a bootstrap; Efron & Tibshirani, An Introduction to the
Bootstrap, 1993, ch. 6), each step dropping one more property of the trace:

* *the trace* — ``mean_t max_w T[t, w]``;
* *each worker's own times, independent* — column ``w`` resampled with replacement, independently per
  worker: drops the workers moving together;
* *pooled excesses, independent* — each worker's smallest time plus an excess drawn from every
  worker's excesses over theirs: drops which worker straggles (what the fitted scenario assumes);
* *the fitted scenario* — its family instead of the measured excesses: adds the family's own tail,
  and, where the fit found one, takes the speed the workers share back in (:func:`gcsim.fit.model.shared_speed`).

Units: seconds. The trace mean's 95 % interval is from batch means (10 batches of consecutive
iterations, Student's t on 9 degrees of freedom), so a slow stretch of iterations widens it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: |model mean / trace mean - 1| above this (and outside the trace mean's interval) is flagged
MEAN_TOLERANCE = 0.05
#: |model p95 / trace p95 - 1| above this is flagged
P95_TOLERANCE = 0.10
#: iterations simulated from the fitted scenario, and bootstrap iterations per resampling
SIMULATED_ITERATIONS = 20_000
#: batches for the trace mean's interval
BATCHES = 10


@dataclass(frozen=True)
class SelfCheck:
    """The fitted scenario's ``uncoded`` iteration time against the trace's own (seconds).

    Attributes:
        n_workers: workers (the maximum is over them).
        trace_mean_s, trace_mean_lo_s, trace_mean_hi_s: the trace's mean of ``max_w T[t, w]`` and its
            95 % interval (batch means).
        trace_p95_s: the trace's 95th percentile of it.
        model_mean_s, model_p95_s: the same from the fitted scenario, simulated.
        per_worker_mean_s: bootstrap, each worker's own times drawn independently.
        pooled_mean_s: bootstrap, each worker's base plus an excess drawn from the pool.
        shared_modelled: the fit modelled a speed shared by the workers of an iteration
            (``workload.speed_variation``, :func:`gcsim.fit.model.shared_speed`).
    """

    n_workers: int
    trace_mean_s: float
    trace_mean_lo_s: float
    trace_mean_hi_s: float
    trace_p95_s: float
    model_mean_s: float
    model_p95_s: float
    per_worker_mean_s: float
    pooled_mean_s: float
    shared_modelled: bool = False

    @property
    def err_mean(self) -> float:
        """Model mean over the trace's, minus 1."""
        return self.model_mean_s / self.trace_mean_s - 1.0

    @property
    def err_p95(self) -> float:
        """Model p95 over the trace's, minus 1."""
        return self.model_p95_s / self.trace_p95_s - 1.0

    @property
    def flagged(self) -> bool:
        """True when the mean is off by more than :data:`MEAN_TOLERANCE` and outside the trace mean's
        interval, or the p95 by more than :data:`P95_TOLERANCE`."""
        outside = not (self.trace_mean_lo_s <= self.model_mean_s <= self.trace_mean_hi_s)
        return (abs(self.err_mean) > MEAN_TOLERANCE and outside) or abs(self.err_p95) > P95_TOLERANCE

    def line(self) -> str:
        """One line: the fitted scenario's uncoded mean and p95 against the trace's."""
        return (f"self-check, uncoded (the slowest of {self.n_workers} workers per iteration): fitted scenario mean "
                f"{self.model_mean_s:.4g} s, p95 {self.model_p95_s:.4g} s; the trace's own mean "
                f"{self.trace_mean_s:.4g} s [95 % {self.trace_mean_lo_s:.4g}, {self.trace_mean_hi_s:.4g}], p95 "
                f"{self.trace_p95_s:.4g} s: {self.err_mean:+.1%} / {self.err_p95:+.1%}")

    def parts(self) -> str:
        """Where the mean's gap comes from (model − trace, seconds, in three parts)."""
        together = "modelled as a shared speed" if self.shared_modelled else "not modelled"
        last = "its shared speed and family" if self.shared_modelled else "the fitted family's shape"
        return (f"of the mean's gap {self.model_mean_s - self.trace_mean_s:+.4g} s: the workers moving together in "
                f"an iteration ({together}) {self.per_worker_mean_s - self.trace_mean_s:+.4g} s, pooling the "
                f"workers' delays (which worker straggles is lost) {self.pooled_mean_s - self.per_worker_mean_s:+.4g}"
                f" s, the fitted model against that pool ({last}) {self.model_mean_s - self.pooled_mean_s:+.4g} s")

    def warning(self) -> str | None:
        """A note for a flagged check: the gap's parts and what to do; None when not flagged."""
        if not self.flagged:
            return None
        return (f"the fitted scenario does not reproduce the trace's own uncoded iteration time "
                f"({self.err_mean:+.1%} mean, {self.err_p95:+.1%} p95); {self.parts()}. Predictions for other "
                f"schemes inherit this; at the trace's own n, replay the trace instead "
                f"(stragglers: {{replay: {{file: TRACE, unit_s: ..., apply: delay}}}} with workload.compute "
                f"{{dist: constant, value: 0}}; README, \"replay\")")

    def comment(self) -> str:
        """The check as ``# `` comment lines for the scenario file."""
        lines = [self.line()] + ([f"WARNING: {self.warning()}"] if self.flagged else [self.parts()])
        return "".join(f"# {x}\n" for x in lines)


def self_check(res, *, seed: int = 0, iterations: int = SIMULATED_ITERATIONS) -> SelfCheck:
    """Compare the fitted scenario of ``res`` (a :class:`gcsim.fit.model.FitResult`) with its trace.

    Args:
        res: the fit; its ``scenario_text`` is simulated with ``uncoded`` only.
        seed: seed of the simulation and of the bootstrap.
        iterations: simulated and bootstrap iterations.
    Returns:
        :class:`SelfCheck`.
    Raises:
        ConfigError: the fitted scenario does not validate (a bug: ``gcsim fit`` validates it first).
    """
    import yaml

    from gcsim.advise.search import mean_ci
    from gcsim.scenario import validate_scenario
    from gcsim.sim.vector import simulate_with

    x = np.asarray(res.trace.times, dtype=float)  # (T, W) seconds
    T, W = x.shape
    it_max = x.max(axis=1)
    _, lo, hi = mean_ci(it_max, BATCHES)
    data = yaml.safe_load(res.scenario_text)
    data.update({"iterations": int(iterations), "seed": int(seed), "schemes": [{"name": "uncoded"}]})
    sim = simulate_with(validate_scenario(data), "auto", trace="iterations")
    d = sim.iterations["duration_s"].to_numpy()
    rng = np.random.default_rng(seed)
    per_worker = np.stack([rng.choice(x[:, w], size=iterations) for w in range(W)], axis=1).max(axis=1)
    base = x.min(axis=0)  # the trace's own, so the bootstrap parts describe the trace, not the fit
    excess = (x - base[None, :]).ravel()
    pooled = (base[None, :] + rng.choice(excess, size=(iterations, W))).max(axis=1)
    return SelfCheck(n_workers=W, trace_mean_s=float(it_max.mean()), trace_mean_lo_s=lo, trace_mean_hi_s=hi,
                     trace_p95_s=float(np.quantile(it_max, 0.95)), model_mean_s=float(d.mean()),
                     model_p95_s=float(np.quantile(d, 0.95)), per_worker_mean_s=float(per_worker.mean()),
                     pooled_mean_s=float(pooled.mean()), shared_modelled=getattr(res, "shared", None) is not None)


def with_check_comment(scenario_text: str, check: SelfCheck) -> str:
    """``scenario_text`` with the check's comment lines put before its first field (``name:``)."""
    lines = scenario_text.splitlines(keepends=True)
    at = next((i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")), len(lines))
    return "".join(lines[:at]) + check.comment() + "".join(lines[at:])


__all__ = ["MEAN_TOLERANCE", "P95_TOLERANCE", "SelfCheck", "self_check", "with_check_comment"]
