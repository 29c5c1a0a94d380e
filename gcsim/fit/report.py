"""The fit report: table (CSV + markdown), plots and the fitted scenario, in a run directory.

Files written into the run directory (``runs/fit/<scenario name>-<UTC timestamp>/`` by default,
created exclusively by :func:`gcsim.rundir.new_run_dir`):

* ``fit.csv`` – one row per family: :data:`FIT_COLUMNS` (AIC, ΔAIC to the best, KS D and p);
* ``report.md`` – the trace, the decomposition (base, delay, regime), the table, the plots, the self-check
  (:mod:`gcsim.fit.check`: the fitted scenario's uncoded time against the trace's own);
* ``qq.png`` – one QQ panel per family: fitted quantiles against the measured delays;
* ``delays.png`` – histogram of the positive delays with every fitted density;
* ``timeline.png`` – every worker's time per iteration, slow-regime iterations marked;
* ``scenario.yaml`` – the fitted scenario (also written to ``--out`` when given);
* ``meta.json`` – last.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from gcsim.fit.families import frozen
from gcsim.fit.model import FitResult

#: parent of the report directories ``gcsim fit`` creates when ``--run-dir`` is not given
DEFAULT_FIT_ROOT = Path("runs/fit")
FIT_COLUMNS = ["family", "k", "params", "loglik", "aic", "delta_aic", "ks_d", "ks_p", "chosen"]


#: a Lomax (pareto) shape above this is its exponential limit (c → ∞ with scale / c fixed)
DEGENERATE_LOMAX_C = 1e6


def params_text(f) -> str:
    """A fit's parameters as ``k=v`` text, in the scenario file's parameterisation: the mixture's
    components as lognormal ``s`` and ``scale = exp(mu)``; a Lomax whose shape ran off to its exponential
    limit says so, with the limit's mean."""
    p = f.params
    if f.family == "mixture":
        return (f"w1={p['w1']:.4g}, s1={p['s1']:.4g}, scale1={np.exp(p['mu1']):.4g}, "
                f"s2={p['s2']:.4g}, scale2={np.exp(p['mu2']):.4g}")
    text = ", ".join(f"{k}={v:.4g}" for k, v in p.items())
    if f.family == "pareto" and p["c"] > DEGENERATE_LOMAX_C:
        text += f" (degenerate: c → ∞, the exponential limit, mean {p['scale'] / p['c']:.4g} s)"
    return text


def fit_table(res: FitResult) -> pd.DataFrame:
    """One row per fitted family (:data:`FIT_COLUMNS`), best AIC first; ``params`` as ``k=v`` text."""
    best = res.fits[0].aic
    rows = [{"family": f.family, "k": f.k, "params": params_text(f),
             "loglik": f.loglik, "aic": f.aic, "delta_aic": f.aic - best, "ks_d": f.ks_d, "ks_p": f.ks_p,
             "chosen": i == 0} for i, f in enumerate(res.fits)]
    return pd.DataFrame(rows, columns=FIT_COLUMNS)


def markdown_table(df: pd.DataFrame) -> str:
    """``df`` as a GitHub markdown table (floats with 4 significant digits)."""
    def cell(v):
        if isinstance(v, (float, np.floating)):
            return f"{v:.4g}"
        return str(v)
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(cell(v) for v in row) + " |\n" for row in df.itertuples(index=False))


def _positive(res: FitResult) -> np.ndarray:
    return np.sort(res.delays[res.delays > 1e-9 * max(float(res.base.max()), 1e-12)])


def plot_qq(res: FitResult, path: Path) -> Path:
    """QQ panels (fitted quantile vs measured quantile at 99 probabilities) per family."""
    from gcsim.compare.plots import _grid, save_figure
    x = _positive(res)
    probs = (np.arange(1, 100) - 0.5) / 99
    emp = np.quantile(x, probs)
    fig, axes = _grid(len(res.fits))
    for ax, f in zip(axes, res.fits):
        fit_q = frozen(f).ppf(probs)
        ax.plot(fit_q, emp, ".", ms=3)
        lim = [0, max(float(np.nanmax(fit_q)), float(emp.max()))]
        ax.plot(lim, lim, "k--", lw=0.8)
        ax.set_title(f"{f.family}: AIC {f.aic - res.fits[0].aic:+.1f}, KS D {f.ks_d:.3f}", fontsize=9)
        ax.set_xlabel("fitted quantile (s)")
        ax.set_ylabel("measured delay quantile (s)")
    return save_figure(fig, path)


