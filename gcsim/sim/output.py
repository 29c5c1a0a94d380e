"""Writing a simulation run directory in the :mod:`gcsim.trace` format.

The directory is created and claimed at the start of the run (:func:`gcsim.rundir.new_run_dir`, so a
bad ``--out`` fails before simulating and two runs never share a directory); ``write_sim_run`` fills
it, every file atomically and ``meta.json`` last. On failure the caller discards it
(:meth:`gcsim.rundir.NewRunDir.discard`), so nothing half-written is left.
"""

from __future__ import annotations

import os
from pathlib import Path

from gcsim import __version__
from gcsim.rundir import NewRunDir, atomic_write_text, new_run_dir
from gcsim.scenario import Scenario
from gcsim.sim.engine import SimResult
from gcsim.sim.plots import plot_bars, plot_cdf
from gcsim.trace import ITERATION_COLUMNS, SUMMARY_COLUMNS, WORKER_COLUMNS, write_csv, write_meta

#: Parent of default simulation run directories.
DEFAULT_SIM_ROOT = Path("runs/sim")


def write_sim_run(result: SimResult, scenario: Scenario | None, out_dir: str | Path | NewRunDir, *,
                  ranges=None) -> Path:
    """Write a complete run directory and return its path.

    Files: ``config.yaml`` (the resolved scenario actually simulated: ``result.scenario``, or
    ``scenario`` when the result has none), ``summary.csv``, ``iterations.csv``, ``workers.csv``
    (:mod:`gcsim.trace` columns, seconds), ``cdf.png``, ``bars.png`` and ``meta.json`` (last, with the
    ``engine`` that computed the run and the ``trace`` level: ``iterations`` omits workers.csv, ``none``
    also iterations.csv); with ``ranges`` (:func:`gcsim.sim.drift.mean_ranges`) ``prediction_range.csv``.

    Args:
        out_dir: a directory made by :func:`gcsim.rundir.new_run_dir` (released here when complete),
            or a path, which is created the same way (absent or an empty directory).
    Raises:
        ConfigError: a path ``out_dir`` exists and is not an empty directory, or cannot be created.
    """
    owned = not isinstance(out_dir, NewRunDir)
    run = new_run_dir(out_dir, root=DEFAULT_SIM_ROOT, prefix="sim") if owned else out_dir
    out = run.path
    sc = result.scenario if result.scenario is not None else scenario
    try:
        atomic_write_text(out / "config.yaml", sc.to_yaml())
        write_csv(out / "summary.csv", result.summary, SUMMARY_COLUMNS)
        if ranges is not None:
            from gcsim.sim.drift import RANGE_COLUMNS

            write_csv(out / "prediction_range.csv", ranges, RANGE_COLUMNS)
        trace = getattr(result, "trace", "full")
        if trace in ("iterations", "full"):
            write_csv(out / "iterations.csv", result.iterations, ITERATION_COLUMNS)
        if trace == "full":
            write_csv(out / "workers.csv", result.workers, WORKER_COLUMNS)
        plot_cdf(result.iterations, out / "cdf.png", title=f"{sc.name}: iteration-time CDF")
        plot_bars(result.summary, out / "bars.png", title=f"{sc.name}: mean and p99 iteration time")
        for f in out.iterdir():
            os.chmod(f, 0o644)
        write_meta(out, "sim", scenario=sc.name, seed=sc.seed, iterations=sc.iterations, n_workers=sc.n_workers,
                   policy=sc.policy, schemes=list(result.schemes), gcsim_version=__version__,
                   engine=getattr(result, "engine", "simpy"), engine_note=getattr(result, "engine_note", ""),
                   trace=trace)
    except BaseException:
        if owned:
            run.discard()
        raise
    run.release()
    return out
