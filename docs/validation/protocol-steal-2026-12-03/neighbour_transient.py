"""Finding 19 (docs/validation/README.md): what the noisy-neighbour exponential pass's calibration run saw,
and what is left of that pass's error once the steady window leaves its transient out.

Run from the repository root:
    .venv/bin/python docs/validation/protocol-steal-2026-12-03/neighbour_transient.py

1. Per 20-iteration block of the two `uncoded` runs and of gc-cr: the cores the workers got while
   computing (processor-sharing inversion, gcsim.compare.worker_share, on the block's rows), the CPU
   other processes took (cores) and the workers' median CPU per partition.
2. The steady window's decision on uncoded-a (gcsim.compare.steady).
3. Per run: the wait-phase other-process CPU per iteration (quantiles, lag-1 autocorrelation, correlation
   with the iteration time), and CPU per partition by how many workers computed at once.
"""

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from gcsim.compare.contention import ContentionProfile, busy_intervals
from gcsim.compare.pipeline import default_warmup
from gcsim.compare.rundir import read_run_dir
from gcsim.compare.steady import steady_window

ROOT = Path("docs/validation/protocol-steal-2026-12-03/runs-noisy/real_expon")
RUNS = ["uncoded-a", "ignore-stragglers", "gc-fr", "gc-cr", "gc-mds", "cce-fr", "cce-cr", "uncoded-b"]


def block_table(label: str, cores: float = 2.0, block: int = 20) -> None:
    run = read_run_dir(ROOT / label)
    sch = run.schemes[0]
    w, its = run.workers_of(sch), run.iterations_of(sch)
    iv = busy_intervals(w)
    cpu = pd.to_numeric(w["compute_cpu_s"], errors="coerce").to_numpy(float)
    num = w["iteration"].to_numpy()
    print(f"  {label}")
    for b0 in range(0, int(num.max()) + 1, block):
        ok = (np.isfinite(cpu) & (cpu > 0) & np.isfinite(iv.part_start_s) & (iv.part_end_s > iv.part_start_s)
              & (num >= b0) & (num < b0 + block))
        target = cpu[ok].sum()

        def gap(c: float) -> float:
            return ContentionProfile(iv, c).cpu_seconds(iv.part_start_s[ok], iv.part_end_s[ok], iv.part_weight[ok]).sum() - target

        got = cores if gap(cores) <= 0 else brentq(gap, 0.01, cores, xtol=1e-3)
        bi = its[(its.iteration >= b0) & (its.iteration < b0 + block)]
        other = (bi.other_cpu_wait_s.sum() + bi.other_cpu_finish_s.sum()) / bi.duration_s.sum()
        per_part = np.median(cpu[ok] / w["n_partitions"].to_numpy()[ok])
        print(f"    iterations {b0:3d}-{b0 + block - 1:3d}: workers got {got:.2f} cores, other processes {other:.2f}, "
              f"{per_part * 1e3:.1f} ms CPU per partition")


def per_iteration(label: str) -> str:
    its = pd.read_csv(ROOT / label / "iterations.csv").iloc[10:]
    if label == "uncoded-a":  # its steady part (section 2)
        its = its[(its.iteration < 110) | (its.iteration >= 150)]
    rate = its.other_cpu_wait_s / (its.decodable_s - its.start_s)
    return (f"  {label:18s} wait-phase other cores q10 {rate.quantile(.1):.2f} q50 {rate.median():.2f} "
            f"q90 {rate.quantile(.9):.2f}; lag-1 autocorrelation {rate.autocorr():+.2f}; "
            f"correlation with the iteration time {np.corrcoef(rate, its.duration_s)[0, 1]:+.2f}")


def per_partition_by_concurrency(label: str) -> str:
    run = read_run_dir(ROOT / label)
    w = run.workers_of(run.schemes[0])
    iv = busy_intervals(w)
    st, en = iv.part_start_s, iv.part_end_s
    fin = np.isfinite(st) & (en > st)
    ev = np.unique(np.concatenate([st[fin], en[fin]]))
    d = np.diff(ev)
    step = np.zeros(len(ev) + 1)
    np.add.at(step, np.searchsorted(ev, st[fin]), 1)
    np.add.at(step, np.searchsorted(ev, en[fin]), -1)
    busy = np.cumsum(step)[:-1]
    ok = fin & (w["status"] == "arrived").to_numpy() & (w["iteration"] >= 10).to_numpy()
    rows = []
    for i in np.where(ok)[0]:
        a, b = np.searchsorted(ev, st[i]), np.searchsorted(ev, en[i])
        rows.append(((busy[a:b] * d[a:b]).sum() / d[a:b].sum(), w["compute_cpu_s"].iloc[i] / w["n_partitions"].iloc[i]))
    x = np.array(rows)
    edges = [0, 1.5, 2.5, 3.5, 4.5, 99]
    k = np.digitize(x[:, 0], edges)
    parts = [f"{edges[j - 1]:g}-{edges[j]:g}: {np.median(x[k == j, 1]) * 1e3:.1f} ms (n={int((k == j).sum())})"
             for j in range(1, len(edges)) if (k == j).sum() > 5]
    return f"  {label:18s} " + "; ".join(parts)


def main() -> None:
    print("1. blocks (workers' cores by the processor-sharing inversion; other-process CPU; CPU per partition)")
    for label in ("uncoded-a", "uncoded-b", "gc-cr"):
        block_table(label)
    run = read_run_dir(ROOT / "uncoded-a")
    win = steady_window(run, "uncoded", default_warmup(len(run.iterations_of("uncoded"))))
    print("\n2. steady window of uncoded-a (after the warm-up):",
          " ".join(f"{c:.2f}" for c in win.block_cores), "\n  ", win.note or "(nothing left out)")
    print("\n3a. other-process CPU while the master waited, per iteration")
    for label in RUNS:
        print(per_iteration(label))
    print("\n3b. median CPU per partition by the mean number of workers computing over the row")
    for label in RUNS:
        print(per_partition_by_concurrency(label))


if __name__ == "__main__":
    main()
