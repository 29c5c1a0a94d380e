"""Plots of a simulation run: iteration-time CDF per scheme and mean/p99 bars (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


_SAVE = {"dpi": 110, "metadata": {"Software": None}}


def plot_cdf(iterations: pd.DataFrame, path: Path, title: str = "") -> None:
    """Empirical CDF of ``duration_s`` (seconds) per scheme, written as PNG to ``path``.

    The x axis is logarithmic when the slowest scheme's p99 exceeds 20× the fastest median.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    p50s, p99s = [], []
    for scheme, grp in iterations.groupby("scheme", sort=False):
        d = np.sort(grp["duration_s"].to_numpy(dtype=float))
        y = np.arange(1, len(d) + 1) / len(d)
        ax.step(d, y, where="post", label=str(scheme), linewidth=1.3)
        p50s.append(np.quantile(d, 0.5))
        p99s.append(np.quantile(d, 0.99))
    if p50s and min(p50s) > 0 and max(p99s) > 20 * min(p50s):
        ax.set_xscale("log")
    ax.set_xlabel("iteration time (s)")
    ax.set_ylabel("fraction of iterations ≤ x")
    ax.set_ylim(0, 1.005)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or "iteration-time CDF per scheme")
    fig.tight_layout()
    fig.savefig(path, **_SAVE)
    plt.close(fig)


def plot_bars(summary: pd.DataFrame, path: Path, title: str = "") -> None:
    """Bar chart of ``mean_s`` and ``p99_s`` (seconds) per scheme, written as PNG to ``path``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(summary) + 2), 4.8))
    x = np.arange(len(summary))
    w = 0.38
    ax.bar(x - w / 2, summary["mean_s"], w, label="mean")
    ax.bar(x + w / 2, summary["p99_s"], w, label="p99")
    ax.set_xticks(x, [str(s) for s in summary["scheme"]], rotation=30, ha="right")
    ax.set_ylabel("iteration time (s)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    ax.set_title(title or "mean and p99 iteration time per scheme")
    fig.tight_layout()
    fig.savefig(path, **_SAVE)
    plt.close(fig)
