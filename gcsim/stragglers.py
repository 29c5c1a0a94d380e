"""Straggler draws shared by both executors: additive delay, multiplicative slowdown, persistent
(Markov) slow state and per-worker scale, keyed by (seed, worker, iteration).

Common random numbers: worker ``w`` in iteration ``t`` uses its own stream
``np.random.default_rng([seed, w, t])`` (computed for all keys at once by
:func:`gcsim.keyed_rng.keyed_uniforms`, bit for bit the same numbers) and always consumes the same layout of uniforms from it
(Markov uniform, delay uniforms, slowdown uniforms, then per-partition compute uniforms), so every
scheme, every executor and every subset of schemes sees the same delays for the same
(seed, worker, iteration), and the compute draw of the q-th partition a worker computes is the same
whatever its load (paired comparisons; Law & Kelton, Simulation Modeling and Analysis, §11.2).

Persistent stragglers (Markov chain per worker, advanced in iteration order) follow the fail-slow
picture of production clusters: a worker stays slow for a geometric number of iterations with mean
``1/p_leave``.

The machine's speed factor (``workload.speed_variation``, :func:`speed_factors`) is one stationary
AR(1) series over iterations, common to every worker, driven by its own stream
``[seed, SPEED, iteration]``: it multiplies the compute draws and leaves every other draw as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gcsim import streams
from gcsim.keyed_rng import grid_uniforms, keyed_uniforms, stream_keys
from gcsim.latency import Distribution, build_distribution
from gcsim.scenario import SpeedVariation, Stragglers

#: Worker index used for the master's stream (never a real worker index).
MASTER_STREAM = streams.MASTER


def speed_factors(spec: SpeedVariation | None, seed: int, iterations: int) -> np.ndarray:
    """float64 ``(iterations,)``: the machine's speed factor ``f_t`` of iterations ``0 .. iterations-1``.

    ``f_t = exp(a_t - sd²/2)`` with ``a`` the stationary Gaussian AR(1) series of
    :class:`~gcsim.scenario.SpeedVariation` (``a_0 = sd·z_0``, ``a_t = lag1·a_{t-1} +
    sqrt(1 - lag1²)·sd·z_t``; Box & Jenkins, Time Series Analysis, §3.2.4), ``z_t`` the standard normal
    quantile of the first uniform of stream ``[seed, SPEED, t]``: ``E[f_t] = 1``, ``sd(log f_t) = sd``,
    ``corr(log f_t, log f_{t-1}) = lag1``. All ones when ``spec`` is None or ``sd`` is 0. The first
    ``k`` factors do not depend on ``iterations``.

    Raises:
        ValueError: ``iterations < 0``.
    """
    if iterations < 0:
        raise ValueError(f"iterations: expected >= 0, got {iterations}")
    if spec is None or spec.sd == 0 or iterations == 0:
        return np.ones(int(iterations))
    from scipy.special import ndtri

    u = keyed_uniforms(stream_keys(seed, streams.SPEED, np.arange(int(iterations))), 1)[:, 0]
    z = ndtri(np.clip(u, 1e-300, None))  # the uniforms lie in [0, 1): 0 would give -inf
    rho, sd = float(spec.lag1), float(spec.sd)
    a = np.empty(int(iterations))
    a[0] = sd * z[0]
    innovation = np.sqrt(1.0 - rho * rho) * sd
    for t in range(1, int(iterations)):
        a[t] = rho * a[t - 1] + innovation * z[t]
    return np.exp(a - 0.5 * sd * sd)


def worker_rng(seed: int, worker: int, iteration: int) -> np.random.Generator:
    """The stream of ``worker`` in ``iteration`` (``default_rng([seed, worker, iteration])``)."""
    return np.random.default_rng([int(seed), int(worker), int(iteration)])


@dataclass(frozen=True)
class StragglerDraw:
    """Straggler state of every worker in one iteration.

    Attributes:
        delay_s: float64 ``(n,)``: additive delay (seconds) before the worker starts computing.
        slowdown: float64 ``(n,)``: factor multiplying every partition's compute time
            (``worker_scale[w] × slowdown draw × persistent.slowdown if slow``).
        slow: bool ``(n,)``: persistent (Markov) slow state (all False without ``persistent``).
    """

    delay_s: np.ndarray
    slowdown: np.ndarray
    slow: np.ndarray


@dataclass(frozen=True)
class DrawBlock:
    """Draws for a range of iterations (``I`` iterations, ``n`` workers, ``P`` partitions).

    Attributes:
        iterations: int ``(I,)``.
        delay_s, slowdown: float64 ``(I, n)``; slow: bool ``(I, n)`` (see :class:`StragglerDraw`).
        compute_s: float64 ``(I, n, P)``: base compute seconds of the q-th partition a worker computes
            (before ``slowdown``, after the machine's speed factor of ``workload.speed_variation``);
            ``P = 0`` when no compute distribution was given. For a distribution that consumes no
            uniforms (``constant``) and no speed variation, a read-only broadcast view of its one value
            (strides 0: memory does not grow with iterations × workers × partitions).
        call_overhead_s: float64 ``(I, n)``: per worker-iteration overhead seconds (the scenario's
            ``workload.call_overhead``; zeros without one).
    """

    iterations: np.ndarray
    delay_s: np.ndarray
    slowdown: np.ndarray
    slow: np.ndarray
    compute_s: np.ndarray
    call_overhead_s: np.ndarray | None = None


class StragglerProcess:
    """Deterministic straggler draws for ``n_workers`` workers.

    Args:
        stragglers_spec: the scenario's :class:`~gcsim.scenario.Stragglers` (or None: no stragglers).
        n_workers: number of workers ``n``.
        seed: scenario seed, ``0 <= seed < 2**32``.
        compute: optional per-partition compute distribution (the scenario's ``workload.compute``)
            for :meth:`draw_block` with ``n_partitions > 0``.
        call_overhead: optional per worker-iteration overhead distribution (``workload.call_overhead``),
            drawn from a sub-stream ``default_rng([seed, w, t, 1])`` so it leaves every other draw as is.
        speed_variation: optional machine speed factor (``workload.speed_variation``,
            :func:`speed_factors`, keyed on its own ``seed`` when it has one, else on ``seed``)
            multiplying the compute draws of every worker of an iteration.

    ``draw(t)`` may be called in any order; the Markov state is advanced in iteration order from 0
    (cached), so ``draw(t)`` is the same whatever was drawn before.

    The persistent state is the two-state (good/bad) Markov chain of Gilbert (Bell Syst. Tech. J. 39,
    1960) per worker; iteration 0 draws it from the stationary law ``P(slow) = p_enter / (p_enter +
    p_leave)`` and a slow spell lasts a geometric number of iterations with mean ``1 / p_leave``.

    Raises:
        ValueError: ``worker_scale`` does not hold ``n_workers`` factors (a validated scenario
            always does).
    """

    def __init__(self, stragglers_spec: Stragglers | None, n_workers: int, seed: int,
                 compute: Distribution | None = None, call_overhead: Distribution | None = None,
                 speed_variation: SpeedVariation | None = None):
        spec = stragglers_spec if stragglers_spec is not None else Stragglers()
        self.n, self.seed = int(n_workers), int(seed)
        self.delay = build_distribution(spec.delay) if spec.delay is not None else None
        self.slowdown_dist = build_distribution(spec.slowdown) if spec.slowdown is not None else None
        self.persistent = spec.persistent
        self.worker_scale = (np.asarray(spec.worker_scale, dtype=np.float64) if spec.worker_scale is not None
                             else np.ones(self.n))
        if self.worker_scale.shape != (self.n,):
            raise ValueError(f"worker_scale: expected {self.n} factors, got {self.worker_scale.shape}")
        self.compute = compute
        self.call_overhead = call_overhead
        from gcsim.replay import TraceReplay  # trace-driven draws (stragglers.replay), keyed like the rest
        self.replay = TraceReplay(spec.replay, self.n, self.seed) if spec.replay is not None else None
        self._nu_delay = self.delay.n_uniforms if self.delay else 0
        self._nu_slow = self.slowdown_dist.n_uniforms if self.slowdown_dist else 0
        self._nu_compute = compute.n_uniforms if compute is not None else 0
        self._head = 1 + self._nu_delay + self._nu_slow  # Markov uniform first
        self._slow_states: list[np.ndarray] = []  # Markov state per iteration, in order
        self.speed_variation = speed_variation if speed_variation is not None and speed_variation.sd > 0 else None
        self._speed = np.ones(0)  # speed factors of iterations 0 .. len - 1 (grown by doubling)

    def speed_factor(self, iterations) -> np.ndarray:
        """float64 ``(I,)``: the machine's speed factor of each of ``iterations`` (:func:`speed_factors`;
        ones without ``speed_variation``)."""
        its = np.asarray(iterations, dtype=np.int64)
        if self.speed_variation is None or its.size == 0:
            return np.ones(its.shape)
        need = int(its.max()) + 1
        if need > self._speed.size:
            seed = self.speed_variation.seed if self.speed_variation.seed is not None else self.seed
            self._speed = speed_factors(self.speed_variation, seed, max(need, 2 * self._speed.size))
        return self._speed[its]

    # ----------------------------------------------------------------- uniforms
    def _uniforms(self, iterations: np.ndarray, n_partitions: int, start: int = 0) -> np.ndarray:
        """``(I, n, head + P·nu_compute - start)`` uniforms, one keyed stream per (worker, iteration),
        from the ``start``-th number of each stream on."""
        width = self._head + n_partitions * self._nu_compute
        its = np.asarray(iterations, dtype=np.int64)
        return grid_uniforms([self.seed, np.arange(self.n)[None, :], its[:, None]], width, start)

    def _markov(self, upto: int, first_uniforms: np.ndarray | None = None) -> None:
        """Advance the cached Markov states through iteration ``upto`` (inclusive). ``first_uniforms``:
        the Markov uniforms ``(upto + 1 - start, n)`` of exactly the missing iterations, when the caller
        already drew them (else they are drawn here)."""
        p = self.persistent
        if p is None:
            return
        start = len(self._slow_states)
        if upto < start:
            return
        us = (first_uniforms if first_uniforms is not None
              else self._uniforms(np.arange(start, upto + 1), 0)[:, :, 0])
        pi_slow = p.p_enter / (p.p_enter + p.p_leave)
        for i, t in enumerate(range(start, upto + 1)):
            u = us[i]
            if t == 0:
                state = u < pi_slow
            else:
                prev = self._slow_states[t - 1]
                state = np.where(prev, u >= p.p_leave, u < p.p_enter)
            self._slow_states.append(state)

    # ----------------------------------------------------------------- public
    def draw_block(self, iterations, n_partitions: int = 0) -> DrawBlock:
        """Draws for ``iterations`` (any int sequence) and the first ``n_partitions`` compute draws.

        Raises:
            ValueError: ``n_partitions > 0`` without a compute distribution.
        """
        its = np.asarray(list(iterations), dtype=np.int64)
        if n_partitions > 0 and self.compute is None:
            raise ValueError("n_partitions > 0 needs a compute distribution")
        o = 0 if self.persistent is not None else 1  # the Markov uniform (first) is read only with persistent
        u = self._uniforms(its, n_partitions, start=o)  # column j - o holds the stream's j-th number
        I = len(its)
        delay = (self.delay.from_uniform(u[:, :, 1 - o:1 - o + self._nu_delay]) if self.delay is not None
                 else np.zeros((I, self.n)))
        slow_factor = (self.slowdown_dist.from_uniform(u[:, :, 1 - o + self._nu_delay:self._head - o])
                       if self.slowdown_dist is not None else np.ones((I, self.n)))
        if self.replay is not None:
            delay, slow_factor = self.replay.apply(its, delay, slow_factor)
        if self.persistent is not None and I:
            start = len(self._slow_states)
            contiguous = its[0] == start and np.array_equal(its, np.arange(start, start + I))
            self._markov(int(its.max()), u[:, :, 0] if contiguous else None)
            slow = np.stack([self._slow_states[t] for t in its])
            slow_factor = slow_factor * np.where(slow, self.persistent.slowdown, 1.0)
        else:
            slow = np.zeros((I, self.n), dtype=bool)
        slowdown = slow_factor * self.worker_scale[None, :]
        if n_partitions > 0 and self._nu_compute == 0:
            # a draw that consumes no uniforms (constant): one value, broadcast (read-only, no memory)
            compute = np.broadcast_to(np.asarray(self.compute.from_uniform(np.empty((1, 1, 1, 0))),
                                                 dtype=np.float64), (I, self.n, n_partitions))
        elif n_partitions > 0:
            cu = u[:, :, self._head - o:].reshape(I, self.n, n_partitions, self._nu_compute)
            compute = self.compute.from_uniform(cu)
        else:
            compute = np.zeros((I, self.n, 0))
        if self.call_overhead is not None:
            nu = self.call_overhead.n_uniforms
            ou = grid_uniforms([self.seed, np.arange(self.n)[None, :], its[:, None], 1], nu)
            overhead = self.call_overhead.from_uniform(ou)
        else:
            overhead = np.zeros((I, self.n))
        if self.speed_variation is not None and I:
            f = self.speed_factor(its)
            compute = np.broadcast_to(compute, (I, self.n, compute.shape[2])) * f[:, None, None]
        return DrawBlock(iterations=its, delay_s=np.asarray(delay, dtype=np.float64),
                         slowdown=np.asarray(slowdown, dtype=np.float64), slow=slow,
                         compute_s=np.asarray(compute, dtype=np.float64),
                         call_overhead_s=np.asarray(overhead, dtype=np.float64))

    def draw(self, iteration: int) -> StragglerDraw:
        """The straggler state of every worker in ``iteration`` (deterministic in seed, worker, iteration)."""
        b = self.draw_block([int(iteration)])
        return StragglerDraw(delay_s=b.delay_s[0], slowdown=b.slowdown[0], slow=b.slow[0])


def master_rng(seed: int, iteration: int) -> np.random.Generator:
    """The master's stream in ``iteration`` (decode/update time draws)."""
    return np.random.default_rng([int(seed), MASTER_STREAM, int(iteration)])


def master_uniforms(seed: int, iterations, width: int) -> np.ndarray:
    """float64 ``(I, width)``: the first ``width`` uniforms of :func:`master_rng` ``(seed, t)`` for every
    ``t`` in ``iterations`` (the same numbers, drawn for all iterations at once)."""
    its = np.asarray(iterations, dtype=np.int64)
    return keyed_uniforms(stream_keys(seed, MASTER_STREAM, its), width)
