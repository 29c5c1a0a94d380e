"""Search every registered scheme over every valid (s, m) for n workers and predict each with the
simulator, on common random numbers (one simulation of all candidates: the same keyed draws).

Candidates: for every name of :func:`gcsim.schemes.scheme_names`, every ``0 <= s <= max_s`` and
``1 <= m <= max_m`` that :func:`gcsim.schemes.make_scheme` accepts for ``n`` (uncoded: s = 0; a coded
scheme at s = 0, m = 1 is uncoded's plan and is left out).

Engine: the vectorised engine (:mod:`gcsim.sim.vector`, when present and it models the scenario:
policy cancel, no CPU sharing, non-overlapping iterations), else the SimPy engine
(:func:`gcsim.sim.engine.simulate`); both give the same times on the same draws.

Statistics per candidate (iteration times in seconds, ``I`` iterations):

* mean with a 95 % CI from 20 batch means (Student t, 19 d.o.f.; batch means keep the CI honest when
  persistent stragglers correlate successive iterations; Law & Kelton, Simulation Modeling and
  Analysis, §9.5.3);
* p95 / p99 with the distribution-free 95 % order-statistic CI (ranks from Binomial(I, q); Conover,
  Practical Nonparametric Statistics, §3.2);
* speedup = objective(uncoded) / objective(candidate).

Ranking: by the objective; exact schemes and approximate ones (which drop or delay part of the
gradient) are ranked separately.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gcsim.errors import ConfigError, SchemeError
from gcsim.scenario import Scenario, SchemeSpec

OBJECTIVES = ("mean", "p95", "p99")
#: what an approximate scheme gives up each iteration (by scheme name)
DROPS = {
    "ignore-stragglers": "drops the s slowest of n partial gradients (sum rescaled by n/(n-s))",
    "pgc-fr": "pipelined: 1 fresh + s stale partition gradients per worker, s stragglers dropped",
    "pgc-cr": "pipelined: 1 fresh + s stale partition gradients per worker, s stragglers dropped",
}
COLUMNS = ["n", "rank", "scheme", "s", "m", "exact", "computation_load", "communication_load",
           "mean_s", "mean_lo", "mean_hi", "p95_s", "p95_lo", "p95_hi", "p99_s", "p99_lo", "p99_hi",
           "speedup", "drops", "label"]


@dataclass
class Advice:
    """Outcome of :func:`advise` for one n.

    Attributes:
        n: workers.
        objective: ``mean``, ``p95`` or ``p99``.
        table: :data:`COLUMNS`, exact schemes first (ranked 1, 2, ...), then approximate (ranked apart).
        iterations: simulated iterations per candidate; engine: ``vector`` or ``simpy``.
        verdict: one or two sentences: the best exact choice and its speedup, or why no coded scheme
            beats uncoded.
        skipped: ``(scheme, s, m, reason)`` for combinations the schemes refused.
    """

    n: int
    objective: str
    table: pd.DataFrame
    iterations: int
    engine: str
    verdict: str
    skipped: list
    wall_s: float = 0.0

    @property
    def best(self) -> pd.Series:
        """The top exact row."""
        return self.table[self.table["exact"]].iloc[0]


def candidates(n: int, max_s: int, max_m: int, names=None) -> tuple[list[SchemeSpec], list]:
    """Every ``(scheme, s, m)`` the schemes accept for ``n`` (module docstring), as labelled specs
    ``<name>.s<s>.m<m>`` (``uncoded`` keeps its name), and the refused ones with the reason."""
    from gcsim.schemes import make_scheme, scheme_names
    specs, skipped = [], []
    for name in names or scheme_names():
        for s in range(0, min(max_s, n - 1) + 1):
            for m in range(1, max_m + 1):
                if s == 0 and m == 1 and name != "uncoded":
                    continue  # the same plan as uncoded
                try:
                    make_scheme(name, n, s, m, 0)
                except SchemeError as e:
                    field = (str(e).split(": ") + [""])[1]
                    if m == 1 or field != "m":  # m > 1 refused by a scheme without m: not worth listing
                        skipped.append((name, s, m, str(e)))
                    continue
                except MemoryError:
                    skipped.append((name, s, m, "out of memory"))
                    continue
                label = name if name == "uncoded" else f"{name}.s{s}.m{m}"
                specs.append(SchemeSpec(name=name, s=s, m=m, seed=0, label=label))
    return specs, skipped


def _simulate(sc: Scenario):
    """``(iterations DataFrame, loads, engine name)`` from the fastest engine that models ``sc``."""
    try:
        from gcsim.sim import vector
    except ImportError:
        vector = None
    if vector is not None and vector.unsupported_reason(sc) is None:
        try:
            r = vector.simulate_vector(sc, trace="none")
            return r.iterations, r.loads, "vector"
        except vector.NeedsSimPy:
            pass
    from gcsim.sim.engine import simulate
    r = simulate(sc)
    return r.iterations, r.loads, "simpy"


def _mean_ci(d: np.ndarray, batches: int = 20) -> tuple[float, float, float]:
    """Mean and its 95 % batch-means CI (module docstring)."""
    import scipy.stats as st
    k = min(batches, len(d))
    if k < 2:
        return float(d.mean()), float("nan"), float("nan")
    means = np.array([b.mean() for b in np.array_split(d, k)])
    half = float(st.t.ppf(0.975, k - 1) * means.std(ddof=1) / math.sqrt(k))
    m = float(d.mean())
    return m, m - half, m + half


def _quantile_ci(d: np.ndarray, q: float) -> tuple[float, float, float]:
    """np.quantile and the distribution-free 95 % order-statistic CI of the q-quantile."""
    import scipy.stats as st
    x = np.sort(d)
    n = len(x)
    lo = int(st.binom.ppf(0.025, n, q))
    hi = int(st.binom.ppf(0.975, n, q)) + 1
    return float(np.quantile(d, q)), float(x[max(lo - 1, 0)]), float(x[min(hi - 1, n - 1)])


def _why_not(sc: Scenario, table: pd.DataFrame, objective: str) -> str:
    """Why no coded exact scheme beats uncoded: what computation the cheapest coded option adds vs
    the tail uncoded waits for."""
    from gcsim.latency import build_distribution
    col = f"{objective}_s"
    unc = table[table["scheme"] == "uncoded"].iloc[0]
    coded = table[table["exact"] & (table["scheme"] != "uncoded")]
    c = build_distribution(sc.workload.compute).mean()
    ws = np.mean(sc.stragglers.worker_scale) if sc.stragglers.worker_scale else 1.0
    parts = [f"no coded scheme beats uncoded on the {objective} ({unc[col]:.4g} s)"]
    if len(coded):
        best = coded.iloc[0]
        extra = (best["computation_load"] - 1) * c * ws
        parts.append(f"the best coded option, {best['scheme']} s={best['s']} m={best['m']}, computes "
                     f"{best['computation_load']:g} partitions per worker: about {extra:.4g} s more compute per "
                     f"iteration, while uncoded's mean exceeds its median by only "
                     f"{unc['mean_s'] - unc.get('p50_s', unc['mean_s']):.4g} s (the straggler tail coding can cut)")
    st = sc.stragglers
    if st.delay is None and st.replay is None and (st.slowdown is not None or st.persistent is not None):
        parts.append("the stragglers here slow the computation down (slowdown/persistent multiply compute), so "
                     "their delay grows with the computation load: more load costs more than the tail saves")
    return "; ".join(parts) + "."


def advise(scenario: Scenario, *, n: int | None = None, objective: str = "mean", max_s: int | None = None,
           max_m: int = 4, iterations: int | None = None, seed: int | None = None, names=None) -> Advice:
    """Search and rank every scheme for ``n`` workers (module docstring).

    Args:
        scenario: a validated scenario (its ``schemes`` are replaced by the candidates).
        n: workers (default the scenario's ``n_workers``).
        objective: one of :data:`OBJECTIVES`.
        max_s: largest s tried (default ``n - 1``); max_m: largest m tried (>= 1).
        iterations, seed: override the scenario's.
        names: scheme names to search (default every registered one).
    Returns:
        :class:`Advice`.
    Raises:
        ConfigError: bad objective / n / max_s / max_m; ``n`` differing from the scenario's when its
            ``stragglers.worker_scale`` has one factor per worker; a replayed trace too small for ``n``
            with ``rule: error``; no candidate at all.
    """
    t0 = time.perf_counter()
    if objective not in OBJECTIVES:
        raise ConfigError("--objective", f"one of {', '.join(OBJECTIVES)}", objective)
    n = scenario.n_workers if n is None else int(n)
    if n < 1:
        raise ConfigError("--n", "an integer >= 1", n)
    if scenario.stragglers.worker_scale is not None and n != scenario.n_workers:
        raise ConfigError("--n", f"{scenario.n_workers} (the scenario's stragglers.worker_scale has that many "
                          f"factors)", n)
    if scenario.stragglers.replay is not None:
        from gcsim.replay import check_fits
        why = check_fits(scenario.stragglers.replay, n, iterations or scenario.iterations)
        if why is not None:
            raise ConfigError("stragglers.replay.rule", why, scenario.stragglers.replay.rule)
    max_s = n - 1 if max_s is None else int(max_s)
    if max_s < 0 or max_m < 1:
        raise ConfigError("--max-s/--max-m", "max_s >= 0 and max_m >= 1", (max_s, max_m))
    specs, skipped = candidates(n, max_s, max_m, names)
    if not any(sp.name == "uncoded" for sp in specs):
        specs.insert(0, SchemeSpec(name="uncoded", label="uncoded"))
    update = {"schemes": specs, "n_workers": n}
    if iterations is not None:
        update["iterations"] = int(iterations)
    if seed is not None:
        update["seed"] = int(seed)
    sc = scenario.model_copy(update=update)
    its, loads, engine = _simulate(sc)
    from gcsim.schemes import scheme_names
    order = {nm: i for i, nm in enumerate(scheme_names())}
    rows = []
    for sp in specs:
        d = its.loc[its["scheme"] == sp.key, "duration_s"].to_numpy(dtype=np.float64)
        info = loads[sp.key]
        mean, mlo, mhi = _mean_ci(d)
        p95, p95lo, p95hi = _quantile_ci(d, 0.95)
        p99, p99lo, p99hi = _quantile_ci(d, 0.99)
        rows.append({"n": n, "scheme": sp.name, "s": sp.s, "m": sp.m, "exact": bool(info["exact"]),
                     "computation_load": info["computation_load"], "communication_load": info["communication_load"],
                     "mean_s": mean, "mean_lo": mlo, "mean_hi": mhi, "p50_s": float(np.quantile(d, 0.5)),
                     "p95_s": p95, "p95_lo": p95lo, "p95_hi": p95hi, "p99_s": p99, "p99_lo": p99lo, "p99_hi": p99hi,
                     "drops": "" if info["exact"] else DROPS.get(sp.name, "approximate decoding"), "label": sp.key,
                     "_order": order.get(sp.name, 99)})
    df = pd.DataFrame(rows)
    col = f"{objective}_s"
    base = float(df.loc[df["scheme"] == "uncoded", col].iloc[0])
    df["speedup"] = base / df[col]
    df = df.sort_values(["exact", col, "computation_load", "communication_load", "_order", "s", "m"],
                        ascending=[False, True, True, True, True, True, True], kind="mergesort")
    df["rank"] = df.groupby("exact").cumcount() + 1
    table = df.reset_index(drop=True)
    exact = table[table["exact"]]
    best = exact.iloc[0]
    if best["scheme"] == "uncoded":
        verdict = _why_not(sc, table, objective)
    else:
        unc = table[table["scheme"] == "uncoded"].iloc[0]
        overlap = best[f"{objective}_hi"] >= unc[f"{objective}_lo"] if objective != "mean" else \
            best["mean_hi"] >= unc["mean_lo"]
        verdict = (f"best exact choice: {best['scheme']} s={best['s']} m={best['m']}, predicted {objective} "
                   f"{best[col]:.4g} s vs uncoded {unc[col]:.4g} s ({best['speedup']:.2f}x)"
                   + (" - but the CIs overlap: not clearly better than uncoded at this many iterations" if overlap
                      else "") + ".")
    approx = table[~table["exact"]]
    if len(approx) and approx.iloc[0][col] < best[col]:
        a = approx.iloc[0]
        verdict += (f" Faster but approximate: {a['scheme']} s={a['s']} ({a[col]:.4g} s; {a['drops']}).")
    return Advice(n=n, objective=objective, table=table[COLUMNS + ["p50_s"]], iterations=sc.iterations,
                  engine=engine, verdict=verdict, skipped=skipped, wall_s=time.perf_counter() - t0)
