"""Write a comparison's output directory: ``validation.csv``, ``calibration.json``, the plots and
``report.md``. The directory is created at the start (:func:`gcsim.rundir.new_run_dir`) and discarded
on failure, so a failure never leaves a partial directory."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from gcsim.compare.pipeline import CompareResult
from gcsim.compare.plots import (SamplePair, plot_cdf_overlay, plot_predicted_vs_measured, plot_qq, plot_timeline)
from gcsim.compare.report import render_report
from gcsim.rundir import NewRunDir, atomic_write_text, new_run_dir


#: Parent of default comparison directories (``<root>/<UTC timestamp>``).
DEFAULT_COMPARE_ROOT = Path("runs/compare")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "scheme"


def _json_ready(x):
    """Replace non-finite floats by strings ("inf", "nan") so the JSON stays standard."""
    if isinstance(x, dict):
        return {str(k): _json_ready(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_ready(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _write_into(result: CompareResult, d: Path, command: str) -> dict[str, Path]:
    table = result.table()
    files = {}
    atomic_write_text(d / "validation.csv", table.to_csv(index=False, float_format="%.9g"))
    files["validation.csv"] = d / "validation.csv"
    cal = {k: c.describe() for k, c in result.calibrations.items()}
    atomic_write_text(d / "calibration.json", json.dumps(_json_ready(cal), indent=2, default=str, allow_nan=False))
    files["calibration.json"] = d / "calibration.json"
    plots: dict[str, str] = {}
    if result.items:
        pairs = [SamplePair(it.label, it.observed_sample(), it.simulated_sample()) for it in result.items]
        plot_cdf_overlay(pairs, d / "cdf.png", result.options.confidence)
        plots["CDF overlay with the observed ECDF 95% band"] = "cdf.png"
        plot_qq(pairs, d / "qq.png")
        plots["QQ plots (y = x is a perfect prediction)"] = "qq.png"
        pvm = table.copy()
        plot_predicted_vs_measured(pvm, d / "predicted_vs_measured.png", band=result.options.bands.p95 or 0.10,
                                   mean_band=result.options.bands.mean or 0.05)
        plots["Predicted vs measured mean and p95"] = "predicted_vs_measured.png"
        for it in result.items:
            first = sorted(it.observed_iterations["iteration"].astype(int).unique())[it.warmup:it.warmup + 3]
            name = f"timeline_{_slug(it.label)}.png"
            plot_timeline(it.observed_workers, it.observed_iterations,
                          it.simulated_workers[it.simulated_workers["scheme"] == it.scheme],
                          it.simulated_iterations[(it.simulated_iterations["replication"] == 0)
                                                  & (it.simulated_iterations["scheme"] == it.scheme)],
                          d / name, iterations=first,
                          title=f"{it.label}: per-worker timeline, observed (top) vs simulated replication 0 (bottom)")
            plots[f"Timeline: {it.label}"] = name
    for title, rel in plots.items():
        files[rel] = d / rel
    atomic_write_text(d / "report.md", render_report(result, plots, command=command))
    files["report.md"] = d / "report.md"
    return files


def write_compare_outputs(result: CompareResult, out_dir: str | Path | NewRunDir, *,
                          command: str = "") -> dict[str, Path]:
    """Write every output file of a comparison into ``out_dir``.

    Args:
        result: from :func:`gcsim.compare.pipeline.compare_runs`.
        out_dir: a directory made by :func:`gcsim.rundir.new_run_dir` before comparing (released
            here when complete), or a path to create the same way (absent or empty).
        command: command line shown in the report.
    Returns:
        file name -> final path (``validation.csv``, ``calibration.json``, ``report.md`` and the PNGs).
    Raises:
        ConfigError: a path ``out_dir`` exists and is not empty (field ``--out``).
    """
    owned = not isinstance(out_dir, NewRunDir)
    run = new_run_dir(out_dir, root=DEFAULT_COMPARE_ROOT, prefix="") if owned else out_dir
    try:
        files = _write_into(result, run.path, command)
    except BaseException:
        if owned:
            run.discard()
        raise
    run.release()
    return files


__all__ = ["DEFAULT_COMPARE_ROOT", "write_compare_outputs"]
