"""Benchmark (issue 13): where ``cce-cr`` stops – which (n, s, m) its construction guard accepts in float64
(the simulator) and in float32 (``gcsim real``'s payloads), the guard's worst error bound, and the decode
error measured with random gradients.

For each (n, s, m) and payload precision: the guard (:func:`gcsim.schemes.cce_cr.worst_decode`, the
scheme's default points, no early stop) gives the worst error bound over its straggler sets and the set
giving it; the scheme is built (accepted iff that bound <= 1e-6 / 1e-4 and the residual <= 1e-6); if
accepted, random float64 partition gradients (seeded) are encoded, the payloads rounded to the precision,
and decoded on the guard's worst set, on every contiguous straggler block in worker order and in the
order of the points, and on ``--random`` seeded random sets; the worst relative 2-norm error against
the float64 sum is reported ("measured"), with how many of those sets the decoder refused (0 expected).
Prints a markdown table and the load average; writes nothing.

    .venv/bin/python benchmarks/cce_cr_limits.py [--n 32,64,128,256] [--s 1,2,3,4] [--m 1,2,4] [--random 50]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.cce_cr import CceCr, default_theta, worst_decode
from gcsim.schemes.patterns import contiguous_sets
from gcsim.threads import one_blas_thread

TOL = {"float64": 1e-6, "float32": 1e-4}


def _ints(text: str) -> list[int]:
    return [int(a) for a in text.split(",") if a]


def measure(n: int, s: int, m: int, dtype: str, random_sets: int, length: int) -> dict:
    theta = default_theta(n)
    t0 = time.process_time()
    resid, bound, worst_set, _ = worst_decode(theta, n, s, m, dtype)  # every guard set, no early stop
    out = dict(bound=bound, residual=resid, worst_set=worst_set, guard_cpu_s=time.process_time() - t0)
    try:
        sch = CceCr(n, s, m, payload_dtype=dtype)
    except SchemeError:
        return {**out, "accepted": False}
    rng = np.random.default_rng(1000 * n + 10 * s + m)
    g = rng.standard_normal((n, length))
    true = g.sum(axis=0)
    grads = dict(enumerate(g))
    payloads = {i: sch.encode(i, grads).astype(dtype).astype(np.float64) for i in range(n)}
    order = np.argsort(theta, kind="stable")
    sets = [worst_set] + contiguous_sets(n, s)
    sets += [tuple(sorted(int(w) for w in order[list(r)])) for r in contiguous_sets(n, s)]
    sets += [tuple(sorted(rng.choice(n, s, replace=False).tolist())) for _ in range(random_sets)]
    worst, refused = 0.0, 0
    for st in dict.fromkeys(sets):
        dec = sch.decode([w for w in range(n) if w not in set(st)])
        if dec is None:
            refused += 1
            continue
        err = float(np.linalg.norm(sch.combine(dec, payloads, length) - true) / np.linalg.norm(true))
        worst = max(worst, err)
    return {**out, "accepted": True, "measured": worst, "sets": len(dict.fromkeys(sets)), "refused": refused}


def _cell(r: dict) -> str:
    if not r["accepted"]:
        return f"refused ({r['bound']:.1e})"
    return f"{r['bound']:.1e} / {r['measured']:.1e}" + (f" ({r['refused']} refused)" if r["refused"] else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=_ints, default=[32, 64, 128, 256])
    ap.add_argument("--s", type=_ints, default=[1, 2, 3, 4])
    ap.add_argument("--m", type=_ints, default=[1, 2, 4])
    ap.add_argument("--random", type=int, default=50, help="random straggler sets decoded per case (seeded)")
    ap.add_argument("--length", type=int, default=2048, help="gradient length")
    a = ap.parse_args()
    print("load %.2f %.2f %.2f" % os.getloadavg(), flush=True)
    print("| n | s | m | float64: bound / measured | float32: bound / measured | guard CPU s (f64, f32) |")
    print("|---|---|---|---|---|---|")
    worst = {"float64": 0.0, "float32": 0.0}
    with one_blas_thread():
        for n in a.n:
            for s in a.s:
                for m in a.m:
                    if s + m > n:
                        continue
                    r = {dt: measure(n, s, m, dt, a.random, a.length) for dt in ("float64", "float32")}
                    for dt in r:
                        if r[dt]["accepted"]:
                            worst[dt] = max(worst[dt], r[dt]["measured"])
                    print(f"| {n} | {s} | {m} | {_cell(r['float64'])} | {_cell(r['float32'])} | "
                          f"{r['float64']['guard_cpu_s']:.2f}, {r['float32']['guard_cpu_s']:.2f} |", flush=True)
    print(f"worst measured error of an accepted case: float64 {worst['float64']:.1e}, float32 {worst['float32']:.1e}")
    print("load %.2f %.2f %.2f" % os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()
