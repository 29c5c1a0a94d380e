"""Simulator speed: wall time of ``gcsim simulate`` on a shipped scenario (target: heavy_tail, all
nine schemes, 1000 iterations, well under a minute on a 2-core machine), split into simulation and
writing the run directory. Prints a table; writes into a temporary directory that it deletes.

    .venv/bin/python benchmarks/sim_speed.py [--scenario scenarios/heavy_tail.yaml] [--iterations N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from gcsim.scenario import load_scenario
from gcsim.sim.engine import simulate
from gcsim.sim.output import write_sim_run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="scenarios/heavy_tail.yaml")
    ap.add_argument("--iterations", type=int, default=None)
    args = ap.parse_args()
    sc = load_scenario(args.scenario)
    t0 = time.perf_counter()
    res = simulate(sc, iterations=args.iterations)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        write_sim_run(res, res.scenario, Path(tmp) / "run")
    t2 = time.perf_counter()
    n_schemes, iters = len(res.schemes), res.scenario.iterations
    print(f"{res.scenario.name}: {n_schemes} schemes x {iters} iterations x {res.scenario.n_workers} workers")
    print(f"simulate   {t1 - t0:7.2f} s  ({n_schemes * iters / (t1 - t0):,.0f} scheme-iterations/s)")
    print(f"write run  {t2 - t1:7.2f} s  (csv + plots)")
    print(f"total      {t2 - t0:7.2f} s")


if __name__ == "__main__":
    main()
