"""Print the README's per-model protocol tables from a protocol.csv.

    .venv/bin/python docs/validation/readme_tables.py docs/validation/protocol-2026-12-02/protocol.csv

Columns: measured mean / p95 of each target run; the prediction calibrated on ``<calib>-a`` alone
(``from-<calib>``, fresh draws) with its 95 % CI and p95 error; the same calibrated on ``<calib>-a`` and
``<calib>-b`` pooled (``from-<calib>-ab``); the same as the first with the CPU work per partition scaled
by the target's CPU-speed probe (``from-<calib>-probe``, when the runs have one); ``gcsim calibrate`` -> ``gcsim simulate`` of a file from
``<calib>-a`` (``calibrate-file-<calib>``); the model check (``check-<calib>-paired``: the target's own
straggler draws, not a prediction).
"""

import sys

import pandas as pd


def pct(x: float) -> str:
    return "–" if pd.isna(x) else f"{x * 100:+.1f} %".replace("-", "−")


def main(path: str, calib: str = "uncoded") -> None:
    d = pd.read_csv(path)
    for model, g in d.groupby("model", sort=False):
        print(f"\n{model}\n")
        print("| scheme | measured mean s | measured p95 s | predicted mean s (err [95 % CI]) | p95 err "
              "| from `uncoded-a`+`-b` pooled | from `uncoded-a`, speed probe | `calibrate`→`simulate` "
              "| model check (own draws) |")
        print("|---|---|---|---|---|---|---|---|---|")
        for _, r in g[g.comparison == f"from-{calib}"].iterrows():
            def other(comp):
                x = g[(g.comparison == comp) & (g.run == r.run)]
                return pct(x.err_mean.iloc[0]) if len(x) else "–"
            name = (f"`{r.scheme}`" + ("" if r.exact else " (approx.)")
                    + (" (repeat: noise floor)" if r.scheme == calib else ""))
            print(f"| {name} | {r.obs_mean_s:.3f} | {r.obs_p95_s:.3f} | {r.sim_mean_s:.3f} ({pct(r.err_mean)} "
                  f"[{pct(r.err_mean_lo)}, {pct(r.err_mean_hi)}]) | {pct(r.err_p95)} | {other(f'from-{calib}-ab')} "
                  f"| {other(f'from-{calib}-probe')} | {other(f'calibrate-file-{calib}')} | {other(f'check-{calib}-paired')} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
