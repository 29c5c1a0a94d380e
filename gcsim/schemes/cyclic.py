"""Shared machinery of the cyclic-support schemes defined by an encoding matrix B (``gc-cr``,
``gc-mds``): cyclic supports and the least-squares decoder.

Cyclic repetition (Tandon et al., "Gradient Coding", ICML 2017, §3.2): worker ``i`` computes
partitions ``i, i+1, ..., i+s (mod n)`` and sends ``b_i · [g_0 .. g_{n-1}]``. For the arrived set
``S`` the master needs ``a`` with ``a^T B_S = 1^T`` (Theorem 1 / Lemma 1 of the paper); it exists for
every ``|S| >= n - s`` when B is built as in the paper.
"""

from __future__ import annotations

import numpy as np

from gcsim.schemes.base import Decoding, Scheme, one_message_per_worker


def cyclic_support(worker: int, d: int, n: int) -> list[int]:
    """Partitions ``worker, worker+1, ..., worker+d-1 (mod n)`` in that order (Tandon et al. §3.2)."""
    return [(worker + t) % n for t in range(d)]


def least_squares_decoding(B_S: np.ndarray, rank: int) -> tuple[np.ndarray, float, float]:
    """Solve ``B_S^T a = 1`` in float64 by least squares (minimum-norm solution).

    Args:
        B_S: ``(r, k)`` rows of B of the arrived workers.
        rank: the rank the rows should have (``n - s``); the condition number is taken over the
            ``rank`` largest singular values, so it stays finite when ``r > rank``.
    Returns:
        ``(a, cond, residual)``: ``a`` ``(r,)``; ``cond`` = sigma_1 / sigma_rank of ``B_S``;
        ``residual`` = ``||a^T B_S - 1||_inf`` (Tandon et al. 2017, Thm. 1 condition).
    """
    B_S = np.asarray(B_S, dtype=np.float64)
    ones = np.ones(B_S.shape[1])
    a, _, _, sv = np.linalg.lstsq(B_S.T, ones, rcond=None)
    resid = float(np.max(np.abs(B_S.T @ a - ones)))
    r = min(rank, sv.size)
    cond = float(sv[0] / sv[r - 1]) if r > 0 and sv[r - 1] > 0 else float("inf")
    return a, cond, resid


class CyclicMatrixScheme(Scheme):
    """A scheme given by an ``(n, n)`` encoding matrix whose row ``i`` is supported on
    :func:`cyclic_support` ``(i, s+1, n)``; decodes any ``>= n - s`` arrivals by least squares with a
    residual check. Subclasses implement :meth:`_coefficient_matrix`.

    Decoding (:meth:`decode`): ``used`` = the arrived workers, sorted; ``weights[:, 0] = a``;
    ``cond`` = cond(B_S); :meth:`Scheme.decode` refuses it when ``||a^T B_S - 1||_inf >
    residual_tolerance`` or its error bound in the payload precision is too large (never a wrong sum).
    """

    def _coefficient_matrix(self) -> np.ndarray:
        """Return B, float64 ``(n, n)``, row ``i`` supported on ``cyclic_support(i, s+1, n)``."""
        raise NotImplementedError

    def _build(self):
        B = np.asarray(self._coefficient_matrix(), dtype=np.float64)
        self.B = B
        assignment = [[j for j in cyclic_support(i, self.s + 1, self.n) if B[i, j] != 0] for i in range(self.n)]
        return assignment, one_message_per_worker(assignment, B)

    def _decode(self, arrived):
        used = tuple(sorted(arrived))
        a, cond, _ = least_squares_decoding(self.B[list(used)], self.n - self.s)
        return Decoding(used=used, weights=a[:, None], exact=True, cond=cond)
