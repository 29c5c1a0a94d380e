"""``gc-mds``: cyclic-MDS gradient coding (Raviv, Tamo, Tandon, Dimakis, "Gradient Coding from
Cyclic MDS Codes and Expander Graphs", ICML 2018, §3, real-valued construction).

Same support as ``gc-cr`` (worker i computes partitions ``i..i+s mod n``, computation load s+1, one
full-length message), but B is deterministic: row i holds the coefficients of the generator
polynomial ``g(x) = prod_{e in E} (x - alpha^e)``, ``alpha = exp(2 pi i / n)``, shifted cyclically by i,
with ``E = {(n-s+1)/2, ..., (n+s-1)/2}`` (s consecutive exponents, excluding 0). The rows generate a
cyclic [n, n-s] MDS code that contains the all-ones vector, so any n-s arrivals decode; E is
symmetric under e -> n-e, so g is real and palindromic (needs ``n - s`` odd).
Examples: n=7, s=2 -> row [1, 1.802, 1]; n=8, s=3 -> [1, 2.414, 2.414, 1].
Decode: ``a^T B_S = 1^T`` in float64, checked like every exact decode (:meth:`Scheme.decode`). B is
circulant, so its left null space is explicit: the real and imaginary parts of the Fourier vectors
``(alpha^{-i e})_i`` for ``e in E`` (``(y^T B)`` is a cyclic convolution of y with g, whose transform vanishes
only where g's does), and ``y0 = 1 / g(1)`` (every column of B sums to g(1); frequency 0 is not in E, so
``y0 ⟂ Z``). A new straggler set S then costs an ``s × s`` solve in these Fourier vectors at the
stragglers' nodes (a Vandermonde-type system in ``alpha^i``, i in S) and ``O(n s)``
(:class:`~gcsim.schemes.cyclic.CyclicMatrixScheme`, issue 13; dense least squares as fallback).
Stability guard: the worst arrived sets are those whose stragglers form a contiguous block of worker
ids (what one slow host with consecutive ids produces): cond(B_S) reaches 1e7–1e9 at n = 64–101,
s = 7–8, so float32 payloads decode with relative error up to 0.04–5 there. At construction the
contiguous block and the near-contiguous sets with one hole (:mod:`gcsim.schemes.patterns`) are
decoded – at shift 0 only: the code is cyclic, so a shifted straggler set decodes with the same
weights, shifted – and parameters whose worst error bound in the payload precision exceeds the
tolerance (:meth:`Scheme.decode_error`) are refused with a SchemeError naming s.
Constraints: ``0 <= s < n``; ``n - s`` odd (or ``s = 0``); ``m = 1``; structured worst case within tolerance.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.cyclic import CyclicMatrixScheme, LeftKernel, cyclic_support
from gcsim.schemes.patterns import contiguous_sets, near_contiguous_sets

_WORST_CACHE: dict[tuple, tuple] = {}


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


def _circulant_pinv_t(inv: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The minimum-norm y with ``y^T B = t^T`` for B circulant with first row g: ``y^T B`` is the cyclic
    convolution ``y * g``, so ``fft(y) = fft(t) / fft(g)`` off the zeros of fft(g) (E) and 0 on them;
    ``inv`` is ``1 / fft(g)`` there (0 on E)."""
    return np.fft.ifft(np.fft.fft(t) * inv).real


