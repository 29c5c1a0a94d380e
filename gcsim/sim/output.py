"""Writing a simulation run directory in the :mod:`gcsim.trace` format.

``write_sim_run`` builds everything in a hidden temporary sibling directory and renames it into
place after ``meta.json`` (written last), so a failure never leaves a partial run directory. An
existing empty ``--out`` directory is kept (it may be the working directory) and filled by moving the
files in, ``meta.json`` last, removing them again on failure.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from gcsim import __version__
from gcsim.errors import ConfigError
from gcsim.scenario import Scenario
from gcsim.sim.engine import SimResult
from gcsim.sim.plots import plot_bars, plot_cdf
from gcsim.trace import ITERATION_COLUMNS, SUMMARY_COLUMNS, WORKER_COLUMNS, atomic_write_text, write_csv, write_meta, make_public


def default_run_dir(scenario_name: str, root: str | Path = "runs/sim") -> Path:
    """``<root>/<scenario_name>-<UTC timestamp>`` (e.g. ``runs/sim/heavy_tail-20250101T120000Z``)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = Path(root) / f"{scenario_name}-{stamp}"
    path, i = base, 1
    while path.exists():
        path, i = Path(f"{base}-{i}"), i + 1
    return path


def check_out_dir(out_dir: str | Path) -> Path:
    """Check that ``out_dir`` can become a new run directory, creating nothing.

    It must be absent or an empty directory, and its nearest existing parent must be a writable
    directory (so a long simulation is not lost at the end for want of a place to write it).

    Raises:
        ConfigError: field ``--out``, naming the path given.
    """
    p = Path(out_dir)
    if str(out_dir) == "" or (p.exists() and (not p.is_dir() or any(p.iterdir()))):
        raise ConfigError("--out", "a directory that does not exist yet (or is empty)", str(out_dir))
    parent = p.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError("--out", f"a path under a directory ({parent} is not a directory)", str(out_dir))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError("--out", "a path under a writable directory", str(out_dir))
    return p


def write_sim_run(result: SimResult, scenario: Scenario | None, out_dir: str | Path) -> Path:
    """Write a complete run directory and return its path.

    Files: ``config.yaml`` (the resolved scenario actually simulated: ``result.scenario``, or
    ``scenario`` when the result has none), ``summary.csv``, ``iterations.csv``, ``workers.csv``
    (:mod:`gcsim.trace` columns, seconds), ``cdf.png``, ``bars.png`` and ``meta.json`` (last).

    Raises:
        ConfigError: ``out_dir`` exists and is not an empty directory, or cannot be created (see
            :func:`check_out_dir`).
    """
    given = check_out_dir(out_dir)
    out = Path(os.path.abspath(given))  # '.', '..' and trailing slashes resolved: the parent is real
    sc = result.scenario if result.scenario is not None else scenario
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = make_public(Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")))
    except OSError as e:
        raise ConfigError("--out", "a path where a directory can be created",
                          f"{out_dir} ({e.strerror or type(e).__name__})") from None
    try:
        atomic_write_text(tmp / "config.yaml", sc.to_yaml())
        write_csv(tmp / "summary.csv", result.summary, SUMMARY_COLUMNS)
        write_csv(tmp / "iterations.csv", result.iterations, ITERATION_COLUMNS)
        write_csv(tmp / "workers.csv", result.workers, WORKER_COLUMNS)
        plot_cdf(result.iterations, tmp / "cdf.png", title=f"{sc.name}: iteration-time CDF")
        plot_bars(result.summary, tmp / "bars.png", title=f"{sc.name}: mean and p99 iteration time")
        write_meta(tmp, "sim", scenario=sc.name, seed=sc.seed, iterations=sc.iterations, n_workers=sc.n_workers,
                   policy=sc.policy, schemes=list(result.schemes), gcsim_version=__version__)
        for f in tmp.iterdir():
            os.chmod(f, 0o644)
        if out.exists():  # an empty directory (checked above), maybe the working directory: fill it
            _move_files_into(tmp, out)
            tmp.rmdir()
        else:
            os.chmod(tmp, 0o755)
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return given


def _move_files_into(src: Path, dst: Path) -> None:
    """Move every file of ``src`` into the empty directory ``dst``, ``meta.json`` last (it marks a
    complete run); on any failure remove the files already moved, so ``dst`` is left empty."""
    names = sorted((f.name for f in src.iterdir()), key=lambda name: name == "meta.json")
    moved: list[Path] = []
    try:
        for name in names:
            os.replace(src / name, dst / name)
            moved.append(dst / name)
    except BaseException:
        for f in moved:
            f.unlink(missing_ok=True)
        raise
