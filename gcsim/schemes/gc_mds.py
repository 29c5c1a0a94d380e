"""``gc-mds``: cyclic-MDS gradient coding (Raviv, Tamo, Tandon, Dimakis, "Gradient Coding from
Cyclic MDS Codes and Expander Graphs", ICML 2018, §3, real-valued construction).

Same support as ``gc-cr`` (worker i computes partitions ``i..i+s mod n``, computation load s+1, one
full-length message), but B is deterministic: row i holds the coefficients of the generator
polynomial ``g(x) = prod_{e in E} (x - alpha^e)``, ``alpha = exp(2 pi i / n)``, shifted cyclically by i,
with ``E = {(n-s+1)/2, ..., (n+s-1)/2}`` (s consecutive exponents, excluding 0). The rows generate a
cyclic [n, n-s] MDS code that contains the all-ones vector, so any n-s arrivals decode; E is
symmetric under e -> n-e, so g is real and palindromic (needs ``n - s`` odd).
Examples: n=7, s=2 -> row [1, 1.802, 1]; n=8, s=3 -> [1, 2.414, 2.414, 1].
Decode: least squares ``B_S^T a = 1`` in float64 with a residual check, like ``gc-cr``.
Constraints: ``0 <= s < n``; ``n - s`` odd (or ``s = 0``); ``m = 1``.
"""

from __future__ import annotations

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.cyclic import CyclicMatrixScheme, cyclic_support


def cyclic_mds_generator(n: int, s: int) -> np.ndarray:
    """Real coefficients ``(s+1,)`` (ascending degree, constant term 1) of ``g(x)`` above.

    Raises:
        SchemeError: if ``s > 0`` and ``n - s`` is even (g would not be real).
    """
    if s == 0:
        return np.ones(1)
    if (n - s) % 2 == 0:
        raise SchemeError.param("gc-mds", "s", f"a value with n - s odd (n={n}), for a real generator", s)
    exponents = np.arange((n - s + 1) // 2, (n + s - 1) // 2 + 1)
    coeffs = np.poly(np.exp(2j * np.pi * exponents / n))[::-1]  # ascending degree, monic
    return np.real(coeffs / coeffs[0])


class GcMds(CyclicMatrixScheme):
    """Cyclic-MDS GC: B rows are cyclic shifts of a real palindromic generator polynomial."""

    name = "gc-mds"
    exact = True
    constraints = "n - s odd (or s = 0); m = 1"
    reference = "Raviv, Tamo, Tandon, Dimakis, Gradient Coding from Cyclic MDS Codes, ICML 2018, §3"

    def _validate(self) -> None:
        cyclic_mds_generator(self.n, self.s)

    def _coefficient_matrix(self) -> np.ndarray:
        g = cyclic_mds_generator(self.n, self.s)
        B = np.zeros((self.n, self.n))
        for i in range(self.n):
            B[i, cyclic_support(i, self.s + 1, self.n)] = g
        return B
