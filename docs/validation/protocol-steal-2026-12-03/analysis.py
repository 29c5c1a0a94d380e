"""Finding 18 (docs/validation/README.md): does the hypervisor's steal explain how the VM's CPU speed
wanders?

Run from the repository root:  .venv/bin/python docs/validation/protocol-steal-2026-12-03/analysis.py

1. The quiet-machine speed series of finding 16 (``drift-2026-12-03/cpu_speed_noise_quiet.txt``: one
   process repeating a worker's partition gradient, 2.5-s windows, 15 minutes, with the host's steal
   ticks per window): correlation of block means of the CPU per gradient with the block's steal share,
   at 20-s, 60-s and 120-s blocks, and the slope ``k`` of ``cpu = c0 * (1 + k * steal_share)``.
2. The runs of this folder (``runs/<model>/<run>``, which record ``host.csv`` and
   ``meta.json host_cpu_load.steal_cores``): per run the median CPU-seconds per partition of the workers
   (after the warm-up) and the host's steal share over the run; across runs the same correlation and
   slope; and what the steal explains of one run's speed predicted from another's.
3. Inside each run: 20-iteration blocks, CPU per partition against the block's steal share.

Steal share = steal CPU-seconds / (wall seconds x host CPUs): the fraction of the machine the host's
other guests took.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
WARMUP = 10
BLOCK = 20


def fit(share: np.ndarray, cpu: np.ndarray) -> dict:
    """Least squares ``cpu = a + b * share``; ``k = b / a`` (relative slowdown per unit steal share),
    Pearson r, and the CV of ``cpu`` before and after removing the fitted line."""
    r = stats.linregress(share, cpu)
    resid = cpu - (r.intercept + r.slope * share)
    return {"n": len(cpu), "r": r.rvalue, "p": r.pvalue, "k": r.slope / r.intercept,
            "cv": cpu.std(ddof=1) / cpu.mean(), "cv_resid": resid.std(ddof=2) / cpu.mean() if len(cpu) > 2 else np.nan}


def quiet_series(path: Path, cpus: int = 2, window_s: float = 2.5, hz: int = 100) -> None:
    rows = [re.match(r"\s+\d+\s+([\d.]+)\s+[\d.]+%\s+(\d+)", line) for line in path.read_text().splitlines()]
    v = np.array([[float(m.group(1)), float(m.group(2))] for m in rows if m])
    ms, steal = v[:, 0], v[:, 1] / (window_s * cpus * hz)
    print(f"1. quiet speed series ({path.parent.name}/{path.name}): {len(ms)} windows of {window_s} s, "
          f"steal share mean {steal.mean():.2%}, max {steal.max():.1%}")
    print(f"   Spearman rho per window {stats.spearmanr(ms, steal).statistic:+.2f}")
    for blk in (8, 24, 48):
        n = len(ms) // blk
        f = fit(steal[: n * blk].reshape(n, blk).mean(1), ms[: n * blk].reshape(n, blk).mean(1))
        print(f"   {blk * window_s:4.0f}-s blocks (n={f['n']:3d}): r {f['r']:+.2f} (p {f['p']:.1g}), k {f['k']:.1f}; "
              f"CV of block means {f['cv']:.1%}, after the steal line {f['cv_resid']:.1%}")


def run_rows(runs_root: Path) -> pd.DataFrame:
    out = []
    for meta_path in sorted(runs_root.glob("*/*/meta.json")):
        d = meta_path.parent
        meta = json.loads(meta_path.read_text())
        w = pd.read_csv(d / "workers.csv")
        ok = w["status"].isin(["arrived", "late"]) & (w["iteration"] >= WARMUP) & (w["compute_cpu_s"] > 0)
        w = w[ok].assign(per=lambda x: x["compute_cpu_s"] / x["n_partitions"])
        h = pd.read_csv(d / "host.csv") if (d / "host.csv").is_file() else None
        cpus = int(meta.get("host_cpus") or 2)
        row = {"model": d.parent.name, "run": d.name,
               "start": json.loads((d / "status.json").read_text()).get("session_started_utc"),
               "cpu_ms": 1e3 * w["per"].median(),
               "steal_share": meta["host_cpu_load"].get("steal_cores", np.nan) / cpus,
               "other_cores": meta["host_cpu_load"].get("other_cores", np.nan),
               "probe_ms": 1e3 * meta.get("cpu_probe", {}).get("start", {}).get("median_cpu_s", np.nan)}
        if h is not None:
            h = h[h["iteration"] >= WARMUP]
            blocks = []
            for b, g in h.groupby(h["iteration"] // BLOCK):
                its = set(g["iteration"])
                per = w.loc[w["iteration"].isin(its), "per"]
                if len(per) and g["reading_wall_s"].sum() > 0:
                    blocks.append((g["host_steal_cpu_s"].sum() / (g["reading_wall_s"].sum() * cpus), 1e3 * per.median()))
            row["blocks"] = blocks
        out.append(row)
    return pd.DataFrame(out).sort_values(["start"]).reset_index(drop=True)


def across_runs(t: pd.DataFrame) -> None:
    print(f"\n2. runs of this folder ({len(t)}), in time order:")
    print("   model        run                 start                  CPU/partition  steal share  other cores  probe")
    for r in t.itertuples():
        print(f"   {r.model:12s} {r.run:18s}  {r.start}  {r.cpu_ms:7.1f} ms     {r.steal_share:7.2%}     "
              f"{r.other_cores:6.2f}      {r.probe_ms:5.1f} ms")
    f = fit(t["steal_share"].to_numpy(), t["cpu_ms"].to_numpy())
    print(f"   across runs: r {f['r']:+.2f} (p {f['p']:.1g}), k {f['k']:.1f}; CV of the runs' CPU per partition "
          f"{f['cv']:.1%}, after the steal line {f['cv_resid']:.1%}")
    for model, g in t.groupby("model"):
        if len(g) >= 3:
            fm = fit(g["steal_share"].to_numpy(), g["cpu_ms"].to_numpy())
            print(f"   {model}: r {fm['r']:+.2f}, k {fm['k']:.1f}, CV {fm['cv']:.1%} -> {fm['cv_resid']:.1%}")
    # one run's speed from another's (the calibration's error): raw, and scaled by (1 + k s) with k from
    # the quiet series' 60-s blocks (a machine constant measured apart from these runs) and leave-one-out
    m, s = t["cpu_ms"].to_numpy(), t["steal_share"].to_numpy()
    raw = [np.log(m[j] / m[i]) for i in range(len(m)) for j in range(len(m)) if i != j]
    print(f"   one run's CPU per partition predicted from another run of the folder: rms error {np.sqrt(np.mean(np.square(raw))):.1%}")
    for k_label, k in (("k = 5 (quiet series, 60-s blocks)", 5.0),):
        cor = [np.log(m[j] / (m[i] * (1 + k * s[j]) / (1 + k * s[i]))) for i in range(len(m)) for j in range(len(m)) if i != j]
        print(f"     scaled by the steal with {k_label}: rms error {np.sqrt(np.mean(np.square(cor))):.1%}")


def within_runs(t: pd.DataFrame) -> None:
    if "blocks" not in t:
        return
    rs, pts = [], []
    for r in t.itertuples():
        b = np.array(r.blocks) if isinstance(r.blocks, list) and len(r.blocks) >= 3 else None
        if b is None:
            continue
        x, y = b[:, 0], np.log(b[:, 1])
        pts.append(np.column_stack([x - x.mean(), y - y.mean()]))
        if x.std() > 0:
            rs.append(np.corrcoef(x, y)[0, 1])
    if not pts:
        return
    p = np.vstack(pts)
    r = stats.linregress(p[:, 0], p[:, 1])
    print(f"\n3. inside runs ({BLOCK}-iteration blocks, run means removed, {len(p)} blocks of {len(pts)} runs): "
          f"log CPU per partition on steal share: slope {r.slope:.1f} (r {r.rvalue:+.2f}, p {r.pvalue:.1g}); "
          f"per-run r median {np.median(rs):+.2f}")


if __name__ == "__main__":
    quiet_series(ROOT / "docs/validation/drift-2026-12-03/cpu_speed_noise_quiet.txt")
    table = run_rows(HERE / "runs")
    if len(table):
        across_runs(table)
        within_runs(table)
