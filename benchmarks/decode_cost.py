"""Benchmark 3 (issue 6): decode cost per iteration for each scheme at n = 8, 32, 128.

For every registered scheme and n, simulate iterations with random arrival orders and time what the
master does on every arrival: ``scheme.decode(arrived_so_far)`` until it returns a decoding (so the
cost includes the not-yet-decodable checks). Reported per iteration, in microseconds, twice: cold
(first time a pattern is seen: the linear solve) and warm (cache hits), and the first iteration alone
(``first ms``: what a scheme computes once, e.g. gc-cr's left null space of B, issue 13). Prints a
table; writes nothing.

    .venv/bin/python benchmarks/decode_cost.py [--iterations 200] [--sizes 8,32,128] [--schemes gc-cr,gc-mds]
    .venv/bin/python benchmarks/decode_cost.py --sizes 1024 --schemes gc-cr,gc-mds --s gc-mds=3 --iterations 50

``--s NAME=S`` fixes s for a scheme instead of ``_params.representative_params`` (whose search for gc-mds at
n = 1024 builds every s from 128 down to the accepted 3, each with its construction guard).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes import make_scheme, scheme_names

from _params import representative_params


def time_iterations(scheme, iterations: int, rng: np.random.Generator) -> float:
    """Mean seconds per iteration spent in decode calls, arrivals in a random order."""
    total = 0.0
    for it in range(iterations):
        order = rng.permutation(len(scheme.messages(it)))
        t0 = time.perf_counter()
        for r in range(1, len(order) + 1):
            if scheme.decode(order[:r], it) is not None:
                break
        total += time.perf_counter() - t0
    return total / iterations


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--sizes", default="8,32,128")
    ap.add_argument("--schemes", default=None, help="comma-separated names (default: every registered scheme)")
    ap.add_argument("--s", default="", help="NAME=S,...: fixed s per scheme (default: representative_params)")
    args = ap.parse_args()
    fixed = {k: int(v) for k, v in (item.split("=") for item in args.s.split(",") if item)}
    sizes = [int(x) for x in args.sizes.split(",")]
    names = scheme_names() if args.schemes is None else args.schemes.split(",")
    print(f"{'scheme':<18}{'n':>5}{'s':>4}{'m':>3}{'first ms':>10}{'cold us/it':>12}{'warm us/it':>12}  load")
    for name in names:
        for n in sizes:
            p = {"s": fixed[name]} if name in fixed else representative_params(name, n)
            if p is None:
                print(f"{name:<18}{n:>5}   (no accepted s, m at this n)")
                continue
            try:
                sch = make_scheme(name, n=n, **p)
            except SchemeError as e:
                print(f"{name:<18}{n:>5}   refused: {e}")
                continue
            load = "%.2f %.2f %.2f" % os.getloadavg()
            first = time_iterations(sch, 1, np.random.default_rng(1))  # a pattern the timed ones (seed 0) do not reuse
            cold = time_iterations(sch, args.iterations, np.random.default_rng(0))
            warm = time_iterations(sch, args.iterations, np.random.default_rng(0))
            print(f"{name:<18}{n:>5}{p.get('s', 0):>4}{p.get('m', 1):>3}{first * 1e3:>10.1f}{cold * 1e6:>12.1f}"
                  f"{warm * 1e6:>12.1f}  {load}")


if __name__ == "__main__":
    main()
