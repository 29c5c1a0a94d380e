"""Chebyshev points, the well-conditioned real evaluation points used by the CCE schemes.

Ye & Abbe (ICML 2018, §3) allow any distinct reals; Vandermonde systems on Chebyshev points of the
first kind have condition numbers growing far slower than on equispaced points (Gautschi, "Norm
estimates for inverses of Vandermonde matrices", Numer. Math. 1975).
"""

from __future__ import annotations

import numpy as np


def chebyshev_nodes(count: int) -> np.ndarray:
    """Chebyshev points of the first kind ``cos((2i+1) pi / (2 count))``, ``i = 0..count-1``.

    Returns a float64 array ``(count,)`` of distinct points in (-1, 1), in decreasing order.
    """
    i = np.arange(count)
    return np.cos((2 * i + 1) * np.pi / (2 * count))


def vandermonde(points: np.ndarray, columns: int) -> np.ndarray:
    """``(len(points), columns)`` matrix ``V[r, c] = points[r] ** c`` (ascending powers)."""
    return np.vander(np.asarray(points, dtype=np.float64), columns, increasing=True)
