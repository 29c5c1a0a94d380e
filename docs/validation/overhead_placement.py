"""Finding 37: is the workers' per-call CPU on the critical path? Both placements, on every committed
pass made with the executor fix (finding 34), each target replayed with its own straggler draws and
given its own load and speed (``gcsim compare --mode paired --load-from target --speed-from target``),
calibrated on ``uncoded-a``: the machine's state is given, so what differs is the model of the call.

* ``measured`` (the model today): the per-call overhead is ``cpu_s - compute_cpu_s``, one CPU job after
  the last partition, before the message leaves (:mod:`gcsim.sim.engine`). That CPU includes Ray's work
  *between* calls (result serialisation of the previous call, argument deserialisation of this one;
  :mod:`gcsim.real.worker`), whose wall time the transfer and dispatch fits already hold.
* ``in-call window``: the overhead is the de-contended wall window from the end of the partitions to
  ``send_s`` (loading the weights, encoding: :func:`gcsim.compare.contention.decontend`), so Ray's
  between-call CPU is left off the critical path (and out of the model altogether: a bound on the
  other side).
* ``window + background``: the in-call window on the path (at most the measured per-call work), the
  rest of the measured per-call CPU kept, as a steady rate of the workers' processes (its mean × n over
  the mean iteration time, added to the idle-time rate of :func:`gcsim.compare.estimators.split_idle_cpu`):
  the same CPU as the model, off the path.

Prints, per model-pass, each exact target's mean error (simulated over measured mean iteration time,
iterations >= 10, one replication) under each, and the worst |error| per model-pass.

    .venv/bin/python docs/validation/overhead_placement.py      # ~45 s; overhead_placement.txt
"""

import dataclasses
from pathlib import Path

import numpy as np

import gcsim.compare.calibrate as calibrate
from gcsim.compare.estimators import measured_cpu
from gcsim.compare.pipeline import CompareOptions, compare_runs
from gcsim.compare.rundir import read_run_dir

ROOT = Path(__file__).resolve().parent
PASSES = ["protocol-seed10-2026-12-05", "protocol-seed11-2026-12-05", "protocol-seed12-2026-12-06",
          "protocol-seed13-2026-12-06"]
WARMUP = 10
EXACT = ["gc-fr", "gc-cr", "gc-mds", "cce-fr", "cce-cr"]


def in_call_window(workers, partitions_s, overhead_s):
    """:func:`measured_cpu` with the per-call overhead replaced by the de-contended in-call window."""
    parts, over = measured_cpu(workers, partitions_s, overhead_s)
    return parts, np.where(np.isfinite(over), np.asarray(overhead_s, float), np.nan)


_WINDOWS: list = []  # the in-call windows of the rows measured_cpu saw, for window_plus_background


def stash_window(workers, partitions_s, overhead_s):
    """:func:`measured_cpu`, keeping the de-contended in-call window of the rows with a per-call CPU."""
    parts, over = measured_cpu(workers, partitions_s, overhead_s)
    _WINDOWS.append(np.asarray(overhead_s, float)[np.isfinite(over)])
    return parts, over


_PER_CALL = calibrate._Samples.per_call_cpu


def window_plus_background(self, notes):
    """``_Samples.per_call_cpu`` with the per-call work cut to the in-call window, the rest as a steady
    rate per worker process (added to the idle-time rate)."""
    over, idle_rate = _PER_CALL(self, notes)
    win = np.concatenate(_WINDOWS) if _WINDOWS else np.zeros(0)
    _WINDOWS.clear()
    if win.size != over.size or over.size == 0:
        raise RuntimeError(f"{win.size} windows for {over.size} per-call values")
    on = np.where(np.isfinite(win), np.minimum(over, np.maximum(win, 0.0)), over)
    dur = np.concatenate([it["duration_s"].to_numpy(float) for it in self.background_its])
    return on, idle_rate + float(np.nanmean(over - on) / np.nanmean(dur))


def errors(root: Path, between_calls_cpu: str = "on-path") -> dict[str, float]:
    """``{target: 100 × (simulated / measured mean − 1)}`` for the exact targets of one model-pass
    (``between_calls_cpu``: ``gcsim compare --between-calls-cpu``; the passes here predate the column)."""
    source = read_run_dir(root / "uncoded-a")
    targets = [read_run_dir(p) for p in sorted(root.iterdir()) if p.name in EXACT]
    opts = dataclasses.replace(CompareOptions(), mode="paired", cpu_source="measured", load_from="target",
                               speed_from="target", replications=1, between_calls_cpu=between_calls_cpu)
    out = {}
    for it in compare_runs([(r, list(r.schemes)) for r in targets], calibrate_from=[source], options=opts).items:
        o = it.observed_iterations
        s = it.simulated_iterations
        obs = o.loc[o["iteration"] >= WARMUP, "duration_s"].mean()
        sim = s.loc[(s["iteration"] >= WARMUP) & (s["replication"] == 0), "duration_s"].mean()
        out[it.run.label] = 100 * (sim / obs - 1)
    return out


def main() -> None:
    print("| model-pass | placement | " + " | ".join(EXACT) + " | worst |")
    print("|---|---|" + "---|" * (len(EXACT) + 1))
    worst = {"measured": [], "in-call window": [], "window + background": []}
    variants = (("measured", measured_cpu, _PER_CALL), ("in-call window", in_call_window, _PER_CALL),
                ("window + background", stash_window, window_plus_background))
    signed: dict[tuple[str, bool], list[float]] = {}
    for p in PASSES:
        for runs in ("runs", "runs-noisy"):
            for model in ("real_default", "real_expon"):
                root = ROOT / p / runs / model
                if not root.is_dir():
                    continue
                for name, fn, per_call in variants:
                    calibrate.measured_cpu, calibrate._Samples.per_call_cpu = fn, per_call
                    _WINDOWS.clear()
                    e = errors(root)
                    w = max(abs(v) for v in e.values())
                    worst[name].append((runs == "runs-noisy", w))
                    signed.setdefault((name, runs == "runs-noisy"), []).extend(e.values())
                    print(f"| {p}/{runs}/{model} | {name} | " + " | ".join(f"{e[k]:+.1f} %" for k in EXACT)
                          + f" | {w:.1f} % |")
        calibrate.measured_cpu, calibrate._Samples.per_call_cpu = measured_cpu, _PER_CALL
    for name, ws in worst.items():
        for noisy, band in ((False, 5.0), (True, 8.0)):
            x = [w for n, w in ws if n == noisy]
            print(f"\n{name}, {'with the neighbour' if noisy else 'quiet'}: worst |error| median {np.median(x):.1f} %, "
                  f"max {max(x):.1f} %, within {band:g} % in {sum(v <= band for v in x)} of {len(x)} model-passes; "
                  f"mean error of the exact targets {np.mean(signed[(name, noisy)]):+.1f} %")


if __name__ == "__main__":
    main()
