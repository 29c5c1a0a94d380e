"""Validation plots (PNG, matplotlib Agg): CDF overlay with ECDF band, QQ, predicted vs measured, and
a per-worker timeline of observed beside simulated iterations.

Every function takes plain arrays / trace DataFrames (gcsim/trace.py format, seconds), writes one PNG
and returns its path. Figures are closed after saving, so many plots do not accumulate memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from gcsim.compare.stats import ecdf_band, quantile_pairs  # noqa: E402

OBS_COLOR, SIM_COLOR = "#1f4e79", "#d95f02"


@dataclass(frozen=True)
class SamplePair:
    """One panel's data: a label (e.g. ``"gc-fr (gc-fr-20250101T000000)"``), observed and simulated
    iteration times in seconds (``(N,)`` and ``(M,)`` or ``(R, N)``, flattened for plotting)."""

    label: str
    observed: np.ndarray
    simulated: np.ndarray


def _grid(k: int, width: float = 4.2, height: float = 3.4):
    ncols = min(3, max(k, 1))
    nrows = math.ceil(max(k, 1) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.ravel()[k:]:
        ax.set_visible(False)
    return fig, axes.ravel()


def save_figure(fig, path: str | Path) -> Path:
    """Lay out, save as PNG (110 dpi, parent folders created) and close ``fig``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_cdf_overlay(pairs: Sequence[SamplePair], path: str | Path, confidence: float = 0.95) -> Path:
    """CDF of simulated vs observed iteration time, one panel per pair, with the observed ECDF's
    pointwise ``confidence`` band (Greenwood; :func:`gcsim.compare.stats.ecdf_band`).

    Returns:
        ``path`` (PNG).
    """
    fig, axes = _grid(len(pairs))
    for ax, p in zip(axes, pairs):
        band = ecdf_band(p.observed, confidence)
        ax.fill_between(band.x, band.low, band.high, step="post", color=OBS_COLOR, alpha=0.2,
                        label=f"observed {confidence:.0%} band")
        ax.step(band.x, band.cdf, where="post", color=OBS_COLOR, lw=1.6, label=f"observed (n={p.observed.size})")
        sim = np.sort(np.ravel(p.simulated))
        ax.step(sim, np.arange(1, sim.size + 1) / sim.size, where="post", color=SIM_COLOR, lw=1.4, ls="--",
                label=f"simulated (n={sim.size})")
        ax.set_title(p.label, fontsize=9)
        ax.set_xlabel("iteration time (s)")
        ax.set_ylabel("P(iteration time ≤ x)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("Iteration-time CDF: simulated vs observed", fontsize=11)
    return save_figure(fig, path)


def plot_qq(pairs: Sequence[SamplePair], path: str | Path, n_points: int = 99) -> Path:
    """QQ plot per pair: observed quantiles (x) against simulated quantiles (y), with the line y = x.
    Points above the line: the simulator predicts slower than observed at that quantile."""
    fig, axes = _grid(len(pairs), width=3.8, height=3.6)
    for ax, p in zip(axes, pairs):
        qo, qs = quantile_pairs(p.observed, p.simulated, n_points)
        lo, hi = float(min(qo.min(), qs.min())), float(max(qo.max(), qs.max()))
        pad = 0.05 * (hi - lo or hi or 1.0)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="grey", lw=1, label="y = x")
        ax.scatter(qo, qs, s=10, color=SIM_COLOR, label=f"quantiles 1..{n_points}%")
        for q, marker in ((0.5, "p50"), (0.95, "p95")):
            i = int(round(q * (n_points + 1))) - 1
            if 0 <= i < len(qo):
                ax.annotate(marker, (qo[i], qs[i]), fontsize=7, xytext=(4, -10), textcoords="offset points")
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_aspect("equal", adjustable="box")
        ax.set_title(p.label, fontsize=9)
        ax.set_xlabel("observed quantile (s)")
        ax.set_ylabel("simulated quantile (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("QQ: simulated vs observed iteration time", fontsize=11)
    return save_figure(fig, path)


def plot_predicted_vs_measured(table: pd.DataFrame, path: str | Path, band: float = 0.10,
                               mean_band: float | None = None) -> Path:
    """Predicted (simulated) vs measured (observed) mean and p95 per row, with y = x and ±``band``.

    Args:
        table: one row per compared (run, scheme) with columns ``label``, ``obs_mean_s``,
            ``sim_mean_s``, ``obs_p95_s``, ``sim_p95_s`` and optionally ``verdict``, ``basis`` (a row
            that is not ``out of sample`` is drawn hollow and says its basis) and ``err_mean_pi_lo`` /
            ``_hi`` (the mean's prediction interval, drawn as a bar through the point).
        band: relative band drawn around y = x in the p95 panel (0.10 = ±10 %).
        mean_band: the band of the mean panel (default ``band``).
    """
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), squeeze=False)
    markers = {"pass": "o", "warn": "s", "fail": "X"}
    bands = (band if mean_band is None else mean_band, band)
    for ax, stat, b in zip(axes.ravel(), ("mean", "p95"), bands):
        x = table[f"obs_{stat}_s"].to_numpy(float)
        y = table[f"sim_{stat}_s"].to_numpy(float)
        top = float(np.nanmax(np.r_[x, y])) * 1.15 if len(x) else 1.0
        line = np.linspace(0, top, 50)
        ax.plot(line, line, color="grey", lw=1, label="y = x")
        ax.fill_between(line, line * (1 - b), line * (1 + b), color="grey", alpha=0.15,
                        label=f"±{b * 100:g}%")
        for i, row in enumerate(table.itertuples(index=False)):
            v = getattr(row, "verdict", "pass") if "verdict" in table.columns else "pass"
            basis = str(getattr(row, "basis", "")) if "basis" in table.columns else ""
            predicted = basis in ("", "out of sample")  # filled: a prediction; hollow: in sample, a check
            color = f"C{i % 10}"
            ax.scatter(x[i], y[i], marker=markers.get(v, "o"), s=45, zorder=3, linewidths=1.5,
                       facecolors=color if predicted else "none", edgecolors=color,
                       label=f"{row.label} ({v}{'' if predicted else ', ' + basis})")
            lo, hi = (getattr(row, f"err_mean_pi_{e}", float("nan")) for e in ("lo", "hi"))
            if stat == "mean" and np.isfinite(lo) and np.isfinite(hi):  # the prediction interval, on y
                ax.vlines(x[i], x[i] * (1 + lo), x[i] * (1 + hi), colors=color, lw=1.2, zorder=2)
            ax.annotate(str(row.label), (x[i], y[i]), fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.set_aspect("equal", adjustable="box")
        ax.set_xlabel(f"measured {stat} iteration time (s)")
        ax.set_ylabel(f"predicted {stat} iteration time (s)")
        ax.set_title(f"{stat}: predicted vs measured" + ("\n(bars: 95 % prediction interval; hollow: not a "
                                                         "prediction)" if stat == "mean" else ""), fontsize=9)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles[:2 + min(len(table), 8)], labels[:2 + min(len(table), 8)], fontsize=6, loc="upper left")
    return save_figure(fig, path)


