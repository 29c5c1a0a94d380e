"""``cce-fr``: block (fractional-repetition) form of communication-computation efficient gradient
coding (Ye & Abbe, "Communication-Computation Efficient Gradient Coding", ICML 2018, §3–4: the
trade-off d >= s + m, here met with a repetition layout; the block layout is not named so in the paper).

Constraints: ``(s+m)`` divides n, ``m >= 1``. Workers form n/d groups of ``d = s+m`` consecutive
workers; all workers of group q compute the same d partitions ``{qd, ..., qd+d-1}`` (computation load
d) and their exact sum ``G_q``; ``G_q`` is split into m chunks ``G_q^(1..m)`` and worker r of the group
sends ``sum_u Lambda[r, u] G_q^(u)`` (communication load 1/m), with ``Lambda`` (d × m) the Vandermonde
matrix on d Chebyshev points, so every m × m minor is nonsingular (a (d, m) MDS code). The master
decodes from any m arrivals per group (an m × m solve; the m lowest-indexed arrived workers are used),
so it tolerates any s stragglers and often more. With m = 1 it is ``gc-fr`` (Tandon et al. 2017, §3.1).

Stability guard: the m × m minors of a Vandermonde ``Lambda`` grow ill-conditioned fast with m
(Gautschi, Numer. Math. 1975): in float64 the decode error passes 1e-6 near m = 24–27 (s = 3..0) and
is garbage at m = 40–48 (cond 5e17); with float32 payloads the usable range ends near m = 12–16. At
construction every row subset a group can decode from is checked – all of them while C(d, s) <= 2000,
else the contiguous and near-contiguous ones (:mod:`gcsim.schemes.patterns`: the worst minors take
clustered Chebyshev nodes) and 200 random ones – and parameters whose worst minor's error bound
(:meth:`Scheme.decode_error`, in the payload precision) exceeds the tolerance are refused with a
SchemeError naming ``m`` and the largest m that passes for this s. Every decode is checked as well.
"""

from __future__ import annotations

import numpy as np

import math

from gcsim.errors import SchemeError
from gcsim.schemes.base import ERROR_TOLERANCE, UNIT_ROUNDOFF, Decoding, Loads, Quorum, Scheme, one_message_per_worker
from gcsim.schemes.chebyshev import chebyshev_nodes, vandermonde
from gcsim.schemes.patterns import count_kinds, straggler_sets

#: row subsets of Lambda checked exhaustively up to this many; beyond it structured + MINOR_SAMPLES random
MINOR_EXHAUSTIVE_MAX = 2000
MINOR_SAMPLES = 200
_MINOR_CACHE: dict[tuple, tuple] = {}


def worst_minor(n: int, s: int, m: int, payload_dtype: str) -> tuple[float, float, tuple[int, ...], dict]:
    """Worst decode of ``cce-fr`` over the m × m minors of ``Lambda`` (every group decodes from one).

    Args:
        n: workers; s, m: as the scheme (group size d = s + m); payload_dtype: ``"float64"``/``"float32"``.
    Returns:
        ``(residual, error_bound, rows, kinds)``: the worst coefficient residual ``max |W L - I|`` and
        the worst error bound (the formula of :meth:`Scheme.decode_error` for the decode in which every
        group uses the same rows: ``residual + (u + u_64) sqrt(n/d) max_u sum_r |W[u, r]| ||L_r||``),
        the rows (positions in the group) of the worst minor, and how many row sets of each kind
        (:data:`gcsim.schemes.patterns.PATTERN_KINDS`) were checked. Cached per argument tuple.
    """
    key = (n, s, m, payload_dtype)
    if key in _MINOR_CACHE:
        return _MINOR_CACHE[key]
    d = s + m
    Lam = vandermonde(chebyshev_nodes(d), m)  # (d, m)
    pairs = list(straggler_sets(d, s, MINOR_SAMPLES, np.random.default_rng(0), MINOR_EXHAUSTIVE_MAX))
    kinds = count_kinds(k for k, _ in pairs)
    rows = np.array([[r for r in range(d) if r not in set(st)] for _, st in pairs], dtype=int).reshape(len(pairs), m)
    L = Lam[rows]  # (P, m, m)
    with np.errstate(all="ignore"):
        try:
            W = np.linalg.inv(L)  # (P, m, m): out_u = sum_r W[u, r] payload_r
        except np.linalg.LinAlgError:
            W = np.full_like(L, np.nan)
        resid = np.max(np.abs(W @ L - np.eye(m)), axis=(1, 2))
        amp = np.max(np.abs(W) @ np.linalg.norm(L, axis=2)[:, :, None], axis=(1, 2)) * math.sqrt(n / d)
    resid = np.where(np.isfinite(resid), resid, np.inf)
    bound = resid + (UNIT_ROUNDOFF[payload_dtype] + UNIT_ROUNDOFF["float64"]) * np.where(np.isfinite(amp), amp, np.inf)
    i = int(np.argmax(bound))
    out = (float(np.max(resid)), float(bound[i]), tuple(int(r) for r in rows[i]), kinds)
    _MINOR_CACHE[key] = out
    return out


