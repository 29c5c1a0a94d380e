"""CPU contention with one run queue per core: how Linux's scheduler (CFS) shares a few cores among
more single-threaded workers, event-driven.

:class:`gcsim.sim.cpu.ProcessorSharing` gives every executing job the same rate ``min(1, cores/A)``.
A real machine does not: each core has its own run queue, the jobs on one core share it equally, and
a job stays on its core while it runs. With 3 runnable workers on 2 cores one has a core to itself
and two share the other (rates 1, ½, ½, not ⅔ each), and the scheduler leaves it so: moving a job
would not reduce the imbalance of one. Measured on the real executor's workers (6 on 2 cores,
docs/validation/README.md, finding 23): with 3 workers computing, the ratio of a partition's wall
time to its CPU time spreads from 1.06 to 2.20 (5th–95th percentile; this model 1.06–2.15) where
egalitarian sharing gives 1.44–1.79, and the worker a coded scheme waits for last is, by selection,
one of the unlucky ones. It is the model a calibration from a real run simulates with (finding 24).

The model (``workload.scheduler: per-core``), for ``k = max(1, floor(cores))`` run queues of
``cores / k`` each (a fractional capacity is spread over the whole cores, e.g. 2.5 cores are two queues
of 1.25 and 0.5 cores one queue of 0.5; a queue gives each of its jobs at most one core, so a worker
alone is never slower than under processor sharing and the model is continuous as ``cores`` crosses a
whole number from above):

* a job of an owner (a worker) that goes on computing at the instant its previous job ended (its
  next partition, its encoding) stays on that queue: the thread never left its core;
* any other job (a worker waking from its straggler delay, a new call) goes to an idle queue if one
  exists (its owner's previous one first, then the lowest index: CFS's wake-up placement looks for an
  idle core), else back to its owner's previous queue (a woken thread stays on its core when none is
  idle), else (an owner never seen) to the queue with the fewest jobs, lowest index first;
* when a queue runs empty while another holds two jobs or more, the most recently placed job of the
  fullest moves to it (CFS's idle balancing, immediate); an imbalance with no idle queue stays until
  a job ends (CFS's periodic balancing acts every tens of milliseconds and, with 3 tasks on 2 cores,
  cannot do better than 2 + 1). The balancing after a job ends waits until the events of that instant
  have run, so a worker that goes on computing is not moved off its own core first;
* the jobs of one queue share it equally: each progresses at ``min(1, c_q / n_q)`` CPU-seconds per
  second, ``c_q = cores / k`` less what other processes take of that core (:meth:`set_cores`,
  :meth:`queue_capacities`): an idle core first (a normal-priority thread wakes on an idle core when
  there is one), the rest in equal parts from the busy ones (it preempts a niced worker there).

A subclass of :class:`gcsim.sim.cpu.ProcessorSharing` (``execute``, ``withdraw``, ``set_cores``,
``active``), exact and event-driven with the same versioned wake-ups; it places jobs on queues and
gives each its own rate.
"""

from __future__ import annotations

import math

import simpy

from gcsim.sim.cpu import CpuJob, ProcessorSharing


