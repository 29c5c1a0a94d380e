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
import time
from pathlib import Path
from typing import Iterable, Mapping

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


# ---------------------------------------------------------------- whole-run readings (meta.json)
def usable_cpus() -> int | None:
    """CPUs this process may run on (``os.sched_getaffinity``), None where unsupported."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def host_cpu_times() -> list[int] | None:
    """The machine-wide ``cpu`` line of ``/proc/stat`` (clock ticks: user nice system idle iowait irq
    softirq steal ...), None where unavailable (not Linux)."""
    try:
        with open("/proc/stat") as f:
            head = f.readline().split()
        return [int(x) for x in head[1:]] if head and head[0] == "cpu" else None
    except (OSError, ValueError):
        return None


def cpu_load_between(before: tuple, after: tuple, excluded_cpu_s: float = 0.0) -> dict | None:
    """Average CPU use while iterating, in cores, from two ``(host_cpu_times(), time.process_time())``
    readings: ``busy_cores`` (the whole machine: everything but idle and iowait), ``steal_cores``
    (the hypervisor ran something else on this virtual machine's CPUs: the ``steal`` field of
    ``/proc/stat``, part of busy; on a shared VM it rises when the host is contended, and the guest's
    CPU speed falls with it — docs/validation/README.md finding 18), ``niced_cores``
    (processes with niceness > 0: Ray starts its workers at niceness 15, ``RAY_worker_niceness``, so
    mostly this run's workers), ``master_cores`` (this process, the master), and ``other_cores`` =
    busy - niced - master: Ray's daemons and any other load on the machine, which takes precedence
    over the niced workers and so leaves them fewer cores; plus the 1-minute load average at the end.
    ``excluded_cpu_s`` of this process (test-set evaluations) are left out of busy and master.
    With a third element in each reading (:func:`session_cpu_s`): also
    ``this_session_cores`` (master, Ray, workers and whatever else this terminal started) and
    ``other_sessions_cores`` (busy - this session), and ``autogroup`` (the kernel shares CPU between
    sessions before niceness, so other sessions' load is not served after the workers but beside them).
    None where ``/proc/stat`` is unavailable."""
    (a, p0, *s0), (b, p1, *s1) = before, after
    if a is None or b is None or len(a) < 5 or len(a) != len(b):
        return None
    d = [y - x for x, y in zip(a, b)]
    total = sum(d[:8])
    if total <= 0:
        return None
    cores = os.cpu_count() or 1  # /proc/stat's cpu line sums every online CPU
    wall_s = total / cores / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
    if wall_s <= 0:
        return None
    excluded = max(excluded_cpu_s, 0.0) / wall_s
    busy, niced = cores * (total - d[3] - d[4]) / total - excluded, cores * d[1] / total
    master = (p1 - p0) / wall_s - excluded
    out = {"busy_cores": round(busy, 3), "steal_cores": round(cores * d[7] / total, 4) if len(d) > 7 else None,
           "niced_cores": round(niced, 3), "master_cores": round(max(master, 0.0), 3),
           "other_cores": round(max(busy - niced - master, 0.0), 3), "loadavg_1m_end": round(os.getloadavg()[0], 2)}
    if s0 and s1 and math.isfinite(s0[0]) and math.isfinite(s1[0]):
        # this session (master, Ray, workers) vs every other session: with autogroup scheduling the
        # other sessions are not served after the niced workers but fairly against this whole session
        own = (s1[0] - s0[0] - max(excluded_cpu_s, 0.0)) / wall_s
        out["this_session_cores"] = round(max(own, 0.0), 3)
        out["other_sessions_cores"] = round(max(busy - own, 0.0), 3)
    out["autogroup"] = autogroup_enabled()
    return out


#: Columns of a real run's ``host.csv`` (one row per iteration): ``reading_wall_s``, the wall seconds
#: since the previous reading (the iteration plus any evaluation or checkpoint after the one before);
#: ``host_steal_cpu_s``, CPU-seconds the hypervisor took from the host's CPUs over those seconds
#: (:func:`host_steal_cpu_s`; NaN where unavailable). Steal over ``reading_wall_s × host_cpus`` is the
#: share of the machine the host's other guests took: the contention that slows this VM's CPU
#: (docs/validation/README.md finding 18).
HOST_COLUMNS = ["scheme", "iteration", "end_s", "reading_wall_s", "host_steal_cpu_s"]


def host_steal_cpu_s() -> float:
    """CPU-seconds the hypervisor has stolen from this (virtual) machine since boot, summed over its
    CPUs (the ``steal`` field of ``/proc/stat``); NaN where unavailable (not Linux, or a kernel without
    the field). Zero on bare metal."""
    times = host_cpu_times()
    if times is None or len(times) < 8:
        return math.nan
    return times[7] / _ticks_per_s()


class HostStealLog:
    """The rows of a real run's ``host.csv`` (:data:`HOST_COLUMNS`), one per iteration: the
    hypervisor's steal since the previous reading, a measurement of the machine beside the iteration,
    never an input of it. Shared by the parameter-server executor (:mod:`gcsim.real.runner`) and the
    all-reduce executor (:mod:`gcsim.real.allreduce`).

    A reading is ``(time.monotonic(), host_steal_cpu_s())``: wall seconds and steal CPU-seconds. The
    first is taken at construction (call :meth:`mark` again right before the first iteration if setup
    happens in between); each :meth:`record` takes the next.

    Args:
        rows: earlier rows to keep (a resumed run's, :meth:`read_prior`).
    """

    def __init__(self, rows: Iterable[dict] = ()):
        self.rows: list[dict] = [dict(r) for r in rows]
        self.mark()

    def mark(self) -> None:
        """Take the reading the next row counts from (now)."""
        self._reading = (time.monotonic(), host_steal_cpu_s())

    def record(self, scheme: str, iteration: int, end_s: float = math.nan) -> dict:
        """Append and return the row of ``iteration``: ``reading_wall_s``, wall seconds since the
        previous reading, and ``host_steal_cpu_s``, steal CPU-seconds over them (NaN where
        unavailable). ``end_s``: the iteration's end, seconds from the run's time origin (as in
        iterations.csv); NaN when not known yet (fill it in :meth:`frame`)."""
        now = (time.monotonic(), host_steal_cpu_s())
        (t0, s0), (t1, s1) = self._reading, now
        row = {"scheme": scheme, "iteration": int(iteration), "end_s": float(end_s),
               "reading_wall_s": t1 - t0, "host_steal_cpu_s": s1 - s0}
        self.rows.append(row)
        self._reading = now
        return row

    def frame(self, end_s: Mapping[int, float] | None = None):
        """The rows as a DataFrame with :data:`HOST_COLUMNS`. ``end_s``: iteration -> end (seconds
        from the time origin) for rows recorded without one (an all-reduce's end is the latest rank's,
        known only once rank 0 has gathered the ranks' records)."""
        import pandas as pd

        rows = self.rows
        if end_s:
            rows = [{**r, "end_s": float(end_s[r["iteration"]])}
                    if not math.isfinite(r["end_s"]) and r["iteration"] in end_s else r for r in rows]
        return pd.DataFrame(rows, columns=HOST_COLUMNS)

    def write(self, path, end_s: Mapping[int, float] | None = None) -> None:
        """Write :meth:`frame` (``end_s`` as there) to the CSV file ``path``."""
        self.frame(end_s).to_csv(path, index=False)

    @staticmethod
    def read_prior(path, before_iteration: int) -> list[dict]:
        """The rows of an existing ``host.csv`` at ``path`` for iterations before ``before_iteration``
        (a resume keeps what earlier sessions measured); ``[]`` when the file does not exist."""
        import pandas as pd

        if not Path(path).exists():
            return []
        prior = pd.read_csv(path)
        return prior[prior["iteration"] < before_iteration].to_dict("records")


def process_niceness(pid: int) -> int | None:
    """Niceness of process ``pid`` (``/proc/<pid>/stat``), None when unknown."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            text = f.read()
        return int(text[text.rindex(")") + 2:].split()[16])
    except (OSError, ValueError, IndexError):
        return None


def worker_niceness(info: list[dict]) -> int | None:
    """Niceness of the first worker process on this host (Ray's ``RAY_worker_niceness``, 15 by
    default), from the workers' ``{"host", "pid"}`` records; None when unknown or none is here."""
    import socket

    host = socket.gethostname()
    for i in info:
        if i.get("host") != host:
            continue
        try:
            return process_niceness(int(i["pid"]))
        except (KeyError, TypeError, ValueError):
            return None
    return None


__all__ = ["HOST_COLUMNS", "HostCpuMeter", "HostStealLog", "autogroup_enabled", "cpu_load_between", "host_busy_cpu_s", "host_cpu_times",
           "host_steal_cpu_s", "process_cpu_s",
           "process_niceness", "session_cpu_s", "usable_cpus", "worker_niceness"]
