"""Finding 16 (docs/validation/README.md): how much the machine's CPU speed wanders, read four ways.

Run from the repository root:  .venv/bin/python docs/validation/drift-2026-12-03/analysis.py

1. The quiet-machine speed series (cpu_speed_noise_quiet.txt, one process, 2.5 s windows, 15 min):
   CV of block means and the rms log-difference of block means at growing lags (a variogram).
2. Every committed real run with CPU clocks (docs/validation/**/workers.csv): per run the median
   CPU-seconds per partition and the within-run drift (20-iteration block CV,
   gcsim.compare.estimators.speed_drift_cv); per pass, the spread between its runs.
3. Concurrency: within one iteration, does a partition cost more CPU when more workers compute at the
   moment it starts? (log CPU per partition regressed on that count, iteration fixed effects).
4. The exponential straggler draws of seed 1 (every real_expon run uses them) against the spec's mean.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from gcsim.compare.estimators import speed_drift_cv  # noqa: E402

HERE = Path(__file__).resolve().parent
VALIDATION = ROOT / "docs" / "validation"
WARMUP = 10


def variogram(path: Path, window_s: float = 2.5) -> None:
    v = np.array([float(m.group(1)) for line in path.read_text().splitlines()
                  if (m := re.match(r"\s+\d+\s+([\d.]+)\s+", line))])
    print(f"1. quiet speed series: {v.size} windows of {window_s} s, mean {v.mean():.2f} ms per gradient, "
          f"CV {v.std(ddof=1) / v.mean():.1%}")
    for blk in (8, 48):
        b = v[: v.size // blk * blk].reshape(-1, blk).mean(axis=1)
        lb = np.log(b)
        lags = [f"{L * blk * window_s:.0f} s: {np.sqrt(np.mean((lb[L:] - lb[:-L]) ** 2)):.1%}"
                for L in (1, 2, 4, 8, 16) if L < lb.size]
        print(f"   blocks of {blk * window_s:.0f} s: CV of block means {b.std(ddof=1) / b.mean():.1%}; "
              f"rms log-difference at lag {', '.join(lags)}")
    runs = v[: v.size // 48 * 48].reshape(-1, 48)
    within = [np.std(r.reshape(-1, 8).mean(axis=1), ddof=1) / r.mean() for r in runs]
    print(f"   as 2-minute 'runs': CV of their means {runs.mean(axis=1).std(ddof=1) / runs.mean():.1%}; "
          f"within a run (20 s blocks) rms {np.sqrt(np.mean(np.square(within))):.1%}")


def run_table() -> pd.DataFrame:
    rows = []
    for st in sorted(VALIDATION.glob("**/status.json")):
        d = st.parent
        if not (d / "workers.csv").is_file():
            continue
        w = pd.read_csv(d / "workers.csv")
        if "compute_cpu_s" not in w:
            continue
        ok = w["status"].isin(["arrived", "late"]) & (w["iteration"] >= WARMUP) & (w["compute_cpu_s"] > 0)
        per = (w["compute_cpu_s"] / w["n_partitions"])[ok]
        if per.empty:
            continue
        rel = d.relative_to(VALIDATION).parts
        group = rel[0] + ("/" + rel[2] if len(rel) > 3 else "")
        rows.append({"pass": group, "run": rel[-1], "start": json.loads(st.read_text()).get("session_started_utc"),
                     "cpu_ms": 1e3 * per.median(), "within": speed_drift_cv(w, WARMUP)})
    return pd.DataFrame(rows).sort_values(["pass", "start"])


def between_runs(t: pd.DataFrame) -> None:
    print("\n2. per pass (runs in time order): spread of the runs' median CPU per partition, and within them")
    for p, g in t.groupby("pass"):
        if len(g) < 3:
            continue
        m = g["cpu_ms"].to_numpy()
        r = np.diff(np.log(m))
        print(f"   {p:45s} {len(g):2d} runs  between CV {m.std(ddof=1) / m.mean():4.1%}  consecutive rms "
              f"{np.sqrt(np.mean(r ** 2)):4.1%}  within rms {np.sqrt(np.nanmean(g['within'] ** 2)):4.1%}  "
              f"({m.min():.1f}-{m.max():.1f} ms)")


def concurrency(run_dirs: list[Path]) -> None:
    out = []
    for run in run_dirs:
        w = pd.read_csv(run / "workers.csv")
        w = w[w["iteration"] >= WARMUP].copy()
        w["t0"] = w["compute_start_s"] + w["delay_s"]  # the real worker sleeps its delay, then computes
        w["t1"] = w["t0"] + w["compute_s"]
        for it, g in w.groupby("iteration"):
            t0, t1 = g["t0"].to_numpy(), g["t1"].to_numpy()
            for i, r in enumerate(g.itertuples()):
                if r.status in ("arrived", "late") and r.compute_cpu_s > 0:
                    a = 1 + int(((t0 < t0[i]) & (t1 > t0[i])).sum())
                    out.append((f"{run}:{it}", a, np.log(r.compute_cpu_s / r.n_partitions)))
    d = pd.DataFrame(out, columns=["key", "A", "l"])
    lc = d["l"] - d.groupby("key")["l"].transform("mean")
    ac = d["A"] - d.groupby("key")["A"].transform("mean")
    slope = float((lc * ac).sum() / (ac ** 2).sum())
    print(f"\n3. concurrency ({len(run_dirs)} runs, {len(d)} rows): within an iteration, CPU per partition "
          f"{slope:+.1%} per extra worker computing when the partition starts")


def expon_draws() -> None:
    w = pd.read_csv(VALIDATION / "protocol-2026-12-02b/runs/real_expon/uncoded-a/workers.csv")
    d = w["delay_s"].to_numpy(float)
    print(f"\n4. seed 1's exponential delays (every real_expon run): mean {d.mean():.4f} s over {d.size} draws vs "
          f"the spec's 0.15 s ({(d.mean() / 0.15 - 1):+.1%}, {(d.mean() - 0.15) / (0.15 / np.sqrt(d.size)):+.1f} "
          f"standard errors); per-iteration max {w.groupby('iteration')['delay_s'].max().mean():.4f} s vs "
          f"E[max of 6] = 0.15 x H_6 = {0.15 * sum(1 / k for k in range(1, 7)):.4f} s")


if __name__ == "__main__":
    variogram(HERE / "cpu_speed_noise_quiet.txt")
    t = run_table()
    between_runs(t)
    concurrency(sorted(VALIDATION.glob("protocol-2026-12-02*/runs/real_expon/*/")))
    expon_draws()
