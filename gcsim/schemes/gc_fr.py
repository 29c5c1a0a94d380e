"""``gc-fr``: fractional-repetition gradient coding (Tandon, Lei, Dimakis, Karampatziakis,
"Gradient Coding", ICML 2017, §3.1, Algorithm 1).

Constraints: (s+1) divides n; m = 1. Workers form n/(s+1) groups of s+1 consecutive workers; the
workers of group g all compute the same s+1 partitions {g(s+1), ..., g(s+1)+s} and each sends their
plain sum (binary B). The master decodes with coefficient 1 on one arrival per group, so it can finish
as soon as every group has an arrival – often with more than s stragglers.
Computation load s+1; communication load 1 message of the full gradient length.
"""

from __future__ import annotations

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.base import Decoding, Quorum, Scheme, one_message_per_worker


class GcFr(Scheme):
    """Fractional repetition GC: groups of s+1 workers share s+1 partitions, each sends the group sum."""

    name = "gc-fr"
    exact = True
    constraints = "(s+1) divides n; m = 1"
    reference = "Tandon et al., Gradient Coding, ICML 2017, §3.1 (fractional repetition)"
    examples = (dict(n=6, s=1), dict(n=6, s=2), dict(n=8, s=3), dict(n=5, s=4))

    def _validate(self) -> None:
        if self.n % (self.s + 1) != 0:
            raise SchemeError.param(self.name, "s", f"s+1 dividing n={self.n}", self.s)

    @property
    def group_size(self) -> int:
        """s + 1 workers (and partitions) per group."""
        return self.s + 1

    def group_of(self, worker: int) -> int:
        """Group index of a worker (workers g(s+1) .. g(s+1)+s form group g)."""
        return worker // self.group_size

    def _build(self):
        d = self.group_size
        assignment = [list(range(self.group_of(i) * d, self.group_of(i) * d + d)) for i in range(self.n)]
        B = np.zeros((self.n, self.k))
        for i, parts in enumerate(assignment):
            B[i, parts] = 1.0
        return assignment, one_message_per_worker(assignment, B)

    @property
    def min_arrivals(self) -> int:
        """n / (s+1): one arrival per group can decode (Tandon et al. 2017, §3.1)."""
        return self.n // self.group_size

    def quorum(self, iteration: int = 0) -> Quorum:
        """One arrival per group of s+1 (the first in arrival order, coefficient 1); never refused."""
        return Quorum(group=np.arange(self.n) // self.group_size, need=1, pick="first", guaranteed=True)

    def _decode(self, arrived):
        first: dict[int, int] = {}
        for a in arrived:
            first.setdefault(self.group_of(a), a)
        if len(first) < self.n // self.group_size:
            return None
        used = tuple(first[g] for g in sorted(first))
        return Decoding(used=used, weights=np.ones((len(used), 1)), exact=True)