_SEGMENTS = (  # (name, color)
    ("dispatched, not started (model transfer / busy)", "#cccccc"),
    ("injected delay", "#dd8452"),
    ("compute", "#4c72b0"),
    ("other (before send)", "#8172b3"),
    ("transfer to master", "#55a868"),
)


def _draw_timeline(ax, workers: pd.DataFrame, iterations: pd.DataFrame, shown: Sequence[int], title: str) -> None:
    its = iterations[iterations["iteration"].isin(shown)].sort_values("iteration")
    wk = workers[workers["iteration"].isin(shown)]
    if its.empty:
        ax.set_title(f"{title}: no iterations {list(shown)}", fontsize=9)
        return
    t0 = float(its["start_s"].min())
    it_end = its.set_index("iteration")["end_s"]
    for k, row in enumerate(its.itertuples(index=False)):
        ax.axvspan(row.start_s - t0, row.end_s - t0, color="#f2f2f2" if k % 2 else "#e6eef7", zorder=0)
        ax.text((row.start_s + row.end_s) / 2 - t0, -0.9, f"it {int(row.iteration)}", ha="center", fontsize=7)
        if np.isfinite(row.decodable_s):
            ax.axvline(row.decodable_s - t0, color="crimson", ls="--", lw=1.2, zorder=4)
    h = 0.7
    for w in wk.itertuples(index=False):
        y = float(w.worker) - h / 2
        delay = w.delay_s if np.isfinite(w.delay_s) else 0.0
        c0 = w.compute_start_s + delay
        c1 = c0 + (w.compute_s if np.isfinite(w.compute_s) else 0.0)
        if not np.isfinite(w.send_s):  # never sent (cancelled): stop drawing at the iteration's end
            stop = float(it_end.get(w.iteration, np.nan))
            c1 = min(c1, stop) if np.isfinite(stop) else c1
            c0 = min(c0, c1)
        spans = [(w.dispatch_s, w.compute_start_s), (w.compute_start_s, c0), (c0, c1), (c1, w.send_s),
                 (w.send_s, w.arrival_s)]
        alpha = 1.0 if str(w.status) == "arrived" and bool(w.used) else 0.45
        for (a, b), (_, color) in zip(spans, _SEGMENTS):
            if np.isfinite(a) and np.isfinite(b) and b > a:
                ax.broken_barh([(a - t0, b - a)], (y, h), facecolors=color, alpha=alpha, zorder=2,
                               hatch=None if alpha == 1.0 else "//", edgecolor="white", lw=0.3)
        if np.isfinite(w.arrival_s):
            ax.plot(w.arrival_s - t0, w.worker, marker="o" if bool(w.used) else "x", color="black", ms=3, zorder=5)
    n = int(wk["worker"].max()) + 1 if len(wk) else 1
    ax.set_ylim(n - 0.4, -1.3)
    ax.set_yticks(range(n))
    ax.set_yticklabels([f"w{i}" for i in range(n)], fontsize=7)
    ax.set_xlabel(f"seconds since iteration {int(its['iteration'].iloc[0])} started")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)


