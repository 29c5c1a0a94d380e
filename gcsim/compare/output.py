"""Write a comparison's output directory: ``validation.csv``, ``calibration.json``, the plots and
``report.md``. The directory is assembled under a temporary name and renamed into place, so a failure
never leaves a partial directory."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from gcsim.compare.pipeline import CompareResult
from gcsim.compare.plots import (SamplePair, plot_cdf_overlay, plot_predicted_vs_measured, plot_qq, plot_timeline)
from gcsim.compare.report import render_report
from gcsim.errors import ConfigError
from gcsim.trace import atomic_write_text, make_public


def default_out_dir(root: str | Path = "runs/compare") -> Path:
    """``<root>/<UTC timestamp>`` (``YYYYmmddTHHMMSSZ``), with a numeric suffix if it exists."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(root) / stamp
    k = 1
    while out.exists():
        out = Path(root) / f"{stamp}-{k}"
        k += 1
    return out


def check_out_dir(out_dir: str | Path) -> Path:
    """Return ``out_dir`` if it does not exist or is an empty directory.

    Raises:
        ConfigError: field ``--out``, when it exists and is not an empty directory.
    """
    p = Path(out_dir)
    if p.exists() and (not p.is_dir() or any(p.iterdir())):
        raise ConfigError("--out", "a directory that does not exist yet (or is empty)", str(out_dir))
    return p


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
        plot_predicted_vs_measured(pvm, d / "predicted_vs_measured.png", band=result.options.bands.p95 or 0.10)
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


def write_compare_outputs(result: CompareResult, out_dir: str | Path, *, command: str = "") -> dict[str, Path]:
    """Write every output file of a comparison into ``out_dir``.

    Args:
        result: from :func:`gcsim.compare.pipeline.compare_runs`.
        out_dir: directory to create (absent or empty).
        command: command line shown in the report.
    Returns:
        file name -> final path (``validation.csv``, ``calibration.json``, ``report.md`` and the PNGs).
    Raises:
        ConfigError: ``out_dir`` exists and is not empty (field ``--out``).
    """
    out = check_out_dir(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_public(Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-")))
    try:
        files = _write_into(result, tmp, command)
        os.chmod(tmp, 0o755)
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {k: out / v.relative_to(tmp) for k, v in files.items()}


__all__ = ["check_out_dir", "default_out_dir", "write_compare_outputs"]