def plot_delays(res: FitResult, path: Path) -> Path:
    """Histogram of the positive delays with every fitted density (the chosen one bold)."""
    import matplotlib.pyplot as plt
    from gcsim.compare.plots import save_figure
    x = _positive(res)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(x, bins=60, density=True, color="0.8", label=f"measured ({len(x)} delays > 0)")
    grid = np.linspace(max(x.min() * 0.5, 1e-12), np.quantile(x, 0.995), 400)
    for i, f in enumerate(res.fits):
        ax.plot(grid, np.exp(frozen(f).logpdf(grid)), lw=2.2 if i == 0 else 1,
                label=f"{f.family}{' (chosen)' if i == 0 else ''}")
    ax.set_xlabel("delay over the worker's base (s)")
    ax.set_ylabel("density")
    ax.set_title("load-independent delay: measured vs fitted families")
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_timeline(res: FitResult, path: Path) -> Path:
    """Every worker's time per iteration; slow-regime iterations (when a regime is present) marked."""
    import matplotlib.pyplot as plt
    from gcsim.compare.plots import save_figure
    x = res.trace.times
    fig, ax = plt.subplots(figsize=(8, 4))
    for w in range(x.shape[1]):
        ax.plot(x[:, w], lw=0.7, label=f"worker {res.trace.workers[w]}")
    if res.regime.present:
        t, w = np.nonzero(res.regime.slow)
        ax.plot(t, x[t, w], "rx", ms=4, label="slow regime")
    ax.set_xlabel("iteration (row of the trace)")
    ax.set_ylabel("time (s)")
    ax.set_title("measured time per worker and iteration")
    if x.shape[1] <= 12:
        ax.legend(fontsize=7, ncol=2)
    return save_figure(fig, path)


def report_markdown(res: FitResult, table: pd.DataFrame, command: str, check=None) -> str:
    """The report's markdown text; ``check`` a :class:`gcsim.fit.check.SelfCheck` (its section)."""
    tr, rg = res.trace, res.regime
    lines = [f"# gcsim fit: {tr.path}", "", f"Command: `{command}`", "",
             f"Trace: {tr.source}; {tr.n_iterations} iterations x {tr.n_workers} workers; "
             f"{tr.unit_s:g} s per trace unit.", ""]
    lines += [f"- {n}" for n in res.notes]
    lines += ["", "## Decomposition", "",
              "- per-worker base (smallest normal-regime time), s: "
              + ", ".join(f"{b:.4g}" for b in res.base),
              f"- per-partition compute (fastest worker, load {res.load}): {res.compute_s:.6g} s; worker_scale "
              + ", ".join(f"{v:.4g}" for v in res.worker_scale),
              f"- load-independent delay: {len(res.delays)} excesses, {res.zero_fraction:.1%} exactly 0"
              + (" (atom at 0 in the scenario)" if res.atom else ""),
              f"- persistent regime: {rg.reason}"
              + (f"; p_enter {rg.p_enter:.4g}, p_leave {rg.p_leave:.4g}, slowdown {res.slowdown:.4g}"
                 if res.slowdown is not None else ""),
              "", "## Delay families (maximum likelihood, ranked by AIC)", "", markdown_table(table),
              "KS p-values are optimistic (parameters estimated from the same sample); read D as an effect size.",
              "", "![QQ](qq.png)", "", "![delays](delays.png)", "", "![timeline](timeline.png)", ""]
    if check is not None:
        lines += ["## Self-check: does the fitted scenario reproduce the trace?", "",
                  "`uncoded` waits for the slowest worker of every iteration; its time, from the trace and "
                  "simulated from the fitted scenario (seconds):", "",
                  "| | mean | 95 % interval of the mean | p95 |", "|---|---|---|---|",
                  f"| the trace | {check.trace_mean_s:.4g} | {check.trace_mean_lo_s:.4g} – {check.trace_mean_hi_s:.4g} "
                  f"| {check.trace_p95_s:.4g} |",
                  f"| each worker's own times, drawn independently (bootstrap) | {check.per_worker_mean_s:.4g} | | |",
                  f"| every worker's excess pooled, drawn independently (bootstrap) | {check.pooled_mean_s:.4g} | | |",
                  f"| the fitted scenario (simulated) | {check.model_mean_s:.4g} | | {check.model_p95_s:.4g} |", "",
                  f"Fitted over trace: mean {check.err_mean:+.1%}, p95 {check.err_p95:+.1%}; {check.parts()}.",
                  "" if not check.flagged else f"\n**Warning**: {check.warning()}.", ""]
    lines += ["## Scenario", "", "```yaml", res.scenario_text.rstrip(), "```", ""]
    return "\n".join(lines)


def write_report(res: FitResult, run_dir: Path, command: str, check=None) -> Path:
    """Write every file of the module docstring into the claimed, empty ``run_dir``; ``meta.json`` last.

    Returns ``run_dir``.
    """
    from gcsim.rundir import atomic_write_text
    from gcsim.trace import write_csv, write_meta
    table = fit_table(res)
    write_csv(run_dir / "fit.csv", table, FIT_COLUMNS)
    plot_qq(res, run_dir / "qq.png")
    plot_delays(res, run_dir / "delays.png")
    plot_timeline(res, run_dir / "timeline.png")
    atomic_write_text(run_dir / "scenario.yaml", res.scenario_text)
    atomic_write_text(run_dir / "report.md", report_markdown(res, table, command, check))
    extra = {} if check is None else {"self_check": {
        "trace_mean_s": check.trace_mean_s, "trace_p95_s": check.trace_p95_s, "model_mean_s": check.model_mean_s,
        "model_p95_s": check.model_p95_s, "err_mean": check.err_mean, "err_p95": check.err_p95,
        "flagged": check.flagged}}
    write_meta(run_dir, "fit", trace=res.trace.path, chosen_family=res.best.family, command=command, **extra,
               families=json.loads(table[["family", "aic"]].to_json(orient="records")))
    return run_dir
