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


_STYLES = ("-", "--", "-.", ":")


def cdf_figure(iterations: pd.DataFrame, title: str = ""):
    """Two-panel figure of the iteration time ``duration_s`` (seconds) per scheme.

    * left, **body**: empirical CDF on a linear axis zoomed to ``[fastest minimum, min(slowest p99,
      2 × median of the schemes' p99)]``, so the schemes' bulk stays readable even when one scheme has
      a heavy tail;
    * right, **tail**: empirical survival function ``P(T >= x)`` at every sorted duration, on log-log
      axes over the full range (a power-law tail is a straight line; the last point is ``1/iterations``).

    Line styles cycle with the colours, and a scheme whose sorted times equal an earlier scheme's
    (e.g. the pipelined schemes and ``ignore-stragglers``, which all wait for the first ``n - s``
    single-partition arrivals) is labelled "(same as <earlier>)" since its curve lies under the earlier
    one. Returns the matplotlib Figure (caller closes it).
    """
    plt = _pyplot()
    fig, (body, tail) = plt.subplots(1, 2, figsize=(12.5, 4.8))
    mins, p99s, maxs = [], [], []
    drawn: dict[str, np.ndarray] = {}
    for i, (scheme, grp) in enumerate(iterations.groupby("scheme", sort=False)):
        d = np.sort(grp["duration_s"].to_numpy(dtype=float))
        n = len(d)
        label = str(scheme)
        twin = next((k for k, v in drawn.items() if v.shape == d.shape and np.allclose(v, d, rtol=1e-9, atol=0)), None)
        if twin is not None:
            label += f" (same as {twin})"  # its curve hides under the earlier one
        drawn[str(scheme)] = d
        style = {"linestyle": _STYLES[i % len(_STYLES)], "linewidth": 1.4, "label": label, "color": f"C{i % 10}"}
        body.step(d, np.arange(1, n + 1) / n, where="post", **style)
        keep = d > 0
        tail.step(d[keep], ((n - np.arange(n)) / n)[keep], where="post", **style)
        mins.append(d[0])
        p99s.append(np.quantile(d, 0.99))
        maxs.append(d[-1])
    if mins:
        # one heavy-tailed scheme must not squash the others: stop at twice the median p99 if that
        # comes first (the right panel shows every tail in full)
        lo, hi = min(mins), min(max(p99s), 2 * float(np.median(p99s)))
        pad = 0.05 * (hi - lo) if hi > lo else 0.05 * max(abs(hi), 1e-3)
        body.set_xlim(lo - pad, hi + pad)
        n_max = max(len(g) for _, g in iterations.groupby("scheme", sort=False))
        tail.set_ylim(0.5 / n_max, 1.5)
    body.set_xlabel("iteration time (s)")
    body.set_ylabel("fraction of iterations ≤ x")
    body.set_ylim(0, 1.005)
    body.set_title("body: CDF (zoomed; every tail in full on the right)", fontsize=10)
    body.grid(alpha=0.3)
    body.legend(fontsize=8, loc="lower right")
    if maxs and max(maxs) > 0:
        tail.set_xscale("log")
        tail.set_yscale("log")
        from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter
        tail.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        tail.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        tail.xaxis.set_minor_formatter(NullFormatter())
    else:  # every iteration took 0 s: nothing to show on log axes
        tail.set_ylim(0, 1.05)
        tail.text(0.5, 0.5, "every iteration took 0 s", ha="center", va="center", transform=tail.transAxes)
    tail.set_xlabel("iteration time (s, log)")
    tail.set_ylabel("fraction of iterations ≥ x (log)")
    tail.set_title("tail: survival function, full range", fontsize=10)
    tail.grid(alpha=0.3, which="both")
    fig.suptitle(title or "iteration-time distribution per scheme")
    fig.tight_layout()
    return fig


def plot_cdf(iterations: pd.DataFrame, path: Path, title: str = "") -> None:
    """Write :func:`cdf_figure` (body CDF + log-log tail of ``duration_s`` per scheme) as PNG to ``path``."""
    plt = _pyplot()
    fig = cdf_figure(iterations, title)
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
