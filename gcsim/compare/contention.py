"""Undo CPU contention in a measured trace: how many CPU-seconds each worker-iteration needed on an
idle core, given that the run's workers shared ``cores`` cores.

The inversion assumes egalitarian processor sharing (:mod:`gcsim.sim.cpu`), whichever
``workload.scheduler`` is then simulated: while ``A(t)`` workers compute, each progresses at
``r(t) = min(1, cores / A(t))`` CPU-seconds per second (Kleinrock, J. ACM 14:242, 1967); which worker
of a trace sat on a crowded core is not recorded, so one run queue per core (:mod:`gcsim.sim.runqueues`)
cannot be inverted row by row, and in total both give the workers the same CPU. Prefer the workers'
own CPU clocks (``--cpu-source measured``) where a trace has them.

Inverting it on a trace: a worker busy on ``[a, b]`` did
``∫_a^b r(t) dt`` CPU-seconds of work, where ``A(t)`` counts every worker of the run busy at ``t``
(workers of earlier iterations still computing included). The integral is exact for piecewise
constant ``A`` and is evaluated with one sweep over the sorted interval ends.

Busy intervals from :data:`gcsim.trace.WORKER_COLUMNS` (seconds):

* partitions: ``[compute_start_s + delay_s, + compute_s]`` (the worker sleeps its injected delay
  first, then computes); with a slowdown ``f > 1`` the real executor sleeps ``(f - 1)/f`` of that
  interval, so the worker counts ``1/f`` busy over it (an average: where the sleeps fall inside is
  not recorded);
* per-call overhead (loading the weights, encoding): from the end of the partitions to ``send_s``
  (workers that sent), fully busy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gcsim.errors import ConfigError


@dataclass(frozen=True)
class BusyIntervals:
    """Per worker-row busy intervals (seconds, ``(k,)`` arrays aligned with the rows given).

    Attributes:
        part_start_s, part_end_s: the partitions' interval (NaN when the row never computed).
        send_s: end of the per-call overhead (NaN for rows that never sent).
        part_weight: busy fraction over the partitions' interval (``1 / max(1, slowdown)``).
    """

    part_start_s: np.ndarray
    part_end_s: np.ndarray
    send_s: np.ndarray
    part_weight: np.ndarray


def busy_intervals(workers: pd.DataFrame) -> BusyIntervals:
    """The busy intervals of every row of ``workers`` (workers.csv rows, see the module docstring)."""
    num = lambda col: pd.to_numeric(workers[col], errors="coerce").to_numpy(float)  # noqa: E731
    start = num("compute_start_s") + np.nan_to_num(num("delay_s"))
    comp = num("compute_s")
    end = start + comp
    ok = np.isfinite(start) & np.isfinite(comp) & (comp > 0)
    start, end = np.where(ok, start, np.nan), np.where(ok, end, np.nan)
    send = num("send_s")
    send = np.where(np.isfinite(send) & ok, np.maximum(send, end), np.nan)
    f = pd.to_numeric(workers["slowdown"], errors="coerce").fillna(1.0).to_numpy(float)
    weight = 1.0 / np.where(np.isfinite(f) & (f > 1), f, 1.0)
    return BusyIntervals(start, end, send, weight)


class ContentionProfile:
    """``A(t)``, the number of busy workers over a run, and the integral of ``min(1, cores/A(t))``.

    Args:
        intervals: :func:`busy_intervals` of EVERY worker row of the run (all iterations).
        cores: capacity, > 0.
    Raises:
        ConfigError: ``cores`` not > 0 (field ``cores``).
    """

    def __init__(self, intervals: BusyIntervals, cores: float):
        if not (isinstance(cores, (int, float)) and not isinstance(cores, bool) and 0 < cores < np.inf):
            raise ConfigError("cores", "a number of cores > 0", cores)
        self.cores = float(cores)
        iv = intervals
        starts, ends, weights = [], [], []
        p = np.isfinite(iv.part_start_s) & (iv.part_end_s > iv.part_start_s)
        starts.append(iv.part_start_s[p]), ends.append(iv.part_end_s[p]), weights.append(iv.part_weight[p])
        o = np.isfinite(iv.send_s) & (iv.send_s > iv.part_end_s)
        starts.append(iv.part_end_s[o]), ends.append(iv.send_s[o]), weights.append(np.ones(int(o.sum())))
        s, e, wt = np.concatenate(starts), np.concatenate(ends), np.concatenate(weights)
        self.times_s = np.unique(np.concatenate([s, e]))
        # busy count on each elementary segment [times[i], times[i+1]): a difference array of weights
        delta = np.zeros(self.times_s.size + 1)
        np.add.at(delta, np.searchsorted(self.times_s, s), wt)
        np.add.at(delta, np.searchsorted(self.times_s, e), -wt)
        self.active = np.cumsum(delta)[:-1][:max(self.times_s.size - 1, 0)]
        rate = np.minimum(1.0, self.cores / np.maximum(self.active, 1e-12))
        seg = np.diff(self.times_s)
        self._cum_rate = np.concatenate([[0.0], np.cumsum(rate * seg)])
        self._cum_active = np.concatenate([[0.0], np.cumsum(self.active * seg)])

    def _integral(self, cum: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self.times_s.size == 0:
            return np.zeros(np.shape(a))
        return np.interp(b, self.times_s, cum) - np.interp(a, self.times_s, cum)

    def cpu_seconds(self, a_s: np.ndarray, b_s: np.ndarray, weight: np.ndarray | float = 1.0) -> np.ndarray:
        """CPU-seconds a worker busy (fraction ``weight``) on ``[a_s, b_s]`` received: ``weight·∫ r(t) dt``."""
        return np.asarray(weight) * self._integral(self._cum_rate, np.asarray(a_s, float), np.asarray(b_s, float))

    def mean_active(self, a_s: np.ndarray, b_s: np.ndarray) -> np.ndarray:
        """Time-average of ``A(t)`` over ``[a_s, b_s]`` (NaN for empty intervals)."""
        a, b = np.asarray(a_s, float), np.asarray(b_s, float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return self._integral(self._cum_active, a, b) / (b - a)


@dataclass(frozen=True)
class DecontendedWork:
    """CPU-seconds on an idle core per worker row (``(k,)``, NaN where not observed).

    Attributes:
        partitions_s: the row's partitions (all of them for rows that sent; what was done before the
            cancel for the others – a lower bound).
        overhead_s: the per-call overhead (rows that sent).
        mean_active: time-average number of busy workers over the partitions' interval.
    """

    partitions_s: np.ndarray
    overhead_s: np.ndarray
    mean_active: np.ndarray


def decontend(workers: pd.DataFrame, cores: float, rows: np.ndarray | None = None) -> DecontendedWork:
    """De-contended work of ``workers`` rows (see the module docstring).

    Args:
        workers: every worker row of one run (the contention involves all of them).
        cores: the run's capacity (> 0).
        rows: boolean mask of the rows to return (default all).
    Raises:
        ConfigError: ``cores`` not > 0.
    """
    iv = busy_intervals(workers)
    prof = ContentionProfile(iv, cores)
    part = prof.cpu_seconds(iv.part_start_s, iv.part_end_s, iv.part_weight)
    over = np.where(np.isfinite(iv.send_s), prof.cpu_seconds(iv.part_end_s, iv.send_s), np.nan)
    act = prof.mean_active(iv.part_start_s, iv.part_end_s)
    if rows is not None:
        part, over, act = part[rows], over[rows], act[rows]
    return DecontendedWork(part, over, act)
