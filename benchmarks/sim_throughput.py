"""Benchmark 1 (issue 6): simulator throughput against the bare-SimPy floor.

For n = 8, 64, 256 workers on the heavy-tail scenario (Pareto additive delays), simulate each scheme
and report simulated worker-iterations per second (n × iterations / wall seconds of ``simulate``).
Beside it, in the same process, time the same count of bare SimPy ``Timeout`` events gathered by a
"first k of n" :class:`simpy.Condition` per iteration (no model, no draws, no bookkeeping): the floor
the model cannot beat. The ratio model/floor says how much the model costs over raw SimPy.

    .venv/bin/python benchmarks/sim_throughput.py [--sizes 8,64,256] [--iterations 200] [--schemes uncoded,gc-cr]
    .venv/bin/python benchmarks/sim_throughput.py --sizes 256 --iterations 10000 --schemes ignore-stragglers,gc-cr --repeat 2
    .venv/bin/python benchmarks/sim_throughput.py --quick      # smoke: n = 8, 64, 50 iterations, two schemes

Issue 13's target for the SimPy engine: n = 256 × 10,000 iterations in under 60 s (``wall s`` column);
every line carries the load average at its start.
"""

from __future__ import annotations

import argparse
import os
import time

import simpy
from simpy.events import Condition

from gcsim.scenario import load_scenario, validate_scenario
from gcsim.sim.engine import simulate

from _params import representative_params


def bare_simpy_rate(n: int, iterations: int, wait_for: int) -> float:
    """Worker-iterations per second of bare SimPy: per iteration, n Timeout events and one Condition
    that fires after ``wait_for`` of them (the master), then the next iteration."""
    env = simpy.Environment()

    def master():
        for _ in range(iterations):
            evs = [env.timeout(0.001 * (1 + (w * 7919) % 13)) for w in range(n)]
            yield Condition(env, lambda events, count: count >= wait_for, evs)

    t0 = time.perf_counter()
    env.process(master())
    env.run()
    return n * iterations / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="scenarios/heavy_tail.yaml")
    ap.add_argument("--sizes", default="8,64,256")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--schemes", default="uncoded,ignore-stragglers,gc-fr,gc-cr,cce-fr,pgc-cr")
    ap.add_argument("--repeat", type=int, default=1, help="timings per (scheme, n) (noise floor)")
    ap.add_argument("--quick", action="store_true", help="smoke run: n = 8, 64, 50 iterations, uncoded and gc-cr")
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.iterations, args.schemes, args.repeat = "8,64", 50, "uncoded,gc-cr", 1
    base = load_scenario(args.scenario).resolved()
    print(f"{'scheme':<18}{'n':>5}{'iters':>7}{'wall s':>9}{'model wi/s':>13}{'bare wi/s':>13}{'model/bare':>12}  load")
    for n in (int(x) for x in args.sizes.split(",")):
        for name in args.schemes.split(","):
            p = representative_params(name, n)
            if p is None:
                print(f"{name:<18}{n:>5}   (no accepted parameters at this n)")
                continue
            data = dict(base, n_workers=n, iterations=args.iterations, schemes=[{"name": name, **p}])
            data["stragglers"] = dict(data["stragglers"], worker_scale=None)
            try:
                sc = validate_scenario(data)
            except Exception as e:  # a scheme refused at this n (e.g. cce-cr conditioning)
                print(f"{name:<18}{n:>5}   refused: {e}")
                continue
            for _ in range(args.repeat):
                load = "%.2f %.2f %.2f" % os.getloadavg()
                t0 = time.perf_counter()
                simulate(sc)
                wall = time.perf_counter() - t0
                model_rate = n * args.iterations / wall
                bare_rate = bare_simpy_rate(n, args.iterations, n - p.get("s", 0))
                print(f"{name:<18}{n:>5}{args.iterations:>7}{wall:>9.1f}{model_rate:>13,.0f}{bare_rate:>13,.0f}"
                      f"{model_rate / bare_rate:>12.3f}  {load}", flush=True)


if __name__ == "__main__":
    main()
