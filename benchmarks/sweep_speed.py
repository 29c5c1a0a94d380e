"""Benchmark (issue 13, deliverable 4): ``gcsim sweep`` of 1,000 points at n = 64, local and Ray executor.

The sweep: ``scenarios/bimodal.yaml`` at n = 64 and 300 iterations per point, grid 5 schemes
(ignore-stragglers, gc-fr, gc-cr, gc-mds, pgc-cr) x s (1, 3, 7, 15) x straggler probability
``stragglers.delay.p`` (0.01, 0.02, 0.05, 0.1, 0.2) x 10 seeds = 1,000 points (gc-mds refuses s = 15 at
n = 64: 50 skipped rows). Each executor runs the command a user types, in a fresh process (imports, sweep
load, the private Ray's start for ``ray``, every point, sweep.csv, plots), BLAS/OpenMP pools at one
thread. Printed per run: wall time, points/s, the sweep's own session time (status.json), rows by status,
Ray's CPUs and chunk size, and the load average (1/5/15 min) before and after — this project's VM has 2
cores shared with other work, so compare runs at similar load. Both executors' sweep.csv are compared
(identical bytes expected).

    .venv/bin/python benchmarks/sweep_speed.py                      # 1,000 points, local then ray
    .venv/bin/python benchmarks/sweep_speed.py --executors ray --seeds 2
    .venv/bin/python benchmarks/sweep_speed.py --quick              # 40 points: a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

import yaml
from _timed_cli import ROOT, fresh_out_dir, timed_gcsim


def sweep_doc(n: int, iterations: int, seeds: int, quick: bool) -> dict:
    grid = {
        "n": [n],
        "iterations": [iterations],
        "schemes": ["ignore-stragglers", "gc-fr", "gc-cr", "gc-mds", "pgc-cr"],
        "s": [1, 3, 7, 15],
        "stragglers.delay.p": [0.01, 0.02, 0.05, 0.1, 0.2] if not quick else [0.01, 0.2],
        "seed": list(range(1, seeds + 1)) if not quick else [1],
    }
    return {"name": "sweep-speed", "base": os.path.join(ROOT, "scenarios", "bimodal.yaml"), "grid": grid}


def run_once(sweep_path: str, executor: str, extra: list[str]) -> dict:
    out = fresh_out_dir(f"sweep-bench-{executor}-")
    run = timed_gcsim(["sweep", sweep_path, "--executor", executor, "--out", out, "--no-progress"] + extra)
    row = {"executor": executor, "out": out, **{k: run[k] for k in ("wall_s", "load_before", "load_after", "rc",
                                                                   "command")}}
    if run["rc"] == 0:
        meta = json.loads(open(os.path.join(out, "meta.json")).read())
        sess = meta["sessions"][-1]
        row.update(points=meta["points"], rows=meta["rows"], status=meta["status_counts"], engines=meta["engines"],
                   session_s=sess["wall_s"], cpus=sess.get("cpus"), chunk=sess.get("chunk_size"))
    else:
        row["error"] = (run["stderr"].strip().splitlines() or [""])[-1]
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--executors", default="local,ray", help="comma-separated: local, ray (default both)")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=10, help="seeds per combination (10: 1,000 points)")
    ap.add_argument("--quick", action="store_true", help="40 points (2 probabilities, 1 seed)")
    ap.add_argument("--keep", action="store_true", help="keep the run directories (else removed)")
    ap.add_argument("extra", nargs="*", help="more `gcsim sweep` options after --, e.g. -- --num-cpus 2")
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="sweep-bench-")
    path = os.path.join(tmp, "sweep.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(sweep_doc(args.n, args.iterations, args.seeds, args.quick), f, sort_keys=False)
    print(f"sweep file {path}; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    rows = []
    for ex in [e.strip() for e in args.executors.split(",") if e.strip()]:
        r = run_once(path, ex, args.extra)
        rows.append(r)
        if r["rc"] != 0:
            print(f"{ex}: failed (rc {r['rc']}): {r['error']}")
            continue
        print(f"{ex}: {r['points']} points, {r['rows']} rows {r['status']} engines {r['engines']}: "
              f"wall {r['wall_s']:.1f} s "
              f"({r['points'] / r['wall_s']:.1f} points/s; sweep session {r['session_s']:.1f} s), "
              + (f"Ray CPUs {r['cpus']}, chunk {r['chunk']}, " if ex == "ray" else "")
              + f"load {r['load_before']} -> {r['load_after']}")
        print(f"  {r['command']}")
    ok = [r for r in rows if r["rc"] == 0]
    if len(ok) == 2:
        a, b = (open(os.path.join(r["out"], "sweep.csv"), "rb").read() for r in ok)
        print(f"sweep.csv of {ok[0]['executor']} and {ok[1]['executor']}: {'identical' if a == b else 'DIFFERENT'}")
    if not args.keep:
        for r in rows:
            shutil.rmtree(r["out"], ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
