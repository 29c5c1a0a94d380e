"""Search every registered scheme over every valid (s, m) for n workers and predict each with the
simulator, on common random numbers (every candidate on the same keyed draws).

Candidates: for every name of :func:`gcsim.schemes.scheme_names`, every ``0 <= s <= max_s`` and
``1 <= m <= max_m`` that :func:`gcsim.schemes.make_scheme` accepts for ``n`` (uncoded: s = 0; a coded
scheme at s = 0, m = 1 is uncoded's plan and is left out), found and grouped into timing classes (same
message plan and quorum: same times) by :mod:`gcsim.advise.candidates`, which also says which costly
constructions are left out unless ``thorough``.

Engine (:mod:`gcsim.advise.evaluate`): the vectorised engine (:mod:`gcsim.sim.vector`) whenever it models
the scenario (policy cancel, no CPU sharing, non-overlapping iterations), one run per timing class on one
set of draws; else the SimPy engine (:func:`gcsim.sim.engine.simulate`). Both give the same times on the
same draws; a candidate whose draws make iterations overlap is simulated by SimPy alone.

Decode checks (``decode_check``): an exact scheme whose quorum is not ``guaranteed`` (gc-cr, gc-mds, cce-cr,
cce-fr with sampled minors: a linear solve may refuse an ill-conditioned set and wait for one more arrival)
is first timed by its quorum, per iteration a lower bound on its time. ``"top"`` (default) then checks every
decode of the candidates among the first :data:`VERIFY_TOP` exact rows, re-ranks, and repeats until those
rows are all checked: the top rows, their order and the best choice are those of the fully checked search; a
row left unchecked is a lower bound (``decode_checked`` False, printed with ``>=``), equal to its checked
value unless a refusal occurred. ``"all"`` checks every row (one decode call per candidate and iteration:
minutes at n >= 64).

Statistics per candidate (iteration times in seconds, ``I`` iterations):

* mean with a 95 % CI from 20 batch means (Student t, 19 d.o.f.; batch means keep the CI honest when
  persistent stragglers correlate successive iterations; Law & Kelton, Simulation Modeling and
  Analysis, §9.5.3);
* p95 / p99 with the distribution-free 95 % order-statistic CI (ranks from Binomial(I, q); Conover,
  Practical Nonparametric Statistics, §3.2);
* speedup = objective(uncoded) / objective(candidate).

Speed drift (``workload.speed_drift``, sd a fraction): the CPU speed of the machine a pick is used on may
lie a standard deviation or more from the speed ``workload.compute`` was measured at
(:mod:`gcsim.sim.drift`), which moves a CPU-bound scheme's times 1:1 and a delay-bound one's hardly at
all, so it can change which scheme is best. With a drift set (sd > 0), the top :data:`VERIFY_TOP`
distinct exact timings, uncoded and the best approximate row are simulated again with the workers' CPU work scaled by
``1 + sd`` and ``1 - sd`` (:func:`gcsim.sim.drift.scale_cpu_work`, the same seed: common random numbers),
every decode checked; their objective there is ``drift_slow_s`` / ``drift_fast_s`` (NaN for other rows),
and the verdict says whether the best exact choice among them stays the best at both speeds (rows
further down are not simulated again; under an extreme drift, sd near 1, one of them can overtake).

Ranking: by the objective; exact schemes and approximate ones (which drop or delay part of the
gradient) are ranked separately.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

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
           "speedup", "drops", "decode_checked", "drift_slow_s", "drift_fast_s", "label"]
#: values of ``decode_check`` (module docstring)
DECODE_CHECKS = ("top", "all")
#: exact rows whose decodes ``decode_check="top"`` checks (re-ranking until they are all checked)
VERIFY_TOP = 3


@dataclass
class Advice:
    """Outcome of :func:`advise` for one n.

    Attributes:
        n: workers.
        objective: ``mean``, ``p95`` or ``p99``.
        table: :data:`COLUMNS`, exact schemes first (ranked 1, 2, ...), then approximate (ranked apart).
        iterations: simulated iterations per candidate; engine: ``vector``, ``simpy`` or ``vector+simpy``
            (some candidates by SimPy), ``engine_note`` why SimPy ran (``""`` if it did not).
        verdict: one or two sentences: the best exact choice and its speedup, or why no coded scheme
            beats uncoded.
        skipped: ``(scheme, s, m, reason)`` for combinations the schemes refused.
        not_searched: ``(scheme, s, m, reason)`` left out for the cost of their construction guard
            (:data:`gcsim.advise.candidates.PATTERN_BUDGET`; none with ``thorough``).
        decode_check: ``top`` or ``all`` (module docstring); timing_classes: vector runs of the search.
        drift_sd: the scenario's ``workload.speed_drift.sd`` (a fraction) when the drifted rows were
            simulated (module docstring), else None.
    """

    n: int
    objective: str
    table: pd.DataFrame
    iterations: int
    engine: str
    verdict: str
    skipped: list
    wall_s: float = 0.0
    engine_note: str = ""
    not_searched: list = field(default_factory=list)
    decode_check: str = "top"
    timing_classes: int = 0
    drift_sd: float | None = None

    @property
    def best(self) -> pd.Series:
        """The top exact row."""
        return self.table[self.table["exact"]].iloc[0]

    @property
    def unchecked(self) -> int:
        """Rows whose times are quorum lower bounds (decodes not checked)."""
        return int((~self.table["decode_checked"].astype(bool)).sum())


def candidates(n: int, max_s: int, max_m: int, names=None, thorough: bool = True) -> tuple[list[SchemeSpec], list]:
    """Every ``(scheme, s, m)`` the schemes accept for ``n`` (module docstring), as labelled specs
    ``<name>.s<s>.m<m>`` (``uncoded`` keeps its name), and the refused ones with the reason
    (:func:`gcsim.advise.candidates.build_candidates`; with ``thorough=False`` the ones left out for
    their cost are listed with the refused)."""
    from gcsim.advise.candidates import build_candidates
    cands, refused, unsearched = build_candidates(n, max_s, max_m, names, thorough=thorough)
    return [c.spec for c in cands], refused + unsearched


@functools.lru_cache(maxsize=None)
def _t975(dof: int) -> float:
    import scipy.stats as st
    return float(st.t.ppf(0.975, dof))


@functools.lru_cache(maxsize=None)
def _binom_ranks(n: int, q: float) -> tuple[int, int]:
    import scipy.stats as st
    return int(st.binom.ppf(0.025, n, q)), int(st.binom.ppf(0.975, n, q)) + 1


def mean_ci(d: np.ndarray, batches: int = 20) -> tuple[float, float, float]:
    """Mean of ``d`` (seconds) and its 95 % batch-means CI: ``batches`` consecutive batches
    (``np.array_split``), Student's t on ``batches − 1`` (module docstring; Law & Kelton §9.5.3). The CI
    is NaN for fewer than 2 values. Also ``gcsim fit``'s self-check (:mod:`gcsim.fit.check`)."""
    k = min(batches, len(d))
    if k < 2:
        return float(d.mean()), float("nan"), float("nan")
    means = np.array([b.mean() for b in np.array_split(d, k)])
    half = float(_t975(k - 1) * means.std(ddof=1) / math.sqrt(k))
    m = float(d.mean())
    return m, m - half, m + half


