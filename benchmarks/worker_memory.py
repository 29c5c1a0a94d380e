"""Benchmark (issue 10): memory of the real executor's worker actors, per worker, at a given n.

Starts the private Ray of ``gcsim real`` (:func:`gcsim.real.runner.ray_session`, loopback), n workers
(:class:`gcsim.real.master.WorkerPool`; ``--workers-per-process K``: K logical workers to an actor
process, ``ceil(n / K)`` processes) and their setup on a synthetic training set of the
CIFAR-10 training set's shape (50,000 uint8 images of 32 x 32 x 3, 147 MB; random pixels: memory
does not depend on the values), then reads every actor's ``/proc/<pid>/smaps_rollup``:

* ``rss_mb`` – resident set (shared pages counted in full in every process);
* ``pss_mb`` – proportional set (shared pages split between the processes sharing them): the sum over
  the workers is what they cost the machine;
* ``anon_mb`` – private anonymous memory (heap: Python objects, torch's allocations, the shards).

One row per actor process (the workers it hosts) and a summary line: PSS per logical worker (the
processes' PSS sum / n), per process (mean, max) and in all, the object store's shared memory
(``/dev/shm`` used), the machine's ``free`` memory before and with the workers up, and its load.
Each worker receives only its partitions' shards (``n``-th of the set for uncoded, ``(s+1)/n`` for
gc-fr); the whole set is no longer sent to every node.

    .venv/bin/python benchmarks/worker_memory.py --n 8
    .venv/bin/python benchmarks/worker_memory.py --n 8 --workers-per-process 8
    .venv/bin/python benchmarks/worker_memory.py --n 64 --workers-per-process 8 --scheme gc-fr --s 1
    .venv/bin/python benchmarks/worker_memory.py --n 16 --scheme gc-fr --s 1 --out worker_memory.csv
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd


def smaps_mb(pid: int) -> dict:
    """``rss_mb``, ``pss_mb``, ``anon_mb`` (MiB) of process ``pid`` from ``/proc/<pid>/smaps_rollup``."""
    vals = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                vals[parts[0].rstrip(":")] = int(parts[1]) / 1024.0
    return {"rss_mb": vals.get("Rss", np.nan), "pss_mb": vals.get("Pss", np.nan),
            "anon_mb": vals.get("Anonymous", np.nan)}


def available_mb() -> float:
    """``MemAvailable`` of ``/proc/meminfo``, MiB (NaN where unreadable)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def shm_used_mb() -> float:
    """Used space of ``/dev/shm`` (Ray's object store lives there), MiB (NaN where absent)."""
    try:
        st = os.statvfs("/dev/shm")
        return (st.f_blocks - st.f_bfree) * st.f_frsize / 2**20
    except OSError:
        return float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=8, help="workers (default 8)")
    ap.add_argument("--workers-per-process", type=int, default=1,
                    help="logical workers per actor process K (default 1: one process per worker)")
    ap.add_argument("--scheme", default="uncoded", help="scheme whose partitions the workers hold")
    ap.add_argument("--s", type=int, default=0, help="stragglers tolerated (scheme parameter s)")
    ap.add_argument("--images", type=int, default=50_000, help="training images (default: CIFAR-10's 50,000)")
    ap.add_argument("--out", default=None, help="CSV of the per-process rows")
    args = ap.parse_args(argv)

    from gcsim.real.master import WorkerPool
    from gcsim.real.runner import ray_session
    from gcsim.real.sampling import shard_indices

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(args.images, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=args.images).astype(np.int64)
    k = args.workers_per_process
    t0 = time.monotonic()
    load0, avail0 = os.getloadavg()[0], available_mb()
    with ray_session(num_cpus=args.n):
        pool = WorkerPool(args.n, num_cpus=min(1.0, (os.cpu_count() or 1) / args.n), workers_per_process=k)
        try:
            shards = shard_indices(len(labels), args.n, 0)
            info = pool.setup(dict(scheme=args.scheme, n=args.n, s=args.s, m=1, scheme_seed=0, model="small-cnn",
                                   model_seed=0, dtype="float32", payload_dtype="float32", batch_size=128,
                                   sampler_seed=0, cancel_poll_s=0.01), images, labels, shards, timeout_s=1200)
            time.sleep(1.0)
            rows = []
            for p, ws in enumerate(pool.processes):
                pid = int(info[ws[0]]["pid"])
                rows.append({"process": p, "pid": pid, "workers": len(ws),
                             "held_partitions": sum(len(info[w]["held"]) for w in ws), **smaps_mb(pid)})
            avail1, shm = available_mb(), shm_used_mb()
        finally:
            pool.shutdown()
    df = pd.DataFrame(rows)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    print(f"n = {args.n} ({args.scheme}, s = {args.s}), K = {pool.k} ({len(df)} processes), {args.images} images: "
          f"PSS per worker {df.pss_mb.sum() / args.n:.0f} MiB; per process mean {df.pss_mb.mean():.0f} MiB "
          f"(max {df.pss_mb.max():.0f}), sum {df.pss_mb.sum():.0f} MiB; RSS per process mean {df.rss_mb.mean():.0f} "
          f"MiB; private anonymous per process mean {df.anon_mb.mean():.0f} MiB; /dev/shm used {shm:.0f} MiB; "
          f"MemAvailable {avail0:.0f} -> {avail1:.0f} MiB; {time.monotonic() - t0:.0f} s; "
          f"loadavg {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    if args.out:
        df.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
