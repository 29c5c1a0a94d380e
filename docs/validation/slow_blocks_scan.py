"""Finding 25: the slowest 20-iteration block of every committed (run, scheme) trace, over its run's
median block (median CPU-seconds per partition on the workers' clocks, after the warm-up) — what the
slow-stretch threshold of ``gcsim/compare/stalls.py`` (1.3 x) was chosen on.

    .venv/bin/python docs/validation/slow_blocks_scan.py

Prints the distribution of the ratio and the traces above 1.25 x. Takes about a minute.
"""

import glob

import numpy as np
import pandas as pd

from gcsim.compare.estimators import speed_block_medians
from gcsim.compare.pipeline import default_warmup
from gcsim.compare.stalls import SLOW_BLOCK_FACTOR, SLOW_BLOCK_ITERATIONS


def main() -> None:
    rows = []
    for path in sorted(glob.glob("docs/validation/**/workers.csv", recursive=True)):
        workers = pd.read_csv(path)
        if "compute_cpu_s" not in workers:
            continue
        for scheme, w in workers.groupby("scheme"):
            blocks = speed_block_medians(w, default_warmup(w["iteration"].nunique()), SLOW_BLOCK_ITERATIONS)
            if len(blocks) >= 3:
                rows.append({"trace": path[len("docs/validation/"):-len("/workers.csv")], "scheme": scheme,
                             "slowest_over_median": float(blocks.max() / np.median(blocks))})
    d = pd.DataFrame(rows)
    q = d["slowest_over_median"].quantile([0.5, 0.9, 0.99])
    print(f"{len(d)} (run, scheme) traces; slowest block / median block: median {q[0.5]:.2f}, 90 % {q[0.9]:.2f}, "
          f"99 % {q[0.99]:.2f}; above {SLOW_BLOCK_FACTOR} in {int((d['slowest_over_median'] > SLOW_BLOCK_FACTOR).sum())}")
    print(d[d["slowest_over_median"] > 1.25].sort_values("slowest_over_median", ascending=False).to_string(index=False))


if __name__ == "__main__":
    main()
