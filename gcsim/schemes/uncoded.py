"""``uncoded``: plain synchronous data parallelism (the baseline of Tandon et al., ICML 2017, §1).

Worker i computes partition i and sends g_i; the master waits for all n workers. Constraints:
s = 0 (it tolerates no straggler); m = 1.
"""

from __future__ import annotations

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.base import Decoding, Loads, Scheme, one_message_per_worker


class Uncoded(Scheme):
    """Uncoded baseline: one partition per worker, wait for all n (decoding vector = all ones)."""

    name = "uncoded"
    exact = True
    constraints = "s = 0; m = 1; any n >= 1"
    reference = "Tandon et al., Gradient Coding, ICML 2017, §1 (baseline)"
    examples = (dict(n=1, s=0), dict(n=5, s=0))

    @classmethod
    def declared_loads(cls, n, s, m):
        """One partition computed and held per worker."""
        return Loads(computation=1, held=1)

    def __init__(self, n: int, s: int = 0, m: int = 1, seed: int = 0, payload_dtype: str = "float64"):
        super().__init__(n, s, m, seed, payload_dtype)

    def _validate(self) -> None:
        if self.s != 0:
            raise SchemeError.param(self.name, "s", "0 (uncoded waits for every worker)", self.s)

    def _build(self):
        assignment = [[i] for i in range(self.n)]
        return assignment, one_message_per_worker(assignment, np.eye(self.n))

    def _decode(self, arrived):
        if len(arrived) < self.n:
            return None
        return Decoding(used=tuple(range(self.n)), weights=np.ones((self.n, 1)), exact=True)