def _quantile_ci(d: np.ndarray, q: float) -> tuple[float, float, float]:
    """np.quantile and the distribution-free 95 % order-statistic CI of the q-quantile."""
    x = np.sort(d)
    n = len(x)
    lo, hi = _binom_ranks(n, q)
    return float(np.quantile(d, q)), float(x[max(lo - 1, 0)]), float(x[min(hi - 1, n - 1)])


def _stats(d: np.ndarray) -> dict:
    mean, mlo, mhi = mean_ci(d)
    p95, p95lo, p95hi = _quantile_ci(d, 0.95)
    p99, p99lo, p99hi = _quantile_ci(d, 0.99)
    return {"mean_s": mean, "mean_lo": mlo, "mean_hi": mhi, "p50_s": float(np.quantile(d, 0.5)),
            "p95_s": p95, "p95_lo": p95lo, "p95_hi": p95hi, "p99_s": p99, "p99_lo": p99lo, "p99_hi": p99hi}


def _table(n: int, cands: list, durations: dict, checked: dict, objective: str) -> pd.DataFrame:
    """The ranked table (module docstring) of the candidates that have durations; rows sharing one
    durations array (a timing class) share its statistics."""
    from gcsim.schemes import scheme_names
    order = {nm: i for i, nm in enumerate(scheme_names())}
    memo: dict[int, dict] = {}
    rows = []
    for c in cands:
        if c.label not in durations:
            continue
        d = durations[c.label]
        st = memo.get(id(d))
        if st is None:
            st = memo[id(d)] = _stats(d)
        sp, info = c.spec, c.info
        rows.append({"n": n, "scheme": sp.name, "s": sp.s, "m": sp.m, "exact": bool(info["exact"]),
                     "computation_load": info["computation_load"], "communication_load": info["communication_load"],
                     **st, "drops": "" if info["exact"] else DROPS.get(sp.name, "approximate decoding"),
                     "decode_checked": bool(checked[c.label]), "label": c.label, "_order": order.get(sp.name, 99)})
    df = pd.DataFrame(rows)
    df["drift_slow_s"] = df["drift_fast_s"] = np.nan
    col = f"{objective}_s"
    base = float(df.loc[df["scheme"] == "uncoded", col].iloc[0])
    df["speedup"] = base / df[col]
    df = df.sort_values(["exact", col, "computation_load", "communication_load", "_order", "s", "m"],
                        ascending=[False, True, True, True, True, True, True], kind="mergesort")
    df["rank"] = df.groupby("exact").cumcount() + 1
    return df.reset_index(drop=True)


