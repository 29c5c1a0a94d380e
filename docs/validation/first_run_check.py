"""Is the first run of a pass systematically slower or faster? Per committed pass with both `uncoded-a`
(first) and `uncoded-b` (last): the median CPU per partition (``compute_cpu_s / n_partitions``, after
10 warm-up iterations) of each, their ratio, and a t-test of the log ratio against 0 (finding 36).

    .venv/bin/python docs/validation/first_run_check.py      # a second
"""

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parent
WARMUP = 10


def cpu_per_partition_ms(run: Path) -> float:
    w = pd.read_csv(run / "workers.csv", usecols=["iteration", "n_partitions", "compute_cpu_s"])
    w = w[w["iteration"] >= WARMUP]
    return float((w["compute_cpu_s"] / w["n_partitions"]).median() * 1000)


def main() -> None:
    rows = []
    for a in sorted(ROOT.glob("**/uncoded-a/workers.csv")):
        b = a.parent.parent / "uncoded-b"
        if (b / "workers.csv").exists():
            rows.append({"pass": str(a.parent.parent.relative_to(ROOT)), "a_ms": cpu_per_partition_ms(a.parent),
                         "b_ms": cpu_per_partition_ms(b)})
    df = pd.DataFrame(rows)
    df["a_over_b"] = df["a_ms"] / df["b_ms"]
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    r = np.log(df["a_over_b"])
    t = stats.ttest_1samp(r, 0.0)
    print(f"\n{len(df)} pairs: a/b mean {df['a_over_b'].mean():.3f}, SD of log ratio {r.std(ddof=1):.3f}, "
          f"range {df['a_over_b'].min():.3f}-{df['a_over_b'].max():.3f}; t-test of log(a/b) = 0: p {t.pvalue:.2f}")


if __name__ == "__main__":
    main()
