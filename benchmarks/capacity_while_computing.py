"""How many cores did the workers of a real run actually get while they computed, and how much CPU
did one partition cost them? Read from a run's own trace (no Ray needed).

For each iteration (after a warm-up of 10) the compute windows of the workers are
``[compute_start_s + delay_s, + compute_s]`` (the real worker sleeps its injected delay first, then
computes); while ``A(t)`` workers compute, on a 2-core machine at most ``min(A, 2)`` cores can serve
them. The effective capacity of an iteration is ``2 × Σ compute_cpu_s / ∫ min(A(t), 2) dt``: 2.0 when
the workers had both cores whenever two of them were computing, less when other processes (the master,
Ray's daemons, other programs: all at a higher priority than Ray's niceness-15 workers) took a share.

    .venv/bin/python benchmarks/capacity_while_computing.py docs/validation/runs/*

prints, per run: the median effective capacity, the CPU per partition (``compute_cpu_s /
n_partitions``) and the run's whole-loop load from meta.json (issue 9, docs/validation/README.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

CORES = 2.0
WARMUP = 10


def effective_capacity(workers: pd.DataFrame, cores: float = CORES) -> np.ndarray:
    """Per iteration: cores the workers received while at least two of them computed (see module
    docstring); ``(I,)``, NaN where no two compute windows overlap."""
    out = []
    for _, g in workers.groupby("iteration"):
        s0 = (g["compute_start_s"] + g["delay_s"]).to_numpy(float)
        e0 = s0 + g["compute_s"].to_numpy(float)
        cpu = g["compute_cpu_s"].to_numpy(float)
        ok = np.isfinite(s0) & np.isfinite(e0) & np.isfinite(cpu) & (e0 > s0)
        s0, e0, cpu = s0[ok], e0[ok], cpu[ok]
        ts = np.unique(np.concatenate([s0, e0]))
        served = 0.0
        for a, b in zip(ts[:-1], ts[1:]):
            mid = 0.5 * (a + b)
            served += (b - a) * min(int(((s0 <= mid) & (e0 > mid)).sum()), cores)
        out.append(cores * cpu.sum() / served if served > 0 else np.nan)
    return np.asarray(out, float)


def main(paths: list[str]) -> None:
    print(f"{'run':40s} {'capacity while computing (cores)':>34s} {'CPU/partition ms':>17s} {'other+master cores (whole run)':>31s}")
    for p in paths:
        path = Path(p)
        wk = pd.read_csv(path / "workers.csv")
        wk = wk[wk["iteration"] >= WARMUP]
        cap = effective_capacity(wk)
        per_part = (wk["compute_cpu_s"] / wk["n_partitions"]).to_numpy(float)
        load = json.loads((path / "meta.json").read_text()).get("host_cpu_load") or {}
        other = (load.get("busy_cores", np.nan) or np.nan) - (load.get("niced_cores", np.nan) or np.nan)
        print(f"{str(path):40s} {np.nanmedian(cap):>24.2f} (mean {np.nanmean(cap):.2f}) "
              f"{np.nanmean(per_part) * 1e3:>17.1f} {other:>31.2f}")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(str(p) for p in Path("docs/validation/runs").iterdir()))