def _evaluate(sc: Scenario, cands: list, objective: str, decode_check: str, skipped: list, engine: str = "auto"):
    """``(durations, checked, engine, note, runs)``: durations (seconds per iteration) and whether they are
    decode-checked, per candidate label; the engine and why SimPy ran; the number of vector timing runs
    (module docstring, :mod:`gcsim.advise.evaluate`). A lazy candidate refused when built for its decode
    check is dropped and added to ``skipped``."""
    from gcsim.advise.candidates import max_load
    from gcsim.advise.evaluate import Draws, simpy_durations
    from gcsim.sim import vector
    reason = vector.unsupported_reason(sc) if engine == "auto" else "asked for (engine simpy)"
    if reason is not None:
        return simpy_durations(sc, [c.spec for c in cands]), {c.label: True for c in cands}, "simpy", reason, 0
    draws = Draws(sc, max(max_load(c.timing) for c in cands))
    classes: dict = {}
    for c in cands:
        classes.setdefault(c.key, (c.label, c.timing))
    res = draws.run(classes, "quorum")
    durations: dict = {}
    checked: dict = {}
    notes = set(res.needs_simpy.values())
    by_simpy: list = []

    def to_simpy(cs):
        if cs:
            by_simpy.extend(cs)
            durations.update(simpy_durations(sc, [c.spec for c in cs]))
            checked.update({c.label: True for c in cs})

    def verify(cs):
        todo = {}
        for c in cs:
            try:
                todo[c.label] = (c.label, c.real())
            except SchemeError as e:  # a lazy candidate refused when built (probability 0 for gc-cr)
                skipped.append((c.spec.name, c.spec.s, c.spec.m, str(e)))
                durations.pop(c.label, None)
                checked.pop(c.label, None)
        if not todo:
            return
        r = draws.run(todo, "exact")
        for c in cs:
            if c.label in r.durations:
                durations[c.label] = r.durations[c.label]
                checked[c.label] = True
        again = [c for c in cs if c.label in r.needs_simpy]
        notes.update(r.needs_simpy[c.label] for c in again)
        to_simpy(again)

    for c in cands:
        if c.key not in res.needs_simpy:
            durations[c.label] = res.durations[c.key]
            checked[c.label] = c.guaranteed
    to_simpy([c for c in cands if c.key in res.needs_simpy])
    by_label = {c.label: c for c in cands}
    if decode_check == "all":
        verify([c for c in cands if c.label in checked and not checked[c.label]])
    else:
        while True:
            t = _table(sc.n_workers, cands, durations, checked, objective)
            top = t[t["exact"]].head(VERIFY_TOP)
            todo = [by_label[lb] for lb, ok in zip(top["label"], top["decode_checked"]) if not ok]
            if not todo:
                break
            verify(todo)
    engine = "vector+simpy" if by_simpy else "vector"
    note = "; ".join(sorted(notes)) if by_simpy else ""
    if by_simpy:
        note = f"{len(by_simpy)} candidate(s) by SimPy: {note}"
    return durations, checked, engine, note, len(classes)


