"""Shared machinery of the cyclic-support schemes defined by an encoding matrix B (``gc-cr``,
``gc-mds``): cyclic supports and the decoders.

Cyclic repetition (Tandon et al., "Gradient Coding", ICML 2017, §3.2): worker ``i`` computes
partitions ``i, i+1, ..., i+s (mod n)`` and sends ``b_i · [g_0 .. g_{n-1}]``. For the arrived set
``F`` the master needs ``a`` with ``a^T B_F = 1^T`` (Theorem 1 / Lemma 1 of the paper); it exists for
every ``|F| >= n - s`` when B is built as in the paper.

Decoding through the left null space (issue 13): B has rank ``n - s``, so the solutions of
``y^T B = 1^T`` over all n workers are ``y0 + Z c`` – ``y0`` the minimum-norm one, ``Z`` an orthonormal
``(n, s)`` basis of ``{z : z^T B = 0}``, ``y0 ⟂ Z``. A decoding vector of ``F`` is such a ``y`` that vanishes
on the stragglers ``S`` (the complement of F): ``Z_S c = -y0_S``, an ``|S| × s`` system. With ``|S| = s`` it
is square and its solution the unique ``a``; with fewer stragglers its minimum-norm solution gives the
minimum-norm ``a`` (``||y0 + Z c||² = ||y0||² + ||c||²``), what least squares on ``B_F`` returns. Per new
pattern that is ``O(s³ + n s)`` instead of the ``O(n³)`` dense solve; ``(y0, Z)`` is computed once per scheme
(:meth:`CyclicMatrixScheme._left_kernel`: one SVD of B, or in closed form for ``gc-mds``). Its conditioning
is the problem's: ``σ_min(Z_S) = σ_min(U_F)`` (CS decomposition, U the left singular vectors of the
non-zero singular values), so ``cond(B_F) <= cond(B) / σ_min(Z_S)``. A decoding whose coefficient
residual ``max|a^T B_F - 1|`` (computed on the sparse B, ``O(n s)``) exceeds the tolerance gets up to two
steps of iterative refinement (the same solve for the residual, through ``(B^+)^T``), then, if still
above it but within ``dense_fallback_residual``, is solved again densely (:func:`least_squares_decoding`).
Correctness never depends on the fast path: whichever decoding comes out is checked by
:meth:`Scheme.decode` as every exact decode (residual and error bound in the payload precision).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

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


def dense_cond(B: np.ndarray, used: tuple[int, ...], rank: int) -> float:
    """cond(B_S), ``B_S = B[used]``, as :func:`least_squares_decoding` reports it: sigma_1 / sigma_rank
    (inf if singular). Takes B and the rows, so that a deferred call holds no copy of B_S."""
    sv = np.linalg.svd(np.asarray(B, dtype=np.float64)[list(used)], compute_uv=False)
    r = min(rank, sv.size)
    return float(sv[0] / sv[r - 1]) if r > 0 and sv[r - 1] > 0 else float("inf")


@dataclass(frozen=True)
class LeftKernel:
    """What the null-space decoder keeps of B (module docstring), computed once per scheme.

    Attributes:
        y0: float64 ``(n,)``: the minimum-norm solution of ``y^T B = 1^T``.
        Z: float64 ``(n, d)``: orthonormal basis of the left null space ``{z : z^T B = 0}`` (d = s), ``⟂ y0``.
        pinv_t: ``t (n,) -> (n,)``: the minimum-norm ``y`` with ``y^T B = t^T`` for t in B's row space
            (``(B^+)^T t``): the iterative refinement's solve; ``y0 = pinv_t(1)``.
    """

    y0: np.ndarray
    Z: np.ndarray
    pinv_t: Callable[[np.ndarray], np.ndarray]


def _matvec(P: np.ndarray, t: np.ndarray) -> np.ndarray:
    return P @ t


def svd_left_kernel(B: np.ndarray, s: int) -> LeftKernel | None:
    """:class:`LeftKernel` of B from its SVD (``O(n³)``, once per scheme; keeps ``(B^+)^T``, n × n):
    ``Z`` the left singular vectors of the ``s`` smallest singular values, ``y0`` and ``pinv_t`` over the
    ``n - s`` largest. None when B does not have that shape numerically (an explicit B of another rank,
    or without the all-ones vector in its row space): the decoder then solves densely."""
    n = B.shape[0]
    U, sv, Vt = np.linalg.svd(B)
    rho = n - s
    if rho < 1 or not sv[rho - 1] > 0:
        return None
    if s and sv[rho] > 1e-8 * sv[0]:  # rank above n - s: no s-dimensional left null space
        return None
    P = (U[:, :rho] / sv[:rho]) @ Vt[:rho]  # (B^+)^T
    y0 = P @ np.ones(n)
    if not np.max(np.abs(y0 @ B - 1.0)) <= 1e-6:  # 1 not in the row space
        return None
    return LeftKernel(y0=y0, Z=np.ascontiguousarray(U[:, rho:]), pinv_t=partial(_matvec, P))


class CyclicMatrixScheme(Scheme):
    """A scheme given by an ``(n, n)`` encoding matrix whose row ``i`` is supported on
    :func:`cyclic_support` ``(i, s+1, n)``; decodes any ``>= n - s`` arrivals through the left null space
    of B (module docstring), solving densely by least squares when that residual exceeds the tolerance.
    Subclasses implement :meth:`_coefficient_matrix` and may give :meth:`_left_kernel` in closed form.

    Decoding (:meth:`decode`): ``used`` = the arrived workers, sorted; ``weights[:, 0] = a``;
    ``cond`` = cond(B_S) (computed when first read after the null-space solve: an SVD of B_S);
    :meth:`Scheme.decode` refuses it when ``||a^T B_S - 1||_inf > residual_tolerance`` or its error
    bound in the payload precision is too large (never a wrong sum).
    """

    #: set False to always solve densely (the reference decoder; tests compare the two)
    fast_decode: bool = True
    #: a null-space decoding whose coefficient residual (after refinement) is above ``residual_tolerance``
    #: is solved again densely when its residual is at most this, else refused as it is: the dense solve
    #: cannot rescue such a set, and it is O(n³) (gc-mds n = 1024, s = 63: its guard's 63 hopeless sets
    #: took 375 s of dense solves on the shared VM). benchmarks/decode_fallback.py (3,077 sets: gc-mds
    #: contiguous / near-contiguous blocks at n <= 128 for every s <= n/3, random gc-cr sets at n <= 256):
    #: no set the dense solve decodes needed it (0 rescued); without refinement 40 did, all with a
    #: null-space residual <= 1.2e-5
    dense_fallback_residual: float = 1e-2
    #: iterative-refinement steps of a null-space decoding above the residual tolerance
    refinement_steps: int = 2

    def _coefficient_matrix(self) -> np.ndarray:
        """Return B, float64 ``(n, n)``, row ``i`` supported on ``cyclic_support(i, s+1, n)``."""
        raise NotImplementedError

    def _left_kernel(self) -> LeftKernel | None:
        """:class:`LeftKernel` of B, or None (no fast path). Default: :func:`svd_left_kernel`."""
        return svd_left_kernel(self.B, self.s)

    def _build(self):
        B = np.asarray(self._coefficient_matrix(), dtype=np.float64)
        self.B = B
        self._kernel: LeftKernel | None | bool = False  # None: no fast path; False: not computed yet
        assignment = [[j for j in cyclic_support(i, self.s + 1, self.n) if B[i, j] != 0] for i in range(self.n)]
        return assignment, one_message_per_worker(assignment, B)

    def _decode(self, arrived):
        used = tuple(sorted(arrived))
        if self.fast_decode:
            fast = self._null_space_weights(used)
            if fast is not None and (fast[1] <= self.residual_tolerance or not fast[1] <= self.dense_fallback_residual):
                # within tolerance, or too far off for the dense solve to rescue: Scheme.decode refuses it
                return Decoding(used=used, weights=fast[0][:, None], exact=True,
                                cond=partial(dense_cond, self.B, used, self.n - self.s))
        return self._dense_decode(used)

    def _dense_decode(self, used: tuple[int, ...]) -> Decoding:
        """The reference decoder: least squares on the dense ``B_S`` (``O(n³)``)."""
        a, cond, _ = least_squares_decoding(self.B[list(used)], self.n - self.s)
        return Decoding(used=used, weights=a[:, None], exact=True, cond=cond)

    def _null_space_weights(self, used: tuple[int, ...]) -> tuple[np.ndarray, float] | None:
        """``(a, residual)``: ``a`` ``(len(used),)`` by the null-space solve (module docstring) and its
        coefficient residual ``max|a^T B_S - 1|``; None when there is no kernel, the small system is
        singular or its solution not finite, or more than ``s`` workers straggle (the caller then solves
        densely). A residual above ``residual_tolerance`` gets up to ``refinement_steps`` steps of
        iterative refinement: solve ``d^T B_S = (1 - a^T B_S)^T`` the same way (``pinv_t`` and the small
        system) and add d while the residual shrinks."""
        if self._kernel is False:
            self._kernel = self._left_kernel()
        K = self._kernel
        if K is None:
            return None
        n, Z = self.n, K.Z
        mask = np.zeros(n, dtype=bool)
        idx = np.fromiter(used, dtype=np.intp, count=len(used))
        mask[idx] = True
        S = np.flatnonzero(~mask)
        if S.size > Z.shape[1]:
            return None
        Z_S = Z[S]
        square = S.size == Z.shape[1]
        cols, vals, _ = self._sparse_coefficients()  # m = 1: cols are partitions
        cols_u, vals_u = cols[idx].ravel(), vals[idx]

        def vanishing_on_S(t):  # (y0 or pinv_t(r)) + Z c, zero on the stragglers, restricted to F
            if not S.size:
                return t[idx]
            rhs = -t[S]
            c = np.linalg.solve(Z_S, rhs) if square else np.linalg.lstsq(Z_S, rhs, rcond=None)[0]
            return (t + Z @ c)[idx]

        def residual_of(a):
            gap = 1.0 - np.bincount(cols_u, weights=(vals_u * a[:, None]).ravel(), minlength=n)
            return gap, float(np.max(np.abs(gap)))

        with np.errstate(all="ignore"):
            try:
                a = vanishing_on_S(K.y0)
                gap, resid = residual_of(a)
                for _ in range(self.refinement_steps):
                    if not resid > self.residual_tolerance:
                        break
                    a2 = a + vanishing_on_S(K.pinv_t(gap))
                    gap2, resid2 = residual_of(a2)
                    if not resid2 < resid:
                        break
                    a, gap, resid = a2, gap2, resid2
            except np.linalg.LinAlgError:
                return None
        if not np.isfinite(resid):  # overflow in a numerically singular system: the dense solve decides
            return None
        return a, resid
