"""Per-run CPU per partition (workers' own clocks), iteration time and CPU-speed probe of the
interleaved runs in ``runs/`` (docs/validation/README.md, finding 14).

    .venv/bin/python docs/validation/cpu-ab-2026-12-03/table.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent


def main() -> None:
    rows = []
    for d in sorted((HERE / "runs").iterdir()):
        w = pd.read_csv(d / "workers.csv")
        it = pd.read_csv(d / "iterations.csv")
        meta = json.loads((d / "meta.json").read_text())
        w = w[(w.compute_cpu_s > 0) & (w.iteration >= 5)]
        probe = meta.get("cpu_probe") or {}
        rows.append({
            "run": d.name,
            "created_utc": str(meta.get("created_utc", ""))[11:19],
            "cpu_per_partition_ms": 1e3 * float((w.compute_cpu_s / w.n_partitions).median()),
            "mean_iteration_s": float(it.duration_s.mean()),
            "probe_start_ms": 1e3 * float((probe.get("start") or {}).get("median_cpu_s", float("nan"))),
            "probe_end_ms": 1e3 * float((probe.get("end") or {}).get("median_cpu_s", float("nan"))),
        })
    df = pd.DataFrame(rows).sort_values("created_utc")
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}" if v < 5 else f"{v:.1f}"))
    df["scheme"] = df.run.str.split("-", n=1).str[1].str.rsplit("-", n=1).str[0]
    print(df.groupby("scheme").cpu_per_partition_ms.agg(["mean", "min", "max", "count"]).round(1).to_string())


if __name__ == "__main__":
    main()
