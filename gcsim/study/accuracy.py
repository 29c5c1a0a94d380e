"""``accuracy.png``: test accuracy (and mean training loss) against iteration for every scheme of a
study, from the runs' ``metrics.csv`` (:data:`gcsim.real.rundir.METRICS_COLUMNS`). Exact schemes are
solid lines, approximate ones dashed; an exact scheme should lie on ``uncoded``'s curve."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from gcsim.compare.plots import save_figure  # noqa: E402


def plot_accuracy(curves: Mapping[str, pd.DataFrame], exact: Mapping[str, bool], path: str | Path) -> Path:
    """Write the accuracy plot.

    Args:
        curves: scheme -> its ``metrics.csv`` (``iteration`` 0-based, ``test_accuracy`` fraction,
            ``loss`` mean training loss since the previous evaluation).
        exact: scheme -> whether its decoding is exact.
        path: PNG to write.
    Returns:
        ``path``.
    """
    fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(12, 4.5))
    cmap = plt.get_cmap("tab10")
    for k, (scheme, mt) in enumerate(curves.items()):
        x = mt["iteration"].to_numpy(float) + 1  # iterations completed at the evaluation
        style = dict(color="black", lw=2.5, zorder=1) if scheme == "uncoded" else dict(color=cmap(k % 10), lw=1.4)
        ls = "-" if exact.get(scheme, True) else "--"
        label = scheme + ("" if exact.get(scheme, True) else " (approx.)")
        ax_acc.plot(x, mt["test_accuracy"].to_numpy(float) * 100, ls=ls, marker="o", ms=3, label=label, **style)
        ax_loss.plot(x, mt["loss"].to_numpy(float), ls=ls, marker="o", ms=3, label=label, **style)
    ax_acc.set(xlabel="iterations completed", ylabel="test accuracy (%)", title="Test accuracy")
    ax_loss.set(xlabel="iterations completed", ylabel="mean training loss since previous evaluation",
                title="Training loss")
    for ax in (ax_acc, ax_loss):
        ax.grid(alpha=0.3)
    ax_acc.legend(fontsize=8, loc="lower right")
    fig.suptitle("Exact schemes (solid) should track uncoded (black); approximate schemes dashed", fontsize=10)
    return save_figure(fig, path)


__all__ = ["plot_accuracy"]
