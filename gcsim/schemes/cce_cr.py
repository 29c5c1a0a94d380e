"""``cce-cr``: communication-computation efficient gradient coding, cyclic form (Ye & Abbe,
"Communication-Computation Efficient Gradient Coding", ICML 2018, §3, polynomial construction),
built in the Chebyshev basis on Chebyshev points in a strided order (issue 13).

Each partition gradient ``g_j`` is split into m chunks ``g_j^(1..m)`` (length l/m). Worker i holds
``d = s + m`` partitions ``i, ..., i+d-1 (mod n)`` (computation load d, the optimum d >= s+m of §2)
and sends ONE vector of length l/m (communication load 1/m):
``f_i = sum_j sum_u p_j^(u)(theta_i) g_j^(u)``.

The construction works in any degree-graded polynomial basis; this one uses the Chebyshev polynomials
``T_0 .. T_(n-s-1)``. For partition j, with ``nd = n - d`` and its non-holders ``j+1, ..., j+nd``:

* ``p_j^(1)(x) = 2^(nd-1) prod_{t=1}^{nd} (x - theta_{j+t})`` (vanishes at the non-holders; its
  ``T_nd`` coefficient is 1);
* ``p_j^(u) = p_j^(1) r_u`` with ``r_u = sum_{k<m} A[k, u] T_k`` of degree u-1, ``A`` fixed by the
  triangular system "the T-coefficients of ``p_j^(1) T_k`` at indices nd .. nd+m-1, combined by A,
  are the identity".

Every ``p_j^(u)`` then has degree <= n-s-1 and T-coefficients e_u at indices nd .. n-s-1, so with
``V_S[i, k] = T_k(theta_i)`` over the arrived workers S, the solution c of ``V_S c = F_S`` has rows
nd .. n-s-1 equal to ``sum_j g_j^(u)``: the decoding weights are those rows of ``V_S^-1``. The
encoding coefficients are evaluated as ``p_j^(1)(theta_i)`` in product form (relative error ~ n u,
never from expanded coefficients) times ``r_u(theta_i)`` (Clenshaw, :func:`numpy.polynomial.
chebyshev.chebval`).

Evaluation points (default, :func:`default_theta`): the n Chebyshev points of the first kind, worker
i at point ``(i q) mod n`` with q the stride of :func:`node_stride` (coprime to n, near
``n (3 - sqrt 5) / 2``). In the natural order the d holders of a partition are neighbouring points,
which crowd near +-1, and ``p_j^(1)`` grows like ``n^(2d)`` at them: the monomial construction of
the paper was refused at every n >= 32 and the Chebyshev basis alone at n = 64 for m = 4. Strided,
consecutive workers sit far apart on [-1, 1], the coefficients stay within ~n^2 of each other and
the decode is accurate to n = 256 (table in README "Schemes"). An explicit ``theta`` (any n distinct
reals) is used as given, in worker order.

Decoding weights: when theta is the Chebyshev point set (in any order) the discrete orthogonality
``sum_i T_k(x_i) T_l(x_i) = n/2 delta_kl`` (``n`` for k = l = 0) gives them from an s x s system
(:class:`Decoder`): ``w = T_k / D_k + sum_{l >= n-s} c_l T_l / D_l`` vanishing at the s stragglers,
O(n s m) per straggler set instead of an (n-s)^3 inverse; otherwise (an explicit theta) by a dense
solve with ``V_S``. ``Decoding.cond`` is cond(V_S), computed only when read.

Numerical guard: at construction the worst coefficient residual ``max |E - I|`` and error bound in
the payload precision (:meth:`Scheme.decode_error`) of the decode over straggler sets of size s are
computed (:func:`iter_guard_sets`, lazily: the s lowest points first – alone, what advise screens –
then the sets of neighbouring points nearest the ends, where the strided code's worst sets are; then
every other set when C(n, s) <= 5000, else the contiguous and near-contiguous sets at every cyclic
shift in worker order and 2000 sets drawn with seed 0) and any (n, s, m) above tolerance (1e-6 in
float64, 1e-4 in float32) is refused with a SchemeError instead of returning wrong gradients later;
the check stops at the first set over tolerance. Results are cached per (n, s, m, theta, payload
dtype) in the process. Every decode is checked as well (:meth:`Scheme.decode`).
Constraints: ``0 <= s < n``, ``m >= 1``, ``d = s + m <= n``, worst-case decode error within tolerance.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Iterator

import numpy as np
from numpy.polynomial import chebyshev as cheb

from gcsim.errors import SchemeError
from gcsim.schemes.base import UNIT_ROUNDOFF, Decoding, Loads, Scheme, one_message_per_worker
from gcsim.schemes.chebyshev import chebyshev_nodes
from gcsim.schemes.cyclic import cyclic_support
from gcsim.schemes.patterns import count_kinds, straggler_sets

#: straggler sets checked exhaustively up to this many; beyond it a seeded sample of STABILITY_SAMPLES
STABILITY_EXHAUSTIVE_MAX = 5000
STABILITY_SAMPLES = 2000
#: the guard's kind for the (near-)contiguous sets in the order of the points on the real line
ADJACENT_POINTS = "adjacent points"
_STABILITY_CACHE: dict[tuple, tuple] = {}


# ------------------------------------------------------------------ evaluation points

def node_stride(n: int) -> int:
    """The stride q of :func:`default_theta`: the q in ``1 .. n//2`` coprime to n closest to
    ``n (3 - sqrt 5) / 2`` (golden-ratio spacing, so any few consecutive workers get points spread over
    [-1, 1]); 1 for n <= 2."""
    if n <= 2:
        return 1
    target = n * (3 - math.sqrt(5)) / 2
    return min((q for q in range(1, n // 2 + 1) if math.gcd(q, n) == 1), key=lambda q: (abs(q - target), q))


def default_theta(n: int) -> np.ndarray:
    """float64 ``(n,)``: worker i's point, the Chebyshev point ``cos((2k+1) pi / 2n)`` with
    ``k = (i * node_stride(n)) mod n``."""
    return chebyshev_nodes(n)[(np.arange(n) * node_stride(n)) % n]


def is_chebyshev_set(theta: np.ndarray) -> bool:
    """Whether theta is exactly the Chebyshev point set of its length (any order): the decode may then
    use their discrete orthogonality (:class:`Decoder`)."""
    th = np.asarray(theta, dtype=np.float64).ravel()
    return bool(np.array_equal(np.sort(th), np.sort(chebyshev_nodes(th.size))))


# ------------------------------------------------------------------ the polynomials

def _times_x(c: np.ndarray) -> np.ndarray:
    """Chebyshev series ``(..., L)`` times x, same length (the top coefficient must be 0):
    ``x T_0 = T_1``, ``x T_k = (T_(k+1) + T_(k-1)) / 2``."""
    out = np.zeros_like(c)
    if c.shape[-1] >= 2:
        out[..., 1:] += 0.5 * c[..., :-1]
        out[..., 1] += 0.5 * c[..., 0]
        out[..., :-1] += 0.5 * c[..., 1:]
    return out


def _first_factor(theta: np.ndarray, n: int, s: int, m: int, js) -> np.ndarray:
    """Chebyshev coefficients ``(len(js), n-s)`` of ``p_j^(1) = 2^(nd-1) prod_t (x - theta_{j+t})``,
    built root by root as ``prod (2x - 2 theta)`` / 2 (every partial product stays O(1)-sized)."""
    nd = n - s - m
    js = np.asarray(js, dtype=int)
    c = np.zeros((js.size, n - s))
    c[:, 0] = 1.0
    for t in range(1, nd + 1):
        r = theta[(js + t) % n][:, None]
        c = 2.0 * _times_x(c) - 2.0 * r * c
    return c / 2.0 if nd >= 1 else c


def _r_coefficients(p1: np.ndarray, nd: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(A, Q)``: ``Q[:, k]`` the Chebyshev series of ``p_j^(1) T_k`` (k < m) and ``A`` ``(K, m, m)`` with
    ``sum_k A[k, u] Q[:, k]`` having T-coefficients e_u at indices nd .. nd+m-1 (a triangular solve).
    The full series, for :func:`cce_polynomials`; the scheme uses :func:`_top_window` (same A)."""
    K, L = p1.shape
    Q = np.zeros((K, m, L))
    Q[:, 0] = p1
    if m > 1:
        Q[:, 1] = _times_x(p1)
    for k in range(2, m):
        Q[:, k] = 2.0 * _times_x(Q[:, k - 1]) - Q[:, k - 2]
    M = np.transpose(Q[:, :, nd: nd + m], (0, 2, 1))  # M[j, i, k]: T_(nd+i) coefficient of p1 T_k
    A = np.linalg.solve(M, np.broadcast_to(np.eye(m), M.shape))
    return A, Q


