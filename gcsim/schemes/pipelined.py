"""Shared machinery of pipelined gradient coding (``pgc-cr``, ``pgc-fr``): approximate, stale.

Pipelined GC (the PipelinedGradientCoding design, Ray + PyTorch, ResNet-18 / CIFAR-10; see the
scheme modules for references): worker i *holds* ``h = s+1`` partitions ``held[i][0..s]`` but
computes only ONE per iteration, round-robin: at iteration t it computes position
``(offset_i + t) mod (s+1)`` (computation load 1). It then sends the plain sum of its latest gradient
of every held partition – one fresh, the others computed 1..s iterations earlier – as one
full-length message. The master takes the FIRST ``n - s`` messages in arrival order and scales each
by ``n / ((n - s)(s + 1))`` (each message stands for s+1 partition gradients; the sum needs n).

Staleness: the gradient of position q in worker i's message at iteration t was computed at the last
``t' <= t`` with ``(offset_i + t') mod (s+1) = q``; its staleness is ``t - t'`` (0 for the fresh one).
Warm-up (t < s), option ``warmup``:

* ``"reference"`` – the reference design: every worker computes each of its held partitions once
  before step 0 (at "iteration -1", a one-off cost outside every iteration's time), so from step 0
  every message carries all s+1 gradients; a position whose first round-robin turn is still ahead has
  staleness ``t + 1``;
* ``"zeros"`` (default; what ``gcsim real``'s workers do, they hold zeros until a partition is first
  computed) – positions whose first turn is still ahead were never computed; they carry coefficient 0
  (zeros are sent for them) and staleness -1, and the master still applies the same scale, so during
  the first s iterations the estimate is ``(t+1)/(s+1)`` of the true sum (biased low).

From iteration s on, assignment and messages repeat with period s+1, so decodings are cached by
(first n-s arrivals as a set, warm-up iteration or steady phase t mod (s+1)). The staleness reported
is the schedule's: in the real executor a worker whose call was cancelled before it computed its
partition (e.g. during its injected delay) keeps the older gradient, which is then s+1 iterations
older than declared at its next use; the real executor records the staleness actually used beside
the declared one (``staleness.csv``, :mod:`gcsim.real.staleness`).
"""

from __future__ import annotations

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.base import Decoding, Loads, Scheme, SparseMessage


