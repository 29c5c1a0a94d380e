"""``pgc-cr``: pipelined gradient coding over cyclic supports (approximate).

Pipelining from the PipelinedGradientCoding design (Ray + PyTorch, ResNet-18 / CIFAR-10) on the
cyclic-repetition layout of Tandon et al., "Gradient Coding", ICML 2017, §3.2: worker i holds
partitions ``i, ..., i+s (mod n)`` and at iteration t computes only partition ``i + (t mod (s+1))``
(so every partition is computed fresh by exactly one worker per iteration). It sends the plain sum of
its latest gradients of all s+1 partitions (s of them stale by 1..s iterations); the master takes the
first n-s arrivals and scales by ``n/((n-s)(s+1))``. Details (warm-up, staleness, caching):
:mod:`gcsim.schemes.pipelined`.
Constraints: ``0 <= s < n``; ``m = 1``. Computation load 1; communication load 1 (one message).
"""

from __future__ import annotations

from gcsim.schemes.cyclic import cyclic_support
from gcsim.schemes.pipelined import PipelinedScheme


class PgcCr(PipelinedScheme):
    """Pipelined cyclic GC: hold s+1 cyclic partitions, compute one per iteration, send the stale sum."""

    name = "pgc-cr"
    constraints = "0 <= s < n; m = 1"
    examples = (dict(n=5, s=1), dict(n=7, s=2), dict(n=8, s=3))
    reference = "PipelinedGradientCoding (Ray/PyTorch) on Tandon et al. 2017 §3.2 cyclic supports"

    def _held_partitions(self, worker: int) -> list[int]:
        return cyclic_support(worker, self.s + 1, self.n)

    def _offset(self, worker: int) -> int:
        return 0
