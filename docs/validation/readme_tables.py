"""Print the README's per-model protocol tables from a protocol.csv.

    .venv/bin/python docs/validation/readme_tables.py docs/validation/protocol-steal-2026-12-03/real_expon/protocol.csv

Columns: measured mean / p95 of each target run; the prediction calibrated on ``<calib>-a`` alone
(``from-<calib>``: its steady part, fresh draws) with its 95 % CI, the same error in expectation (the
luck of the target's straggler draws removed by a control variate, ``err_mean_cv``) with its CI, and
the p95 error raw and in expectation (``err_p95_cv``); then, in expectation (the raw error where a comparison has none: the model check), the same calibrated on
every iteration of ``<calib>-a`` (``from-<calib>-all-iterations``, when the table has it: what the
calibration gave before the steady window); calibrated on the coded scheme's run (``from-<coded>``);
``gcsim calibrate`` -> ``gcsim simulate`` of a file from ``<calib>-a`` (``calibrate-file-<calib>``); the
diagnostic given each target's own load and CPU speed (``given-<calib>-load-and-speed``: not a
prediction); the model check (``check-<calib>-paired``: the target's own straggler draws, not a
prediction).
"""

import sys

import pandas as pd


def pct(x: float) -> str:
    if pd.isna(x):
        return "–"
    v = round(x * 100, 1) + 0.0  # + 0.0: a value that rounds to zero prints +0.0, never −0.0
    return f"{v:+.1f} %".replace("-", "−")


def expectation(r) -> str:
    """``−1.2 % [−2.5 %, +0.1 %]`` from the control-variate columns, ``–`` without them."""
    if "err_mean_cv" not in r or pd.isna(r.err_mean_cv):
        return "–"
    return f"{pct(r.err_mean_cv)} [{pct(r.err_mean_cv_lo)}, {pct(r.err_mean_cv_hi)}]"


def main(path: str, calib: str = "uncoded", coded: str = "gc-fr") -> None:
    d = pd.read_csv(path)
    for model, g in d.groupby("model", sort=False):
        print(f"\n{model}\n")
        print(f"| scheme | measured mean s | measured p95 s | predicted from `{calib}-a` (err [95 % CI]) "
              "| in expectation [95 % CI] | p95 err | p95 in expectation "
              f"| in expectation: same, every iteration | from `{coded}` | `calibrate`→`simulate` "
              "| given load and speed (diagnostic) | model check (own draws) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for _, r in g[g.comparison == f"from-{calib}"].iterrows():
            def other(comp):
                x = g[(g.comparison == comp) & (g.run == r.run)]
                if not len(x):
                    return "–"
                cv = x.err_mean_cv.iloc[0] if "err_mean_cv" in x else float("nan")
                return pct(x.err_mean.iloc[0] if pd.isna(cv) else cv)
            name = (f"`{r.scheme}`" + ("" if r.exact else " (approx.)")
                    + (" (repeat: noise floor)" if r.scheme == calib else ""))
            print(f"| {name} | {r.obs_mean_s:.3f} | {r.obs_p95_s:.3f} | {r.sim_mean_s:.3f} ({pct(r.err_mean)} "
                  f"[{pct(r.err_mean_lo)}, {pct(r.err_mean_hi)}]) | {expectation(r)} | {pct(r.err_p95)} "
                  f"| {pct(r.err_p95_cv) if 'err_p95_cv' in r else '–'} "
                  f"| {other(f'from-{calib}-all-iterations')} | {other(f'from-{coded}')} "
                  f"| {other(f'calibrate-file-{calib}')} | {other(f'given-{calib}-load-and-speed')} "
                  f"| {other(f'check-{calib}-paired')} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
