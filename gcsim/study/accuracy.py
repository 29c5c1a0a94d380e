"""Accuracy of a study's runs: ``accuracy.png`` (test accuracy and mean training loss against
iteration), ``accuracy_time.png`` (test accuracy against training wall time) and time to accuracy
(:func:`time_to_accuracy`: iterations and wall seconds to reach stated test-accuracy targets), from the
runs' ``metrics.csv`` (:data:`gcsim.real.rundir.METRICS_COLUMNS`) and ``iterations.csv``
(:data:`gcsim.trace.ITERATION_COLUMNS`). Exact schemes are solid lines, approximate ones dashed; an
exact scheme should lie on ``uncoded``'s curve.

Training wall time at the end of iteration t is the sum of ``duration_s`` (start of the iteration to
the end of its SGD step) over the iterations ``<= t``: test-set evaluations and checkpoints between
iterations are not counted (they are the same for every scheme and not part of training).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from gcsim.compare.plots import save_figure  # noqa: E402


#: test-accuracy targets (fractions) of the study's time-to-accuracy columns (small CNN, CIFAR-10)
DEFAULT_TARGETS = (0.40, 0.50)

#: columns of :func:`time_to_accuracy` / ``time_to_accuracy.csv`` (one row per scheme and target):
#: ``target`` fraction; ``iterations`` completed at the first evaluation reaching it; ``wall_s``
#: training seconds to then (module docstring); both NaN when no evaluation reached it
TTA_COLUMNS = ["scheme", "target", "iterations", "wall_s"]


def accuracy_curve(metrics: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy at every evaluation against iterations completed and training wall time.

    Args:
        metrics: a run's ``metrics.csv`` (``iteration`` 0-based index of the last iteration before the
            evaluation, ``test_accuracy`` fraction).
        iterations: the run's ``iterations.csv`` (``iteration``, ``duration_s`` seconds) of one scheme.
    Returns:
        DataFrame ``iterations_done`` (int), ``wall_s`` (training seconds up to and including that
        iteration; NaN if a duration is missing), ``test_accuracy``, sorted by ``iterations_done``.
    """
    dur = iterations[["iteration", "duration_s"]].sort_values("iteration")
    cum = pd.Series(np.cumsum(dur["duration_s"].to_numpy(float)), index=dur["iteration"].to_numpy(int))
    it = metrics["iteration"].to_numpy(int)
    wall = cum.reindex(it).to_numpy(float)
    out = pd.DataFrame({"iterations_done": it + 1, "wall_s": wall,
                        "test_accuracy": metrics["test_accuracy"].to_numpy(float)})
    return out.sort_values("iterations_done", ignore_index=True)


def time_to_accuracy(metrics: pd.DataFrame, iterations: pd.DataFrame,
                     targets=DEFAULT_TARGETS) -> pd.DataFrame:
    """Iterations and training wall seconds until the test accuracy first reaches each target.

    Resolution is the run's evaluation interval: the answer is the first evaluation at or above the
    target (an upper bound on the true crossing).

    Args:
        metrics, iterations: as :func:`accuracy_curve`.
        targets: test-accuracy targets, fractions in (0, 1].
    Returns:
        DataFrame ``target``, ``iterations`` (float; NaN when not reached), ``wall_s`` (NaN when not
        reached), one row per target in the given order.
    Raises:
        GcsimError: a target outside (0, 1].
    """
    from gcsim.errors import GcsimError

    curve = accuracy_curve(metrics, iterations)
    rows = []
    for t in targets:
        if not 0 < float(t) <= 1:
            raise GcsimError(f"accuracy target {t!r}: expected a fraction in (0, 1]")
        hit = curve[curve["test_accuracy"] >= float(t)]
        first = hit.iloc[0] if len(hit) else None
        rows.append({"target": float(t), "iterations": float(first["iterations_done"]) if first is not None else np.nan,
                     "wall_s": float(first["wall_s"]) if first is not None else np.nan})
    return pd.DataFrame(rows, columns=["target", "iterations", "wall_s"])