def _distinct(table: pd.DataFrame) -> pd.DataFrame:
    """The exact rows of ``table`` in rank order, one per timing (equal mean, p95 and p99)."""
    return table[table["exact"]].drop_duplicates(["mean_s", "p95_s", "p99_s"])


def _drift_rows(table: pd.DataFrame) -> list[str]:
    """Labels of the rows simulated again under speed drift (module docstring): the first exact row of
    each of the top :data:`VERIFY_TOP` distinct timings (rows of one timing class, e.g. gc-fr s=1 and
    cce-fr s=1 m=1, share every statistic and would drift alike), uncoded and the best approximate row."""
    approx = table[~table["exact"]]
    labels = list(_distinct(table)["label"].head(VERIFY_TOP)) + list(table.loc[table["scheme"] == "uncoded", "label"])
    labels += list(approx["label"].head(1))
    return list(dict.fromkeys(labels))


def _drifted(sc: Scenario, cands: list, table: pd.DataFrame, objective: str, sd: float, engine: str) -> None:
    """Fill ``drift_slow_s`` / ``drift_fast_s`` (seconds, the objective with the workers' CPU work ×(1 + sd)
    and ×(1 − sd); module docstring) of the :func:`_drift_rows` rows of ``table``, in place. A candidate
    refused when built for its decode check keeps NaN."""
    from gcsim.sim.drift import scale_cpu_work
    labels = _drift_rows(table)
    subset = [c for c in cands if c.label in labels]
    base = sc.model_copy(update={"schemes": [c.spec for c in subset]})
    for column, factor in (("drift_slow_s", 1.0 + sd), ("drift_fast_s", 1.0 - sd)):
        durations, *_ = _evaluate(scale_cpu_work(base, factor), subset, objective, "all", [], engine)
        for label, d in durations.items():
            table.loc[table["label"] == label, column] = _stats(d)[f"{objective}_s"]


