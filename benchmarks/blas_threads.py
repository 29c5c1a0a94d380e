"""Benchmark (issue 15, item 6): cold decodes with numpy's default BLAS threads vs one thread.

Decoding a new arrival pattern is a small least-squares solve (gc-cr, gc-mds) or inverse (cce-cr);
multi-threaded BLAS makes these slower, most of all on a busy machine. For each case it decodes the
same random patterns (n - s arrivals, distinct, so every decode is cold) on two freshly built copies
of the scheme, one under ``threadpool_limits(None)`` (the default: as many threads as cores) and one
under :func:`gcsim.threads.one_blas_thread` (what every ``gcsim`` command uses), alternating the
order over ``--rounds`` rounds, and prints the median milliseconds per decode and the ratio.
Writes nothing.

    .venv/bin/python benchmarks/blas_threads.py [--patterns 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from gcsim.schemes import make_scheme
from gcsim.threads import one_blas_thread

CASES = [("gc-mds", 101, 2, 1), ("gc-cr", 128, 8, 1), ("cce-cr", 16, 2, 2)]


def time_decodes(name: str, n: int, s: int, m: int, patterns: list[list[int]], pinned: bool) -> float:
    """Median seconds per cold decode of ``patterns`` on a fresh scheme, BLAS pinned or default."""
    scheme = make_scheme(name, n=n, s=s, m=m, seed=0)
    limit = one_blas_thread() if pinned else threadpool_limits(limits=None)
    times = []
    with limit if pinned else contextlib.nullcontext():
        for p in patterns:
            t0 = time.perf_counter()
            scheme.decode(p)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patterns", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
    print(f"BLAS: {blas}")
    print(f"{'scheme':8} {'n':>4} {'s':>3} {'m':>2} {'default ms':>11} {'1 thread ms':>12} {'speed-up':>9}")
    rng = np.random.default_rng(0)
    for name, n, s, m in CASES:
        n_msgs = len(make_scheme(name, n=n, s=s, m=m, seed=0).messages(0))
        pats = [rng.permutation(n_msgs)[: n_msgs - s].tolist() for _ in range(args.patterns)]
        default, pinned = [], []
        for r in range(args.rounds):
            for flag in ((False, True) if r % 2 == 0 else (True, False)):
                (pinned if flag else default).append(time_decodes(name, n, s, m, pats, flag))
        d, p = statistics.median(default), statistics.median(pinned)
        print(f"{name:8} {n:4d} {s:3d} {m:2d} {d * 1e3:11.3f} {p * 1e3:12.3f} {d / p:8.2f}x")


if __name__ == "__main__":
    main()
