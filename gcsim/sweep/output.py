"""sweep.csv (tidy: one row per point and scheme) and the sweep's plots (matplotlib, Agg).

Columns of sweep.csv, in order: ``point`` (index in the grid, first key slowest), one column per grid
key that is not a fixed column (e.g. ``stragglers.delay.p``, ``schemes``), then :data:`ROW_COLUMNS`:
``n`` (workers), ``scheme`` (its label or name), ``s``, ``m``, ``status`` (``ok``; ``skipped``: the
scheme or the scenario refused the point's parameters, ``reason`` says why; ``failed``: the simulation
raised, ``reason`` says what), ``mean_s`` / ``p50_s`` / ``p95_s`` / ``p99_s`` (iteration time, seconds;
empty unless ``ok``), ``iterations`` (of the point), ``refusals`` (iterations that waited past a refused
decode), ``engine`` (``vector`` or ``simpy``), ``seed``. Floats are written with ``repr`` (they read
back bit for bit).
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Iterable

from gcsim.rundir import atomic_write_text
from gcsim.sweep.config import SweepPlan

#: the per-row columns after the grid columns
ROW_COLUMNS = ["n", "scheme", "s", "m", "status", "reason", "mean_s", "p50_s", "p95_s", "p99_s", "iterations",
               "refusals", "engine", "seed"]
#: values of the ``status`` column
ROW_STATUSES = ("ok", "skipped", "failed")

_UNITS = {"n": "n (workers)", "s": "s (stragglers tolerated)", "m": "m (communication reduction)",
          "seed": "seed", "iterations": "iterations"}


def csv_columns(plan: SweepPlan) -> list[str]:
    """The header of the sweep's sweep.csv."""
    return ["point", *plan.columns(), *ROW_COLUMNS]


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else repr(v)
    return str(v)


def csv_text(plan: SweepPlan, rows: Iterable[dict]) -> str:
    """sweep.csv's text for ``rows`` (dicts with :func:`csv_columns` keys; missing keys are empty)."""
    cols = csv_columns(plan)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in cols])
    return buf.getvalue()


def write_csv(plan: SweepPlan, rows: Iterable[dict], path: Path) -> None:
    """Write sweep.csv atomically."""
    atomic_write_text(path, csv_text(plan, rows))


def _pyplot():
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def plot_axis(plan: SweepPlan, rows: list[dict], column: str, path: Path) -> bool:
    """Mean and p95 iteration time (seconds) against the swept ``column``, one line per scheme (its own
    marker and line style, so coinciding lines stay visible); each marker is the mean over the ``ok`` rows
    at that value (the other swept values averaged; a scheme skipped at some of them says over how many
    in its legend). Non-numeric values are placed in grid order. Returns False (nothing written) when no
    row is ``ok``."""
    import numpy as np

    ax_obj = next(a for a in plan.axes if a.column == column)
    ok = [r for r in rows if r.get("status") == "ok"]
    if not ok:
        return False
    from gcsim.sweep.config import display

    labels = [display(v) for v in ax_obj.values] if ax_obj.kind != "schemes" else []
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in ax_obj.values)
    schemes = list(dict.fromkeys(r["scheme"] for r in ok))
    others = len([a for a in plan.axes if a.column != column])
    plt = _pyplot()
    fig, panels = plt.subplots(1, 2, figsize=(11, 4.4))
    # rows per (scheme, value): a scheme skipped at some of the other parameters' values is averaged over
    # fewer of them than the rest, and its legend says so (a review found uncoded, only valid at s = 0,
    # averaged over s = 0 alone beside schemes averaged over s = 0, 1, 3)
    counts = {(sch, display(v)): sum(1 for r in ok if r["scheme"] == sch and display(r[column]) == display(v))
              for sch in schemes for v in ax_obj.values}
    most = max(counts.values()) if counts else 0
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-"), ("x", "--"), ("P", "-."), ("*", ":")]
    for metric, pan, what in (("mean_s", panels[0], "mean"), ("p95_s", panels[1], "p95")):
        for i, sch in enumerate(schemes):
            xs, ys = [], []
            for pos, v in enumerate(ax_obj.values):
                key = display(v)
                vals = [r[metric] for r in ok if r["scheme"] == sch and display(r[column]) == key]
                if not vals:
                    continue
                xs.append(v if numeric else pos)
                ys.append(float(np.mean(vals)))
            if xs:
                fewest = min(c for (s_, _), c in counts.items() if s_ == sch and c > 0)
                label = sch if fewest == most else f"{sch} (over {fewest} of {most} combinations: the rest skipped)"
                marker, line = styles[i % len(styles)]
                pan.plot(xs, ys, marker=marker, linestyle=line, markersize=7 - (i % 3), label=label)
        pan.set_xlabel(_UNITS.get(column, column))
        pan.set_ylabel(f"{what} iteration time (s)")
        pan.set_title(f"{what} iteration time vs {column}")
        pan.grid(True, alpha=0.3)
        if numeric and len(ax_obj.values) <= 12:
            pan.set_xticks(sorted(set(ax_obj.values)))
        if not numeric:
            pan.set_xticks(range(len(labels)), labels, rotation=20, fontsize=8)
    panels[0].legend(fontsize=8, title="scheme")
    sub = ("each marker: the mean over the other swept parameters' values" if others
           else "each marker: one simulation")
    fig.suptitle(f"sweep {plan.name}: iteration time vs {column}\n({sub}; skipped points left out)\n"
                 f"schemes with equal times draw on top of each other: sweep.csv has every row", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return True


def plot_name(column: str) -> str:
    """File name of the plot against ``column`` (``plot_stragglers.delay.p.png``)."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in column)
    return f"plot_{safe}.png"


def write_plots(plan: SweepPlan, rows: list[dict], out: Path) -> list[Path]:
    """One plot per swept parameter with two or more values (not ``schemes``: it is the lines);
    returns the files written."""
    written = []
    for ax in plan.axes:
        if ax.kind == "schemes" or len(ax.values) < 2:
            continue
        path = Path(out) / plot_name(ax.column)
        if plot_axis(plan, rows, ax.column, path):
            written.append(path)
    return written


__all__ = ["ROW_COLUMNS", "ROW_STATUSES", "csv_columns", "csv_text", "plot_axis", "plot_name", "write_csv",
           "write_plots"]
