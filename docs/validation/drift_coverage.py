"""Finding 25: how far each target's CPU speed lay from its calibration run's, against the drift the
prediction interval assumed, over every committed protocol pass; and the same with the drift measured
on blocks of 10, 20 and 40 iterations of the calibration run.

    .venv/bin/python docs/validation/drift_coverage.py

For every ``from-uncoded`` row of every ``protocol.csv`` (a prediction from ``uncoded-a``): the log ratio
of the target's median CPU-seconds per partition (the workers' clocks, after a 10-iteration warm-up) to
``uncoded-a``'s, divided by the row's ``speed_cv`` (the σ the interval used). Prints the root mean
square of that ratio (1 if the assumed drift were right), the share beyond 2, and the same with σ
recomputed as sqrt(2) x the CV of block medians of ``uncoded-a``. Takes about a minute.
"""

import glob
import os

import numpy as np
import pandas as pd

from gcsim.compare.estimators import finished_partition_cpu_s, speed_block_medians


def median_cpu_per_partition(run_dir: str) -> float:
    w = pd.read_csv(os.path.join(run_dir, "workers.csv"))
    return float(np.nanmedian(finished_partition_cpu_s(w[w["iteration"] >= 10])))


def main() -> None:
    rows = []
    for path in sorted(glob.glob("docs/validation/**/protocol.csv", recursive=True)):
        table = pd.read_csv(path)
        table = table[table["comparison"] == "from-uncoded"]
        for _, r in table.iterrows():
            if not isinstance(r.run_dir, str) or not os.path.exists(r.run_dir) or not np.isfinite(r.speed_cv):
                continue
            cal = os.path.join(os.path.dirname(r.run_dir), "uncoded-a")
            log_ratio = np.log(median_cpu_per_partition(r.run_dir) / median_cpu_per_partition(cal))
            blocks = pd.read_csv(os.path.join(cal, "workers.csv"))
            alt = {}
            for size in (10, 20, 40):
                m = speed_block_medians(blocks, 10, size)
                alt[size] = np.sqrt(2) * np.std(m, ddof=1) / np.mean(m)
            rows.append({"pass": path, "target": r.target, "log_ratio": log_ratio, "sigma": r.speed_cv,
                         **{f"sigma_{k}": v for k, v in alt.items()}})
    d = pd.DataFrame(rows)
    z = d["log_ratio"] / d["sigma"]
    print(f"{len(d)} predictions from uncoded-a; log ratio of CPU per partition: RMS "
          f"{np.sqrt(np.mean(d['log_ratio'] ** 2)):.3f}; assumed drift: median {d['sigma'].median():.3f}")
    print(f"as the interval assumed: RMS z {np.sqrt(np.mean(z ** 2)):.2f}, |z| > 2 in {int((z.abs() > 2).sum())} "
          f"({(z.abs() > 2).mean():.1%})")
    for size in (10, 20, 40):
        zz = d["log_ratio"] / d[f"sigma_{size}"]
        print(f"blocks of {size} iterations (every iteration): RMS z {np.sqrt(np.mean(zz ** 2)):.2f}, "
              f"|z| > 2 in {(zz.abs() > 2).mean():.1%}")


if __name__ == "__main__":
    main()
