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

Numerical guard: at construction the worst coefficient residual ``max |E - I|`` of the decode over
straggler sets of size s is computed (exhaustively when C(n, s) <= 5000, else on 2000 sets drawn with
seed 0) and any (n, s, m) above ``residual_tolerance`` (1e-6) is refused with a SchemeError instead of
returning wrong gradients later (e.g. (30, 3, 3) reaches 6e-4 and is refused; (20, 2, 2) reaches 7e-10). Results are cached
per (n, s, m, theta) in the process. Each decode is also residual-checked (``None`` above tolerance).
Constraints: ``0 <= s < n``, ``m >= 1``, ``d = s + m <= n``, worst-case decode error <= 1e-6.
"""

from __future__ import annotations

import math

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.base import Decoding, Scheme, one_message_per_worker
from gcsim.schemes.chebyshev import chebyshev_nodes, vandermonde
from gcsim.schemes.cyclic import cyclic_support

#: straggler sets checked exhaustively up to this many; beyond it a seeded sample of STABILITY_SAMPLES
STABILITY_EXHAUSTIVE_MAX = 5000
STABILITY_SAMPLES = 2000
_STABILITY_CACHE: dict[tuple, float] = {}


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


def worst_decode_residual(theta: np.ndarray, n: int, s: int, m: int, tolerance: float = math.inf) -> float:
    """Worst ``max |E - I|`` over straggler sets of size s (exhaustive when C(n, s) <= 5000, else 2000
    sets drawn with ``numpy.random.default_rng(0)``); stops early once above ``tolerance``. Cached."""
    key = (n, s, m, np.asarray(theta, dtype=np.float64).tobytes(), tolerance)
    if key in _STABILITY_CACHE:
        return _STABILITY_CACHE[key]
    C = cce_coefficients(theta, n, s, m)
    r = n - s
    if math.comb(n, s) <= STABILITY_EXHAUSTIVE_MAX:
        import itertools
        sets = np.array([[w for w in range(n) if w not in set(st)] for st in itertools.combinations(range(n), s)],
                        dtype=int).reshape(-1, r)
    else:
        rng = np.random.default_rng(0)
        sets = np.sort(np.stack([rng.permutation(n)[:r] for _ in range(STABILITY_SAMPLES)]), axis=1)
    nd = n - s - m
    target = np.eye(m)[:, None, :]  # (m, 1, m) broadcast over partitions
    worst = 0.0
    batch = max(1, 2_000_000 // max(1, r * n * m))
    for start in range(0, len(sets), batch):
        S = sets[start: start + batch]
        V = np.vander(theta[S].ravel(), r, increasing=True).reshape(len(S), r, r)
        with np.errstate(all="ignore"):
            try:
                X = np.linalg.inv(V)
            except np.linalg.LinAlgError:
                worst = math.inf
                break
            W = X[:, nd: nd + m, :]  # (P, m, r)
            E = np.einsum("pur,prjv->pujv", W, C[S])
        err = np.abs(E - target)
        w = float(np.max(err)) if np.all(np.isfinite(err)) else math.inf
        worst = max(worst, w)
        if worst > tolerance:
            break
    _STABILITY_CACHE[key] = worst
    return worst


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
    reference = "Ye & Abbe, Communication-Computation Efficient Gradient Coding, ICML 2018, §3"

    def __init__(self, n: int, s: int, m: int = 1, seed: int = 0, theta=None):
        self._theta_given = None if theta is None else np.array(theta, dtype=np.float64).ravel()
        super().__init__(n, s, m, seed)

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
        worst = worst_decode_residual(self.theta, n, s, m, self.residual_tolerance)
        if not worst <= self.residual_tolerance:
            raise SchemeError.param(
                self.name, "(n, s, m)",
                f"a combination whose worst-case decode error is <= {self.residual_tolerance:g} "
                f"(a checked straggler set gives {worst:.1e}; use smaller n, s or m, or cce-fr)", (n, s, m))
        self.worst_residual = worst

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
        W, cond = decoding_weights(self.theta[list(used)], self.n, self.s, self.m)
        dec = Decoding(used=used, weights=W, exact=True, cond=cond)
        if not self.residual(dec) <= self.residual_tolerance:
            return None
        return dec