class PipelinedScheme(Scheme):
    """Base of the pipelined schemes. Subclasses implement :meth:`_held_partitions` and
    :meth:`_offset`. ``Decoding.staleness`` is ``(n - s, k)`` ints, -1 where a partition is absent."""

    exact = False
    #: the warm-up modes (module docstring)
    WARMUP_MODES = ("zeros", "reference")

    def __init__(self, n: int, s: int, m: int = 1, seed: int = 0, payload_dtype: str = "float64",
                 warmup: str = "zeros"):
        if warmup not in self.WARMUP_MODES:
            raise SchemeError.param(self.name, "warmup", " or ".join(self.WARMUP_MODES), warmup)
        self.warmup = warmup
        super().__init__(n, s, m, seed, payload_dtype)

    @classmethod
    def declared_loads(cls, n, s, m):
        """One partition computed per iteration, s + 1 held (round-robin)."""
        return Loads(computation=1, held=s + 1)

    def _held_partitions(self, worker: int) -> list[int]:
        """The s+1 partitions ``worker`` holds, in round-robin order (position 0..s)."""
        raise NotImplementedError

    def _offset(self, worker: int) -> int:
        """Round-robin offset: at iteration t the worker computes position (offset + t) mod (s+1)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- construction
    def _build(self):
        self._held = [self._held_partitions(i) for i in range(self.n)]
        self._per_phase: dict = {}  # phase -> (messages, staleness), least recently used first
        self._held_arr = None
        self._held_sorted = self._held_order = self._steady_msgs = None
        return self._assignment_at(0), self._phase_data(0)[0]

    @property
    def assignment_period(self) -> int:
        return self.s + 1

    def _phase(self, iteration: int) -> tuple[bool, int]:
        """(warm-up?, t mod (s+1)): everything about an iteration that decoding depends on."""
        if iteration < 0:
            raise SchemeError.param(self.name, "iteration", "an integer >= 0", iteration)
        return (iteration < self.s, iteration % (self.s + 1))

    def _assignment_at(self, iteration: int) -> list[list[int]]:
        h = self.s + 1
        return [[self._held[i][(self._offset(i) + iteration) % h]] for i in range(self.n)]

    def _held_ages(self, iteration: int) -> np.ndarray:
        """int ``(n, s+1)``: per worker and held position q (``_held[i][q]``), iterations since it was
        last computed, as used in the message of ``iteration``: worker i computes position
        ``(offset_i + t') mod h`` at t', so ``age = (offset_i + t - q) mod h`` (module docstring); -1
        (warm-up ``"zeros"``) or ``iteration + 1`` (``"reference"``) where it was never computed."""
        h = self.s + 1
        if self._held_arr is None:
            self._held_arr = np.array(self._held, dtype=np.int64).reshape(self.n, h)
            self._offsets = np.array([self._offset(i) for i in range(self.n)], dtype=np.int64)
        age = (self._offsets[:, None] + int(iteration) - np.arange(h)[None, :]) % h  # (n, h)
        return np.where(iteration - age >= 0, age, iteration + 1 if self.warmup == "reference" else -1)

    def _scatter(self, ages: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """int16 ``(len(rows), k)``: the held-position ages of workers ``rows`` spread over the k
        partitions, -1 where a worker does not hold a partition."""
        # ages are <= s + 1 (or t + 1 < s + 1 during a "reference" warm-up): int16 holds every n a scenario
        # accepts and keeps a cached decoding's table at 2 bytes a cell (issue 13)
        out = np.full((len(rows), self.k), -1, dtype=np.int16 if self.n < 2**15 else np.int32)
        out[np.arange(len(rows))[:, None], self._held_arr[rows]] = ages[rows]
        return out

    def staleness_matrix(self, iteration: int) -> np.ndarray:
        """int ``(n, k)``: iterations since worker i last computed partition j, as used in its
        message of ``iteration``; -1 where i does not hold j or (warm-up ``"zeros"``) has never
        computed it; ``iteration + 1`` for a partition only computed before step 0 (``"reference"``).
        Built on demand (the scheme keeps ``(n, s+1)`` per phase, not this)."""
        return self._scatter(self._held_ages(iteration), np.arange(self.n))

    #: bytes the per-phase tables may hold before the least recently used phase is dropped (rebuilt on
    #: demand); each phase holds O(n (s+1)) numbers: its messages by support and the held ages
    PHASE_CACHE_BYTES = 256 * 2**20

    def _phase_data(self, iteration: int) -> tuple[list[SparseMessage], np.ndarray]:
        """``(messages, held ages (n, s+1))`` of the phase of ``iteration`` (cached)."""
        key = self._phase(iteration)
        hit = self._per_phase.pop(key, None)
        if hit is None:
            ages = self._held_ages(iteration)  # (n, s+1), aligned with self._held_arr
            if self._held_sorted is None:
                self._held_order = np.argsort(self._held_arr, axis=1, kind="stable")
                self._held_sorted = np.take_along_axis(self._held_arr, self._held_order, axis=1)
            computed = np.take_along_axis(ages, self._held_order, axis=1) >= 0  # (n, s+1): enters the message
            if computed.all():  # every phase after the warm-up: the same messages (only the ages differ)
                if self._steady_msgs is None:
                    self._steady_msgs = self._sparse_messages(self._held_sorted.tolist())
                msgs = self._steady_msgs
            else:
                flat = self._held_sorted[computed].tolist()  # row-major: worker 0's support first
                ends = np.cumsum(computed.sum(axis=1)).tolist()
                msgs = self._sparse_messages([flat[a:b] for a, b in zip([0, *ends[:-1]], ends)])
            hit = (msgs, ages)
            per_phase = 3 * ages.nbytes + 200 * self.n  # ages, supports + values, message objects
            while self._per_phase and (len(self._per_phase) + 1) * per_phase > self.PHASE_CACHE_BYTES:
                self._per_phase.pop(next(iter(self._per_phase)))  # least recently used first
        self._per_phase[key] = hit  # (re)inserted last: dicts keep insertion order
        return hit

    def _sparse_messages(self, supports: list[list[int]]) -> list[SparseMessage]:
        """Worker i's message: coefficient 1 on each partition of ``supports[i]`` (increasing); the
        coefficient columns are shared, read-only, one per support size."""
        ones: dict[int, np.ndarray] = {}
        msgs = []
        for i, sup in enumerate(supports):
            vals = ones.get(len(sup))
            if vals is None:
                vals = ones[len(sup)] = np.ones((len(sup), 1))
                vals.setflags(write=False)
            msgs.append(SparseMessage(id=i, worker=i, support=tuple(sup), values=vals, k=self.k, payload_fraction=1.0))
        return msgs

    # ----------------------------------------------------------------- public API
    def assignment(self, iteration: int = 0) -> list[list[int]]:
        """Per worker, the single partition it computes in ``iteration`` (round-robin)."""
        self._phase(iteration)
        return self._assignment_at(iteration)

    def messages(self, iteration: int = 0) -> list[SparseMessage]:
        """One message per worker: coefficient 1 on every held partition computed at least once."""
        return self._phase_data(iteration)[0]

    def held_partitions(self, worker: int) -> list[int]:
        return sorted(self._held[worker])

    def _cache_key(self, arrived, iteration):
        return (frozenset(arrived[: self.n - self.s]), self._phase(iteration))

    def _decode_at(self, arrived, iteration):
        used = tuple(sorted(arrived[: self.n - self.s]))
        scale = self.n / ((self.n - self.s) * (self.s + 1))
        stale = self._scatter(self._phase_data(iteration)[1], np.asarray(used, dtype=np.int64))
        return Decoding(used=used, weights=np.full((len(used), 1), scale), exact=False, staleness=stale)
