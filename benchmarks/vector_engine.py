"""Benchmark (issue 13): the vectorised engine against a bare numpy order-statistic floor, and at scale.

1. ``floor``: in the same process, worker-iterations per second of the vector engine (one scheme, a
   single "first n-s of n" quorum, ``trace="none"``) against the bare numpy floor: one Generator draws
   ``(I, n)`` Pareto delays and ``np.partition`` takes the (n-s)-th order statistic per iteration (no keyed
   streams, no network/master terms, no bookkeeping). Target: ratio >= 0.3.
2. ``scale``: n = 1024 workers × 10,000 iterations × the 9 schemes of the heavy-tail scenario (parameters
   from ``_params.representative_params``; schemes refused at n = 1024 are listed and skipped),
   ``trace="none"``, ``decode_check="quorum"`` (the exact check would ask gc-cr/gc-mds for a dense solve per
   iteration), peak memory by ``tracemalloc`` (Python + numpy allocations) and ``ru_maxrss``. Target: < 10 s.

Every timing is printed with ``os.getloadavg()`` beside it; each measurement runs ``--repeat`` times.

    .venv/bin/python benchmarks/vector_engine.py [--part floor|scale|all] [--repeat 2] [--n 1024] [--iterations 10000]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import tracemalloc

import numpy as np

from gcsim.scenario import load_scenario
from gcsim.schemes import scheme_names
from gcsim.sim.vector import simulate_vector

from _params import representative_params

HERE = os.path.dirname(os.path.abspath(__file__))


def _load() -> str:
    return "load %.2f %.2f %.2f" % os.getloadavg()


def _scenario(n: int, iterations: int, schemes: list[dict]):
    sc = load_scenario(os.path.join(HERE, "..", "scenarios", "heavy_tail.yaml"))
    return sc.model_copy(update={"n_workers": n, "iterations": iterations, "schemes": [
        sc.schemes[0].model_copy(update=s) for s in schemes]})


def floor_rate(n: int, iterations: int, s: int) -> float:
    """Worker-iterations per second of the bare numpy order statistic (same delay law as heavy_tail)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(1)
    delays = 0.04 * (rng.pareto(1.8, size=(iterations, n)) + 1.0)
    kth = np.partition(delays, n - s - 1, axis=1)[:, n - s - 1]
    float(kth.mean())
    return n * iterations / (time.perf_counter() - t0)


def part_floor(repeat: int) -> None:
    for n, iterations in ((64, 20000), (1024, 2000)):
        s = n // 8
        sc = _scenario(n, iterations, [{"name": "ignore-stragglers", "s": s, "m": 1, "label": None}])
        for rep in range(repeat):
            fl = floor_rate(n, iterations, s)
            t0 = time.perf_counter()
            simulate_vector(sc, trace="none")
            vec = n * iterations / (time.perf_counter() - t0)
            print(f"floor n={n} I={iterations} rep {rep}: vector {vec / 1e6:.2f} M worker-it/s, numpy floor "
                  f"{fl / 1e6:.2f} M/s, ratio {vec / fl:.2f}  ({_load()})", flush=True)


def part_scale(n: int, iterations: int, repeat: int) -> None:
    schemes, skipped = [], []
    for name in scheme_names():
        p = representative_params(name, n)
        if p is None:
            skipped.append(name)
            continue
        schemes.append({"name": name, "s": p.get("s", 0), "m": p.get("m", 1), "label": None})
    sc = _scenario(n, iterations, schemes)
    names = ", ".join("%s(s=%d,m=%d)" % (s["name"], s["s"], s["m"]) for s in schemes)
    print(f"scale: n={n}, {iterations} iterations, schemes {names}; refused at this n: "
          f"{', '.join(skipped) or 'none'}", flush=True)
    for rep in range(repeat):
        tracemalloc.start()
        t0 = time.perf_counter()
        r = simulate_vector(sc, trace="none", decode_check="quorum")
        wall = time.perf_counter() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"scale rep {rep}: {wall:.1f} s for {len(schemes)} schemes ({n * iterations * len(schemes) / wall / 1e6:.1f}"
              f" M worker-it/s); peak traced memory {peak / 2**20:.0f} MiB, max RSS {rss:.0f} MiB  ({_load()})",
              flush=True)
    print(r.summary[["scheme", "s", "m", "mean_s", "p99_s"]].to_string(index=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["floor", "scale", "all"], default="all")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--iterations", type=int, default=10000)
    a = ap.parse_args()
    if a.part in ("floor", "all"):
        part_floor(a.repeat)
    if a.part in ("scale", "all"):
        part_scale(a.n, a.iterations, a.repeat)


if __name__ == "__main__":
    main()
