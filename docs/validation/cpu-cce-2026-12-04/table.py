"""CPU per partition of the interleaved uncoded / gc-fr / cce-fr / cce-cr repeats in ``runs/``
(docs/validation/README.md, finding 21): each run's median over the rows that sent (status ``arrived``,
iterations >= 10) of ``compute_cpu_s / n_partitions`` (the workers' own CPU clocks, seconds), its
CPU-speed probes, and the scheme effect with the machine's drift taken out two ways:

- *within rounds*: each run over the mean of its round (every round holds each scheme once, in a
  shuffled order), averaged over rounds, with the standard error across rounds;
- *with a time trend*: least squares of log(CPU per partition) on scheme indicators and a linear trend in
  the run's start time (uncoded the reference).

    .venv/bin/python docs/validation/cpu-cce-2026-12-04/table.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
WARMUP = 10


def per_run() -> pd.DataFrame:
    rows = []
    for d in sorted(p for p in (HERE / "runs").iterdir() if p.is_dir()):
        w = pd.read_csv(d / "workers.csv")
        it = pd.read_csv(d / "iterations.csv")
        meta = json.loads((d / "meta.json").read_text())
        ok = w[(w.status == "arrived") & (w.iteration >= WARMUP) & (w.compute_cpu_s > 0)]
        probe = meta.get("cpu_probe") or {}
        rnd, scheme = d.name.split("-", 1)
        rows.append({
            "run": d.name, "round": int(rnd[1:]), "scheme": scheme,
            "start_utc": str(meta.get("created_utc", ""))[11:19],
            "partitions_per_worker": int(ok.n_partitions.iloc[0]),
            "cpu_per_partition_ms": 1e3 * float((ok.compute_cpu_s / ok.n_partitions).median()),
            "mean_iteration_s": float(it[it.iteration >= WARMUP].duration_s.mean()),
            "probe_start_ms": 1e3 * float((probe.get("start") or {}).get("median_cpu_s", float("nan"))),
            "probe_end_ms": 1e3 * float((probe.get("end") or {}).get("median_cpu_s", float("nan"))),
            "other_cores": float((meta.get("host_cpu_load") or {}).get("other_cores", float("nan"))),
        })
    return pd.DataFrame(rows).sort_values("start_utc").reset_index(drop=True)


def main() -> None:
    df = per_run()
    fmt = lambda v: f"{v:.3f}" if abs(v) < 5 else f"{v:.1f}"  # noqa: E731
    print(df.drop(columns="run").to_string(index=False, float_format=fmt))
    print()
    # within rounds: CPU per partition over the round's mean
    df["rel_round"] = df.cpu_per_partition_ms / df.groupby("round").cpu_per_partition_ms.transform("mean")
    g = df.groupby("scheme").rel_round
    within = pd.DataFrame({"runs": g.size(), "ms_mean": df.groupby("scheme").cpu_per_partition_ms.mean(),
                           "over_round_mean": g.mean(), "se": g.std(ddof=1) / np.sqrt(g.size())})
    print("within rounds (run / its round's mean):")
    print(within.to_string(float_format=fmt))
    # time trend: log cpu = a + b_scheme + c * minutes since the first start
    t = pd.to_datetime(df.start_utc, format="%H:%M:%S")
    minutes = ((t - t.min()).dt.total_seconds() / 60.0).to_numpy()
    schemes = [s for s in ["gc-fr", "cce-fr", "cce-cr"] if s in set(df.scheme)]
    x = np.column_stack([np.ones(len(df)), minutes] + [(df.scheme == s).to_numpy(float) for s in schemes])
    y = np.log(df.cpu_per_partition_ms.to_numpy())
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    dof = len(y) - x.shape[1]
    cov = np.linalg.inv(x.T @ x) * float(resid @ resid) / max(dof, 1)
    se = np.sqrt(np.diag(cov))
    print()
    print(f"time trend: {100 * coef[1]:+.2f} %/min (SE {100 * se[1]:.2f}); residual SD {100 * np.std(resid, ddof=x.shape[1]):.1f} %")
    for k, s in enumerate(schemes):
        print(f"  {s} over uncoded: {100 * np.expm1(coef[2 + k]):+.1f} % (SE {100 * se[2 + k]:.1f})")


if __name__ == "__main__":
    main()
