"""Finding 31: how much of finding 27's per-scheme CPU ratio is the selection of the rows that sent, which
the model reproduces, and how much is left over.

Finding 27 divides each scheme's median CPU per partition over the calls that *sent* (``status ==
arrived``) by the mean of its pass's two `uncoded` runs. A coded scheme cancels its slowest calls, so the
calls that sent are a selected, faster part of the population, and their CPU per partition can sit below
`uncoded`'s (every call of which sends) with no difference in the work itself. The model has that
selection: it draws each worker's partition CPU with its own spread (``workload.compute``, sd ~12 %), so
a simulated coded scheme's sent calls are selected too. Per model-pass this script calibrates a scenario
on `uncoded-a` (``gcsim calibrate``), simulates every scheme of the pass at its own s and m (1,000
iterations, ``--trace full``, no drift range), and takes the same ratio in the simulated trace. The part
of the measured ratio the model does not reproduce is measured / simulated.

    .venv/bin/python docs/validation/selection_check.py        # ~8 minutes on 2 cores; selection_check.txt
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

ROOT = Path(__file__).resolve().parent
GCSIM = str(Path(sys.executable).with_name("gcsim"))
WARMUP = 10
SCHEMES = ["ignore-stragglers", "gc-fr", "gc-cr", "gc-mds", "cce-fr", "cce-cr"]
ITERATIONS = 1000


def sent_median_s(workers: pd.DataFrame) -> pd.Series:
    """Per scheme: median CPU-seconds per partition of the calls that sent, after the warm-up."""
    w = workers[(workers["iteration"] >= WARMUP) & (workers["status"] == "arrived")]
    return (w["compute_cpu_s"] / w["n_partitions"]).groupby(w["scheme"]).median()


def scheme_of(run: Path) -> dict:
    """``{name, s, m}`` of a run, from its summary.csv."""
    r = pd.read_csv(run / "summary.csv").iloc[0]
    return {"name": str(r["scheme"]), "s": int(r["s"]), "m": int(r["m"])}


def simulated_ratios(d: Path, schemes: list[dict], tmp: Path) -> pd.Series:
    """Each scheme's simulated sent-median over uncoded's, from a scenario calibrated on ``d/uncoded-a``."""
    cal = tmp / "cal.yaml"
    subprocess.run([GCSIM, "calibrate", str(d / "uncoded-a"), "--out", str(cal)], check=True,
                   capture_output=True)
    sc = yaml.safe_load(cal.read_text())
    sc["schemes"] = [{"name": "uncoded", "s": 0, "m": 1}] + schemes
    sc["iterations"] = ITERATIONS
    cal.write_text(yaml.safe_dump(sc, sort_keys=False))
    out = tmp / "sim"
    subprocess.run([GCSIM, "simulate", str(cal), "--trace", "full", "--speed-drift", "none", "--out", str(out),
                    "--no-progress"], check=True, capture_output=True)
    med = sent_median_s(pd.read_csv(out / "workers.csv"))
    return med / med["uncoded"]


def main() -> None:
    from pass_counts import run_memory_kept  # a sibling script (docs/validation/ is on sys.path when run)

    rows = []
    passes = [d for d in sorted(ROOT.glob("protocol*/runs*/*"))
              if (d / "uncoded-a" / "workers.csv").exists() and (d / "uncoded-b" / "workers.csv").exists()
              and "compute_cpu_s" in pd.read_csv(d / "uncoded-a" / "workers.csv", nrows=1)
              and not run_memory_kept(d / "uncoded-a")]  # finding 34's fix: those runs have no gap to explain
    for i, d in enumerate(passes):
        ref = np.mean([sent_median_s(pd.read_csv(d / u / "workers.csv")).iloc[0] for u in ("uncoded-a", "uncoded-b")])
        runs = {s: d / s for s in SCHEMES if (d / s / "workers.csv").exists()}
        with tempfile.TemporaryDirectory() as tmp:
            sim = simulated_ratios(d, [scheme_of(r) for r in runs.values()], Path(tmp))
        for s, r in runs.items():
            measured = float(sent_median_s(pd.read_csv(r / "workers.csv")).iloc[0]) / ref
            rows.append({"pass": str(d.relative_to(ROOT)), "model": "bimodal" if "default" in d.name else "exponential",
                         "scheme": s, "measured": measured, "simulated": float(sim[s])})
        print(f"   [{i + 1}/{len(passes)}] {d.relative_to(ROOT)}", file=sys.stderr)
    df = pd.DataFrame(rows)
    df["left"] = df["measured"] / df["simulated"]
    print(f"CPU per partition of the calls that sent over `uncoded`'s, measured (over the mean of the pass's two "
          f"`uncoded` runs) and simulated (a scenario calibrated on `uncoded-a`, {ITERATIONS} iterations), "
          f"{df['pass'].nunique()} model-passes; geometric means, t-test on the log of what is left\n")
    for model, g in [("both models", df)] + list(df.groupby("model")):
        print(f"{model}:")
        for s in SCHEMES:
            x = g[g["scheme"] == s]
            if x.empty:
                continue
            gm = {c: float(np.exp(np.log(x[c]).mean())) for c in ("measured", "simulated", "left")}
            p = stats.ttest_1samp(np.log(x["left"]), 0).pvalue
            print(f"   {s:18s} measured {gm['measured']:.3f}, simulated {gm['simulated']:.3f}, left "
                  f"{gm['left']:.3f} (below 1 in {int((x['left'] < 1).sum())} of {len(x)}, p {p:.1e})")


if __name__ == "__main__":
    main()
