"""CPU contention between co-located workers: an event-driven egalitarian processor-sharing resource.

``cores`` identical cores are shared by the ``A`` jobs currently executing: each progresses at rate
``min(1, cores / A)`` CPU-seconds per second (egalitarian processor sharing with a capacity of
``cores`` servers, Kleinrock, "Time-shared systems: a theoretical treatment", J. ACM 14:242, 1967;
the multi-server form is the "limited processor sharing" of Avi-Itzhak & Halfin, 1988). It models
single-threaded workers sharing the cores of one machine under a fair OS scheduler (Linux CFS), at
time scales well above the scheduler's time slice (a few ms).

Exact and event-driven (no time stepping): the remaining work of every job is brought up to date
only when the active set changes (a job starts, finishes or is withdrawn), and one SimPy timeout is
scheduled for the next completion under the new rate. A superseded timeout is left in the queue and
ignored when it fires (SimPy cannot retract events; a version number tells them apart).

Usage inside a SimPy process::

    job = cpu.execute(work_s)      # a simpy.Event that succeeds when the work is done
    try:
        yield job
    except simpy.Interrupt:
        done_s = cpu.withdraw(job) # CPU-seconds it got before leaving
"""

from __future__ import annotations

import math

import simpy

from gcsim.errors import ConfigError

#: Remaining work (CPU-seconds) below which a job counts as finished (absorbs float rounding).
_EPS_WORK_S = 1e-12


class CpuJob(simpy.Event):
    """One job of :class:`ProcessorSharing`: ``work_s`` CPU-seconds (on an idle core).

    Attributes:
        work_s: CPU-seconds requested.
        start_s: simulation instant it entered the resource (seconds).
        end_s: instant it finished (NaN until then; stays NaN when withdrawn).
    The event's value on success is ``end_s``.
    """

    def __init__(self, env: simpy.Environment, work_s: float):
        super().__init__(env)
        self.work_s = float(work_s)
        self.start_s = env.now
        self.end_s = math.nan


class ProcessorSharing:
    """``cores`` cores shared equally by the executing jobs (see the module docstring).

    Args:
        env: the SimPy environment.
        cores: capacity, > 0 (a fraction is an effective capacity, e.g. cores partly used by other
            processes).
    Raises:
        ConfigError: ``cores`` not a finite number > 0 (field ``workload.cores``).
    """

    def __init__(self, env: simpy.Environment, cores: float):
        if isinstance(cores, bool) or not isinstance(cores, (int, float)) or not (0 < cores < math.inf):
            raise ConfigError("workload.cores", "a number of cores > 0", cores)
        self.env = env
        self.cores = float(cores)
        self._remaining: dict[CpuJob, float] = {}  # insertion-ordered: deterministic ties
        self._last_s = env.now
        self._rate = 1.0
        self._version = 0

    @property
    def active(self) -> int:
        """Number of jobs executing now."""
        return len(self._remaining)

    def rate(self, active: int | None = None) -> float:
        """CPU-seconds per second each job gets with ``active`` jobs (default: now): ``min(1, cores/active)``."""
        a = self.active if active is None else int(active)
        return 1.0 if a <= 0 else min(1.0, self.cores / a)

    def execute(self, work_s: float, owner: object = None) -> CpuJob:
        """Start a job of ``work_s`` CPU-seconds (>= 0); returns its event (succeeds at completion).
        ``owner`` (the worker it computes for) places it in :class:`gcsim.sim.runqueues.PerCoreQueues`
        and changes nothing here.

        Raises:
            ValueError: ``work_s`` negative or not finite.
        """
        if not (work_s >= 0 and math.isfinite(work_s)):
            raise ValueError(f"work_s: expected a finite number >= 0, got {work_s!r}")
        job = CpuJob(self.env, work_s)
        if work_s <= _EPS_WORK_S:
            job.end_s = self.env.now
            job.succeed(job.end_s)
            return job
        self._advance()
        self._admit(job, owner)
        self._reschedule()
        return job

    def set_cores(self, cores: float) -> None:
        """Change the capacity from now on (other processes took or freed cores): every active job is
        charged at the old rate up to now and continues at ``min(1, cores / A)``.

        Raises:
            ValueError: ``cores`` not a finite number > 0.
        """
        if not (0 < cores < math.inf):
            raise ValueError(f"cores: expected a finite number > 0, got {cores!r}")
        if float(cores) == self.cores:
            return
        self._advance()
        self.cores = float(cores)
        self._reschedule()

    def withdraw(self, job: CpuJob) -> float:
        """Remove an unfinished job (its process was interrupted); returns the CPU-seconds it received.
        A job already finished (or unknown) returns its full ``work_s`` and changes nothing."""
        if job not in self._remaining:
            return job.work_s
        self._advance()
        left = self._drop(job)
        self._reschedule()
        return job.work_s - max(left, 0.0)

    # ------------------------------------------------------------------ internals
    def _admit(self, job: CpuJob, owner: object) -> None:
        """Add ``job`` to the executing set (all up to date at ``env.now``)."""
        self._remaining[job] = float(job.work_s)

    def _drop(self, job: CpuJob) -> float:
        """Remove an executing ``job``; returns the CPU-seconds it still needed."""
        return self._remaining.pop(job)

    def _advance(self) -> None:
        """Charge every active job for the time since the last change at the current rate."""
        now = self.env.now
        dt = now - self._last_s
        if dt > 0 and self._remaining:
            got = dt * self._rate
            for job in self._remaining:
                self._remaining[job] -= got
        self._last_s = now

    def _reschedule(self) -> None:
        self._version += 1
        self._rate = self.rate()
        if not self._remaining:
            return
        least = min(self._remaining.values())
        wake = self.env.timeout(max(least, 0.0) / self._rate)
        wake.callbacks.append(lambda _ev, version=self._version: self._on_wake(version))

    def _on_wake(self, version: int) -> None:
        if version != self._version:
            return  # superseded by a later change of the active set
        self._advance()
        least = min(self._remaining.values())
        done = [job for job, left in self._remaining.items() if left <= max(least, 0.0) + _EPS_WORK_S]
        now = self.env.now
        for job in done:
            del self._remaining[job]
        self._reschedule()
        for job in done:
            job.end_s = now
            job.succeed(now)