def plot_timeline(observed_workers: pd.DataFrame, observed_iterations: pd.DataFrame,
                  simulated_workers: pd.DataFrame, simulated_iterations: pd.DataFrame, path: str | Path, *,
                  iterations: Sequence[int] | None = None, title: str = "") -> Path:
    """Per-worker Gantt timeline of a few observed iterations (top) and the simulated ones (bottom).

    Each worker row shows, per iteration: dispatched but not started (grey), the injected delay (orange),
    compute (blue), any other gap before sending (purple), the transfer to the master (green) – the
    order of :mod:`gcsim.sim.engine` (delay, then compute); faded/hatched when
    the message was late, cancelled or not used; a dot where a used message arrives (x: not used).
    Shaded columns are iterations (start_s..end_s); the red dashed line marks ``decodable_s``, the
    moment the arrived set first became decodable.

    Args:
        observed_workers, observed_iterations: one scheme's rows of workers.csv / iterations.csv.
        simulated_workers, simulated_iterations: the same for the simulated run (one replication).
        iterations: iteration indices to show (default: the first 3 after the first observed one).
        title: figure title (e.g. scheme and run name).
    """
    if iterations is None:
        first = sorted(observed_iterations["iteration"].astype(int).unique())
        iterations = first[1:4] if len(first) > 3 else first[:3]
    shown = [int(i) for i in iterations]
    n = max(int(observed_workers["worker"].max()) + 1 if len(observed_workers) else 1, 1)
    fig, axes = plt.subplots(2, 1, figsize=(11, 1.2 + 0.55 * n * 2 + 1.5), squeeze=False, sharex=True)
    _draw_timeline(axes[0, 0], observed_workers, observed_iterations, shown, "observed")
    _draw_timeline(axes[1, 0], simulated_workers, simulated_iterations, shown, "simulated")
    handles = [Patch(color=c, label=name) for name, c in _SEGMENTS]
    handles += [Line2D([], [], color="crimson", ls="--", label="decodable_s"),
                Line2D([], [], color="black", marker="o", ls="", ms=4, label="arrival (used)"),
                Line2D([], [], color="black", marker="x", ls="", ms=4, label="arrival (not used)")]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.suptitle(title or "Per-worker timeline: observed vs simulated", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["SamplePair", "plot_cdf_overlay", "plot_predicted_vs_measured", "plot_qq", "plot_timeline"]
