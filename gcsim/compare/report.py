"""Text renderings of a comparison: the terminal verdict table and the one-page ``report.md``."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Mapping

import numpy as np
import pandas as pd

from gcsim.compare.control_variate import BLOCK_ITERATIONS
from gcsim.compare.pipeline import CompareResult


def _pct(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.1%}"


def _ci(row, stat: str) -> str:
    return f"{_pct(row[f'err_{stat}'])} [{_pct(row[f'err_{stat}_lo'])}, {_pct(row[f'err_{stat}_hi'])}]"


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f}"


def verdict_table(table: pd.DataFrame) -> str:
    """Fixed-width verdict table for the terminal: one line per compared (run, scheme).

    Args:
        table: :meth:`CompareResult.table` (``validation.csv`` rows).
    """
    cols = [("scheme", "label"), ("verdict", "verdict"), ("basis", None), ("obs mean ms", None), ("sim mean ms", None),
            ("mean err [95% CI]", None), ("in expectation [95% CI]", None), ("prediction interval (drift)", None), ("obs p95 ms", None), ("sim p95 ms", None), ("p95 err [95% CI]", None),
            ("p95 err in expectation [95% CI]", None), ("W1/mean", None), ("KS", None)]
    rows = []
    for _, r in table.iterrows():
        rows.append([str(r["label"]), str(r["verdict"]).upper(), str(r.get("basis", "")), _ms(r["obs_mean_s"]),
                     _ms(r["sim_mean_s"]),
                     _ci(r, "mean"), _expectation(r), _pi(r), _ms(r["obs_p95_s"]), _ms(r["sim_p95_s"]),
                     _ci(r, "p95"), _expectation(r, "p95"), f"{r['w1_rel']:.3f}", f"{r['ks']:.3f}"])
    heads = [c[0] for c in cols]
    widths = [max(len(h), *(len(x[i]) for x in rows)) if rows else len(h) for i, h in enumerate(heads)]
    line = lambda vals: "  ".join(v.ljust(w) if i < 3 else v.rjust(w) for i, (v, w) in enumerate(zip(vals, widths)))
    return "\n".join([line(heads), line(["-" * w for w in widths])] + [line(x) for x in rows])


def _expectation(r, statistic: str = "mean") -> str:
    """``+1.2% [+0.4%, +2.0%]``: a row's ``statistic`` ("mean" or "p95") error in expectation (control
    variate), ``-`` without one."""
    v = r.get(f"err_{statistic}_cv")
    if v is None or not np.isfinite(v):
        return "-"
    return f"{_pct(v)} [{_pct(r[f'err_{statistic}_cv_lo'])}, {_pct(r[f'err_{statistic}_cv_hi'])}]"


def _pi(r) -> str:
    """``[lo, hi] (σ x %, d dof) covers|misses`` of a row's prediction interval (the degrees of freedom
    only for a σ measured, not given), ``-`` without one."""
    lo, hi = r.get("err_mean_pi_lo"), r.get("err_mean_pi_hi")
    if lo is None or hi is None or not (np.isfinite(lo) and np.isfinite(hi)):
        return "-"
    dof = r.get("speed_dof")
    dof = f", {float(dof):.3g} dof" if dof is not None and np.isfinite(dof) else ""  # inf: σ given
    return (f"[{_pct(lo)}, {_pct(hi)}] (σ {float(r['speed_cv']):.1%}{dof}) "
            f"{'covers' if r.get('pi_covers') else 'misses'}")


def _md_table(df: pd.DataFrame) -> str:
    head = "| " + " | ".join(df.columns) + " |"
    sep = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body])


def render_report(result: CompareResult, plots: Mapping[str, str], *, command: str = "") -> str:
    """The one-page markdown report: settings, verdict table, ranking, calibration, plots.

    Args:
        result: the comparison.
        plots: title -> PNG path relative to the report's folder.
        command: the command line that produced it (shown verbatim).
    Returns:
        Markdown text.
    """
    opt = result.options
    table = result.table()
    bands = ", ".join(f"{k} ±{v * 100:g}%" for k, v in opt.bands.judged().items())
    lines = [
        "# gcsim compare: simulated vs observed iteration time",
        "",
        f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')}"
        + (f" by `{command}`" if command else "") + ".",
        "",
        f"- Mode: **{opt.mode}** ({'each replication draws its own straggler delays from the run’s spec' if opt.mode == 'scenario' else 'replications replay the run’s own straggler draws (same seed); paired bootstrap: a model check, not a prediction'}).",
        "- Basis of each row: **out of sample** = calibrated on another run and scored on iterations the "
        "calibration never saw (a prediction); **in sample** = calibrated on the run it is scored against; "
        "**model check** = replays the run’s own straggler draws.",
        f"- CPU: {opt.cpu_source}" + (f"; other processes’ CPU taken from the {opt.load_from} run(s)"
                                        + ("; steady background fitted to the workers’ CPU clocks"
                                           if opt.background == "fitted" and opt.load_from == "calibration"
                                           else "; steady background as measured")
                                        if opt.cpu_source == "measured" else "")
        + ({"probe": "; CPU work per partition scaled by each target's CPU-speed probe (timed before its first "
                     "iteration) over the calibration run's",
            "target": "; CPU work per partition scaled to each target's measured CPU per partition (basis "
                      "*given machine state*: a diagnostic, not a prediction)"}.get(opt.speed_from, "")
           if opt.cpu_source == "measured" else "") + ".",
        f"- Replications per scheme: {opt.replications}; warm-up dropped: "
        + ", ".join(f"{it.label}: {it.warmup}" for it in result.items) + " iterations.",
        f"- Bands: {bands}. **pass**: the {opt.confidence:.0%} bootstrap CI of every banded relative error "
        "(sim − obs)/obs lies inside its band; **warn**: the point estimates do but a CI does not; **fail**: otherwise.",
        f"- Bootstrap: percentile, {opt.n_resamples} resamples, seeded; the raw errors' treats iterations as "
        f"independent, the errors in expectation resample blocks of {BLOCK_ITERATIONS} consecutive iterations "
        "(the machine's speed wanders). Verdicts judge the mean and p95 errors in expectation where a row has "
        "them (a prediction: the target run's straggler luck taken out), the raw errors otherwise; each reason "
        "says which.",
        "- Prediction interval (predictions only): the mean error's CI widened by the machine's CPU-speed drift "
        "measured on the calibration run(s) (`--speed-drift`, the drift in brackets: one standard deviation of "
        "the CPU per partition, measured on a few blocks of iterations: Student's t quantile) carried through the "
        "simulator; *covers* when the measured mean lies inside.",
        "- Mean error in expectation (scenario mode): the luck of the run's own straggler draws removed by a "
        "control variate – the run's draws replayed through the same calibration, ŷ = ȳ − β(C̄ − E_f), β fitted "
        "(`gcsim.compare.control_variate`; Lavenberg & Welch 1981, Law & Kelton §11.4). The same quantity as the "
        "mean error with a narrower CI; the prediction (fresh draws) is unchanged; `--no-control-variate` skips it. "
        "The p95 in expectation uses the same replay: the run's p95 corrected by how far its replay's p95 fell "
        "from the prediction's, `Q_y − β(Q_C − ξ_f)` with β the same per-iteration slope (Hsu & Nelson 1990; "
        "`control_variate_quantile_error`).",
        "",
        "## Verdict",
        "",
    ]
    if len(table):
        md = pd.DataFrame({
            "scheme": table["label"], "run": table["run"], "basis": table["basis"],
            "verdict": table["verdict"].str.upper(),
            "obs mean ms": table["obs_mean_s"].map(_ms), "sim mean ms": table["sim_mean_s"].map(_ms),
            "mean err [CI]": [_ci(r, "mean") for _, r in table.iterrows()],
            "mean err in expectation [CI]": [_expectation(r) for _, r in table.iterrows()],
            "mean err prediction interval (drift)": [_pi(r) for _, r in table.iterrows()],
            "obs p95 ms": table["obs_p95_s"].map(_ms), "sim p95 ms": table["sim_p95_s"].map(_ms),
            "p95 err [CI]": [_ci(r, "p95") for _, r in table.iterrows()],
            "p95 err in expectation [CI]": [_expectation(r, "p95") for _, r in table.iterrows()],
            "p50 err": table["err_p50"].map(_pct), "p99 err": table["err_p99"].map(_pct),
            "W1/mean": table["w1_rel"].map(lambda x: f"{x:.3f}"), "KS": table["ks"].map(lambda x: f"{x:.3f}"),
            "ECDF-band cover": table["ecdf_coverage"].map(lambda x: f"{x:.0%}"),
        })
        lines += [_md_table(md), "",
                  "Columns: *obs* is the measured run after its warm-up (so its mean can differ from what `gcsim "
                  "real` printed over every iteration); *W1/mean* the Wasserstein-1 distance between the measured "
                  "and simulated iteration-time distributions over the measured mean; *KS* the Kolmogorov–Smirnov "
                  "statistic; *ECDF-band cover* the share of the measured iteration times at which the simulated "
                  f"CDF lies inside the measured CDF's pointwise {opt.confidence:.0%} band (Greenwood; 100 % = "
                  "never outside; a pointwise band, so a perfect model still leaves it at a few points).", ""]
        reasons = [f"- {r['label']}: {r['reason']}" for _, r in table.iterrows() if r["reason"]]
        if reasons:
            lines += ["Why not a clean pass:", "", *reasons, ""]
        no_cv = [f"- {it.label} ({what}): {x.reason}" for it in result.items
                 for what, x in (("mean", it.expectation), ("p95", it.expectation_p95)) if x.failed]
        if no_cv:
            lines += ["No error in expectation:", "", *no_cv, ""]
        chosen = sorted({x.reason for it in result.items for x in (it.expectation, it.expectation_p95)
                         if not x.asked and x.reason})
        if chosen:
            lines += [f"Errors in expectation not computed ({', '.join(chosen)}): they are made for predictions "
                      "only (`--calibrate-from` another run, scenario mode).", ""]
    rk = result.ranking
    lines += ["## Scheme ranking (by mean iteration time, fastest first)", ""]
    if rk is None:
        lines += ["One scheme only: no ranking to check.", ""]
    else:
        lines += [f"- observed:  {rk.observed_text()}",
                  f"- predicted: {rk.predicted_text()}",
                  "- Kendall tau = "
                  + (f"{rk.tau:+.3f}" if np.isfinite(rk.tau) else "undefined (the observed or the predicted means all tie)")
                  + f" ({rk.verdict()})."]
        obs_mean = dict(zip(table["label"], table["obs_mean_s"]))
        for a, b in rk.discordant:
            gap = (obs_mean[b] - obs_mean[a]) / obs_mean[a]
            lines.append(f"- swapped: {a} vs {b} (observed {b} slower by {gap:.1%}; compare with the mean CIs above)")
        lines.append("")
    lines += ["## Calibration (what the simulator was given besides the run’s own configuration)", ""]
    cal_rows = []
    for key, cal in result.calibrations.items():
        d = cal.describe()
        cal_rows.append({
            "calibrated from": key, "cores": "-" if d.get("cores") is None else f"{d['cores']:g}",
            "compute/partition mean ms": _ms(d["compute_per_partition_mean_s"]),
            "p95 ms": _ms(d["compute_per_partition_p95_s"]),
            "censored": f"{d['compute_censored_rows']}/{d['compute_rows']}",
            "latency ms": _ms(d["latency_s"]),
            "bandwidth MB/s": "inf" if not math.isfinite(d["bandwidth_bytes_per_s"]) else f"{d['bandwidth_bytes_per_s'] / 1e6:.1f}",
            "transfer mean ms": _ms(d["transfer_mean_s"]), "master overhead mean ms": _ms(d["master_overhead_mean_s"]),
            "start lag median ms": _ms(d["start_lag_median_s"]),
            "call overhead mean ms": _ms(d.get("call_overhead_mean_s", 0.0)),
        })
    if cal_rows:
        lines += [_md_table(pd.DataFrame(cal_rows)), ""]
        notes = sorted({n for cal in result.calibrations.values() for n in cal.notes})
        if notes:
            lines += ["Notes:", "", *[f"- {n}" for n in notes], ""]
    if result.stall_notes:
        lines += ["Measured iterations the prediction cannot produce (kept in the score; "
                  "gcsim/compare/stalls.py):", "", *[f"- {n}" for n in result.stall_notes], ""]
    if result.missing_notes():
        lines += ["Not computed:", "", *[f"- {n}" for n in result.missing_notes()], ""]
    if result.slow_stretch_notes:
        lines += ["Target runs during which the machine slowed (kept in the score; gcsim/compare/stalls.py):", "",
                  *[f"- {n}" for n in result.slow_stretch_notes], ""]
    if result.target_notes:
        lines += ["Target runs to read with care (gcsim/compare/stalls.py):", "",
                  *[f"- {n}" for n in result.target_notes], ""]
    lines += ["## Plots", ""]
    for title, rel in plots.items():
        lines += [f"### {title}", "", f"![{title}]({rel})", ""]
    lines += ["Files: `validation.csv` (the table above, full precision), `calibration.json`.", ""]
    return "\n".join(lines)
