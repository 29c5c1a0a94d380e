"""``ignore-stragglers``: uncoded assignment, the master uses the first n-s arrivals and rescales.

The approximate baseline of Tandon et al. ("Gradient Coding", ICML 2017, §5: "ignoring the
stragglers"): worker i computes partition i and sends g_i; the master takes the first ``n - s``
messages *in arrival order* and returns ``n/(n-s) * sum_{i in first n-s} g_i`` (a biased estimate of
``sum_j g_j``: the slow workers' partitions are systematically missing).
Constraints: ``0 <= s < n``; ``m = 1``. Computation load 1; communication load 1.
"""

from __future__ import annotations

import numpy as np

from gcsim.schemes.base import Decoding, Loads, Scheme, one_message_per_worker


class IgnoreStragglers(Scheme):
    """Uncoded assignment; decode = first ``n - s`` arrivals, each with weight ``n/(n-s)``."""

    name = "ignore-stragglers"
    exact = False
    constraints = "0 <= s < n; m = 1"
    reference = "Tandon et al., Gradient Coding, ICML 2017, §5 (ignore-stragglers baseline)"
    examples = (dict(n=5, s=0), dict(n=6, s=2), dict(n=7, s=3))

    @classmethod
    def declared_loads(cls, n, s, m):
        """One partition computed and held per worker (uncoded assignment)."""
        return Loads(computation=1, held=1)

    def _build(self):
        assignment = [[i] for i in range(self.n)]
        return assignment, one_message_per_worker(assignment, np.eye(self.n))

    def _cache_key(self, arrived, iteration):
        # only the first n-s arrivals matter
        return frozenset(arrived[: self.n - self.s])

    def _decode(self, arrived):
        used = tuple(sorted(arrived[: self.n - self.s]))
        scale = self.n / (self.n - self.s)
        return Decoding(used=used, weights=np.full((len(used), 1), scale), exact=False)
