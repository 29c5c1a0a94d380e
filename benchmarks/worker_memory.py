"""Benchmark (issue 10): memory of the real executor's worker actors, per worker, at a given n.

Starts the private Ray of ``gcsim real`` (:func:`gcsim.real.runner.ray_session`, loopback), n worker
actors (:class:`gcsim.real.master.WorkerPool`) and their setup on a synthetic training set of the
CIFAR-10 training set's shape (50,000 uint8 images of 32 x 32 x 3, 147 MB; random pixels: memory
does not depend on the values), then reads every actor's ``/proc/<pid>/smaps_rollup``:

* ``rss_mb`` – resident set (shared pages counted in full in every process);
* ``pss_mb`` – proportional set (shared pages split between the processes sharing them): the sum over
  the workers is what they cost the machine;
* ``anon_mb`` – private anonymous memory (heap: Python objects, torch's allocations, the shards).

One row per worker and a summary line (mean, max, sum of PSS) with the machine's load beside it.
Each worker receives only its partitions' shards (``n``-th of the set for uncoded, ``(s+1)/n`` for
gc-fr); the whole set is no longer sent to every node.

    .venv/bin/python benchmarks/worker_memory.py --n 8
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=8, help="worker actors (default 8)")
    ap.add_argument("--scheme", default="uncoded", help="scheme whose partitions the workers hold")
    ap.add_argument("--s", type=int, default=0, help="stragglers tolerated (scheme parameter s)")
    ap.add_argument("--images", type=int, default=50_000, help="training images (default: CIFAR-10's 50,000)")
    ap.add_argument("--out", default=None, help="CSV of the per-worker rows")
    args = ap.parse_args(argv)

    from gcsim.real.config import RealConfig
    from gcsim.real.master import WorkerPool
    from gcsim.real.runner import ray_session
    from gcsim.real.sampling import shard_indices

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(args.images, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=args.images).astype(np.int64)
    cfg = RealConfig(scheme=args.scheme, n_workers=args.n, s=args.s)
    t0 = time.monotonic()
    with ray_session(cfg):
        pool = WorkerPool(args.n, num_cpus=min(1.0, (os.cpu_count() or 1) / args.n))
        try:
            shards = shard_indices(len(labels), args.n, 0)
            info = pool.setup(dict(scheme=args.scheme, n=args.n, s=args.s, m=1, scheme_seed=0, model="small-cnn",
                                   model_seed=0, dtype="float32", payload_dtype="float32", batch_size=128,
                                   sampler_seed=0, cancel_poll_s=0.01), images, labels, shards, timeout_s=600)
            time.sleep(1.0)
            rows = [{"worker": i["worker"], "pid": i["pid"], "held_partitions": len(i["held"]), **smaps_mb(int(i["pid"]))}
                    for i in info]
        finally:
            pool.shutdown()
    df = pd.DataFrame(rows)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    print(f"n = {args.n} ({args.scheme}, s = {args.s}), {args.images} images: PSS per worker mean "
          f"{df.pss_mb.mean():.0f} MiB (max {df.pss_mb.max():.0f}), sum {df.pss_mb.sum():.0f} MiB; RSS mean "
          f"{df.rss_mb.mean():.0f} MiB; private anonymous mean {df.anon_mb.mean():.0f} MiB; "
          f"{time.monotonic() - t0:.0f} s; loadavg {os.getloadavg()[0]:.2f}")
    if args.out:
        df.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
