"""Benchmark (issue 6): the machine's effective CPU capacity for co-located single-threaded workers,
and the per-call cost a worker pays after loading new weights.

1. **Capacity curve.** ``A = 1..A_max`` processes (``torch.set_num_threads(1)``, optional niceness)
   each repeat the small CNN's forward+backward on 32 CIFAR-shaped images
   (:func:`gcsim.real.model.build_model`, :func:`gcsim.real.model.slice_gradient`, as a worker
   computes one partition). They start together (a barrier) and count steps inside the same
   ``--window-s`` window. ``t(A)`` = median per-step wall time; effective capacity
   ``c(A) = A × t(1) / t(A)`` (cores' worth of work the A jobs get), per-job rate ``c(A)/A``.
   Under egalitarian processor sharing over ``cores`` (:mod:`gcsim.sim.cpu`), ``c(A) = min(A, cores)``.
2. **Per-call cost.** One process: ``--calls`` times load fresh flat weights
   (:func:`gcsim.real.model.set_flat_weights`, as :mod:`gcsim.real.worker` does at every call), then
   ``--steps`` steps; optionally sleeps ``--idle-s`` before each call (a worker idles between calls).
   Reports the load time, the first step of a call and the later steps (median, ms).

Also prints ``nproc``, the CPU topology from /proc/cpuinfo (SMT siblings) and the 1-min load average
before and after (other processes on the machine distort both measurements: rerun when loaded).

    .venv/bin/python benchmarks/cpu_capacity.py                      # A = 1..6, ~1 min
    .venv/bin/python benchmarks/cpu_capacity.py --max-active 4 --window-s 2 --nice 15
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

import numpy as np


def _topology() -> str:
    """``logical CPUs / physical cores / threads per core`` from /proc/cpuinfo (Linux)."""
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        return "unknown"
    cores = set()
    logical = 0
    for block in text.strip().split("\n\n"):
        kv = dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
        kv = {k.strip(): v.strip() for k, v in kv.items()}
        if "processor" in kv:
            logical += 1
            cores.add((kv.get("physical id", "0"), kv.get("core id", kv["processor"])))
    return f"{logical} logical CPUs, {len(cores)} physical cores, {logical / max(1, len(cores)):g} threads/core"


def _make_batch(seed: int):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(32, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=32)
    return images, labels


def _worker(idx: int, nice: int, barrier, window_s: float, out) -> None:
    """One contending process: warm up, wait for the barrier, step until the window closes."""
    import torch

    from gcsim.real.model import build_model, slice_gradient

    torch.set_num_threads(1)
    if nice:
        os.nice(nice)
    model = build_model("small-cnn", seed=0)
    images, labels = _make_batch(idx)
    for _ in range(3):
        slice_gradient(model, images, labels, 32)
    barrier.wait()
    cpu0 = time.process_time()
    t_start = time.perf_counter()
    end = t_start + window_s
    steps = []
    while True:
        c0 = time.perf_counter()
        slice_gradient(model, images, labels, 32)
        c1 = time.perf_counter()
        steps.append(c1 - c0)
        if c1 >= end:
            break
    out.put((idx, steps, time.process_time() - cpu0, time.perf_counter() - t_start))


def _busy_jiffies() -> tuple[float, float]:
    """``(busy, total)`` CPU seconds of the whole machine since boot, from /proc/stat."""
    f = [float(x) for x in open("/proc/stat").readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = f[3] + (f[4] if len(f) > 4 else 0.0)
    return (sum(f[:8]) - idle) / hz, sum(f[:8]) / hz


def capacity_curve(max_active: int, window_s: float, nice: int) -> list[dict]:
    """Per-step time ``t(A)`` (median, s) and ``c(A) = A·t(1)/t(A)`` for A = 1..max_active, with the
    cores the A processes used (CPU time / window) and what everything else used meanwhile (``other``,
    from /proc/stat: machine busy minus ours)."""
    ctx = mp.get_context("spawn")
    rows = []
    t1 = None
    for a in range(1, max_active + 1):
        barrier, out = ctx.Barrier(a + 1), ctx.Queue()
        procs = [ctx.Process(target=_worker, args=(i, nice, barrier, window_s, out)) for i in range(a)]
        for p in procs:
            p.start()
        barrier.wait()
        b0, w0 = _busy_jiffies(), time.perf_counter()
        res = [out.get() for _ in procs]
        b1, w1 = _busy_jiffies(), time.perf_counter()
        for p in procs:
            p.join()
        # drop each process's last step (it straddles the window end, when others may have stopped)
        per_step = np.concatenate([np.asarray(s[:-1] if len(s) > 1 else s) for _, s, _, _ in res])
        ours = sum(cpu for _, _, cpu, _ in res) / (w1 - w0)
        other = max(0.0, (b1[0] - b0[0]) / (w1 - w0) - ours)
        cpu_per_step = sum(cpu for _, _, cpu, _ in res) / sum(len(s) for _, s, _, _ in res)
        t = float(np.median(per_step))
        t1 = t if a == 1 else t1
        rows.append({"A": a, "t_ms": t * 1e3, "p90_ms": float(np.quantile(per_step, 0.9)) * 1e3,
                     "steps": int(per_step.size), "c": a * t1 / t, "rate": t1 / t,
                     "used": ours, "other": other, "cpu_ms": cpu_per_step * 1e3})
    return rows


def _per_call(calls: int, steps: int, idle_s: float, out) -> None:
    import torch

    from gcsim.real.model import build_model, get_flat_weights, set_flat_weights, slice_gradient

    torch.set_num_threads(1)
    model = build_model("small-cnn", seed=0)
    images, labels = _make_batch(0)
    base = get_flat_weights(model)
    rng = np.random.default_rng(1)
    for _ in range(3):
        slice_gradient(model, images, labels, 32)
    load, first, later = [], [], []
    for _ in range(calls):
        w = (base + rng.normal(0, 1e-3, base.shape)).astype(base.dtype)
        if idle_s > 0:
            time.sleep(idle_s)
        c0 = time.perf_counter()
        set_flat_weights(model, w)
        c1 = time.perf_counter()
        slice_gradient(model, images, labels, 32)
        c2 = time.perf_counter()
        load.append(c1 - c0)
        first.append(c2 - c1)
        for _ in range(steps - 1):
            c0 = time.perf_counter()
            slice_gradient(model, images, labels, 32)
            later.append(time.perf_counter() - c0)
    out.put((load, first, later, base.size))


def per_call_cost(calls: int, steps: int, idle_s: float) -> dict:
    """Median load / first-step / later-step times (s) in a fresh single-threaded process."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=_per_call, args=(calls, steps, idle_s, out))
    p.start()
    load, first, later, n_params = out.get()
    p.join()
    return {"idle_s": idle_s, "load_ms": np.median(load) * 1e3, "first_ms": np.median(first) * 1e3,
            "later_ms": np.median(later) * 1e3, "n_params": n_params}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-active", type=int, default=6, help="largest number of concurrent processes A")
    ap.add_argument("--window-s", type=float, default=3.0, help="measurement window per A (seconds)")
    ap.add_argument("--nice", type=int, default=0, help="niceness of the contending processes (Ray workers: 15)")
    ap.add_argument("--calls", type=int, default=30, help="per-call cost: number of calls")
    ap.add_argument("--steps", type=int, default=4, help="per-call cost: steps per call")
    args = ap.parse_args(argv)

    print(f"nproc={os.cpu_count()} sched_getaffinity={len(os.sched_getaffinity(0))}  {_topology()}")
    print(f"loadavg before: {os.getloadavg()[0]:.2f}")
    rows = capacity_curve(args.max_active, args.window_s, args.nice)
    print(f"\ncapacity curve (small-cnn fwd+bwd, 32 images, 1 thread/process, nice {args.nice}, "
          f"window {args.window_s:g} s)")
    print(f"{'A':>2} {'t(A) ms':>9} {'p90 ms':>8} {'steps':>6} {'c(A)':>6} {'c(A)/A':>7} {'used':>6} {'other':>6} {'cpu/step ms':>11}")
    for r in rows:
        print(f"{r['A']:>2} {r['t_ms']:>9.1f} {r['p90_ms']:>8.1f} {r['steps']:>6} {r['c']:>6.2f} {r['rate']:>7.2f}"
              f" {r['used']:>6.2f} {r['other']:>6.2f} {r['cpu_ms']:>11.1f}")
    print("used: cores our A processes got (CPU time / window); other: cores everything else used meanwhile;\n"
          "cpu/step: CPU-seconds per step (constant in A <=> no contention inefficiency)")
    print("capacity list for workload.capacity:", [round(r["c"], 2) for r in rows])
    print("\nper-call cost (load fresh flat weights, then steps; single process)")
    print(f"{'idle before call s':>18} {'load ms':>8} {'first step ms':>14} {'later steps ms':>15}")
    for idle in (0.0, 0.05):
        r = per_call_cost(args.calls, args.steps, idle)
        print(f"{idle:>18.2f} {r['load_ms']:>8.2f} {r['first_ms']:>14.1f} {r['later_ms']:>15.1f}")
    print(f"\nloadavg after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