class PerCoreQueues(ProcessorSharing):
    """``k = max(1, floor(cores))`` run queues of ``cores / k`` each (see the module docstring); the
    interface, validation and versioned wake-ups of :class:`ProcessorSharing`, with a rate per job.

    Args:
        env: the SimPy environment.
        cores: total capacity, > 0 (a fraction is an effective capacity spread over the queues).
    Raises:
        ConfigError: ``cores`` not a finite number > 0 (field ``workload.cores``).
    """

    def __init__(self, env: simpy.Environment, cores: float):
        super().__init__(env, cores)
        self.nominal = self.cores  # the capacity with no other process (set_cores lowers ``cores``)
        self.n_queues = max(1, math.floor(self.cores + 1e-9))
        self._queue_of: dict[CpuJob, int] = {}
        self._queues: list[list[CpuJob]] = [[] for _ in range(self.n_queues)]  # placement order
        self._owner_of: dict[CpuJob, object] = {}
        self._last: dict[object, tuple[int, float]] = {}  # owner -> (queue, instant its last job ended)
        self._rates: dict[CpuJob, float] = {}
        self._balance_pending = False

    def queue_lengths(self) -> list[int]:
        """Jobs on each run queue now, ``(k,)``."""
        return [len(q) for q in self._queues]

    def queue_capacities(self) -> list[float]:
        """Cores each run queue gives its jobs now, ``(k,)``: ``nominal / k`` each, less what other
        processes take (``nominal - cores``, :meth:`set_cores`), which goes to the idle queues first (a
        normal-priority thread wakes on an idle core when there is one) and the rest in equal parts to
        the busy ones (it preempts a niced worker on whichever core it lands)."""
        per = self.nominal / self.n_queues
        caps = [per] * self.n_queues
        others = max(self.nominal - self.cores, 0.0)
        busy = [q for q, jobs in enumerate(self._queues) if jobs]
        for q, jobs in enumerate(self._queues):
            if not jobs and others > 0:
                take = min(others, per)
                caps[q] -= take
                others -= take
        for q in busy:
            caps[q] = max(caps[q] - others / len(busy), per * 1e-6)
        return caps

    # ------------------------------------------------------------------ internals
    def _admit(self, job: CpuJob, owner: object) -> None:
        """Place ``job`` on a run queue (the module docstring's rules) and balance."""
        last = self._last.get(owner) if owner is not None else None
        lens = [len(x) for x in self._queues]
        if last is not None and last[1] == self.env.now:
            q = last[0]  # it goes on computing: the thread never left its core
        elif 0 in lens:
            q = last[0] if last is not None and lens[last[0]] == 0 else lens.index(0)
        elif last is not None:
            q = last[0]
        else:
            q = lens.index(min(lens))
        self._remaining[job] = float(job.work_s)
        self._queue_of[job] = q
        self._queues[q].append(job)
        self._owner_of[job] = owner
        self._balance()

    def _drop(self, job: CpuJob) -> float:
        """Remove ``job`` (withdrawn) and balance; returns the CPU-seconds it still needed."""
        left = self._remaining[job]
        self._remove(job)
        self._balance()
        return left

    def _remove(self, job: CpuJob) -> None:
        q = self._queue_of.pop(job)
        self._queues[q].remove(job)
        del self._remaining[job]
        owner = self._owner_of.pop(job)
        if owner is not None:
            self._last[owner] = (q, self.env.now)

    def _balance(self) -> None:
        """While a queue is empty and another holds two jobs or more, move the newest job of the
        fullest (lowest index among the fullest) to the empty one (lowest index)."""
        while True:
            lens = [len(x) for x in self._queues]
            hi, lo = max(lens), min(lens)
            if lo > 0 or hi < 2:
                return
            src, dst = lens.index(hi), lens.index(lo)
            job = self._queues[src].pop()
            self._queues[dst].append(job)
            self._queue_of[job] = dst

    def _balance_later(self, _ev=None) -> None:
        self._balance_pending = False
        self._advance()
        self._balance()
        self._reschedule()

    def _advance(self) -> None:
        """Charge every active job for the time since the last change at its rate."""
        now = self.env.now
        dt = now - self._last_s
        if dt > 0:
            for job, rate in self._rates.items():
                if job in self._remaining:
                    self._remaining[job] -= dt * rate
        self._last_s = now

    def _reschedule(self) -> None:
        """Each job's rate ``min(1, capacity_q / n_q)`` on its queue ``q`` (:meth:`queue_capacities`) and
        one versioned wake-up for the job that ends first."""
        self._version += 1
        caps = self.queue_capacities()
        self._rates = {job: min(1.0, caps[q] / len(self._queues[q])) for job, q in self._queue_of.items()}
        if not self._remaining:
            return
        soonest = min(max(left, 0.0) / self._rates[job] for job, left in self._remaining.items())
        wake = self.env.timeout(soonest)
        wake.callbacks.append(lambda _ev, version=self._version: self._on_wake(version))

    def _on_wake(self, version: int) -> None:
        if version != self._version:
            return  # superseded by a later change
        self._advance()
        now = self.env.now
        done = [job for job, left in self._remaining.items() if left / self._rates[job] <= 1e-12]
        if not done:  # float rounding left a sliver: finish the job closest to its end
            done = [min(self._remaining, key=lambda j: self._remaining[j] / self._rates[j])]
        for job in done:
            self._remove(job)
        self._reschedule()
        for job in done:
            job.end_s = now
            job.succeed(now)
        if not self._balance_pending:
            # balance once the jobs' own events have run (scheduled after them, same instant): a worker
            # that goes on computing keeps its core
            self._balance_pending = True
            self.env.timeout(0).callbacks.append(self._balance_later)
