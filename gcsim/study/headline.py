"""The study's headline table: per scheme, measured and simulated mean / p95 iteration time, their
relative errors and verdict (from the comparison), measured speedup over ``uncoded`` and the test
accuracy reached (from the run's ``metrics.csv``); rendered as ``headline.csv`` and ``headline.md``."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Mapping

import numpy as np
import pandas as pd

from gcsim.study.accuracy import DEFAULT_TARGETS, time_to_accuracy

#: headline.csv columns. Times in seconds; ``err_*`` = (simulated − measured) / measured (fractions);
#: ``measured_*`` / ``simulated_*`` are after the comparison's warm-up; speedups = mean(uncoded) /
#: mean(scheme) (NaN without uncoded); ``test_accuracy`` = the last evaluation of the run (fraction);
#: ``accuracy_gap_vs_uncoded`` = the largest |accuracy − uncoded's accuracy| over the evaluations both
#: runs made at the same iteration (fraction; NaN without uncoded); ``iterations_to_<P>pct`` /
#: ``wall_s_to_<P>pct`` = iterations and training seconds until the test accuracy first reached P % at
#: an evaluation (:func:`gcsim.study.accuracy.time_to_accuracy`; NaN when not reached), for the
#: targets :data:`gcsim.study.accuracy.DEFAULT_TARGETS`.
TTA_HEADLINE_COLUMNS = [f"{kind}_to_{round(t * 100)}pct" for t in DEFAULT_TARGETS for kind in ("iterations", "wall_s")]
HEADLINE_COLUMNS = [
    "scheme", "exact", "n", "s", "m", "iterations", "warmup",
    "measured_mean_s", "measured_p95_s", "simulated_mean_s", "simulated_p95_s", "err_mean", "err_p95", "verdict",
    "measured_speedup_vs_uncoded", "simulated_speedup_vs_uncoded",
    "test_accuracy", "accuracy_gap_vs_uncoded", *TTA_HEADLINE_COLUMNS, "wall_s", "run_dir",
]


def accuracy_gap(metrics: pd.DataFrame, reference: pd.DataFrame) -> float:
    """Largest ``|test_accuracy − reference test_accuracy|`` over the iterations both evaluated at
    (fraction; NaN when they share none). Both frames have ``metrics.csv`` columns."""
    m = metrics[["iteration", "test_accuracy"]].merge(reference[["iteration", "test_accuracy"]], on="iteration",
                                                      suffixes=("", "_ref"))
    if m.empty:
        return float("nan")
    return float(np.max(np.abs(m["test_accuracy"].to_numpy(float) - m["test_accuracy_ref"].to_numpy(float))))


def build_headline(validation: pd.DataFrame, runs: Mapping[str, dict]) -> pd.DataFrame:
    """The headline table.

    Args:
        validation: the comparison's table (``validation.csv``: ``scheme``, ``n``, ``s``, ``m``,
            ``warmup``, ``obs_mean_s``, ``obs_p95_s``, ``sim_mean_s``, ``sim_p95_s``, ``err_mean``,
            ``err_p95``, ``verdict``), one row per scheme.
        runs: scheme -> ``{"run_dir": path, "iterations": measured iterations, "metrics": metrics.csv
            DataFrame, "exact": bool, "wall_s": seconds or NaN, "iteration_times": optional iterations.csv
            rows of the scheme (``iteration``, ``duration_s``) for the time-to-accuracy columns}``.
    Returns:
        DataFrame with :data:`HEADLINE_COLUMNS`, in the order of ``validation``.
    """
    rows = []
    for _, r in validation.iterrows():
        sch = str(r["scheme"])
        info = runs[sch]
        mt = info["metrics"]
        tta = {c: np.nan for c in TTA_HEADLINE_COLUMNS}
        if info.get("iteration_times") is not None and len(mt):
            for _, t in time_to_accuracy(mt, info["iteration_times"], DEFAULT_TARGETS).iterrows():
                tta[f"iterations_to_{round(t['target'] * 100)}pct"] = t["iterations"]
                tta[f"wall_s_to_{round(t['target'] * 100)}pct"] = t["wall_s"]
        rows.append({**tta,
            "scheme": sch, "exact": bool(info["exact"]), "n": int(r["n"]), "s": int(r["s"]), "m": int(r["m"]),
            "iterations": int(info["iterations"]), "warmup": int(r["warmup"]),
            "measured_mean_s": float(r["obs_mean_s"]), "measured_p95_s": float(r["obs_p95_s"]),
            "simulated_mean_s": float(r["sim_mean_s"]), "simulated_p95_s": float(r["sim_p95_s"]),
            "err_mean": float(r["err_mean"]), "err_p95": float(r["err_p95"]), "verdict": str(r["verdict"]),
            "measured_speedup_vs_uncoded": np.nan, "simulated_speedup_vs_uncoded": np.nan,
            "test_accuracy": float(mt["test_accuracy"].iloc[-1]) if len(mt) else np.nan,
            "accuracy_gap_vs_uncoded": np.nan, "wall_s": float(info.get("wall_s", np.nan)),
            "run_dir": str(info["run_dir"]),
        })
    out = pd.DataFrame(rows, columns=HEADLINE_COLUMNS)
    if "uncoded" in set(out["scheme"]):
        base = out.loc[out["scheme"] == "uncoded"].iloc[0]
        out["measured_speedup_vs_uncoded"] = base["measured_mean_s"] / out["measured_mean_s"]
        out["simulated_speedup_vs_uncoded"] = base["simulated_mean_s"] / out["simulated_mean_s"]
        ref = runs["uncoded"]["metrics"]
        out["accuracy_gap_vs_uncoded"] = [accuracy_gap(runs[s]["metrics"], ref) for s in out["scheme"]]
    return out


def _f(x, fmt: str, dash: str = "-") -> str:
    return dash if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|",
                      *("| " + " | ".join(r) + " |" for r in rows)])


def render_headline_md(table: pd.DataFrame, *, machine: dict, command: str, settings: Mapping[str, str],
                       plots: Mapping[str, str] | None = None, notes: list[str] | None = None) -> str:
    """``headline.md``: the command, the machine, the settings, the headline table, observations.

    Args:
        table: :func:`build_headline`'s table.
        machine: :func:`gcsim.study.machine.describe_machine`.
        command: the exact command line.
        settings: label -> value lines (scenario, stragglers, policy, ...).
        plots: title -> PNG path relative to headline.md.
        notes: extra bullet lines (e.g. how each run was obtained).
    Returns:
        Markdown text.
    """
    heads = ["scheme", "s", "m", "iters", "measured mean s", "measured p95 s", "simulated mean s",
             "simulated p95 s", "err mean", "err p95", "verdict", "measured speedup", "test accuracy",
             *(f"to {round(t * 100)} %: iters / s" for t in DEFAULT_TARGETS)]
    rows = []
    for _, r in table.iterrows():
        rows.append([f"`{r['scheme']}`" + ("" if r["exact"] else " (approx.)"), str(r["s"]), str(r["m"]),
                     str(r["iterations"]), _f(r["measured_mean_s"], ".3f"), _f(r["measured_p95_s"], ".3f"),
                     _f(r["simulated_mean_s"], ".3f"), _f(r["simulated_p95_s"], ".3f"),
                     _f(r["err_mean"], "+.1%"), _f(r["err_p95"], "+.1%"), str(r["verdict"]).upper(),
                     _f(r["measured_speedup_vs_uncoded"], ".2f") + ("×" if math.isfinite(
                         r["measured_speedup_vs_uncoded"]) else ""),
                     _f(r["test_accuracy"], ".1%"),
                     *(f"{_f(r[f'iterations_to_{round(t * 100)}pct'], '.0f')} / "
                       f"{_f(r[f'wall_s_to_{round(t * 100)}pct'], '.1f')}" for t in DEFAULT_TARGETS)])
    mem = machine.get("memory_bytes")
    ver = machine.get("versions", {})
    lines = [
        "# gcsim study: measured vs simulated iteration time per gradient-coding scheme",
        "",
        f"Generated {datetime.now(timezone.utc).isoformat(timespec='seconds')} by:",
        "",
        "```bash",
        command,
        "```",
        "",
        "## Machine",
        "",
        f"- CPU: {machine.get('cpu_model')}; {machine.get('cpu_count')} CPUs ({machine.get('cpus_usable')} usable "
        f"by this process)" + (f"; {mem / 2**30:.1f} GiB memory" if mem else ""),
        f"- Load average (1, 5, 15 min) at the start: {machine.get('load_avg_1_5_15')}",
        f"- {machine.get('platform')}; Python {machine.get('python')}; torch {ver.get('torch')}, "
        f"torchvision {ver.get('torchvision')}, ray {ver.get('ray')}, numpy {ver.get('numpy')}, "
        f"simpy {ver.get('simpy')}, gcsim {ver.get('gcsim')}",
        "",
        "## Settings",
        "",
        *(f"- {k}: {v}" for k, v in settings.items()),
        "",
        "## Headline",
        "",
        _md_table(heads, rows),
        "",
        "Times are seconds per iteration after the warm-up; err = (simulated − measured) / measured; "
        "measured speedup = measured mean of `uncoded` / measured mean of the scheme; test accuracy is the "
        "last evaluation of the run; to P %: iterations and training seconds (sum of iteration times, "
        "evaluations excluded) until an evaluation first reached P % test accuracy (- = not reached). Verdict: see report.md (pass: the 95% CIs of the mean and p95 errors "
        "lie inside their bands; warn: only the point estimates do; fail: otherwise).",
        "",
    ]
    if "uncoded" in set(table["scheme"]):
        lines += ["## Accuracy against uncoded", ""]
        for _, r in table.iterrows():
            if r["scheme"] == "uncoded":
                continue
            kind = "exact" if r["exact"] else "approximate"
            lines.append(f"- `{r['scheme']}` ({kind}): final test accuracy {_f(r['test_accuracy'], '.1%')} "
                         f"(uncoded {_f(table.loc[table.scheme == 'uncoded', 'test_accuracy'].iloc[0], '.1%')}); "
                         f"largest gap to uncoded at a common evaluation "
                         f"{_f(r['accuracy_gap_vs_uncoded'] * 100, '.2f')} percentage points")
        lines.append("")
    if notes:
        lines += ["## Runs", "", *(f"- {n}" for n in notes), ""]
    if plots:
        lines += ["## Plots", ""]
        for title, rel in plots.items():
            lines += [f"### {title}", "", f"![{title}]({rel})", ""]
    return "\n".join(lines)


__all__ = ["HEADLINE_COLUMNS", "TTA_HEADLINE_COLUMNS", "accuracy_gap", "build_headline", "render_headline_md"]