def time_to_accuracy_of_run(run_dir: str | Path, targets=DEFAULT_TARGETS, scheme: str | None = None) -> pd.DataFrame:
    """:func:`time_to_accuracy` of a run directory (``metrics.csv`` + ``iterations.csv``).

    Args:
        run_dir: a real run's directory.
        targets: accuracy targets (fractions).
        scheme: label in ``iterations.csv`` (default: its only one).
    Returns:
        DataFrame with :data:`TTA_COLUMNS`.
    Raises:
        GcsimError: a file is missing, or ``scheme`` is not (or not uniquely) in ``iterations.csv``.
    """
    from gcsim.errors import GcsimError

    d = Path(run_dir)
    for name in ("metrics.csv", "iterations.csv"):
        if not (d / name).is_file():
            raise GcsimError(f"{d}: no {name} (not a finished real run directory)")
    metrics, its = pd.read_csv(d / "metrics.csv"), pd.read_csv(d / "iterations.csv")
    labels = sorted(set(its["scheme"].astype(str)))
    if scheme is None and len(labels) != 1:
        raise GcsimError(f"{d}: iterations.csv holds schemes {labels}; name one")
    scheme = labels[0] if scheme is None else scheme
    if scheme not in labels:
        raise GcsimError(f"{d}: scheme {scheme!r} not in iterations.csv (has {labels})")
    tta = time_to_accuracy(metrics, its[its["scheme"].astype(str) == scheme], targets)
    tta.insert(0, "scheme", scheme)
    return tta[TTA_COLUMNS]


def _style(k: int, scheme: str, exact: Mapping[str, bool]) -> tuple[dict, str, str]:
    """(line style kwargs, linestyle, legend label) of scheme number ``k``."""
    cmap = plt.get_cmap("tab10")
    style = dict(color="black", lw=2.5, zorder=1) if scheme == "uncoded" else dict(color=cmap(k % 10), lw=1.4)
    is_exact = exact.get(scheme, True)
    return style, "-" if is_exact else "--", scheme + ("" if is_exact else " (approx.)")


def plot_accuracy_time(curves: Mapping[str, pd.DataFrame], exact: Mapping[str, bool], path: str | Path,
                       targets=DEFAULT_TARGETS) -> Path:
    """Write ``accuracy_time.png``: test accuracy against training wall time (and against iterations).

    Args:
        curves: scheme -> :func:`accuracy_curve` frame.
        exact: scheme -> whether its decoding is exact.
        path: PNG to write.
        targets: accuracy targets drawn as horizontal lines (fractions).
    Returns:
        ``path``.
    """
    fig, (ax_t, ax_i) = plt.subplots(1, 2, figsize=(12, 4.5))
    for k, (scheme, c) in enumerate(curves.items()):
        style, ls, label = _style(k, scheme, exact)
        acc = c["test_accuracy"].to_numpy(float) * 100
        ax_t.plot(c["wall_s"].to_numpy(float), acc, ls=ls, marker="o", ms=3, label=label, **style)
        ax_i.plot(c["iterations_done"].to_numpy(float), acc, ls=ls, marker="o", ms=3, label=label, **style)
    for ax in (ax_t, ax_i):
        for t in targets:
            ax.axhline(float(t) * 100, color="grey", lw=0.8, ls=":")
        ax.grid(alpha=0.3)
        ax.set_ylabel("test accuracy (%)")
    ax_t.set(xlabel="training wall time (s, sum of iteration durations)", title="Test accuracy vs wall time")
    ax_i.set(xlabel="iterations completed", title="Test accuracy vs iterations")
    ax_t.legend(fontsize=8, loc="lower right")
    return save_figure(fig, path)


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
    for k, (scheme, mt) in enumerate(curves.items()):
        x = mt["iteration"].to_numpy(float) + 1  # iterations completed at the evaluation
        style, ls, label = _style(k, scheme, exact)
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


__all__ = ["DEFAULT_TARGETS", "TTA_COLUMNS", "accuracy_curve", "plot_accuracy", "plot_accuracy_time",
           "time_to_accuracy", "time_to_accuracy_of_run"]