def _top_window(theta: np.ndarray, n: int, s: int, m: int, js) -> np.ndarray:
    """``(len(js), m)``: the T-coefficients of ``p_j^(1)`` at indices nd, nd-1, ..., nd-m+1 (0 below index 0).

    Multiplying a series by ``2x - 2r`` makes its coefficient at depth a below the top (index degree - a)
    from those at depths a, a-1, a-2 only (``2x T_k = T_(k+1) + T_(k-1)``, ``2x T_0 = 2 T_1``), so the top m
    coefficients are built root by root in O(nd m), not the whole series in O(nd^2)."""
    nd = n - s - m
    js = np.asarray(js, dtype=int)
    top = np.zeros((js.size, m))
    top[:, 0] = 1.0
    for t in range(nd):  # degree t -> t + 1
        r = theta[(js + t + 1) % n]
        new = np.zeros_like(top)
        for a in range(min(m, t + 2)):  # new index k = t + 1 - a >= 0
            v = np.zeros(js.size)
            if a <= t:  # 2x T_(k-1), index t - a >= 0
                v = v + top[:, a] * (2.0 if t == a else 1.0)
            if a >= 2:  # 2x T_(k+1) -> T_k, index t + 2 - a
                v = v + top[:, a - 2]
            if a >= 1:  # -2r T_k, index t + 1 - a
                v = v - 2.0 * r * top[:, a - 1]
            new[:, a] = v
        top = new
    return top / 2.0 if nd >= 1 else top


