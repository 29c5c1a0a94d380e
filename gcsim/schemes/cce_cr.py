"""``cce-cr``: communication-computation efficient gradient coding, cyclic form (Ye & Abbe,
"Communication-Computation Efficient Gradient Coding", ICML 2018, §3, polynomial construction).

Each partition gradient ``g_j`` is split into m chunks ``g_j^(1..m)`` (length l/m). Worker i holds
``d = s + m`` partitions ``i, ..., i+d-1 (mod n)`` (computation load d, the optimum d >= s+m of §2)
and sends ONE vector of length l/m (communication load 1/m):
``f_i = sum_j sum_u p_j^(u)(theta_i) g_j^(u)`` where, for partition j,
``p_j^(1)(x) = prod_{t=1}^{n-d} (x - theta_{j+t})`` (vanishes at the workers not holding j) and
``p_j^(u)(x) = x p_j^(u-1)(x) - c p_j^(1)(x)``, c the coefficient of ``x^(n-d-1)`` in ``p_j^(u-1)``.
Every ``p_j^(u)`` has degree <= n-s-1 and its coefficients of degrees n-d .. n-s-1 form the unit
vector e_u; hence with ``V_S`` the Vandermonde matrix of the arrived theta's (columns 1, x, ...,
x^(n-s-1)), the solution C of ``V_S C = F_S`` has rows n-d .. n-s-1 equal to ``sum_j g_j^(u)``.
Evaluation points: Chebyshev points (any distinct reals are valid; these condition ``V_S`` best), or
an explicit ``theta``.

Numerical guard: at construction the worst coefficient residual ``max |E - I|`` and error bound in
the payload precision (:meth:`Scheme.decode_error`) of the decode over straggler sets of size s are
computed (exhaustively when C(n, s) <= 5000, else on the contiguous and near-contiguous sets at
every cyclic shift – where the worst sets are: an exhaustive check found accepted (18,6,6), (18,8,6),
(22,6,2), (26,8,1) failing only on near-contiguous sets – then 2000 sets drawn with seed 0) and any
(n, s, m) above tolerance (1e-6 in float64, 1e-4 in float32) is refused with a SchemeError instead
of returning wrong gradients later (e.g. (30, 3, 3) reaches 6e-4 and is refused; (20, 2, 2) reaches
7e-10). Results are cached per (n, s, m, theta, payload dtype) in the process. Every decode is checked
as well (:meth:`Scheme.decode`).
Constraints: ``0 <= s < n``, ``m >= 1``, ``d = s + m <= n``, worst-case decode error within tolerance.
"""

from __future__ import annotations

import math

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.base import UNIT_ROUNDOFF, Decoding, Loads, Scheme, one_message_per_worker
from gcsim.schemes.chebyshev import chebyshev_nodes, vandermonde
from gcsim.schemes.cyclic import cyclic_support
from gcsim.schemes.patterns import count_kinds, straggler_sets

#: straggler sets checked exhaustively up to this many; beyond it a seeded sample of STABILITY_SAMPLES
STABILITY_EXHAUSTIVE_MAX = 5000
STABILITY_SAMPLES = 2000
_STABILITY_CACHE: dict[tuple, tuple] = {}


def cce_polynomials(theta: np.ndarray, n: int, s: int, m: int) -> np.ndarray:
    """Coefficients of the Ye & Abbe (2018, §3) polynomials.

    Args:
        theta: ``(n,)`` distinct evaluation points (worker i evaluates at ``theta[i]``).
    Returns:
        float64 ``(n, m, n-s)``: ``P[j, u]`` = ascending-degree coefficients of ``p_j^(u+1)``.
    """
    d = s + m
    nd = n - d
    P = np.zeros((n, m, n - s))
    for j in range(n):
        roots = theta[[(j + t) % n for t in range(1, nd + 1)]]
        p1 = np.zeros(n - s)
        p1[: nd + 1] = np.poly(roots)[::-1] if nd > 0 else 1.0
        P[j, 0] = p1
        prev = p1
        for u in range(1, m):
            c = prev[nd - 1] if nd >= 1 else 0.0
            nxt = np.zeros(n - s)
            nxt[1:] = prev[:-1]  # x * prev (degree stays <= n-s-1)
            nxt -= c * p1
            P[j, u] = nxt
            prev = nxt
    return P