def _rows_text(rows: tuple[int, ...], d: int) -> str:
    """Short text for a row set of a group of d: the list, or 'all d' / a first..last range."""
    if len(rows) == d:
        return f"0..{d - 1} (all)"
    return str(list(rows)) if len(rows) <= 8 else f"[{rows[0]}, {rows[1]}, ..., {rows[-1]}] ({len(rows)} rows)"


class CceFr(Scheme):
    """Block CCE: groups of d = s+m workers share d partitions; each sends one 1/m-length MDS chunk."""

    name = "cce-fr"
    exact = True
    uses_m = True
    constraints = "(s+m) divides n; worst m x m minor of Lambda decodes within tolerance (checked)"
    reference = "Ye & Abbe, Communication-Computation Efficient Gradient Coding, ICML 2018, §3 (block form)"
    examples = (dict(n=6, s=1, m=2), dict(n=8, s=2, m=2), dict(n=9, s=1, m=2), dict(n=6, s=2, m=1), dict(n=6, s=0, m=3))

    @classmethod
    def declared_loads(cls, n, s, m):
        """d = s + m partitions computed and held by every worker of a group (Ye & Abbe 2018: d >= s + m)."""
        return Loads(computation=s + m, held=s + m)

    def _validate(self) -> None:
        d = self.s + self.m
        if self.n % d != 0:
            raise SchemeError.param(self.name, "s+m", f"a divisor of n={self.n} (s={self.s}, m={self.m})", d)
        resid, bound, rows, kinds = worst_minor(self.n, self.s, self.m, self.payload_dtype)
        if not (resid <= self.residual_tolerance and bound <= self.error_tolerance):
            ok = self.largest_stable_m(self.n, self.s, self.m - 1, self.payload_dtype)
            raise SchemeError.param(
                self.name, "m", f"m <= {ok} for s={self.s} with {self.payload_dtype} payloads (the m x m minor of "
                f"Lambda on group rows {_rows_text(rows, self.group_size)} decodes with error bound {bound:.1e} > "
                f"{self.error_tolerance:g})",
                self.m)
        self.worst_residual, self.worst_error_bound = resid, bound
        #: row sets of each kind checked at construction; every minor was checked iff only "exhaustive"
        self.checked_kinds = kinds
        self.minors_exhaustive = sum(kinds.values()) == kinds.get("exhaustive", 0)

    @staticmethod
    def largest_stable_m(n: int, s: int, upto: int, payload_dtype: str = "float64") -> int:
        """Largest ``m' <= upto`` whose worst minor (:func:`worst_minor`, same n and s) is within
        tolerance (binary search; m' = 1 always is: Lambda is a column of ones)."""
        lo, hi = 1, max(1, upto)
        tol = ERROR_TOLERANCE[payload_dtype]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            r, b, _, _ = worst_minor(n, s, mid, payload_dtype)
            if r <= Scheme.residual_tolerance and b <= tol:
                lo = mid
            else:
                hi = mid - 1
        return lo

    @property
    def group_size(self) -> int:
        """d = s + m workers (and partitions) per group."""
        return self.s + self.m

    def group_of(self, worker: int) -> int:
        """Group index of a worker (workers qd .. qd+d-1 form group q)."""
        return worker // self.group_size

    def _build(self):
        d, m = self.group_size, self.m
        self.Lambda = vandermonde(chebyshev_nodes(d), m)  # (d, m)
        assignment = [list(range(self.group_of(i) * d, self.group_of(i) * d + d)) for i in range(self.n)]
        C = np.zeros((self.n, self.k, m))
        for i, parts in enumerate(assignment):
            C[i, parts, :] = self.Lambda[i % d]
        return assignment, one_message_per_worker(assignment, C, m)

    @property
    def min_arrivals(self) -> int:
        """m · n / (s+m): m arrivals per group can decode (an m × m Vandermonde solve)."""
        return self.m * (self.n // self.group_size)

    def quorum(self, iteration: int = 0) -> Quorum:
        """m arrivals per group of s+m (the m lowest-indexed arrived: an m × m solve). ``guaranteed`` (never
        refused, so the vector engine need not call decode) only when the construction checked every
        minor (C(s+m, s) <= :data:`MINOR_EXHAUSTIVE_MAX`); with sampled minors each decode is checked."""
        return Quorum(group=np.arange(self.n) // self.group_size, need=self.m, pick="lowest",
                      guaranteed=bool(self.minors_exhaustive))

    def _decode(self, arrived):
        d, m = self.group_size, self.m
        per_group: dict[int, list[int]] = {}
        for a in sorted(arrived):
            per_group.setdefault(self.group_of(a), []).append(a)
        if len(per_group) < self.n // d or any(len(v) < m for v in per_group.values()):
            return None
        used, blocks, cond = [], [], 1.0
        for q in sorted(per_group):
            rows = per_group[q][:m]
            L = self.Lambda[[r % d for r in rows]]  # (m, m): payload_r = sum_u L[r, u] G^(u)
            cond = max(cond, float(np.linalg.cond(L)))
            try:
                blocks.append(np.linalg.inv(L).T)  # weights[r, u] = (L^-1)[u, r]
            except np.linalg.LinAlgError:  # numerically singular: Scheme.decode refuses non-finite weights
                blocks.append(np.full((m, m), np.nan))
            used.extend(rows)
        return Decoding(used=tuple(used), weights=np.vstack(blocks), exact=True, cond=cond)
