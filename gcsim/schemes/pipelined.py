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
from gcsim.schemes.base import Decoding, Loads, Message, Scheme


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

    def staleness_matrix(self, iteration: int) -> np.ndarray:
        """int ``(n, k)``: iterations since worker i last computed partition j, as used in its
        message of ``iteration``; -1 where i does not hold j or (warm-up ``"zeros"``) has never
        computed it; ``iteration + 1`` for a partition only computed before step 0 (``"reference"``).

        Worker i computes position ``(offset_i + t') mod h`` at iteration t', so position q was last
        computed ``age = (offset_i + t - q) mod h`` iterations before t (module docstring); computed
        with whole arrays (``(n, h)``), no per-worker loop."""
        h = self.s + 1
        if getattr(self, "_held_arr", None) is None:
            self._held_arr = np.array(self._held, dtype=np.int64).reshape(self.n, h)
            self._offsets = np.array([self._offset(i) for i in range(self.n)], dtype=np.int64)
        age = (self._offsets[:, None] + int(iteration) - np.arange(h)[None, :]) % h  # (n, h)
        val = np.where(iteration - age >= 0, age, iteration + 1 if self.warmup == "reference" else -1)
        out = np.full((self.n, self.k), -1, dtype=np.int64)
        out[np.arange(self.n)[:, None], self._held_arr] = val
        return out

    #: bytes the per-phase message tables may hold before the oldest phase is dropped (rebuilt on
    #: demand): at n = 1024 with s near n there are 2s + 1 phases of two (n, k) arrays, 16 MB each
    #: (issue 13: 8.6 GB held before this bound)
    PHASE_CACHE_BYTES = 256 * 2**20

    def _phase_data(self, iteration: int) -> tuple[list[Message], np.ndarray]:
        key = self._phase(iteration)
        hit = self._per_phase.pop(key, None)
        if hit is None:
            stale = self.staleness_matrix(iteration)
            coeffs = (stale >= 0).astype(np.float64)
            msgs = [Message(id=i, worker=i, coeffs=coeffs[i][:, None], payload_fraction=1.0)
                    for i in range(self.n)]
            hit = (msgs, stale)
            per_phase = stale.nbytes + coeffs.nbytes
            while self._per_phase and (len(self._per_phase) + 1) * per_phase > self.PHASE_CACHE_BYTES:
                self._per_phase.pop(next(iter(self._per_phase)))  # least recently used first
        self._per_phase[key] = hit  # (re)inserted last: dicts keep insertion order
        return hit

    # ----------------------------------------------------------------- public API
    def assignment(self, iteration: int = 0) -> list[list[int]]:
        """Per worker, the single partition it computes in ``iteration`` (round-robin)."""
        self._phase(iteration)
        return self._assignment_at(iteration)

    def messages(self, iteration: int = 0) -> list[Message]:
        """One message per worker: coefficient 1 on every held partition computed at least once."""
        return self._phase_data(iteration)[0]

    def held_partitions(self, worker: int) -> list[int]:
        return sorted(self._held[worker])

    def _cache_key(self, arrived, iteration):
        return (frozenset(arrived[: self.n - self.s]), self._phase(iteration))

    def _decode_at(self, arrived, iteration):
        used = tuple(sorted(arrived[: self.n - self.s]))
        scale = self.n / ((self.n - self.s) * (self.s + 1))
        stale = self._phase_data(iteration)[1][list(used)]
        return Decoding(used=used, weights=np.full((len(used), 1), scale), exact=False, staleness=stale)