def _r_from_window(top: np.ndarray, nd: int, m: int) -> np.ndarray:
    """``A`` ``(K, m, m)`` of :func:`_r_coefficients` from the top-m window of p1 (:func:`_top_window`):
    ``M[i, k]`` = the T_(nd+i) coefficient of ``p1 T_k`` = ``(c_(nd+i-k) + c_(k-nd-i)) / 2`` for k >= 1
    (``T_a T_k = (T_(a+k) + T_|a-k|) / 2``; the second term only when nd < m), ``c_(nd+i)`` for k = 0."""
    K = top.shape[0]

    def c(index: int) -> np.ndarray:  # T-coefficient of p1 at an index (the window holds nd-m+1 .. nd)
        depth = nd - index
        return top[:, depth] if 0 <= index and 0 <= depth < m else np.zeros(K)

    M = np.zeros((K, m, m))
    for i in range(m):
        e = nd + i
        M[:, i, 0] = c(e)
        for k in range(1, m):
            M[:, i, k] = 0.5 * (c(e - k) + (c(k - e) if e >= 1 else 0.0))
    return np.linalg.solve(M, np.broadcast_to(np.eye(m), M.shape))


def cce_polynomials(theta: np.ndarray, n: int, s: int, m: int) -> np.ndarray:
    """Chebyshev coefficients of the polynomials (module docstring).

    Args:
        theta: ``(n,)`` distinct evaluation points (worker i evaluates at ``theta[i]``).
    Returns:
        float64 ``(n, m, n-s)``: ``P[j, u]`` = coefficients of ``p_j^(u+1)`` on ``T_0 .. T_(n-s-1)``.
    """
    theta = np.asarray(theta, dtype=np.float64)
    p1 = _first_factor(theta, n, s, m, np.arange(n))
    A, Q = _r_coefficients(p1, n - s - m, m)
    return np.einsum("jku,jkl->jul", A, Q)


