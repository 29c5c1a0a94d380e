"""``gcsim advise`` output: the printed ranked table, and the run directory.

Run directory (``runs/advise/<scenario>-<UTC timestamp>/`` by default, created exclusively by
:func:`gcsim.rundir.new_run_dir`): ``advice.csv`` (:data:`gcsim.advise.search.COLUMNS` for every n; ``drift_slow_s`` /
``drift_fast_s`` empty without ``workload.speed_drift``),
``advice.md`` (command, verdicts, tables), ``advice_n<N>.png`` (predicted objective against s per
scheme, uncoded as a line, the best exact choice marked), ``config.yaml`` (the scenario searched),
``meta.json`` (last); with ``--iterations-to-target`` also ``time_to_target.csv``
(:data:`gcsim.advise.target.TARGET_COLUMNS`) and its ranking in ``advice.md``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from gcsim.advise.search import COLUMNS, VERIFY_TOP, Advice

#: parent of ``gcsim advise``'s run directories when ``--out`` is not given
DEFAULT_ADVISE_ROOT = Path("runs/advise")


def format_table(adv: Advice, top: int | None = None) -> str:
    """The ranked table as text: exact schemes, then approximate ones ranked apart; times in seconds
    with their 95 % CIs, loads in partitions / gradient lengths per worker and iteration."""
    col = f"{adv.objective}_s"

    def fmt(df: pd.DataFrame) -> str:
        lb = [">=" if not ok else "" for ok in df["decode_checked"]]  # quorum lower bounds
        out = pd.DataFrame({
            "rank": df["rank"], "scheme": df["scheme"], "s": df["s"], "m": df["m"],
            "comp_load": [f"{v:g}" for v in df["computation_load"]],
            "comm_load": [f"{v:.3g}" for v in df["communication_load"]],
            "mean_s [95% CI]": [f"{g}{a:.4g} [{b:.4g}, {c:.4g}]" for g, a, b, c in
                                zip(lb, df["mean_s"], df["mean_lo"], df["mean_hi"])],
            "p95_s [95% CI]": [f"{g}{a:.4g} [{b:.4g}, {c:.4g}]" for g, a, b, c in
                               zip(lb, df["p95_s"], df["p95_lo"], df["p95_hi"])],
            "speedup": [f"{v:.2f}x" for v in df["speedup"]],
        })
        if adv.objective == "p99":
            out.insert(8, "p99_s [95% CI]", [f"{g}{a:.4g} [{b:.4g}, {c:.4g}]" for g, a, b, c in
                                             zip(lb, df["p99_s"], df["p99_lo"], df["p99_hi"])])
        if adv.drift_sd is not None:  # the objective on a machine one drift SD slower / faster (search.py)
            out[f"{adv.objective}_s slower/faster"] = ["-" if np.isnan(a) else f"{a:.4g} / {b:.4g}" for a, b in
                                                       zip(df["drift_slow_s"], df["drift_fast_s"])]
        return out.to_string(index=False)

    t = adv.table
    ex, ap = t[t["exact"]], t[~t["exact"]]
    if top is not None:
        ex, ap = ex.head(top), ap.head(top)
    text = [f"n={adv.n}: exact schemes, ranked by predicted {adv.objective} ({col}); {adv.iterations} iterations "
            f"each, {engine_text(adv)}", fmt(ex)]
    if len(ap):
        text += ["approximate schemes (ranked apart: they drop or delay part of the gradient)", fmt(ap)]
        text += [f"  {name}: {d}" for name, d in ap.drop_duplicates("scheme")[["scheme", "drops"]].itertuples(index=False)]
    shown = pd.concat([ex, ap])
    if adv.drift_sd is not None:
        unc = t[t["scheme"] == "uncoded"].iloc[0]
        text.append(f"  slower/faster: the {adv.objective} with the workers' CPU work {adv.drift_sd * 100:.3g} % higher / "
                    f"lower (workload.speed_drift sd), for the top {VERIFY_TOP} distinct exact timings, uncoded "
                    f"({unc['drift_slow_s']:.4g} / {unc['drift_fast_s']:.4g} s) and the best approximate row")
    if not shown["decode_checked"].all():
        text.append(f"  >=: a lower bound - the quorum's time, decodes not checked for refusals (a refused set waits "
                    f"for one more arrival); the top {VERIFY_TOP} exact rows are checked, --decode-check all checks "
                    f"every row")
    return "\n".join(text)


def engine_text(adv: Advice) -> str:
    """Which engine ran and why, and which decodes were checked, e.g. ``"vector engine (539 timing
    classes), decodes checked: top 3 exact rows"`` or ``"simpy engine (workload.cores 2 (CPU sharing)),
    decodes checked: every row"``."""
    if adv.engine == "simpy":
        eng = f"simpy engine ({adv.engine_note})" if adv.engine_note else "simpy engine"
    else:
        eng = f"vector engine ({adv.timing_classes} timing classes" + (f"; {adv.engine_note})" if adv.engine_note
                                                                       else ")")
    check = "every row" if adv.unchecked == 0 else f"top {VERIFY_TOP} exact rows"
    return f"{eng}, decodes checked: {check}"


