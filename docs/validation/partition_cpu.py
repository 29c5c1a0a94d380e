"""Finding 28: the CPU of each partition of a call, from an instrumented run (partition-cpu-2026-12-05/).

The workers of those runs (instrument.patch) logged, per partition: the process's CPU (what workers.csv's
``compute_cpu_s`` sums), the computing thread's own CPU (the difference is Ray's other threads), the wall
time and the number of time slices the thread ran in. Printed: per run and position in the call, the
medians; per run, workers.csv's median CPU per partition of the calls that sent (cpu_by_scheme.py's
measure) over the mean of the two `uncoded` runs; how the thread's CPU grows with its time slices; the
eight interleaved `uncoded`/`gc-fr` pairs with a Ray per run and in one shared Ray, and the two settings
against each other (part 6, added 2026-12-05 21:40 UTC as a correction).

    .venv/bin/python docs/validation/partition_cpu.py     # a second; output in partition_cpu.txt
"""

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent / "partition-cpu-2026-12-05" / "runs"
PAIRS = ROOT.parent / "pairs"  # eight interleaved rounds of uncoded and gc-fr, a Ray per run (run_pairs.sh)
ONE_RAY = ROOT.parent / "pairs-one-ray"  # the same inside one long-lived Ray (run_pairs_one_ray.sh)
WARMUP = 10


def partitions(root: Path = ROOT) -> pd.DataFrame:
    rows = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        with gzip.open(d / "partitions.jsonl.gz", "rt") as f:
            for line in f:
                r = json.loads(line)
                if r["it"] < WARMUP:
                    continue
                for pos, (j, proc, thread, wall, slices) in enumerate(r["parts"]):
                    rows.append({"run": d.name, "position": pos, "proc_ms": 1e3 * proc, "thread_ms": 1e3 * thread,
                                 "wall_ms": 1e3 * wall, "slices": slices})
    df = pd.DataFrame(rows)
    df["other_threads_ms"] = df["proc_ms"] - df["thread_ms"]
    return df


def arrived_median_ms(run: Path) -> float:
    """workers.csv's median CPU per partition of the calls that sent (cpu_by_scheme.py's measure), ms."""
    w = pd.read_csv(run / "workers.csv")
    w = w[(w.iteration >= WARMUP) & (w.status == "arrived")]
    return 1e3 * float((w.compute_cpu_s / w.n_partitions).median())


def pairs(root: Path, title: str) -> np.ndarray:
    """Print one pairs experiment; return its per-round log ratios gc-fr / uncoded."""
    from scipy import stats

    print(f"\n{title}")
    rounds = sorted({int(p.name.rsplit("-", 1)[1]) for p in root.iterdir() if p.is_dir()})
    ratio = np.array([arrived_median_ms(root / f"gc-fr-{r}") / arrived_median_ms(root / f"uncoded-{r}")
                      for r in rounds])
    print("   uncoded, gc-fr (ms): " + ", ".join(
        f"{arrived_median_ms(root / f'uncoded-{r}'):.1f} {arrived_median_ms(root / f'gc-fr-{r}'):.1f}"
        for r in rounds))
    lr = np.log(ratio)
    print("   gc-fr over uncoded per round: " + ", ".join(f"{v:.3f}" for v in ratio))
    print(f"   geometric mean {np.exp(lr.mean()):.3f}, 95 % CI {np.exp(lr.mean() - stats.t.ppf(0.975, lr.size - 1) * lr.std(ddof=1) / np.sqrt(lr.size)):.3f}"
          f"-{np.exp(lr.mean() + stats.t.ppf(0.975, lr.size - 1) * lr.std(ddof=1) / np.sqrt(lr.size)):.3f}, t-test p "
          f"{stats.ttest_1samp(lr, 0).pvalue:.2f}, below 1 in {int((lr < 0).sum())} of {lr.size}")
    df = partitions(root)
    df["scheme"] = df["run"].str.rsplit("-", n=1).str[0]
    df["round"] = df["run"].str.rsplit("-", n=1).str[1].astype(int)
    g = df.groupby(["round", "scheme", "position"])["proc_ms"].median()
    for pos in (0, 1):
        r = np.array([g[(k, "gc-fr", pos)] / g[(k, "uncoded", 0)] for k in rounds])
        print(f"   gc-fr's partition {pos + 1} of its call over uncoded's one (medians): mean "
              f"{np.exp(np.log(r).mean()):.3f}, t-test p {stats.ttest_1samp(np.log(r), 0).pvalue:.2f}")
    print("   time slices per partition: " + ", ".join(
        f"{s} position {p + 1}: {v:.1f}" for (s, p), v in df.groupby(["scheme", "position"])["slices"].mean().items()))
    return lr


