"""Finding 20's table: every committed protocol pass, predicted from ``uncoded-a`` (``from-uncoded``), with
the raw mean error (one run's straggler draws) beside the mean error in expectation (the draws' luck
removed by a control variate, ``gcsim.compare.control_variate``), over the exact schemes.

    .venv/bin/python docs/validation/expectation_summary.py            # after recompute_protocols.sh

The second table is the same for the p95 (finding 21): the p95 error raw and in expectation (the run's
p95 corrected by how far its replay's p95 fell from the prediction's, ``Q_y − β(Q_C − ξ_f)``, β the
per-iteration slope; Hsu & Nelson 1990).

Columns: worst |mean error| raw / in expectation; the median 95 % CI half-width of each; the range of the
control coefficient beta; the measured mean (raw) and the measured expectation inside the 95 % prediction
interval; the targets' CPU per partition against ``uncoded-a``'s (min … max, from their workers' clocks).
"""

from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent


def _cpu_ratio(rows: pd.DataFrame) -> str:
    from gcsim.compare.pipeline import partition_cpu_s
    from gcsim.compare.rundir import read_run_dir

    src = None
    ratios = []
    for d in rows["run_dir"]:
        run = read_run_dir(d)
        if src is None:
            src = read_run_dir(Path(d).parent / "uncoded-a")
            base = partition_cpu_s(src.workers_of(src.schemes[0]), src, 10, src.schemes[0])
        sch = run.schemes[0]
        ratios.append(partition_cpu_s(run.workers_of(sch), run, 10, sch) / base)
    r = np.asarray(ratios, float)
    r = r[np.isfinite(r)]
    return "–" if not r.size else f"{r.min():.2f} … {r.max():.2f}"


def main() -> None:
    print("| pass | model | neighbour | worst \\|mean err\\| raw | in expectation | CI ± raw | CI ± expectation "
          "| β | mean inside PI (raw / expectation) | CPU per partition / uncoded-a's |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in sorted(ROOT.glob("protocol*/**/protocol.csv")):
        table = pd.read_csv(path)
        noisy = "noisy" in str(path.relative_to(ROOT))
        for model, g in table.groupby("model", sort=False):
            s = g[(g["comparison"] == "from-uncoded") & g["exact"].astype(bool) & (g["target"] != "uncoded-b")]
            if not len(s) or "err_mean_cv" not in s:
                continue
            half_raw = ((s["err_mean_hi"] - s["err_mean_lo"]) / 2).median()
            half_cv = ((s["err_mean_cv_hi"] - s["err_mean_cv_lo"]) / 2).median()
            pi = f"{int(s['pi_covers'].astype(bool).sum())} / {int(s['pi_covers_cv'].astype(bool).sum())} of {len(s)}"
            print(f"| `{path.parent.relative_to(ROOT)}` | {model} | {'yes' if noisy else 'no'} "
                  f"| {s['err_mean'].abs().max():.1%} | {s['err_mean_cv'].abs().max():.1%} "
                  f"| {half_raw:.1%} | {half_cv:.1%} | {s['cv_beta'].min():.2f} … {s['cv_beta'].max():.2f} "
                  f"| {pi} | {_cpu_ratio(s)} |")


def p95_table() -> None:
    print("| pass | model | neighbour | worst \\|p95 err\\| raw | in expectation | CI ± raw | CI ± expectation "
          "| targets over 10 % (raw / expectation) |")
    print("|---|---|---|---|---|---|---|---|")
    for path in sorted(ROOT.glob("protocol*/**/protocol.csv")):
        table = pd.read_csv(path)
        noisy = "noisy" in str(path.relative_to(ROOT))
        for model, g in table.groupby("model", sort=False):
            s = g[(g["comparison"] == "from-uncoded") & g["exact"].astype(bool) & (g["target"] != "uncoded-b")]
            if not len(s) or "err_p95_cv" not in s:
                continue
            half_raw = ((s["err_p95_hi"] - s["err_p95_lo"]) / 2).median()
            half_cv = ((s["err_p95_cv_hi"] - s["err_p95_cv_lo"]) / 2).median()
            over = f"{int((s['err_p95'].abs() > 0.10).sum())} / {int((s['err_p95_cv'].abs() > 0.10).sum())} of {len(s)}"
            print(f"| `{path.parent.relative_to(ROOT)}` | {model} | {'yes' if noisy else 'no'} "
                  f"| {s['err_p95'].abs().max():.1%} | {s['err_p95_cv'].abs().max():.1%} "
                  f"| {half_raw:.1%} | {half_cv:.1%} | {over} |")


if __name__ == "__main__":
    main()
    print()
    p95_table()