def _drift_verdict(table: pd.DataFrame, objective: str, sd: float) -> str:
    """One sentence: whether the best exact choice stays the best among the drifted exact rows at a
    machine ``sd`` slower and faster (module docstring), with its speedup over uncoded there; ``""`` when
    fewer than two exact options were drifted (nothing to choose between)."""
    t = table[table["exact"] & table["drift_slow_s"].notna()]
    if len(t) < 2:
        return ""
    unc = table[table["scheme"] == "uncoded"].iloc[0]
    best = table[table["exact"]].iloc[0]

    def name(r):
        return "uncoded" if r["scheme"] == "uncoded" else f"{r['scheme']} s={r['s']} m={r['m']}"

    parts, stays = [], True
    for column, how in (("drift_slow_s", "slower"), ("drift_fast_s", "faster")):
        top = t.loc[t[column].idxmin()]
        sp = unc[column] / top[column]
        if top["label"] == best["label"]:
            parts.append(f"{how}: still {name(top)} ({sp:.2f}x)")
        else:
            stays = False
            gain = "" if top["scheme"] == "uncoded" else f", {sp:.2f}x over uncoded"
            parts.append(f"{how}: {name(top)} instead ({top[column]:.4g} s{gain}; {name(best)} {best[column]:.4g} s)")
    head = (f"On a machine {sd * 100:.3g} % slower or faster (workload.speed_drift sd, one standard deviation), the "
            f"best of the top {min(VERIFY_TOP, len(_distinct(table)))} distinct exact options and uncoded by the "
            f"{objective} ")
    return head + ("stays the same (" if stays else "changes (") + "; ".join(parts) + ")."


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
    if not len(coded):
        parts.append(f"no exact coded scheme was a candidate at n={sc.n_workers} (every one needs n >= 2 and s >= 1 "
                     f"or m >= 2: raise --n, --max-s or --max-m)")
    else:
        best = coded.iloc[0]
        extra = (best["computation_load"] - 1) * c * ws
        # the most any scheme can save: waiting for all n workers vs for the first arrival at load 1
        # (ignore-stragglers s = n - 1; a coded scheme's workers compute more, so arrive no earlier)
        first = table[(table["scheme"] == "ignore-stragglers") & (table["s"] == sc.n_workers - 1)]
        saving = (f"uncoded's {objective} is only {unc[col] - first.iloc[0][col]:.4g} s above the first arrival's "
                  f"({first.iloc[0][col]:.4g} s, ignore-stragglers s={sc.n_workers - 1}): the most coding can save"
                  if len(first) else f"uncoded's {objective} exceeds its median by only "
                  f"{unc[col] - unc.get('p50_s', unc['mean_s']):.4g} s")
        parts.append(f"the best coded option, {best['scheme']} s={best['s']} m={best['m']}, computes "
                     f"{best['computation_load']:g} partitions per worker: about {extra:.4g} s more compute per "
                     f"iteration, while {saving}")
    st = sc.stragglers
    if st.delay is None and st.replay is None and (st.slowdown is not None or st.persistent is not None):
        parts.append("the stragglers here slow the computation down (slowdown/persistent multiply compute), so "
                     "their delay grows with the computation load: more load costs more than the tail saves")
    return "; ".join(parts) + "."


