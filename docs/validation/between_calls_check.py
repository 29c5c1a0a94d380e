"""Finding 38: Ray's CPU between calls, measured apart (trace format 4, ``between_calls_cpu_s``), and
what the model's error is with it on the critical path, as the workers' steady CPU, or left out.

Per model-pass with the column (``protocol-seed14-2026-12-06``): first each run's per-call CPU split
(mean over the worker rows that sent, iterations >= 10: ``cpu_s - compute_cpu_s``, of which
``between_calls_cpu_s``); then every exact target replayed with its own straggler draws, its own load
and speed (``gcsim compare --mode paired --load-from target --speed-from target``, calibrated on
``uncoded-a``) under three models of the per-call CPU:

* ``all on the path`` (the model today): ``cpu_s - compute_cpu_s``, one CPU job after the partitions;
* ``in-call on the path, between steady``: ``cpu_s - compute_cpu_s - between_calls_cpu_s`` after the
  partitions, the between-call CPU as a steady rate of the workers' processes (its mean × n over the
  mean iteration time, added to the idle-time rate of :func:`gcsim.compare.estimators.split_idle_cpu`);
* ``in-call on the path, between left out``: ``gcsim compare --between-calls-cpu in-lags`` (the code's
  model since finding 39; the two first rows are ``on-path`` with the monkeypatches below).

    .venv/bin/python docs/validation/between_calls_check.py      # ~30 s; between_calls_check.txt
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

import gcsim.compare.calibrate as calibrate
from gcsim.compare.estimators import measured_cpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead_placement import EXACT, ROOT, WARMUP, errors  # noqa: E402  (the same replay, finding 37)

PASSES = ["protocol-seed14-2026-12-06", "protocol-seed15-2026-12-06"]
_BETWEEN: list = []  # between_calls_cpu_s of the rows measured_cpu saw
_PER_CALL = calibrate._Samples.per_call_cpu


def in_call(workers, partitions_s, overhead_s):
    """:func:`measured_cpu` with the per-call CPU less the between-call CPU (kept in ``_BETWEEN``)."""
    parts, over = measured_cpu(workers, partitions_s, overhead_s)
    between = pd.to_numeric(workers["between_calls_cpu_s"], errors="coerce").to_numpy(float)
    if not np.isfinite(between[np.isfinite(over)]).all():
        raise RuntimeError("a row with a per-call CPU but no between_calls_cpu_s (trace format < 4?)")
    _BETWEEN.append(between[np.isfinite(over)])
    return parts, np.where(np.isfinite(over), np.maximum(over - np.nan_to_num(between), 0.0), over)


def between_steady(self, notes):
    """``_Samples.per_call_cpu`` plus the between-call CPU as a steady rate per worker process."""
    over, idle_rate = _PER_CALL(self, notes)
    between = np.concatenate(_BETWEEN)
    dur = np.concatenate([it["duration_s"].to_numpy(float) for it in self.background_its])
    return over, idle_rate + float(np.mean(between) / np.nanmean(dur))


def split_table(root: Path) -> None:
    """Per run: the per-call CPU and its between-call part (ms, mean over the rows that sent)."""
    print(f"\n{root.relative_to(ROOT)}: per-call CPU (ms) and the part between calls\n")
    print("| run | cpu_s - compute_cpu_s | between_calls_cpu_s | share |")
    print("|---|---|---|---|")
    for p in sorted(root.iterdir()):
        if not (p / "workers.csv").exists():
            continue
        w = pd.read_csv(p / "workers.csv")
        w = w[(w["iteration"] >= WARMUP) & (w["status"] == "arrived")]
        call = (w["cpu_s"] - w["compute_cpu_s"]).mean() * 1e3
        between = w["between_calls_cpu_s"].mean() * 1e3
        print(f"| {p.name} | {call:.2f} | {between:.2f} | {between / call:.0%} |")


def main() -> None:
    variants = (("all on the path", measured_cpu, _PER_CALL, "on-path"),
                ("in-call on the path, between steady", in_call, between_steady, "on-path"),
                ("in-call on the path, between left out", measured_cpu, _PER_CALL, "in-lags"))
    roots = [ROOT / p / runs / m for p in PASSES for runs in ("runs", "runs-noisy") for m in ("real_default", "real_expon")
             if (ROOT / p / runs / m).is_dir()]
    for root in roots:
        split_table(root)
    print("\n| model-pass | per-call CPU | " + " | ".join(EXACT) + " | worst |")
    print("|---|---|" + "---|" * (len(EXACT) + 1))
    for root in roots:
        for name, fn, per_call, between_calls_cpu in variants:
            calibrate.measured_cpu, calibrate._Samples.per_call_cpu = fn, per_call
            _BETWEEN.clear()
            e = errors(root, between_calls_cpu)
            print(f"| {root.relative_to(ROOT)} | {name} | " + " | ".join(f"{e[k]:+.1f} %" for k in EXACT)
                  + f" | {max(abs(v) for v in e.values()):.1f} % |")
        calibrate.measured_cpu, calibrate._Samples.per_call_cpu = measured_cpu, _PER_CALL


if __name__ == "__main__":
    main()
