"""Shared by the command-line benchmarks (``advise_speed.py``, ``sweep_speed.py``): run one ``gcsim``
command as a user types it, in a fresh process, and time it.

The process gets BLAS/OpenMP pools of one thread (``OMP_NUM_THREADS`` etc.; ``gcsim`` pins BLAS itself
too) and optionally one CPU (``taskset -c 0``). The load average (1/5/15 min) is read before and after,
since this project's VM has 2 cores shared with other work: compare runs at similar load.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
#: the repository root (commands run there, so relative scenario paths work)
ROOT = os.path.dirname(HERE)
#: environment variables that pin the BLAS/OpenMP pools to one thread
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def load_average() -> str:
    """The 1/5/15-minute load average as ``"0.52 0.61 0.70"``."""
    return "%.2f %.2f %.2f" % os.getloadavg()


def gcsim_command() -> list[str]:
    """The ``gcsim`` console script beside this interpreter, else ``python -m gcsim.cli``."""
    exe = os.path.join(os.path.dirname(sys.executable), "gcsim")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "gcsim.cli"]


def fresh_out_dir(prefix: str) -> str:
    """A temporary path that does not exist yet (``gcsim`` creates its ``--out`` itself)."""
    import tempfile

    out = tempfile.mkdtemp(prefix=prefix)
    shutil.rmtree(out)
    return out


def timed_gcsim(args: list[str], *, pin: bool = False) -> dict:
    """Run ``gcsim <args>`` in a fresh process from :data:`ROOT` with one-thread BLAS pools.

    Args:
        args: the sub-command and its arguments, e.g. ``["advise", "scenarios/x.yaml", "--n", "32"]``.
        pin: run it on CPU 0 only (``taskset -c 0``, when installed).
    Returns:
        ``{"wall_s": seconds, "load_before": str, "load_after": str, "rc": exit status, "command": the
        command line, "stdout": str, "stderr": str}``.
    """
    cmd = gcsim_command() + list(args)
    if pin and shutil.which("taskset"):
        cmd = ["taskset", "-c", "0"] + cmd
    env = dict(os.environ, **ONE_THREAD)
    before = load_average()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "load_before": before, "load_after": load_average(), "rc": proc.returncode,
            "command": " ".join(cmd), "stdout": proc.stdout, "stderr": proc.stderr}
