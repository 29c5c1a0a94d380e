"""``pgc-fr``: pipelined gradient coding over fractional-repetition groups (approximate).

This variant is this project's extension, not a published scheme: the PipelinedGradientCoding
design (Ray + PyTorch, ResNet-18 / CIFAR-10), which implements pipelining on cyclic supports only
(``pgc-cr``), moved onto the fractional-repetition layout of Tandon et al., "Gradient Coding", ICML 2017, §3.1: groups of s+1
consecutive workers hold the same s+1 partitions; worker r of a group (r = 0..s) computes at
iteration t only the group's partition at position ``(r + t) mod (s+1)`` (so each group partition is
computed fresh by exactly one group member per iteration) and sends the plain sum of its latest
gradients of all s+1 group partitions. The master takes the first n-s arrivals (whatever their
groups) and scales by ``n/((n-s)(s+1))``. Details (warm-up, staleness, caching):
:mod:`gcsim.schemes.pipelined`.
Constraints: ``(s+1)`` divides n; ``m = 1``. Computation load 1; communication load 1.
"""

from __future__ import annotations

from gcsim.errors import SchemeError
from gcsim.schemes.pipelined import PipelinedScheme


class PgcFr(PipelinedScheme):
    """Pipelined FR GC: groups of s+1 share s+1 partitions, each member computes one per iteration."""

    name = "pgc-fr"
    constraints = "(s+1) divides n; m = 1"
    examples = (dict(n=4, s=0), dict(n=6, s=1), dict(n=6, s=2), dict(n=8, s=3))
    reference = ("this project's extension: PipelinedGradientCoding's pipelining (cyclic only) on Tandon et al. "
                 "2017 §3.1 fractional repetition")

    def _validate(self) -> None:
        if self.n % (self.s + 1) != 0:
            raise SchemeError.param(self.name, "s", f"s+1 dividing n={self.n}", self.s)

    def _held_partitions(self, worker: int) -> list[int]:
        base = (worker // (self.s + 1)) * (self.s + 1)
        return list(range(base, base + self.s + 1))

    def _offset(self, worker: int) -> int:
        return worker % (self.s + 1)