class GcMds(CyclicMatrixScheme):
    """Cyclic-MDS GC: B rows are cyclic shifts of a real palindromic generator polynomial."""

    name = "gc-mds"
    exact = True
    constraints = "n - s odd (or s = 0); m = 1; contiguous stragglers decode within tolerance (checked)"
    examples = (dict(n=5, s=0), dict(n=7, s=2), dict(n=8, s=3), dict(n=11, s=4))
    reference = "Raviv, Tamo, Tandon, Dimakis, Gradient Coding from Cyclic MDS Codes, ICML 2018, §3"

    def _validate(self) -> None:
        cyclic_mds_generator(self.n, self.s)

    def structured_straggler_sets(self) -> list[tuple[int, ...]]:
        """The construction check's straggler sets: the block ``{0..s-1}`` and the near-contiguous
        sets with one hole starting at worker 0 (``s`` sets; none when s = 0)."""
        if self.s == 0:
            return []
        return contiguous_sets(self.n, self.s)[:1] + near_contiguous_sets(self.n, self.s, 1, shifts=[0])

    def _check_construction(self) -> None:
        key = (self.n, self.s, self.payload_dtype)
        if key not in _WORST_CACHE:
            strag = self.structured_straggler_sets()
            arrived = [[w for w in range(self.n) if w not in set(st)] for st in strag]
            resid, bound, worst = self.worst_case(arrived)
            worst_strag = () if worst is None else tuple(w for w in range(self.n) if w not in set(worst))
            _WORST_CACHE[key] = (resid, bound, worst_strag)
        resid, bound, worst_strag = _WORST_CACHE[key]
        if not (resid <= self.residual_tolerance and bound <= self.error_tolerance):
            raise SchemeError.param(
                self.name, "s", f"a smaller s for n={self.n} with {self.payload_dtype} payloads (stragglers "
                f"{list(worst_strag)} decode with residual {resid:.1e}, error bound {bound:.1e} > "
                f"{self.error_tolerance:g}; or use gc-fr)", self.s)
        self.worst_residual, self.worst_error_bound = resid, bound
        #: straggler sets of each kind checked at construction (cyclic code: one shift stands for all)
        self.checked_kinds = {"exhaustive": 0, "contiguous": min(1, self.s), "near-contiguous": max(0, self.s and
                              len(self.structured_straggler_sets()) - 1), "random": 0}

    def _left_kernel(self) -> LeftKernel:
        """:class:`~gcsim.schemes.cyclic.LeftKernel` in closed form (module docstring), ``O(n s)``:
        ``y0 = 1/g(1)``, Z the orthonormal real Fourier basis of the frequencies E (cos and sin of
        ``2 pi i e / n`` for ``e < n/2``, ``(-1)^i`` for ``e = n/2``; angles reduced mod n before scaling,
        so Z is orthonormal to rounding), ``pinv_t`` by FFT (:func:`_circulant_pinv_t`)."""
        n, s = self.n, self.s
        g = cyclic_mds_generator(n, s)
        ghat = np.fft.fft(np.concatenate([g, np.zeros(n - s - 1)]))
        inv = np.zeros(n, dtype=complex)
        keep = np.ones(n, dtype=bool)
        keep[(n - s + 1) // 2: (n + s - 1) // 2 + 1] = False  # E (symmetric: -E = E)
        with np.errstate(all="ignore"):  # |g(alpha^k)| underflows near E for large s: no inverse there
            inv[keep] = 1.0 / ghat[keep]
        inv[~np.isfinite(inv)] = 0.0
        i = np.arange(n)
        cols = []
        for e in range((n - s + 1) // 2, (n + s - 1) // 2 + 1):
            if 2 * e < n:
                angle = 2 * np.pi * ((i * e) % n) / n
                cols += [np.sqrt(2 / n) * np.cos(angle), np.sqrt(2 / n) * np.sin(angle)]
            elif 2 * e == n:
                cols.append(np.where(i % 2 == 0, 1.0, -1.0) / np.sqrt(n))
        Z = np.stack(cols, axis=1) if cols else np.zeros((n, 0))
        return LeftKernel(y0=np.full(n, 1.0 / g.sum()), Z=Z, pinv_t=partial(_circulant_pinv_t, inv))

    def _coefficient_matrix(self) -> np.ndarray:
        g = cyclic_mds_generator(self.n, self.s)
        B = np.zeros((self.n, self.n))
        for i in range(self.n):
            B[i, cyclic_support(i, self.s + 1, self.n)] = g
        return B
