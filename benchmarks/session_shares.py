"""Benchmark (issue 9, docs/validation/README.md finding 14): how much CPU do niced workers get
against another session's busy loop while a normal-priority task of their own session runs part of
the time?

The real executor's workers run at niceness 15 in the same session as the master and Ray's daemons
(niceness 0). Under ``kernel.sched_autogroup_enabled = 1`` CFS first shares each CPU between sessions
(task groups), and splits a group's weight over the CPUs in proportion to its load on each
(``calc_group_shares``, kernel/sched/fair.c); a nice-0 task weighs 1024 against a nice-15 task's 36
(``sched_prio_to_weight``). If that split matters, a nice-0 task of the workers' session busy on one
CPU leaves the session little weight on the other CPU, where the niced workers face the other
session's loop, and the workers get *less* than ``cores - neighbour - master``.

Setup, every process started and ended by PID: one busy loop in a session of its own (like another
user's job; ``--no-neighbour`` for the control); in this session ``--workers`` spinners at niceness
``--nice`` and one "master" at niceness 0 that is busy for ``duty × --period-s`` then sleeps for the
rest of each period. For each duty of ``--duties`` (interleaved, ``--rounds`` rounds) it measures over
``--window-s`` seconds the CPU-seconds per second (cores) of the spinners, of the master and of the
neighbour (``/proc/<pid>/stat`` utime + stime).

    .venv/bin/python benchmarks/session_shares.py                  # ~1 minute
    .venv/bin/python benchmarks/session_shares.py --no-neighbour   # the control
    .venv/bin/python benchmarks/session_shares.py --workers 6 --worker-work-s 0.06   # like a real run's workers

Meaningful only on a machine where nothing else runs: record ``uptime`` beside the result.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

import numpy as np

SPIN = "while True: pass"
#: an intermittent worker, like a real one: burn ``work_s`` CPU-seconds (its partitions), then sleep an
#: exponential delay of mean ``sleep_s`` (its straggler delay), forever; argv: work_s sleep_s seed
WORKER = """
import random, sys, time
work, mean_sleep, rng = float(sys.argv[1]), float(sys.argv[2]), random.Random(int(sys.argv[3]))
while True:
    c0 = time.process_time()
    while time.process_time() - c0 < work:
        pass
    time.sleep(rng.expovariate(1.0 / mean_sleep))
"""
MASTER = """
import sys, time
duty, period = float(sys.argv[1]), float(sys.argv[2])
while True:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < duty * period:
        pass
    rest = period - (time.perf_counter() - t0)
    if rest > 0:
        time.sleep(rest)
"""


def cpu_s(pid: int) -> float:
    """CPU-seconds (user + system) used so far by process ``pid`` (``/proc/<pid>/stat`` fields 14, 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2, help="niced spinners in this session [2]")
    ap.add_argument("--nice", type=int, default=15, help="their niceness [15, as Ray's workers]")
    ap.add_argument("--duties", type=float, nargs="+", default=[0.0, 0.25, 0.5],
                    help="fractions of each period the nice-0 master is busy [0 0.25 0.5]")
    ap.add_argument("--period-s", type=float, default=0.05, help="the master's busy/sleep period [0.05 s]")
    ap.add_argument("--window-s", type=float, default=4.0, help="measurement window per duty [4 s]")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over the duties, interleaved [3]")
    ap.add_argument("--no-neighbour", action="store_true", help="no busy loop in another session")
    ap.add_argument("--worker-work-s", type=float, default=None,
                    help="make the niced workers intermittent, like a real run's: each burns this many "
                         "CPU-seconds, then sleeps an exponential delay of mean --worker-sleep-s [always busy]")
    ap.add_argument("--worker-sleep-s", type=float, default=0.15, help="mean sleep of an intermittent worker [0.15 s]")
    a = ap.parse_args(argv)
    if a.workers < 1 or a.window_s <= 0 or a.period_s <= 0 or not all(0 <= d < 1 for d in a.duties):
        ap.error("--workers >= 1, --window-s > 0, --period-s > 0 and every duty in [0, 1) are required")

    load_before = os.getloadavg()
    started: list[subprocess.Popen] = []
    try:
        neighbour = None
        if not a.no_neighbour:
            neighbour = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
            started.append(neighbour)
        spinners = []
        for _ in range(a.workers):
            nice = a.nice
            code = [SPIN] if a.worker_work_s is None else [WORKER, str(a.worker_work_s), str(a.worker_sleep_s),
                                                            str(len(spinners))]
            p = subprocess.Popen([sys.executable, "-c", *code], preexec_fn=lambda: os.nice(nice))
            started.append(p)
            spinners.append(p)
        time.sleep(0.5)
        results: dict[float, list[tuple[float, float, float]]] = {d: [] for d in a.duties}
        for _ in range(a.rounds):
            for d in a.duties:
                master = subprocess.Popen([sys.executable, "-c", MASTER, str(d), str(a.period_s)])
                started.append(master)
                time.sleep(0.3)  # let it reach its steady pattern
                pids = [p.pid for p in spinners]
                w0, m0 = sum(cpu_s(p) for p in pids), cpu_s(master.pid)
                n0 = cpu_s(neighbour.pid) if neighbour else 0.0
                t0 = time.perf_counter()
                time.sleep(a.window_s)
                dt = time.perf_counter() - t0
                w1, m1 = sum(cpu_s(p) for p in pids), cpu_s(master.pid)
                n1 = cpu_s(neighbour.pid) if neighbour else 0.0
                master.kill()
                master.wait()
                started.remove(master)
                results[d].append(((w1 - w0) / dt, (m1 - m0) / dt, (n1 - n0) / dt))
    finally:
        for p in started:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    autogroup = "?"
    try:
        autogroup = open("/proc/sys/kernel/sched_autogroup_enabled").read().strip()
    except OSError:
        pass
    kind = ("spinners" if a.worker_work_s is None else
            f"intermittent workers ({a.worker_work_s * 1e3:.0f} ms CPU, then ~{a.worker_sleep_s * 1e3:.0f} ms asleep)")
    print(f"{a.workers} {kind} at nice {a.nice}; master at nice 0, period {a.period_s * 1e3:.0f} ms; "
          f"neighbour: {'none' if a.no_neighbour else 'busy loop in another session'}; autogroup {autogroup}; "
          f"{os.cpu_count()} CPUs; loadavg before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    print("duty   workers' cores (median [min, max])   master cores   neighbour cores")
    for d in a.duties:
        r = np.array(results[d])
        print(f"{d:4.2f}   {np.median(r[:, 0]):.2f} [{r[:, 0].min():.2f}, {r[:, 0].max():.2f}]"
              f"                     {np.median(r[:, 1]):.2f}           {np.median(r[:, 2]):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
