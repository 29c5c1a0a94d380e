"""Two questions about the workers' CPU clocks over every committed protocol pass (finding 27).

1. Does the per-call CPU (``cpu_s - compute_cpu_s``: loading the weights, encoding, Ray's threads) move
   with the CPU per partition when the machine's speed changes? Across the `uncoded` runs (one scheme,
   one straggler model, so only the machine differs) and within runs (20-iteration blocks). If it does,
   a speed drift must scale both (``Calibration.at_speed``, ``gcsim.sim.drift.scale_cpu_work``).
2. Is part of the CPU per partition the scheme's? Each scheme's median CPU per partition over the mean
   of the pass's two `uncoded` runs (`uncoded-a` first, `uncoded-b` last: a drift that is linear in time
   cancels), per model-pass; the mean ratio, how many are below 1, a t-test on the log ratio, and the
   same by the run's position in the pass (the order was fixed per model, so position and scheme are
   partly confounded).

    .venv/bin/python docs/validation/cpu_by_scheme.py            # a few seconds
"""

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parent
WARMUP = 10
SCHEMES = ["ignore-stragglers", "gc-fr", "gc-cr", "gc-mds", "cce-fr", "cce-cr"]


def before_fix(run: Path) -> bool:
    """A run made before finding 34's executor fix: this script describes the scheme gap those runs had,
    and later passes would dilute it."""
    from pass_counts import run_memory_kept  # a sibling script (docs/validation/ is on sys.path when run)

    return not run_memory_kept(run)


def finished_rows(path: Path) -> pd.DataFrame | None:
    """workers.csv rows after the warm-up that sent (status ``arrived``), with ``part_s`` (CPU per
    partition) and ``call_s`` (the call's CPU besides its partitions); None without CPU clocks."""
    w = pd.read_csv(path)
    if "compute_cpu_s" not in w or "cpu_s" not in w:
        return None
    w = w[(w["iteration"] >= WARMUP) & (w["status"] == "arrived")].copy()
    w["part_s"] = w["compute_cpu_s"] / w["n_partitions"]
    w["call_s"] = w["cpu_s"] - w["compute_cpu_s"]
    w = w[np.isfinite(w["part_s"]) & np.isfinite(w["call_s"]) & (w["part_s"] > 0)]
    return w if len(w) >= 100 else None


def per_call_vs_speed() -> None:
    rows, within = [], []
    for path in sorted(p for p in ROOT.glob("protocol*/runs*/*/uncoded-*/workers.csv") if before_fix(p.parent)):
        w = finished_rows(path)
        if w is None:
            continue
        rows.append({"model": path.parent.parent.name, "neighbour": "noisy" in str(path),
                     "part_ms": 1e3 * w["part_s"].median(), "call_ms": 1e3 * w["call_s"].median()})
        blocks = w.groupby((w["iteration"] - WARMUP) // 20)[["part_s", "call_s"]].median()
        if len(blocks) >= 5:
            within.append(stats.spearmanr(blocks["part_s"], blocks["call_s"])[0])
    df = pd.DataFrame(rows)
    print("1. per-call CPU against CPU per partition, `uncoded` runs (elasticity: d log call / d log partition)")
    for (model, neighbour), g in df.groupby(["model", "neighbour"]):
        if len(g) < 5:
            continue  # the s = 2 pass's two runs
        rho, p = stats.spearmanr(g["part_ms"], g["call_ms"])
        slope = np.polyfit(g["part_ms"], g["call_ms"], 1)[0]
        print(f"   {model:13s} neighbour {str(neighbour):5s} {len(g):2d} runs: partition {g.part_ms.min():.1f}-"
              f"{g.part_ms.max():.1f} ms, call {g.call_ms.min():.2f}-{g.call_ms.max():.2f} ms, Spearman {rho:+.2f} "
              f"(p {p:.1e}), elasticity {slope * g.part_ms.mean() / g.call_ms.mean():.2f}")
    within = np.array(within)
    print(f"   within runs, 20-iteration blocks: Spearman median {np.median(within):+.2f}, positive in "
          f"{int((within > 0).sum())} of {within.size} runs")


def scheme_ratios() -> None:
    res = []
    for d in sorted(d for d in ROOT.glob("protocol*/runs*/*") if before_fix(d / "uncoded-a")):
        a, b = d / "uncoded-a" / "workers.csv", d / "uncoded-b" / "workers.csv"
        if not (a.exists() and b.exists()):
            continue
        wa, wb = finished_rows(a), finished_rows(b)
        if wa is None or wb is None:
            continue
        ref = np.mean([wa["part_s"].median(), wb["part_s"].median()])
        starts = {}
        for s in SCHEMES:
            p = d / s / "workers.csv"
            w = finished_rows(p) if p.exists() else None
            if w is not None:
                starts[s] = (w["part_s"].median() / ref, pd.read_json(d / s / "status.json", typ="series")
                             .get("session_started_utc", ""))
        order = sorted(starts, key=lambda s: str(starts[s][1]))
        res += [{"pass": str(d.relative_to(ROOT)), "scheme": s, "ratio": r, "position": order.index(s) + 1}
                for s, (r, _) in starts.items()]
    df = pd.DataFrame(res)
    n_passes = df["pass"].nunique()
    print(f"\n2. CPU per partition over the mean of the two `uncoded` runs of the same model-pass ({n_passes} "
          f"model-passes)")
    for s in SCHEMES:
        r = df.loc[df["scheme"] == s, "ratio"].to_numpy()
        print(f"   {s:18s} mean {r.mean():.3f}, median {np.median(r):.3f}, below 1 in {int((r < 1).sum())} of "
              f"{r.size}, t-test on log ratio p = {stats.ttest_1samp(np.log(r), 0).pvalue:.1e}")
    print("   by position in the pass (1 = right after uncoded-a):", ", ".join(
        f"{int(k)}: {v:.3f}" for k, v in df.groupby("position")["ratio"].mean().items()))
    fr = df[df["scheme"] == "gc-fr"]
    print("   gc-fr by its position:", ", ".join(
        f"{int(k)}: {g.mean():.3f} (n {g.size})" for k, g in fr.groupby("position")["ratio"]))


if __name__ == "__main__":
    per_call_vs_speed()
    scheme_ratios()
