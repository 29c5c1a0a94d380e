"""Benchmark 3 (issue 6): decode cost per iteration for each scheme at n = 8, 32, 128.

For every registered scheme and n, simulate iterations with random arrival orders and time what the
master does on every arrival: ``scheme.decode(arrived_so_far)`` until it returns a decoding (so the
cost includes the not-yet-decodable checks). Reported per iteration, in microseconds, twice: cold
(first time a pattern is seen: the linear solve) and warm (cache hits). Prints a table; writes nothing.

    .venv/bin/python benchmarks/decode_cost.py [--iterations 200] [--sizes 8,32,128]
"""

from __future__ import annotations

import argparse
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
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"{'scheme':<18}{'n':>5}{'s':>4}{'m':>3}{'cold us/it':>12}{'warm us/it':>12}")
    for name in scheme_names():
        for n in sizes:
            p = representative_params(name, n)
            if p is None:
                print(f"{name:<18}{n:>5}   (no accepted s, m at this n)")
                continue
            try:
                sch = make_scheme(name, n=n, **p)
            except SchemeError as e:
                print(f"{name:<18}{n:>5}   refused: {e}")
                continue
            cold = time_iterations(sch, args.iterations, np.random.default_rng(0))
            warm = time_iterations(sch, args.iterations, np.random.default_rng(0))
            print(f"{name:<18}{n:>5}{p.get('s', 0):>4}{p.get('m', 1):>3}{cold * 1e6:>12.1f}{warm * 1e6:>12.1f}")


if __name__ == "__main__":
    main()
