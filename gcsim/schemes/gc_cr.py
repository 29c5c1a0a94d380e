"""``gc-cr``: cyclic-repetition gradient coding with the randomized construction of Tandon, Lei,
Dimakis, Karampatziakis, "Gradient Coding", ICML 2017, §3.2 (Algorithm 2).

Worker i computes partitions ``i, ..., i+s (mod n)`` (computation load s+1) and sends
``b_i · [g_0..g_{n-1}]`` (one full-length message). Construction (seeded): draw ``H`` (s × n) with
i.i.d. standard normal entries in its first n-1 columns and last column minus the row sums, so
``H 1 = 0``; row i of B has coefficient 1 on partition i and the other s coefficients solve the
s × s system ``H b_i = 0``. Any n-s rows of B then span ``null(H)``, which contains the all-ones
vector, so any n-s arrivals decode (with probability 1 over H).
Decode: least squares ``B_S^T a = 1`` in float64, checked like every exact decode (residual <= 1e-6
and error bound in the payload precision, :meth:`Scheme.decode`; a refused set makes the master wait
for one more arrival); ``Decoding.cond`` reports cond(B_S), heavy-tailed for random H. The random
construction has no structured worst case to check at construction: its rare ill-conditioned sets
(e.g. n = 256, s = 2, stragglers [28, 113], cond 4.7e11) are refused at decode time and counted.
Constraints: ``0 <= s < n``; ``m = 1``. :meth:`GcCr.from_matrix` builds the scheme from an explicit B
(e.g. the paper's n=3, s=1 example, Fig. 1).
"""

from __future__ import annotations

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.cyclic import CyclicMatrixScheme, cyclic_support


def random_cyclic_matrix(n: int, s: int, rng: np.random.Generator) -> np.ndarray:
    """Tandon et al. 2017, Algorithm 2: ``(n, n)`` float64 B with cyclic supports and rows in null(H).

    Raises:
        SchemeError: if a drawn s × s system is singular (probability 0).
    """
    B = np.zeros((n, n))
    if s == 0:
        return np.eye(n)
    H = rng.standard_normal((s, n))
    H[:, -1] = -H[:, :-1].sum(axis=1)
    for i in range(n):
        supp = cyclic_support(i, s + 1, n)
        B[i, supp[0]] = 1.0
        try:
            B[i, supp[1:]] = np.linalg.solve(H[:, supp[1:]], -H[:, supp[0]])
        except np.linalg.LinAlgError:  # pragma: no cover - probability zero
            raise SchemeError(f"scheme gc-cr: seed: expected a seed giving a non-singular H, got singular for row {i}")
    return B


class GcCr(CyclicMatrixScheme):
    """Cyclic repetition GC with the paper's seeded random B (or an explicit B via :meth:`from_matrix`).

    Args:
        n, s, m, seed: as :class:`~gcsim.schemes.base.Scheme` (``m`` must be 1).
        matrix: optional explicit ``(n, n)`` B; each row must be non-zero only on its cyclic support
            ``{i..i+s mod n}`` and non-zero on partition ``i``.
    Raises:
        SchemeError: bad n, s, m or matrix.
    """

    name = "gc-cr"
    exact = True
    constraints = "0 <= s < n; m = 1"
    examples = (dict(n=3, s=1), dict(n=7, s=2), dict(n=10, s=3), dict(n=12, s=5))
    reference = "Tandon et al., Gradient Coding, ICML 2017, §3.2, Alg. 2 (randomized cyclic repetition)"

    def __init__(self, n: int, s: int, m: int = 1, seed: int = 0, payload_dtype: str = "float64", matrix=None):
        self._explicit = None if matrix is None else np.array(matrix, dtype=np.float64)
        super().__init__(n, s, m, seed, payload_dtype)

    @classmethod
    def from_matrix(cls, matrix, s: int, payload_dtype: str = "float64") -> "GcCr":
        """Build from an explicit ``(n, n)`` encoding matrix B tolerating ``s`` stragglers."""
        B = np.array(matrix, dtype=np.float64)
        if B.ndim != 2 or B.shape[0] != B.shape[1]:
            raise SchemeError.param(cls.name, "matrix", "a square (n, n) array", B.shape)
        return cls(n=B.shape[0], s=s, payload_dtype=payload_dtype, matrix=B)

    def _validate(self) -> None:
        B = self._explicit
        if B is None:
            return
        if B.shape != (self.n, self.n) or not np.all(np.isfinite(B)):
            raise SchemeError.param(self.name, "matrix", f"a finite ({self.n}, {self.n}) array", B.shape)
        for i in range(self.n):
            outside = np.ones(self.n, dtype=bool)
            outside[cyclic_support(i, self.s + 1, self.n)] = False
            if np.any(B[i, outside] != 0) or B[i, i] == 0:
                raise SchemeError.param(self.name, f"matrix row {i}",
                                        f"non-zero on partition {i}, zero outside {{{i}..{i}+s mod n}}", B[i].tolist())

    def _coefficient_matrix(self) -> np.ndarray:
        if self._explicit is not None:
            return self._explicit
        return random_cyclic_matrix(self.n, self.s, np.random.default_rng(self.seed))
