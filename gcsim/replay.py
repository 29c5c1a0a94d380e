"""Trace-driven straggler model: replay measured per-worker, per-iteration times.

Scenario field ``stragglers.replay`` (:class:`gcsim.scenario.Replay`)::

    stragglers:
      replay: {file: job_3_norm.csv, unit_s: 0.001, apply: delay, rule: block-bootstrap, block: 20}

Worker ``w`` at iteration ``t`` takes the trace's time ``x[t, w]`` (seconds; the trace is read by
:func:`gcsim.fit.traceio.read_trace`: a gcsim run directory or a ``worker, iteration, duration`` CSV,
``unit_s`` seconds per unit). ``apply``:

* ``delay`` (default): ``x[t, w]`` is added to the worker's additive delay (load-independent); with
  ``workload.compute: {dist: constant, value: 0}`` and no network the worker's time is exactly the
  trace's;
* ``slowdown``: the worker's compute is multiplied by ``x[t, w] / min(x > 0)`` (load-proportional; the
  reference is the trace's smallest time above 0, so a 0 in the trace is a compute of 0 s).

When the run is longer than the trace (``T`` iterations) or has more workers (``W``), ``rule`` says
what happens:

* ``error`` (default): refused (one-line ConfigError naming ``stragglers.replay.rule``);
* ``wrap``: iteration ``t`` replays row ``t mod T``, worker ``w`` replays column ``w mod W``;
* ``block-bootstrap``: iterations ``t < T`` replay row ``t``; later ones are cut into blocks of
  ``block`` consecutive iterations, block ``j`` replaying trace rows ``start_j … start_j + block − 1``
  with ``start_j`` uniform on ``[0, T − block]`` (moving-block bootstrap, Künsch, Ann. Statist. 17,
  1989: runs of slow iterations and the cross-worker pattern inside a block are kept); worker
  ``w >= W`` replays column ``c_w`` uniform on ``[0, W)``. ``start_j`` and ``c_w`` come from the keyed
  streams ``default_rng([seed, REPLAY_STREAM, 1, j])`` / ``default_rng([seed, REPLAY_STREAM, 0, w])``,
  so every scheme and both executors replay the same rows.

A trace with more workers than the run: the first ``n`` columns are used. Replay consumes no
uniforms from the workers' streams, so adding it leaves every other draw of the scenario as it was.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from gcsim import streams
from gcsim.errors import ConfigError

#: stream index of the replay's keyed draws (not a worker index; MASTER_STREAM is 2**32 - 1)
REPLAY_STREAM = streams.REPLAY


@lru_cache(maxsize=16)
def _times(file: str, unit_s: float, scheme, worker_col, iteration_col, duration_col) -> np.ndarray:
    from gcsim.fit.traceio import read_trace
    tr = read_trace(file, scheme=scheme, worker_col=worker_col, iteration_col=iteration_col,
                    duration_col=duration_col, unit_s=unit_s, min_iterations=1)
    x = tr.times.copy()
    x.setflags(write=False)
    return x


def trace_times(spec) -> np.ndarray:
    """The replayed grid ``(T, W)`` in seconds for a :class:`gcsim.scenario.Replay` spec (cached).

    Raises:
        RunDirError: the trace cannot be read (file, line, column named).
    """
    return _times(spec.file, float(spec.unit_s), spec.scheme, spec.worker_col, spec.iteration_col, spec.duration_col)


def check_fits(spec, n_workers: int, iterations: int) -> str | None:
    """Why ``rule: error`` refuses a run of ``n_workers`` × ``iterations`` (None when it fits)."""
    T, W = trace_times(spec).shape
    if spec.rule == "error" and (n_workers > W or iterations > T):
        return (f"a trace with at least n_workers={n_workers} workers and iterations={iterations} iterations, or "
                f"rule wrap / block-bootstrap; the trace has {W} workers x {T} iterations")
    return None


class TraceReplay:
    """The replay of one scenario: :meth:`times` gives ``x[row(t), col(w)]`` for any iterations.

    Args:
        spec: the scenario's :class:`gcsim.scenario.Replay`.
        n_workers: ``n``.
        seed: the scenario seed (keys the block-bootstrap draws).
    Raises:
        ConfigError: ``rule: error`` and the trace has fewer than ``n_workers`` workers.
    """

    def __init__(self, spec, n_workers: int, seed: int):
        self.spec, self.n, self.seed = spec, int(n_workers), int(seed)
        self.x = trace_times(spec)
        T, W = self.x.shape
        self.block = min(int(spec.block), T)
        if W >= self.n:
            self.cols = np.arange(self.n)
        elif spec.rule == "error":
            raise ConfigError("stragglers.replay.rule", check_fits(spec, self.n, 1), spec.rule)
        elif spec.rule == "wrap":
            self.cols = np.arange(self.n) % W
        else:
            self.cols = np.array([w if w < W else int(np.random.default_rng([self.seed, REPLAY_STREAM, 0, w])
                                                      .integers(0, W)) for w in range(self.n)])
        positive = self.x[self.x > 0]
        if spec.apply == "slowdown" and not len(positive):
            raise ConfigError("stragglers.replay.apply", "delay for a trace whose times are all 0 (slowdown divides "
                              "by the smallest time > 0)", spec.apply)
        self.ref = float(positive.min()) if len(positive) else 1.0  # a 0 in the trace: that compute takes 0 s

    def rows(self, iterations) -> np.ndarray:
        """Trace row replayed at each iteration (int ``(I,)``; module docstring rule).

        Raises:
            ConfigError: ``rule: error`` and an iteration beyond the trace.
        """
        its = np.asarray(iterations, dtype=np.int64)
        T = self.x.shape[0]
        if len(its) == 0 or its.max() < T:
            return its
        if self.spec.rule == "error":
            raise ConfigError("stragglers.replay.rule", check_fits(self.spec, self.n, int(its.max()) + 1), "error")
        if self.spec.rule == "wrap":
            return its % T
        out = its.copy()
        late = its >= T
        j, off = np.divmod(its[late] - T, self.block)
        starts = {b: int(np.random.default_rng([self.seed, REPLAY_STREAM, 1, int(b)]).integers(0, T - self.block + 1))
                  for b in np.unique(j)}
        out[late] = np.array([starts[b] for b in j], dtype=np.int64) + off
        return out

    def times(self, iterations) -> np.ndarray:
        """The replayed seconds ``(I, n)`` for ``iterations``."""
        return self.x[self.rows(iterations)][:, self.cols]

    def apply(self, iterations, delay: np.ndarray, slow_factor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(delay + times, slow_factor)`` for ``apply: delay``, ``(delay, slow_factor × times / min(x > 0))``
        for ``apply: slowdown``; arrays ``(I, n)``."""
        x = self.times(iterations)
        if self.spec.apply == "delay":
            return delay + x, slow_factor
        return delay, slow_factor * (x / self.ref)