def cce_coefficients(theta: np.ndarray, n: int, s: int, m: int) -> np.ndarray:
    """Message coefficients ``(n, k=n, m)``: ``C[i, j, u] = p_j^(u+1)(theta_i)`` for j held by worker i
    (its cyclic support of size s+m), exactly 0 otherwise."""
    P = cce_polynomials(theta, n, s, m)
    C = np.zeros((n, n, m))
    powers = vandermonde(theta, n - s)  # (n, n-s)
    for i in range(n):
        for j in cyclic_support(i, s + m, n):
            C[i, j] = P[j] @ powers[i]
    return C


def decoding_weights(theta_S: np.ndarray, n: int, s: int, m: int) -> tuple[np.ndarray, float]:
    """Weights ``(|S|, m)`` and cond(V_S): rows n-d .. n-s-1 of pinv(V_S), transposed (Ye & Abbe §3)."""
    V = vandermonde(theta_S, n - s)
    nd = n - s - m
    if V.shape[0] == V.shape[1]:
        X = np.linalg.inv(V)
    else:
        X = np.linalg.pinv(V)
    return X[nd: nd + m].T.copy(), float(np.linalg.cond(V))


def worst_decode(theta: np.ndarray, n: int, s: int, m: int, payload_dtype: str = "float64",
                 tolerance: float = math.inf) -> tuple[float, float, tuple[int, ...], dict]:
    """Worst decode over straggler sets of size s (:func:`gcsim.schemes.patterns.straggler_sets`: every
    set while C(n, s) <= 5000; else the contiguous and near-contiguous sets at every cyclic shift, then
    2000 drawn with ``numpy.random.default_rng(0)``); stops early once the bound exceeds ``tolerance``.

    Returns:
        ``(residual, error_bound, stragglers, kinds)``: worst ``max |E - I|``; worst error bound in
        ``payload_dtype`` (the formula of :meth:`Scheme.decode_error`, batched); the straggler set
        giving it; sets tried per kind (:data:`gcsim.schemes.patterns.PATTERN_KINDS`). Cached.
    """
    key = (n, s, m, np.asarray(theta, dtype=np.float64).tobytes(), payload_dtype, tolerance)
    if key in _STABILITY_CACHE:
        return _STABILITY_CACHE[key]
    C = cce_coefficients(theta, n, s, m)
    norms = np.sqrt(np.einsum("ijv,ijv->i", C, C))  # (n,) ||C_i||_F
    u = UNIT_ROUNDOFF[payload_dtype] + UNIT_ROUNDOFF["float64"]
    r = n - s
    pairs = list(straggler_sets(n, s, STABILITY_SAMPLES, np.random.default_rng(0), STABILITY_EXHAUSTIVE_MAX))
    strag = [st for _, st in pairs]
    sets = np.array([[w for w in range(n) if w not in set(st)] for st in strag], dtype=int).reshape(-1, r)
    nd = n - s - m
    target = np.eye(m)[:, None, :]  # (m, 1, m) broadcast over partitions
    worst_r, worst_b, worst_i, tried = 0.0, -1.0, 0, 0
    batch = max(1, 2_000_000 // max(1, r * n * m))
    for start in range(0, len(sets), batch):
        S = sets[start: start + batch]
        V = np.vander(theta[S].ravel(), r, increasing=True).reshape(len(S), r, r)
        with np.errstate(all="ignore"):
            try:
                X = np.linalg.inv(V)
            except np.linalg.LinAlgError:
                X = np.full_like(V, np.nan)
            W = X[:, nd: nd + m, :]  # (P, m, r)
            E = np.einsum("pur,prjv->pujv", W, C[S])
            res = np.max(np.abs(E - target), axis=(1, 2, 3))
            amp = np.max(np.abs(W) @ norms[S][:, :, None], axis=(1, 2)) / math.sqrt(n)
        res = np.where(np.isfinite(res), res, np.inf)
        bound = res + u * np.where(np.isfinite(amp), amp, np.inf)
        tried = start + len(S)
        worst_r = max(worst_r, float(np.max(res)))
        if float(np.max(bound)) > worst_b:
            worst_b, worst_i = float(np.max(bound)), start + int(np.argmax(bound))
        if worst_b > tolerance or worst_r > tolerance:
            break
    kinds = count_kinds(k for k, _ in pairs[:tried])
    out = (worst_r, worst_b, tuple(strag[worst_i]), kinds)
    _STABILITY_CACHE[key] = out
    return out


class CceCr(Scheme):
    """Cyclic CCE (Ye & Abbe 2018): load s+m, one 1/m-length message per worker, Vandermonde decode.

    Args:
        n, s, m, seed: as :class:`~gcsim.schemes.base.Scheme` (seed unused: the construction is
            deterministic).
        theta: optional ``(n,)`` distinct real evaluation points (default: Chebyshev points).
    Raises:
        SchemeError: d = s+m > n, non-distinct theta, or a worst-case decode error above tolerance.
    """

    name = "cce-cr"
    exact = True
    uses_m = True
    constraints = "s + m <= n; worst-case decode error <= 1e-6 (checked)"
    examples = (dict(n=4, s=1, m=2), dict(n=8, s=2, m=2), dict(n=10, s=3, m=2), dict(n=7, s=1, m=3),
                dict(n=6, s=0, m=2), dict(n=5, s=1, m=1))
    reference = "Ye & Abbe, Communication-Computation Efficient Gradient Coding, ICML 2018, §3"

    @classmethod
    def declared_loads(cls, n, s, m):
        """d = s + m partitions computed and held (Ye & Abbe 2018, §3: d >= s + m)."""
        return Loads(computation=s + m, held=s + m)

    def __init__(self, n: int, s: int, m: int = 1, seed: int = 0, payload_dtype: str = "float64", theta=None):
        self._theta_given = None if theta is None else np.array(theta, dtype=np.float64).ravel()
        super().__init__(n, s, m, seed, payload_dtype)

    def _validate(self) -> None:
        n, s, m = self.n, self.s, self.m
        if s + m > n:
            raise SchemeError.param(self.name, "m", f"1 <= m <= n - s = {n - s} (load d = s + m must not exceed n)", m)
        if self._theta_given is None:
            self.theta = chebyshev_nodes(n)
        else:
            th = self._theta_given
            if th.shape != (n,) or not np.all(np.isfinite(th)) or len(np.unique(th)) != n:
                raise SchemeError.param(self.name, "theta", f"{n} distinct finite reals", th.tolist())
            self.theta = th
        tol = min(self.residual_tolerance, self.error_tolerance)
        resid, bound, strag, kinds = worst_decode(self.theta, n, s, m, self.payload_dtype, tol)
        if not (resid <= self.residual_tolerance and bound <= self.error_tolerance):
            raise SchemeError.param(
                self.name, "(n, s, m)",
                f"a combination whose worst-case decode error in {self.payload_dtype} is <= {self.error_tolerance:g} "
                f"(stragglers {list(strag)} give residual {resid:.1e}, error bound {bound:.1e}; use smaller n, s or m, "
                f"or cce-fr)", (n, s, m))
        self.worst_residual, self.worst_error_bound, self.checked_kinds = resid, bound, kinds

    @property
    def load(self) -> int:
        """d = s + m partitions per worker."""
        return self.s + self.m

    def _build(self):
        C = cce_coefficients(self.theta, self.n, self.s, self.m)
        assignment = [cyclic_support(i, self.load, self.n) for i in range(self.n)]
        return assignment, one_message_per_worker(assignment, C, self.m)

    def _decode(self, arrived):
        used = tuple(sorted(arrived))
        try:
            W, cond = decoding_weights(self.theta[list(used)], self.n, self.s, self.m)
        except np.linalg.LinAlgError:  # numerically singular: Scheme.decode refuses non-finite weights
            W, cond = np.full((len(used), self.m), np.nan), math.inf
        return Decoding(used=used, weights=W, exact=True, cond=cond)
