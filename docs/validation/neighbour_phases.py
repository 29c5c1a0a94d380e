"""Finding 30: is the noisy neighbour's CPU elastic, i.e. does the other processes' CPU in a phase of the
iteration fall when more workers compute in it? Read from the committed neighbour passes' traces.

Per run (iterations from 10 on): the other processes' CPU (``iterations.csv`` ``other_cpu_wait_s`` /
``other_cpu_finish_s``: every process but the workers, so the master and the neighbour) per second of
each phase, ``[start_s, decodable_s]`` (the master waits) and ``[decodable_s, end_s]`` (it decodes and
steps); the mean number of workers computing in the phase (``workers.csv``: from ``compute_start_s +
delay_s`` for ``compute_s``); and the phase's share of the run's time. Then, per phase, the least-squares
slope of the other processes' cores on the workers computing, within each model-pass (both centred on
the model-pass's mean), over the steady-neighbour passes (a neighbour in a session of its own that kept a
core: 2026-12-03 and later).

    .venv/bin/python docs/validation/neighbour_phases.py      # seconds; output in neighbour_phases.txt
"""

from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent
STEADY = ["protocol-steal-2026-12-03", "protocol-neighbour-2026-12-03", "protocol-seed6-2026-12-04",
          "protocol-seed9-2026-12-05"]
WARMUP = 10


def busy_workers(w: pd.DataFrame, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Worker-seconds of computing inside each interval ``[a_i, b_i]`` (seconds)."""
    s = (w.compute_start_s + w.delay_s).to_numpy()
    e = s + w.compute_s.to_numpy()
    ok = np.isfinite(s) & np.isfinite(e)
    s, e = s[ok], e[ok]
    return np.clip(np.minimum(e[None, :], b[:, None]) - np.maximum(s[None, :], a[:, None]), 0, None).sum(1)


def runs() -> pd.DataFrame:
    rows = []
    for p in STEADY:
        for run in sorted((ROOT / p / "runs-noisy").glob("*/*")):
            it = pd.read_csv(run / "iterations.csv")
            it = it[it.iteration >= WARMUP]
            w = pd.read_csv(run / "workers.csv")
            wait = (it.decodable_s - it.start_s).to_numpy()
            fin = (it.end_s - it.decodable_s).to_numpy()
            rows.append({
                "pass": p, "model": run.parent.name, "run": run.name,
                "other_wait_cores": it.other_cpu_wait_s.sum() / wait.sum(),
                "workers_wait": busy_workers(w, it.start_s.to_numpy(), it.decodable_s.to_numpy()).sum() / wait.sum(),
                "other_finish_cores": it.other_cpu_finish_s.sum() / fin.sum(),
                "workers_finish": busy_workers(w, it.decodable_s.to_numpy(), it.end_s.to_numpy()).sum() / fin.sum(),
                "finish_share": fin.sum() / (fin.sum() + wait.sum()),
            })
    return pd.DataFrame(rows)


def within_slope(df: pd.DataFrame, x: str, y: str) -> tuple[float, float, float]:
    """Slope of y on x with both centred within each model-pass; its standard error; the correlation."""
    g = df.groupby(["pass", "model"])
    xc = (df[x] - g[x].transform("mean")).to_numpy()
    yc = (df[y] - g[y].transform("mean")).to_numpy()
    b = float(xc @ yc / (xc @ xc))
    resid = yc - b * xc
    dof = len(xc) - 1 - g.ngroups
    se = float(np.sqrt(resid @ resid / dof / (xc @ xc)))
    return b, se, float(np.corrcoef(xc, yc)[0, 1])


def main() -> None:
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 200)
    df = runs()
    print("1. per run: other processes' cores and workers computing, while the master waits / decodes and steps")
    print(df.round(3).to_string(index=False))
    print("\n2. within each model-pass: slope of the other processes' cores on the workers computing")
    for phase in ("wait", "finish"):
        b, se, r = within_slope(df, f"workers_{phase}", f"other_{phase}_cores")
        print(f"   {phase:6s}: {b:+.3f} cores per computing worker (SE {se:.3f}), r {r:+.2f}; other processes "
              f"{df[f'other_{phase}_cores'].min():.2f}-{df[f'other_{phase}_cores'].max():.2f} cores, workers "
              f"{df[f'workers_{phase}'].min():.2f}-{df[f'workers_{phase}'].max():.2f}")
    print(f"\n3. the finish phase's share of a run's time: {df.finish_share.min():.1%}-{df.finish_share.max():.1%} "
          f"(median {df.finish_share.median():.1%})")
    un = df[df.run.str.startswith("uncoded")]
    co = df[~df.run.str.startswith("uncoded")]
    print(f"   other processes while the master decodes: uncoded runs {un.other_finish_cores.mean():.2f} cores, "
          f"the other schemes {co.other_finish_cores.mean():.2f}; while it waits {un.other_wait_cores.mean():.2f} "
          f"and {co.other_wait_cores.mean():.2f}")


if __name__ == "__main__":
    main()