def partition_values(theta: np.ndarray, n: int, s: int, m: int, js) -> np.ndarray:
    """``(len(js), d, m)``: ``p_j^(u+1)(theta_i)`` for each j in js and its holders ``i = j - q mod n``,
    ``q = 0 .. d-1``: ``p_j^(1)(theta_i)`` in product form times ``r_u(theta_i)`` (Clenshaw)."""
    theta = np.asarray(theta, dtype=np.float64)
    d, nd = s + m, n - s - m
    js = np.asarray(js, dtype=int)
    holders = (js[:, None] - np.arange(d)[None, :]) % n  # (K, d)
    x = theta[holders]  # (K, d)
    v1 = np.ones_like(x)
    if nd >= 1:
        roots = theta[(js[:, None] + np.arange(1, nd + 1)[None, :]) % n]  # (K, nd)
        step = max(1, 2_000_000 // max(1, js.size * nd))  # holders per (K, step, nd) temporary
        for q in range(0, d, step):
            v1[:, q: q + step] = np.prod(2.0 * (x[:, q: q + step, None] - roots[:, None, :]), axis=2) / 2.0
    A = _r_from_window(_top_window(theta, n, s, m, js), nd, m)  # (K, m, m)
    r = np.stack([cheb.chebval(x, A[:, :, u].T[:, :, None], tensor=False) for u in range(m)], axis=-1)  # (K, d, m)
    return v1[:, :, None] * r


def cce_coefficients(theta: np.ndarray, n: int, s: int, m: int) -> np.ndarray:
    """Message coefficients ``(n, k=n, m)``: ``C[i, j, u] = p_j^(u+1)(theta_i)`` for j held by worker i
    (its cyclic support of size s+m), exactly 0 otherwise."""
    d = s + m
    vals = partition_values(theta, n, s, m, np.arange(n))  # (n, d, m)
    C = np.zeros((n, n, m))
    js = np.arange(n)
    for q in range(d):
        C[(js - q) % n, js] = vals[:, q]
    return C


# ------------------------------------------------------------------ decoding

class Decoder:
    """Decoding weights of (theta, n, s, m) for batches of straggler sets of size s.

    With theta the Chebyshev point set (:func:`is_chebyshev_set`), ``G[i, l] = T_l(theta_i)`` satisfies
    ``G^T G = diag(D)`` (``D = n, n/2, ..., n/2``), so the weights for output u (coefficient index
    k = nd + u) are ``w = G[:, k] / D_k + G[:, r:] / D[r:] c`` with the s unknowns c fixed by w = 0 at
    the stragglers (r = n - s); otherwise a dense solve with ``V_S^T``.
    """

    def __init__(self, theta: np.ndarray, n: int, s: int, m: int):
        self.theta = np.asarray(theta, dtype=np.float64)
        self.n, self.s, self.m = n, s, m
        self.r, self.nd = n - s, n - s - m
        self.orthogonal = is_chebyshev_set(self.theta)
        if self.orthogonal:
            G = _chebyshev_values_cached(self.theta.tobytes())  # (n, n)
            D = np.full(n, n / 2.0)
            D[0] = float(n)
            self._Gk = G[:, self.nd: self.r] / D[self.nd: self.r]  # (n, m)
            self._Gf = G[:, self.r:] / D[self.r:]  # (n, s)

    def weights(self, stragglers: np.ndarray) -> np.ndarray:
        """Args: stragglers ``(P, s)`` int (each row a straggler set). Returns W float64 ``(P, n, m)``:
        the weight of worker i for output chunk u (exactly 0 at the stragglers; NaN where the system is
        singular)."""
        T = np.asarray(stragglers, dtype=int)
        T = T[None] if T.ndim == 1 else T
        P, n, m, s = T.shape[0], self.n, self.m, self.s
        with np.errstate(all="ignore"):
            if self.orthogonal:
                W = np.broadcast_to(self._Gk, (P, n, m)).copy()
                if s:
                    c = _solve(self._Gf[T], -self._Gk[T])  # (P, s, m): the s x s systems
                    W += self._Gf[None] @ c
            else:
                mask = np.ones((P, n), dtype=bool)
                mask[np.arange(P)[:, None], T] = False
                S = np.nonzero(mask)[1].reshape(P, self.r)
                V = cheb.chebvander(self.theta[S], self.r - 1)  # (P, r, r)
                rhs = np.broadcast_to(np.eye(self.r)[:, self.nd:], (P, self.r, m))
                W = np.zeros((P, n, m))
                W[np.arange(P)[:, None], S] = _solve(np.swapaxes(V, 1, 2), rhs)
        if s:
            W[np.arange(P)[:, None], T] = 0.0
        return W

    def weights_for(self, used):
        """``(W, cond)`` for one arrived set (sorted worker ids): W ``(len(used), m)`` from :meth:`weights`
        when ``len(used) == n - s``, else by least squares (pinv of the T-Vandermonde of the arrived
        points, rows nd .. n-s-1); cond a callable giving cond(V_S) (``Decoding.cond`` evaluates it
        only when read)."""
        used = list(used)
        V = lambda: cheb.chebvander(self.theta[used], self.r - 1)  # noqa: E731
        cond = lambda: float(_cond(V()[None])[0])  # noqa: E731
        if len(used) == self.r:
            arrived = set(used)
            T = np.array([w for w in range(self.n) if w not in arrived], dtype=int)
            return self.weights(T[None])[0, used], cond
        with np.errstate(all="ignore"):
            X = np.linalg.pinv(V())
        return X[self.nd: self.r].T.copy(), cond


def chebyshev_values(theta: np.ndarray) -> np.ndarray:
    """``G[i, l] = T_l(x_i) = cos(l (2k_i + 1) pi / 2n)``, ``l = 0 .. n-1``, for theta the n Chebyshev
    points in any order (k_i the index of ``theta[i]`` in :func:`chebyshev_nodes`), with the angle
    reduced exactly in integers: accurate to ~u where the three-term recurrence
    (:func:`numpy.polynomial.chebyshev.chebvander`) loses ~l^2 u near +-1 – which the s x s system of
    :class:`Decoder` amplifies (residual 5e-10 instead of 8e-13 at n = 256, s = 1, m = 1)."""
    th = np.asarray(theta, dtype=np.float64)
    n = th.size
    k = np.searchsorted(-chebyshev_nodes(n), -th)  # the nodes decrease: exact matches (is_chebyshev_set)
    a = ((2 * k[:, None] + 1) * np.arange(n)[None, :]) % (4 * n)
    return np.cos(np.pi * a / (2 * n))


@functools.lru_cache(maxsize=2)
def _chebyshev_values_cached(theta_bytes: bytes) -> np.ndarray:
    """:func:`chebyshev_values` of the points given as float64 bytes, for the few point sets in use (read-only)."""
    G = chebyshev_values(np.frombuffer(theta_bytes, dtype=np.float64))
    G.flags.writeable = False
    return G


def _solve(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Batched solve; NaN for a batch containing a singular matrix (then row by row)."""
    try:
        return np.linalg.solve(A, B)
    except np.linalg.LinAlgError:
        out = np.full(B.shape, np.nan)
        for p in range(A.shape[0]):
            try:
                out[p] = np.linalg.solve(A[p], B[p])
            except np.linalg.LinAlgError:
                pass
        return out


def _cond(A: np.ndarray) -> np.ndarray:
    """Batched 2-norm condition numbers (inf where not finite)."""
    with np.errstate(all="ignore"):
        try:
            c = np.linalg.cond(A)
        except np.linalg.LinAlgError:
            c = np.full(A.shape[0], np.inf)
    return np.where(np.isfinite(c), c, np.inf)


# ------------------------------------------------------------------ the guard

def end_block(theta: np.ndarray, s: int) -> tuple[int, ...]:
    """The s workers with the smallest points (sorted ids): with the default points, the block of
    neighbouring Chebyshev points at -1, where the decode is worst (the exhaustive checks of
    ``tests/test_schemes_exactness.py``); the guard decodes it first."""
    return tuple(sorted(int(w) for w in np.argsort(np.asarray(theta), kind="stable")[:s]))


def _point_windows(theta: np.ndarray, n: int, s: int) -> Iterator[tuple[int, ...]]:
    """Straggler sets of s neighbouring points (sorted worker ids): for each window start in the order of
    the points, nearest the two ends first (0, n-s, 1, n-s-1, ...: the worst sets sit at +-1), the block
    and the sets with one or two holes inside a window of s+1 or s+2 (as
    :func:`gcsim.schemes.patterns.near_contiguous_sets`, cyclically in point order); duplicates possible."""
    if s == 0:
        return
    order = np.argsort(np.asarray(theta), kind="stable")  # workers by their point, increasing
    offsets = [np.arange(s)]
    for h in (1, 2):
        w = s + h
        if w > n or s < 2:
            break
        offsets += [np.array([q for q in range(w) if q not in holes])
                    for holes in itertools.combinations(range(1, w - 1), h)]
    offsets = np.stack(offsets)  # (variants, s), block first
    for o in dict.fromkeys(o % n for d in range(n) for o in (d, n - s - d)):
        for row in np.sort(order[(o + offsets) % n], axis=1).tolist():
            yield tuple(row)


def iter_guard_sets(theta: np.ndarray, n: int, s: int) -> Iterator[tuple[str, tuple[int, ...]]]:
    """``(kind, straggler set)`` the construction guard decodes, lazily and without repeats, in order:
    :func:`end_block`; the sets of neighbouring points nearest the ends first (:func:`_point_windows`,
    kind :data:`ADJACENT_POINTS`); then, while C(n, s) <= STABILITY_EXHAUSTIVE_MAX, every other set (all of
    kind ``exhaustive``); else the contiguous and near-contiguous sets in worker order
    (:func:`gcsim.schemes.patterns.straggler_sets`) and STABILITY_SAMPLES random sets
    (``numpy.random.default_rng(0)``; repeats of earlier sets kept, as there)."""
    exhaustive = math.comb(n, s) <= STABILITY_EXHAUSTIVE_MAX
    first = end_block(theta, s)
    seen = {first}
    yield ("exhaustive" if exhaustive else ADJACENT_POINTS), first
    for st in _point_windows(theta, n, s):
        if st not in seen:
            seen.add(st)
            yield ("exhaustive" if exhaustive else ADJACENT_POINTS), st
    for kind, st in straggler_sets(n, s, STABILITY_SAMPLES, np.random.default_rng(0), STABILITY_EXHAUSTIVE_MAX):
        if kind == "random":
            yield kind, st
        elif st not in seen:
            seen.add(st)
            yield kind, st


def guard_sets(theta: np.ndarray, n: int, s: int) -> list[tuple[str, tuple[int, ...]]]:
    """Every ``(kind, straggler set)`` of :func:`iter_guard_sets`, as a list."""
    return list(iter_guard_sets(theta, n, s))


def decode_errors(W: np.ndarray, C: np.ndarray, n: int, s: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(residual, amp)`` ``(P,)`` of weights ``W`` ``(P, n, m)`` (:meth:`Decoder.weights`) on coefficients
    C ``(n, n, m)``: ``max |E - I|`` with ``E[u, j, v] = sum_i W[i, u] C[i, j, v]`` summed over the d
    holders of j, and ``max_u sum_i |W[i, u]| ||C_i||_F / sqrt(n)`` (:meth:`Scheme.decode_error`'s)."""
    d = s + m
    js = np.arange(n)
    idx = (js[None, :] - np.arange(d)[:, None]) % n  # (d, n): holders of j
    Cg = C[idx, js[None, :]]  # (d, n, m)
    norms = np.sqrt(np.einsum("ijv,ijv->i", C, C))
    P = W.shape[0]
    with np.errstate(all="ignore"):
        # per partition j one (P m x d) @ (d x m) product over its d holders
        Wg = np.ascontiguousarray(np.transpose(W[:, idx], (2, 0, 3, 1))).reshape(n, P * m, d)
        E = (Wg @ np.ascontiguousarray(np.transpose(Cg, (1, 0, 2)))).reshape(n, P, m, m)  # E[j, p, u, v]
        E[:, :, np.arange(m), np.arange(m)] -= 1.0
        res = np.max(np.abs(E), axis=(0, 2, 3))
        amp = np.max(np.einsum("piu,i->pu", np.abs(W), norms), axis=1) / math.sqrt(n)
    res = np.where(np.isfinite(res), res, np.inf)
    amp = np.where(np.isfinite(amp), amp, np.inf)
    return res, amp


def worst_decode(theta: np.ndarray, n: int, s: int, m: int, payload_dtype: str = "float64",
                 tolerance: float = math.inf, residual_tolerance: float = math.inf
                 ) -> tuple[float, float, tuple[int, ...], dict]:
    """Worst decode over the straggler sets of :func:`guard_sets`; stops early once the error bound
    exceeds ``tolerance`` or the residual ``residual_tolerance`` (the scheme is then refused whatever
    the other sets give). The first set is decoded alone (what advise's screen of that set reproduces).

    Returns:
        ``(residual, error_bound, stragglers, kinds)``: worst ``max |E - I|``; worst error bound in
        ``payload_dtype`` (the formula of :meth:`Scheme.decode_error`, batched); the straggler set
        giving it; sets tried per kind (:data:`gcsim.schemes.patterns.PATTERN_KINDS` and
        :data:`ADJACENT_POINTS`). Cached.
    """
    from gcsim.threads import one_blas_thread

    theta = np.asarray(theta, dtype=np.float64)
    key = (n, s, m, theta.tobytes(), payload_dtype, tolerance, residual_tolerance)
    if key in _STABILITY_CACHE:
        return _STABILITY_CACHE[key]
    u = UNIT_ROUNDOFF[payload_dtype] + UNIT_ROUNDOFF["float64"]
    with one_blas_thread():  # many small solves: multi-threaded BLAS only fights for the cores
        C = cce_coefficients(theta, n, s, m)
        dec = Decoder(theta, n, s, m)
        sets_iter = iter_guard_sets(theta, n, s)  # lazily: a refusal at large s stops before ~n s^2 sets exist
        consumed: list[tuple[str, tuple[int, ...]]] = []
        worst_r, worst_b, worst_i = 0.0, -1.0, 0
        batch = max(1, 1_000_000 // max(1, n * m * (s + m) * m))
        size = 1  # the end block alone first (advise screens it)
        while True:
            chunk = list(itertools.islice(sets_iter, size))
            if not chunk:
                break
            start = len(consumed)
            consumed += chunk
            sets = np.array([st for _, st in chunk], dtype=int).reshape(len(chunk), s)
            res, amp = decode_errors(dec.weights(sets), C, n, s, m)
            bound = res + u * amp
            worst_r = max(worst_r, float(np.max(res)))
            if float(np.max(bound)) > worst_b:
                worst_b, worst_i = float(np.max(bound)), start + int(np.argmax(bound))
            if worst_b > tolerance or worst_r > residual_tolerance:
                break
            size = batch
    pairs, tried = consumed, len(consumed)
    kinds = count_kinds(k for k, _ in pairs[:tried] if k != ADJACENT_POINTS)
    kinds[ADJACENT_POINTS] = sum(1 for k, _ in pairs[:tried] if k == ADJACENT_POINTS)
    out = (worst_r, worst_b, tuple(pairs[worst_i][1]), kinds)
    _STABILITY_CACHE[key] = out
    return out


class CceCr(Scheme):
    """Cyclic CCE (Ye & Abbe 2018): load s+m, one 1/m-length message per worker, decoded in the
    Chebyshev basis (module docstring).

    Args:
        n, s, m, seed: as :class:`~gcsim.schemes.base.Scheme` (seed unused: the construction is
            deterministic).
        theta: optional ``(n,)`` distinct real evaluation points, worker i at ``theta[i]`` (default:
            :func:`default_theta`, the Chebyshev points in strided order).
    Raises:
        SchemeError: d = s+m > n, non-distinct theta, or a worst-case decode error above tolerance.
    """

    name = "cce-cr"
    exact = True
    uses_m = True
    constraints = "s + m <= n; worst-case decode error <= 1e-6 (checked)"
    examples = (dict(n=4, s=1, m=2), dict(n=8, s=2, m=2), dict(n=10, s=3, m=2), dict(n=7, s=1, m=3),
                dict(n=6, s=0, m=2), dict(n=5, s=1, m=1), dict(n=64, s=1, m=4), dict(n=64, s=2, m=2))
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
            self.theta = default_theta(n)
        else:
            th = self._theta_given
            if th.shape != (n,) or not np.all(np.isfinite(th)) or len(np.unique(th)) != n:
                raise SchemeError.param(self.name, "theta", f"{n} distinct finite reals", th.tolist())
            self.theta = th
        # both tolerances: stopping at min(1e-6, 1e-4) accepted float32 sets beyond 1e-6 unchecked (issue 13)
        resid, bound, strag, kinds = worst_decode(self.theta, n, s, m, self.payload_dtype, self.error_tolerance,
                                                  self.residual_tolerance)
        if not (resid <= self.residual_tolerance and bound <= self.error_tolerance):
            raise SchemeError.param(
                self.name, "(n, s, m)",
                f"a combination whose worst-case decode error in {self.payload_dtype} is <= {self.error_tolerance:g} "
                f"(stragglers {list(strag)} give residual {resid:.1e}, error bound {bound:.1e}; use smaller n, s or m, "
                f"or cce-fr)", (n, s, m))
        self.worst_residual, self.worst_error_bound, self.checked_kinds = resid, bound, kinds
        self._decoder = Decoder(self.theta, n, s, m)

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
            W, cond = self._decoder.weights_for(used)
        except np.linalg.LinAlgError:  # numerically singular: Scheme.decode refuses non-finite weights
            W, cond = np.full((len(used), self.m), np.nan), math.inf
        return Decoding(used=used, weights=W, exact=True, cond=cond)
