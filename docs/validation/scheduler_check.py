"""Finding 23's tables: how the workers of real runs shared the 2 cores, beside the simulator's two
models of it (``workload.scheduler``), on one protocol pass's traces.

Every target of the pass is replayed with its own straggler draws (``gcsim compare --mode paired``),
calibrated from ``uncoded-a`` with the target's own measured other-process CPU and CPU per partition
(``--load-from target --speed-from target``: the machine state is given, so what differs is how the
cores were shared), once per scheduler. For every worker-iteration that sent, ``wall / CPU`` of its
partitions (``compute_s / compute_cpu_s``) is binned by ``A``, the time-average number of workers
computing during its partitions (itself included); for a worker computing alone, its wall time beyond its CPU
time by the number of other workers' replies that reached the master meanwhile; and, per scheme,
the compute wall time of the worker whose message made the iteration decodable (the last one the
master needed).

    .venv/bin/python docs/validation/scheduler_check.py docs/validation/protocol-seed4-2026-12-04/runs/real_expon

Takes a few seconds. Prints three Markdown tables.
"""

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from gcsim.compare.pipeline import CompareOptions, compare_runs
from gcsim.compare.rundir import read_run_dir

WARMUP = 10
BINS = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)


def _partition_windows(workers: pd.DataFrame) -> pd.DataFrame:
    """Rows that computed, with ``A`` and ``ratio`` (a real worker sleeps its delay, then computes)."""
    w = workers[workers["iteration"] >= WARMUP].copy()
    start = (w["compute_start_s"] + w["delay_s"]).to_numpy(float)
    end = start + w["compute_s"].to_numpy(float)
    ok = np.isfinite(start) & np.isfinite(end) & (w["compute_s"].to_numpy(float) > 0.005)
    w, start, end = w[ok], start[ok], end[ok]
    overlap = np.clip(np.minimum(end[:, None], end[None, :]) - np.maximum(start[:, None], start[None, :]), 0, None)
    np.fill_diagonal(overlap, 0.0)
    w["A"] = 1.0 + overlap.sum(axis=1) / (end - start)
    w["ratio"] = w["compute_s"] / w["compute_cpu_s"]
    arrivals = pd.to_numeric(workers["arrival_s"], errors="coerce").dropna().to_numpy(float)
    w["replies"] = ((arrivals[None, :] >= start[:, None]) & (arrivals[None, :] < end[:, None])).sum(axis=1)
    return w[np.isfinite(w["ratio"])]


def _decisive(workers: pd.DataFrame, iterations: pd.DataFrame) -> pd.DataFrame:
    """Per iteration after the warm-up, the used worker whose message arrived last by ``decodable_s``."""
    w = workers.merge(iterations[["iteration", "decodable_s"]], on="iteration")
    w = w[(w["iteration"] >= WARMUP) & (w["status"] == "arrived") & w["used"].astype(bool)
          & (w["arrival_s"] <= w["decodable_s"] + 1e-9)]
    return w.loc[w.groupby("iteration")["arrival_s"].idxmax()]


def main(runs_root: str) -> None:
    root = Path(runs_root)
    source = read_run_dir(root / "uncoded-a")
    targets = [read_run_dir(p) for p in sorted(root.iterdir()) if (p / "workers.csv").exists()]
    results = {}
    for scheduler in ("processor-sharing", "per-core"):
        opts = dataclasses.replace(CompareOptions(), mode="paired", cpu_source="measured", load_from="target",
                                   speed_from="target", replications=1, scheduler=scheduler)
        results[scheduler] = compare_runs([(r, list(r.schemes)) for r in targets], calibrate_from=[source],
                                          options=opts).items
    observed = results["processor-sharing"]
    windows = {"measured": pd.concat([_partition_windows(it.observed_workers) for it in observed])}
    for scheduler, items in results.items():
        windows[scheduler] = pd.concat([_partition_windows(it.simulated_workers) for it in items])
    print(f"wall / CPU of a worker's partitions by A, the workers computing meanwhile ({runs_root}; every target, "
          f"iterations >= {WARMUP}): mean, standard deviation, 5th-95th percentile\n")
    print("| A | " + " | ".join(windows) + " |")
    print("|---|" + "---|" * len(windows))
    for a in BINS:
        cells = []
        for w in windows.values():
            x = w["ratio"][(w["A"] - a).abs() < 0.25]
            q5, q95 = np.percentile(x, [5, 95]) if len(x) else (np.nan, np.nan)
            cells.append(f"{x.mean():.2f} ± {x.std():.2f} [{q5:.2f}, {q95:.2f}] (n {len(x)})")
        print(f"| {a:.1f} | " + " | ".join(cells) + " |")
    print("\nA worker computing alone (A < 1.15): wall time beyond its CPU time (ms, mean) by the number of "
          "replies of other workers that reached the master meanwhile\n")
    print("| replies meanwhile | " + " | ".join(windows) + " |")
    print("|---|" + "---|" * len(windows))
    for k in (0, 1, 2):
        cells = []
        for w in windows.values():
            x = w[(w["A"] < 1.15) & (np.minimum(w["replies"], 2) == k)]
            cells.append(f"{((x['ratio'] - 1) * x['compute_cpu_s']).mean() * 1e3:.1f} (n {len(x)})")
        print(f"| {k}{'+' if k == 2 else ''} | " + " | ".join(cells) + " |")
    print("\nThe worker the master waited for last: compute wall time of its partitions (ms) and the mean "
          "iteration time (ms), measured vs each scheduler (one paired replay)\n")
    print("| target | measured wall | " + " | ".join(f"{s} wall" for s in results) + " | measured mean | "
          + " | ".join(f"{s} mean" for s in results) + " |")
    print("|---|---|" + "---|" * (2 * len(results) + 1))
    for k, it in enumerate(observed):
        obs_w = _decisive(it.observed_workers, it.observed_iterations)["compute_s"].mean() * 1e3
        obs_m = it.observed_iterations.loc[it.observed_iterations["iteration"] >= WARMUP, "duration_s"].mean() * 1e3
        walls, means = [], []
        for items in results.values():
            sim = items[k]
            its = sim.simulated_iterations[sim.simulated_iterations["replication"] == 0]
            walls.append(_decisive(sim.simulated_workers, its)["compute_s"].mean() * 1e3)
            means.append(its.loc[its["iteration"] >= WARMUP, "duration_s"].mean() * 1e3)
        print(f"| {it.run.label} | {obs_w:.1f} | " + " | ".join(f"{x:.1f} ({x - obs_w:+.1f})" for x in walls)
              + f" | {obs_m:.1f} | " + " | ".join(f"{x:.1f} ({100 * (x / obs_m - 1):+.1f} %)" for x in means) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    from gcsim.errors import GcsimError

    try:
        main(sys.argv[1])
    except GcsimError as e:
        sys.exit(f"scheduler_check.py: {e}")
