"""``cce-fr``: block (fractional-repetition) form of communication-computation efficient gradient
coding (Ye & Abbe, "Communication-Computation Efficient Gradient Coding", ICML 2018, §3–4: the
trade-off d >= s + m, here met with a repetition layout; the block layout is not named so in the paper).

Constraints: ``(s+m)`` divides n, ``m >= 1``. Workers form n/d groups of ``d = s+m`` consecutive
workers; all workers of group q compute the same d partitions ``{qd, ..., qd+d-1}`` (computation load
d) and their exact sum ``G_q``; ``G_q`` is split into m chunks ``G_q^(1..m)`` and worker r of the group
sends ``sum_u Lambda[r, u] G_q^(u)`` (communication load 1/m), with ``Lambda`` (d × m) the Vandermonde
matrix on d Chebyshev points, so every m × m minor is nonsingular (a (d, m) MDS code). The master
decodes from any m arrivals per group (an m × m solve; the m lowest-indexed arrived workers are used),
so it tolerates any s stragglers and often more. With m = 1 it is ``gc-fr`` (Tandon et al. 2017, §3.1).
"""

from __future__ import annotations

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.base import Decoding, Scheme, one_message_per_worker
from gcsim.schemes.chebyshev import chebyshev_nodes, vandermonde


class CceFr(Scheme):
    """Block CCE: groups of d = s+m workers share d partitions; each sends one 1/m-length MDS chunk."""

    name = "cce-fr"
    exact = True
    uses_m = True
    constraints = "(s+m) divides n; m >= 1"
    reference = "Ye & Abbe, Communication-Computation Efficient Gradient Coding, ICML 2018, §3 (block form)"

    def _validate(self) -> None:
        d = self.s + self.m
        if self.n % d != 0:
            raise SchemeError.param(self.name, "s+m", f"a divisor of n={self.n} (s={self.s}, m={self.m})", d)

    @property
    def group_size(self) -> int:
        """d = s + m workers (and partitions) per group."""
        return self.s + self.m

    def group_of(self, worker: int) -> int:
        """Group index of a worker (workers qd .. qd+d-1 form group q)."""
        return worker // self.group_size

    def _build(self):
        d, m = self.group_size, self.m
        self.Lambda = vandermonde(chebyshev_nodes(d), m)  # (d, m)
        assignment = [list(range(self.group_of(i) * d, self.group_of(i) * d + d)) for i in range(self.n)]
        C = np.zeros((self.n, self.k, m))
        for i, parts in enumerate(assignment):
            C[i, parts, :] = self.Lambda[i % d]
        return assignment, one_message_per_worker(assignment, C, m)

    @property
    def min_arrivals(self) -> int:
        """m · n / (s+m): m arrivals per group can decode (an m × m Vandermonde solve)."""
        return self.m * (self.n // self.group_size)

    def _decode(self, arrived):
        d, m = self.group_size, self.m
        per_group: dict[int, list[int]] = {}
        for a in sorted(arrived):
            per_group.setdefault(self.group_of(a), []).append(a)
        if len(per_group) < self.n // d or any(len(v) < m for v in per_group.values()):
            return None
        used, blocks, cond = [], [], 1.0
        for q in sorted(per_group):
            rows = per_group[q][:m]
            L = self.Lambda[[r % d for r in rows]]  # (m, m): payload_r = sum_u L[r, u] G^(u)
            cond = max(cond, float(np.linalg.cond(L)))
            blocks.append(np.linalg.inv(L).T)  # weights[r, u] = (L^-1)[u, r]
            used.extend(rows)
        return Decoding(used=tuple(used), weights=np.vstack(blocks), exact=True, cond=cond)
