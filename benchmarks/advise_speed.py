"""Benchmark (issue 12, deliverable 3): ``gcsim advise SCENARIO --n N`` wall time at n = 32, 64, 256.

Target: under 60 s for n = 256 on one core. Each run is the command a user types, in a fresh process
(imports, scenario load, candidate search, simulation, run directory, plot), with BLAS/OpenMP pools at one
thread (``gcsim`` pins BLAS to one thread itself) and, with ``--pin``, the process on one CPU (``taskset``).
Printed per run: the wall time, advise's own time (``meta.json``: ``wall_s``), candidates, timing classes
simulated, rows left as lower bounds, candidates not searched, and the load average (1/5/15 min) before
and after — this project's VM has 2 cores shared with other work, so compare runs at similar load.

    .venv/bin/python benchmarks/advise_speed.py                       # heavy_tail, n = 32, 64, 256
    .venv/bin/python benchmarks/advise_speed.py --n 256 --repeat 3 --scenario scenarios/bimodal.yaml
    .venv/bin/python benchmarks/advise_speed.py --quick               # n = 12, 32: a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

from _timed_cli import fresh_out_dir, timed_gcsim

TARGET_S = {256: 60.0}


def run_once(scenario: str, n: int, extra: list[str], pin: bool) -> dict:
    out = fresh_out_dir("advise-bench-")
    run = timed_gcsim(["advise", scenario, "--n", str(n), "--out", out] + extra, pin=pin)
    row = {"n": n, **{k: run[k] for k in ("wall_s", "load_before", "load_after", "rc", "command")}}
    if run["rc"] == 0:
        meta = json.loads(open(os.path.join(out, "meta.json")).read())
        s = meta["search"][str(n)]
        row.update(advise_s=meta["wall_s"], best=meta["best"][str(n)], engine=s["engine"],
                   candidates=s["candidates"], classes=s["timing_classes"], lower_bounds=s["rows_lower_bound"],
                   not_searched=len(s["not_searched"]))
    else:
        row["error"] = (run["stderr"] or run["stdout"]).strip().splitlines()[-1:]
    shutil.rmtree(out, ignore_errors=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="scenarios/heavy_tail.yaml")
    ap.add_argument("--n", default="32,64,256", help="comma-separated worker counts")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--pin", action="store_true", help="taskset -c 0 (one CPU)")
    ap.add_argument("--quick", action="store_true", help="n = 12, 32 (smoke)")
    ap.add_argument("--extra", default="", help="more gcsim advise options, e.g. '--decode-check all'")
    a = ap.parse_args()
    ns = [12, 32] if a.quick else [int(x) for x in a.n.split(",")]
    extra = a.extra.split()
    print(f"scenario {a.scenario}; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    ok = True
    for n in ns:
        for r in range(a.repeat):
            row = run_once(a.scenario, n, extra, a.pin)
            if row["rc"] != 0:
                print(f"n={n:4d} run {r + 1}: FAILED rc={row['rc']} {row.get('error')}  load {row['load_before']}")
                ok = False
                continue
            best = row["best"]
            target = TARGET_S.get(n)
            verdict = "" if target is None else ("  (target < %.0f s: %s)" % (target, "met" if row["wall_s"] < target
                                                                              else "MISSED"))
            ok &= target is None or row["wall_s"] < target
            print(f"n={n:4d} run {r + 1}: {row['wall_s']:6.1f} s wall ({row['advise_s']:.1f} s in advise), "
                  f"{row['candidates']} candidates, {row['classes']} timing classes, {row['lower_bounds']} rows lower "
                  f"bounds, {row['not_searched']} not searched; best {best['scheme']} s={best['s']} m={best['m']}; "
                  f"{row['engine']}; load {row['load_before']} -> {row['load_after']}{verdict}")
    print("command: " + " ".join(["gcsim", "advise", a.scenario, "--n", "N"] + extra))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
