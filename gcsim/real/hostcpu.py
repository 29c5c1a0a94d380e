"""CPU taken from the workers by everything else on their host, measured per iteration phase.

Ray starts its worker processes at niceness 15 (``RAY_worker_niceness``); the master (the Ray
driver), Ray's daemons (raylet, GCS, object store) and any other program on the machine run at
niceness 0. Under Linux CFS a nice-0 task weighs 1024 against a nice-15 task's 36, so whatever the
normal-priority processes ask for they get (96.6 % of a contended core), and the workers share what
is left — for the processes of the master's own session. With the kernel's autogroup scheduling on
(most distributions' default) a process of *another* session is not served first: CFS shares the CPU
fairly between sessions and applies niceness only inside each (:func:`session_cpu_s`), so another
terminal's job takes a fair share against the whole run and every cycle the run leaves idle (an
elastic load, measured in issue 9's noisy-neighbour protocol). That share is an input of the iteration time as much as the workers' own CPU work, and it
changes with the machine's load, so the real executor measures it instead of assuming an idle
machine (issue 9; the kernel's CFS weights: ``sched_prio_to_weight`` in ``kernel/sched/core.c``).

:class:`HostCpuMeter` reads, at each phase boundary of an iteration (start, decodable, end):

* the host's busy CPU time: the ``cpu`` line of ``/proc/stat`` (user + nice + system + irq +
  softirq + steal clock ticks, summed over every CPU);
* the worker processes' CPU time: ``utime + stime`` of ``/proc/<pid>/stat`` for every worker actor
  on this host (the pids the actors report at setup).

"Other" CPU over a phase = host busy − workers, in CPU-seconds. Resolution: one clock tick
(``SC_CLK_TCK``, 10 ms on Linux) per reading, so a single short phase is coarse, but sums over many
iterations are exact to a tick. Where ``/proc`` is unavailable (not Linux) every reading is NaN.
Workers on other nodes of a Ray cluster are not on the master's host: the reading then covers the
master's host only (say so in the run's meta.json, ``other_cpu_scope``).
"""

from __future__ import annotations

import math
import os
from typing import Iterable

#: Fields of the ``cpu`` line of /proc/stat counted as busy: user nice system (idle iowait) irq softirq steal.
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


def _ticks_per_s() -> float:
    try:
        return float(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100.0


def host_busy_cpu_s() -> float:
    """Busy CPU-seconds of the whole host since boot (summed over CPUs); NaN where unavailable."""
    try:
        with open("/proc/stat") as f:
            head = f.readline().split()
        if not head or head[0] != "cpu":
            return math.nan
        vals = [int(x) for x in head[1:9]]
        return sum(vals[i] for i in _BUSY_FIELDS if i < len(vals)) / _ticks_per_s()
    except (OSError, ValueError):
        return math.nan


def process_cpu_s(pid: int) -> float:
    """CPU-seconds (user + system, all threads) process ``pid`` has used; NaN if it is gone or
    ``/proc`` is unavailable."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            text = f.read()
        fields = text[text.rindex(")") + 2:].split()
        # after the command name: state(0) ppid(1) ... utime(11) stime(12)
        return (int(fields[11]) + int(fields[12])) / _ticks_per_s()
    except (OSError, ValueError, IndexError):
        return math.nan


def session_cpu_s(sid: int | None = None) -> float:
    """CPU-seconds (user + system) used so far by the live processes of session ``sid`` and by the
    children they reaped (``cutime``/``cstime``; default session: this
    process's session, i.e. the master, Ray's daemons and worker actors it started, and anything else
    started from the same terminal); NaN where ``/proc`` is unavailable.

    Why sessions: with the kernel's autogroup scheduling on (``/proc/sys/kernel/sched_autogroup_enabled``,
    the default of most desktop and many server distributions) the CFS shares CPU fairly between
    *sessions* first and applies niceness only inside one (``sched(7)``, "The autogroup feature"). A
    process of another session (another terminal, a cron job, another user's job) is then not served
    before the niced workers: it takes a fair share against this whole session, and every cycle the
    session leaves idle. Measured on the project's VM: a nice-15 spinner pinned to one CPU got 1.3 s
    of 6 s against a nice-0 spinner of its own session, and 1.9 s against one of another session.
    """
    try:
        sid = os.getsid(0) if sid is None else int(sid)
        total = 0
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2:].split()
            # after the command name: state(0) ppid(1) pgrp(2) session(3) ... utime(11) stime(12)
            # cutime(13) cstime(14): children that exited and were reaped count with their parent (Ray
            # starts and retires worker processes; a live-only sum would lose their CPU)
            if int(fields[3]) == sid:
                total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        return total / _ticks_per_s()
    except (OSError, ValueError, IndexError, AttributeError):
        return math.nan


def autogroup_enabled() -> bool | None:
    """Whether the kernel shares CPU between sessions before niceness (autogroup); None if unknown."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return None


class HostCpuMeter:
    """Readings of the host's busy CPU and of the local worker processes' CPU (module docstring).

    Args:
        worker_pids: process ids of the worker actors that run on this host.
    """

    def __init__(self, worker_pids: Iterable[int]):
        self.worker_pids = tuple(int(p) for p in worker_pids)
        self._last_worker_s = {p: 0.0 for p in self.worker_pids}

    def read(self) -> tuple[float, float]:
        """``(host_busy_cpu_s, workers_cpu_s)`` CPU-seconds since boot. A worker process that has
        died keeps its last reading (its CPU does not vanish from the difference)."""
        busy = host_busy_cpu_s()
        total = 0.0
        for p in self.worker_pids:
            v = process_cpu_s(p)
            if math.isfinite(v):
                self._last_worker_s[p] = v
            total += self._last_worker_s[p]
        return busy, total

    @staticmethod
    def other_cpu_s(before: tuple[float, float], after: tuple[float, float]) -> float:
        """CPU-seconds used between two :meth:`read` results by every process but the workers
        (clipped at 0: the two clocks tick separately); NaN when either reading is unavailable."""
        (b0, w0), (b1, w1) = before, after
        if not all(math.isfinite(x) for x in (b0, w0, b1, w1)):
            return math.nan
        return max((b1 - b0) - (w1 - w0), 0.0)


__all__ = ["HostCpuMeter", "autogroup_enabled", "host_busy_cpu_s", "process_cpu_s", "session_cpu_s"]