def not_searched_text(adv: Advice, most: int = 12) -> str:
    """One line naming the candidates left out for their construction cost, or ``""``."""
    if not adv.not_searched:
        return ""
    items = [f"{nm} s={s} m={m}" for nm, s, m, _ in adv.not_searched]
    return (f"not searched ({len(items)}: construction guard too costly, ~n partitions per worker; --thorough "
            f"includes them): " + ", ".join(items[:most]) + (" ..." if len(items) > most else ""))


def plot_advice(adv: Advice, path: Path) -> Path:
    """Predicted objective against s, one line per scheme (and m), uncoded dashed, the best marked."""
    import matplotlib.pyplot as plt
    from gcsim.compare.plots import save_figure
    col = f"{adv.objective}_s"
    t = adv.table
    fig, ax = plt.subplots(figsize=(9, 5.4))
    colors = plt.get_cmap("tab20").colors  # one colour and marker per line: no two lines alike in the legend
    markers = "os^vD<>ph*"
    for i, ((name, m), g) in enumerate(t[t["scheme"] != "uncoded"].groupby(["scheme", "m"], sort=False)):
        g = g.sort_values("s")
        exact = bool(g["exact"].iloc[0])
        line, = ax.plot(g["s"], g[col], marker=markers[i % len(markers)], ms=3, ls="-" if exact else ":",
                        color=colors[(2 * i) % 20 + (i // 10) % 2],
                        label=f"{name}{f' m={m}' if m > 1 else ''}{'' if exact else ' (approx.)'}")
        lb = g[~g["decode_checked"].astype(bool)]
        if len(lb):  # quorum lower bounds: open markers
            ax.plot(lb["s"], lb[col], ls="none", marker=line.get_marker(), ms=4, mfc="white", mec=line.get_color())
    unc = float(t.loc[t["scheme"] == "uncoded", col].iloc[0])
    clip = ""
    if float(t[col].max()) > 3 * unc:  # keep the region that matters readable (advice.csv has every row)
        ax.set_ylim(0, 3 * unc)
        clip = f"; {int((t[col] > 3 * unc).sum())} rows > 3x uncoded not shown"
    if adv.n > 40:  # s from 0 to n - 1: linear to 10, logarithmic beyond
        from matplotlib.ticker import FixedLocator, ScalarFormatter
        ax.set_xscale("symlog", linthresh=10)
        ax.xaxis.set_major_locator(FixedLocator([v for v in (0, 2, 4, 6, 8, 10, 20, 50, 100, 200, 500, 1000, 2000)
                                                 if v < adv.n]))
        ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.axhline(unc, color="k", ls="--", lw=1, label="uncoded")
    b = adv.best
    ax.plot([b["s"]], [b[col]], marker="*", ms=18, color="gold", mec="k", zorder=5,
            label=f"best exact: {b['scheme']} s={b['s']} m={b['m']}")
    ax.set_xlabel("s (stragglers tolerated)")
    ax.set_ylabel(f"predicted {adv.objective} iteration time (s)")
    note = "; open markers: lower bounds, decodes unchecked" if not t["decode_checked"].all() else ""
    ax.set_title(f"gcsim advise, n={adv.n}: predicted {adv.objective} per scheme, lower is better\n"
                 f"({adv.iterations} simulated iterations each{note}{clip})", fontsize=9)
    ax.legend(fontsize=7, ncol=2, loc="best")
    return save_figure(fig, path)


def _md_columns(adv: Advice) -> list[str]:
    """The table's columns in advice.md: :data:`COLUMNS` but the label, and the drift columns only when
    the scenario has a speed drift."""
    drop = {"label"} | (set() if adv.drift_sd is not None else {"drift_slow_s", "drift_fast_s"})
    return [c for c in COLUMNS if c not in drop]


def advice_markdown(advices: list[Advice], command: str, targets: pd.DataFrame | None = None) -> str:
    """The report's markdown: command, then per n the verdict and the full table (and, with
    ``targets`` from :func:`gcsim.advise.target.time_to_target`, the ranking by time to target)."""
    from gcsim.fit.report import markdown_table
    lines = ["# gcsim advise", "", f"Command: `{command}`", ""]
    for a in advices:
        lines += [f"## n = {a.n}", "", a.verdict, "", f"Engine: {engine_text(a)}; {a.wall_s:.1f} s. Rows with "
                  f"`decode_checked` False are lower bounds (the quorum's time; a refused decode would wait for one more "
                  f"arrival).", "", f"![advice](advice_n{a.n}.png)", "", markdown_table(a.table[_md_columns(a)]), ""]
        if a.not_searched:
            lines += [not_searched_text(a, most=60), ""]
        if targets is not None:
            lines += ["### Predicted time to target (iterations to target x predicted mean iteration time)", "",
                      markdown_table(targets[targets["n"] == a.n]), ""]
        if a.skipped:
            lines += [f"Refused by the schemes ({len(a.skipped)}): "
                      + "; ".join(f"{nm} s={s} m={m}" for nm, s, m, _ in a.skipped[:30])
                      + (" ..." if len(a.skipped) > 30 else ""), ""]
    return "\n".join(lines)


def write_advice(advices: list[Advice], scenario, run_dir: Path, command: str,
                 targets: pd.DataFrame | None = None) -> Path:
    """Write the run directory of the module docstring into the claimed ``run_dir``; returns it.
    ``targets``: optional :func:`gcsim.advise.target.time_to_target` rows (``time_to_target.csv``)."""
    from gcsim.rundir import atomic_write_text
    from gcsim.trace import write_csv, write_meta
    table = pd.concat([a.table for a in advices], ignore_index=True)
    write_csv(run_dir / "advice.csv", table, COLUMNS)
    for a in advices:
        plot_advice(a, run_dir / f"advice_n{a.n}.png")
    if targets is not None:
        from gcsim.advise.target import TARGET_COLUMNS
        write_csv(run_dir / "time_to_target.csv", targets, TARGET_COLUMNS)
    atomic_write_text(run_dir / "advice.md", advice_markdown(advices, command, targets))
    atomic_write_text(run_dir / "config.yaml", scenario.to_yaml())
    best = {str(a.n): {"scheme": a.best["scheme"], "s": int(a.best["s"]), "m": int(a.best["m"])} for a in advices}
    write_meta(run_dir, "advise", command=command, objective=advices[0].objective, best=best,
               engine=advices[0].engine, iterations=int(advices[0].iterations),
               verdicts=[a.verdict for a in advices], speed_drift_sd=advices[0].drift_sd,
               wall_s=float(np.sum([a.wall_s for a in advices])),
               search={str(a.n): {"engine": a.engine, "engine_note": a.engine_note, "decode_check": a.decode_check,
                                  "candidates": int(len(a.table)), "timing_classes": int(a.timing_classes),
                                  "rows_lower_bound": a.unchecked, "refused": len(a.skipped),
                                  "not_searched": [[nm, int(s), int(m)] for nm, s, m, _ in a.not_searched],
                                  "wall_s": round(float(a.wall_s), 3)} for a in advices})
    return run_dir
