"""Benchmark (issue 9): how steady is this machine's CPU speed? The floor under any prediction of a
CPU-bound run, and the reason a short CPU-speed probe cannot predict a run's speed on a shared VM.

One process (``torch.set_num_threads(1)``) repeats the worker's unit of work – the small CNN's
forward + backward on 32 CIFAR-shaped images (:func:`gcsim.real.model.slice_gradient`, one partition
of the default real run) – for ``--windows`` windows of ``--window-s`` seconds each and reports per
window the CPU-seconds per gradient (``time.process_time``), the share of that CPU spent in the kernel
(``/proc/self/stat`` utime/stime) and the host's steal ticks (``/proc/stat``). Summary: mean,
coefficient of variation and range of the per-window CPU per gradient, lag-1 autocorrelation
(speed that persists across windows is drift; none is fast jitter), and the CV of means of
consecutive blocks of ``--block`` windows (what a probe of that length would see).

The CPU clock excludes time the process waited for a core, so on an idle machine the per-gradient
CPU is the machine's speed itself: on a dedicated machine its CV is ~1 %; on this project's shared
2-vCPU VM it was 8 % from one second to the next (docs/validation/README.md, finding 13).

    .venv/bin/python benchmarks/cpu_speed_noise.py                    # 30 windows of 1 s, ~35 s
    .venv/bin/python benchmarks/cpu_speed_noise.py --windows 120 --window-s 2 --block 10
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def _proc_stat() -> np.ndarray:
    """Host CPU ticks: user, nice, system, idle, iowait, irq, softirq, steal."""
    with open("/proc/stat") as f:
        return np.array([int(x) for x in f.readline().split()[1:9]])


def _self_ticks() -> tuple[int, int]:
    """This process's (utime, stime) in clock ticks (/proc/self/stat fields 14, 15)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=30, help="number of windows [30]")
    ap.add_argument("--window-s", type=float, default=1.0, help="window length, seconds [1]")
    ap.add_argument("--block", type=int, default=5, help="windows per block for the block-mean CV [5]")
    ap.add_argument("--images", type=int, default=32, help="images per gradient (one partition) [32]")
    args = ap.parse_args()

    import torch

    from gcsim.real.model import build_model, slice_gradient

    torch.set_num_threads(1)
    model = build_model("small-cnn", seed=0)
    model.train()
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(args.images, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, size=args.images)
    for _ in range(3):  # torch's lazy start-up
        slice_gradient(model, x, y, 6 * args.images)
    print(f"load average before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs")
    print(" window  cpu ms/grad  kernel share  steal ticks")
    cpu_ms, sys_share, steal = [], [], []
    for k in range(args.windows):
        h0, (u0, s0), c0, w0, n = _proc_stat(), _self_ticks(), time.process_time(), time.perf_counter(), 0
        while time.perf_counter() - w0 < args.window_s:
            slice_gradient(model, x, y, 6 * args.images)
            n += 1
        h1, (u1, s1), c1 = _proc_stat(), _self_ticks(), time.process_time()
        cpu_ms.append((c1 - c0) / n * 1e3)
        sys_share.append((s1 - s0) / max(1, (u1 - u0) + (s1 - s0)))
        steal.append(int(h1[7] - h0[7]))
        print(f" {k:6d}  {cpu_ms[-1]:11.2f}  {sys_share[-1]:12.1%}  {steal[-1]:11d}", flush=True)
    v = np.asarray(cpu_ms)
    lag1 = float(np.corrcoef(v[:-1], v[1:])[0, 1]) if v.size > 2 else float("nan")
    blocks = v[: v.size // args.block * args.block].reshape(-1, args.block).mean(axis=1)
    block_cv = float(blocks.std(ddof=1) / blocks.mean()) if blocks.size > 1 else float("nan")
    print(f"CPU per gradient: mean {v.mean():.2f} ms, CV {v.std(ddof=1) / v.mean():.1%}, range "
          f"{v.min():.2f}-{v.max():.2f} ms; lag-1 autocorrelation {lag1:+.2f}; CV of {args.block}-window "
          f"block means {block_cv:.1%}")
    print(f"kernel share of the CPU: median {np.median(sys_share):.1%}; steal ticks in all: {sum(steal)}; "
          f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