def advise(scenario: Scenario, *, n: int | None = None, objective: str = "mean", max_s: int | None = None,
           max_m: int = 4, iterations: int | None = None, seed: int | None = None, names=None,
           decode_check: str = "top", thorough: bool = False, engine: str = "auto") -> Advice:
    """Search and rank every scheme for ``n`` workers (module docstring).

    Args:
        scenario: a validated scenario (its ``schemes`` are replaced by the candidates).
        n: workers (default the scenario's ``n_workers``).
        objective: one of :data:`OBJECTIVES`.
        max_s: largest s tried (default ``n - 1``); max_m: largest m tried (>= 1).
        iterations, seed: override the scenario's.
        names: scheme names to search (default every registered one).
        decode_check: one of :data:`DECODE_CHECKS` (module docstring).
        thorough: build every candidate whatever its construction guard costs and check every decode
            (``decode_check="all"``): the reference search (:mod:`gcsim.advise.candidates`).
        engine: ``"auto"`` (module docstring) or ``"simpy"`` (every candidate by the SimPy engine: the
            reference the vector engine is tested against; slow).
    Returns:
        :class:`Advice`.
    Raises:
        ConfigError: bad objective / n / max_s / max_m / decode_check; ``n`` differing from the scenario's
            when its ``stragglers.worker_scale`` has one factor per worker; a replayed trace too small for
            ``n`` with ``rule: error``; no candidate at all.
    """
    from gcsim.advise.candidates import _built, build_candidates
    t0 = time.perf_counter()
    if objective not in OBJECTIVES:
        raise ConfigError("--objective", f"one of {', '.join(OBJECTIVES)}", objective)
    if decode_check not in DECODE_CHECKS:
        raise ConfigError("--decode-check", f"one of {', '.join(DECODE_CHECKS)}", decode_check)
    if engine not in ("auto", "simpy"):
        raise ConfigError("engine", "auto or simpy", engine)
    if thorough:
        decode_check = "all"
    n = scenario.n_workers if n is None else int(n)
    if n < 1:
        raise ConfigError("--n", "an integer >= 1", n)
    if scenario.stragglers.worker_scale is not None and n != scenario.n_workers:
        raise ConfigError("--n", f"{scenario.n_workers} (the scenario's stragglers.worker_scale has one factor "
                          f"per worker; for another n, list that many factors there, or delete the line: every "
                          f"worker then runs at the factor-1 worker's speed)", n)
    if scenario.stragglers.replay is not None:
        from gcsim.replay import check_fits, trace_times
        rp = scenario.stragglers.replay
        its = iterations or scenario.iterations
        T, W = trace_times(rp).shape
        if check_fits(rp, n, 1) is None and check_fits(rp, n, its) is not None:  # only the length is short
            raise ConfigError("--iterations", f"at most {T} (the replayed trace's iterations; stragglers.replay.rule "
                              f"is error: set it to wrap or block-bootstrap to simulate more)", its)
        why = check_fits(rp, n, its)
        if why is not None:
            raise ConfigError("stragglers.replay.rule", why, rp.rule)
    max_s = n - 1 if max_s is None else int(max_s)
    if max_s < 0 or max_m < 1:
        raise ConfigError("--max-s/--max-m", "max_s >= 0 and max_m >= 1", (max_s, max_m))
    cands, skipped, not_searched = build_candidates(n, max_s, max_m, names, thorough=thorough)
    if not any(c.spec.name == "uncoded" for c in cands):
        from gcsim.schemes import make_scheme
        cands.insert(0, _built(SchemeSpec(name="uncoded", label="uncoded"), make_scheme("uncoded", n, 0)))
    update = {"schemes": [c.spec for c in cands], "n_workers": n}
    if iterations is not None:
        update["iterations"] = int(iterations)
    if seed is not None:
        update["seed"] = int(seed)
    sc = scenario.model_copy(update=update)
    engine_choice = engine
    durations, checked, engine, note, classes = _evaluate(sc, cands, objective, decode_check, skipped, engine)
    table = _table(n, cands, durations, checked, objective)
    col = f"{objective}_s"
    drift = sc.workload.speed_drift
    drift_sd = float(drift.sd) if drift is not None and float(drift.sd) > 0 else None
    if drift_sd is not None:
        _drifted(sc, cands, table, objective, drift_sd, engine_choice)
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
    if drift_sd is not None:
        verdict = " ".join(v for v in (verdict, _drift_verdict(table, objective, drift_sd)) if v)
    approx = table[~table["exact"]]
    if len(approx) and approx.iloc[0][col] < best[col]:
        a = approx.iloc[0]
        kept = n - int(a["s"])  # every approximate scheme here waits for n - s workers per iteration
        verdict += (f" Faster but approximate: {a['scheme']} s={a['s']} ({a[col]:.4g} s; {a['drops']}): each "
                    f"iteration's gradient then comes from {kept} of {n} workers' partitions"
                    + (", so its accuracy per iteration needs checking (gcsim study measures it)" if kept * 2 <= n
                       else "") + ".")
    return Advice(n=n, objective=objective, table=table[COLUMNS + ["p50_s"]], iterations=sc.iterations,
                  engine=engine, verdict=verdict, skipped=skipped, wall_s=time.perf_counter() - t0,
                  engine_note=note, not_searched=not_searched, decode_check=decode_check, timing_classes=classes,
                  drift_sd=drift_sd)