def iterating_wall_s(run: Path) -> float:
    """Seconds from the first iteration's start to the last one's end (iterations.csv)."""
    it = pd.read_csv(run / "iterations.csv")
    return float(it.end_s.iloc[-1] - it.start_s.iloc[0])


def main() -> None:
    pd.set_option("display.width", 200)
    df = partitions()
    print("1. per run and position of the partition in its call (medians; other threads: mean)")
    print(df.groupby(["run", "position"]).agg(n=("proc_ms", "size"), process_cpu_ms=("proc_ms", "median"),
                                               thread_cpu_ms=("thread_ms", "median"),
                                               other_threads_ms=("other_threads_ms", "mean"),
                                               wall_ms=("wall_ms", "median"), slices=("slices", "median"))
          .round(2).to_string())
    later = df[df.position > 0].groupby("run")["proc_ms"].median()
    first = df[df.position == 0].groupby("run")["proc_ms"].median()
    print("\n   later partitions over the first, per multi-partition run:",
          ", ".join(f"{r} {later[r] / first[r]:.3f}" for r in later.index))
    print("\n2. workers.csv: median CPU per partition of the calls that sent, over the mean of the uncoded runs")
    med = {}
    for d in sorted(ROOT.iterdir()):
        w = pd.read_csv(d / "workers.csv")
        w = w[(w.iteration >= WARMUP) & (w.status == "arrived")]
        med[d.name] = float((w.compute_cpu_s / w.n_partitions).median())
    ref = np.mean([v for k, v in med.items() if k.startswith("uncoded")])
    print("   " + ", ".join(f"{k} {1e3 * v:.2f} ms ({v / ref:.3f})" for k, v in med.items()))
    print("\n3. thread CPU against its time slices (least squares per run): ms = a + b x slices")
    for run, g in df.groupby("run"):
        b, a = np.polyfit(g.slices, g.thread_ms, 1)
        print(f"   {run:10s} a {a:.2f} ms, b {b:.3f} ms per slice, mean slices {g.slices.mean():.1f}")
    own = pairs(PAIRS, "4. eight interleaved rounds of uncoded and gc-fr (order alternating), each run its own Ray:")
    shared = pairs(ONE_RAY, "5. the same inside one long-lived Ray (`ray start`, every run `gcsim real --address`), as a "
                   "study's runs share one:")
    from scipy import stats

    print("\n6. the two settings against each other")
    w = stats.ttest_ind(own, shared, equal_var=False)
    print(f"   a Ray per run over one shared Ray (ratio of geometric means): {np.exp(own.mean() - shared.mean()):.3f}, "
          f"Welch t-test p {w.pvalue:.2f}, Mann-Whitney p {stats.mannwhitneyu(own, shared).pvalue:.2f}")
    both = np.concatenate([own, shared])
    half = stats.t.ppf(0.975, both.size - 1) * both.std(ddof=1) / np.sqrt(both.size)
    print(f"   all {both.size} pairs: gc-fr over uncoded {np.exp(both.mean()):.3f}, 95 % CI "
          f"{np.exp(both.mean() - half):.3f}-{np.exp(both.mean() + half):.3f}, t-test p "
          f"{stats.ttest_1samp(both, 0).pvalue:.3f}")
    for name, root in (("a Ray per run", PAIRS), ("one shared Ray", ONE_RAY)):
        walls = {s: [iterating_wall_s(d) for d in sorted(root.glob(f"{s}-*"))] for s in ("uncoded", "gc-fr")}
        print(f"   {name}: seconds iterating per run, median: " + ", ".join(
            f"{s} {np.median(v):.0f} ({min(v):.0f}-{max(v):.0f})" for s, v in walls.items()))


if __name__ == "__main__":
    main()
