"""The candidates of ``gcsim advise`` – every ``(scheme, s, m)`` that
:func:`gcsim.schemes.make_scheme` accepts for ``n`` – found without building what the answer does not
need, and grouped into timing classes.

Timing class: the vector engine (:mod:`gcsim.sim.vector`) times a scheme from its message plan (partitions
each worker computes before each message, who sends it, its payload fraction) and its quorum (groups, arrivals
needed, which are used); two candidates with the same plan and quorum have the same iteration times on the
same draws whatever their decoders do, provided the quorum is ``guaranteed`` (the decoder accepts every set
meeting it). :func:`timing_key` is that plan + quorum; candidates sharing it are simulated once
(e.g. ``ignore-stragglers``, ``pgc-fr`` and ``pgc-cr`` at the same s; ``gc-cr``, ``gc-mds`` and
``cce-cr`` m = 1). For a quorum that is not guaranteed (an exact decode by a linear solve may refuse an
ill-conditioned set and wait for one more arrival) the class's times are a lower bound, per iteration, on
the candidate's: :mod:`gcsim.advise.evaluate` checks the decodes where the ranking needs it.

What is not built, and why it gives the same answer (``thorough=False``, the default):

* ``gc-cr`` and ``pgc-cr`` (m = 1) accept every ``0 <= s < n`` (gc-cr's random construction fails with
  probability 0); their timing is fixed by (n, s): cyclic load s+1 / load 1, one full-length message per
  worker, any n-s / the first n-s arrivals. A stand-in with that plan is timed; the scheme itself is built
  only when its decodes are checked (at n = 256 building all 255 of each takes tens of seconds).
  ``tests/test_advise_fast.py`` checks the stand-ins against the built schemes.
* A pipelined scheme's plan is the same in every phase (one partition, then one full-length message per
  worker), so its first phase stands for all (the engine would otherwise build s+1 phases).
* ``gc-mds`` and ``cce-cr`` run a numerical guard at construction that decodes a list of straggler sets and
  refuses the parameters if the worst error bound (:meth:`gcsim.schemes.base.Scheme.decode_error`) exceeds
  the tolerance. The first set of gc-mds's list is the block ``{0..s-1}``, of cce-cr's the s workers with the
  smallest points (neighbours on the real line, its worst sets); advise decodes it first with the
  scheme modules' own functions (``_gc_mds_first``; ``_CceCrFirstSet``, from a few partitions' rows of the
  coefficient error: a lower bound on the guard's maximum) and, when its error bound exceeds the
  tolerance by more than the rounding the two computations can differ by, records the refusal the guard
  would give without running the guard (``gc-mds`` at n = 256: 128 guards of up to 255 least-squares
  solves each; ``cce-cr``: one straggler set instead of thousands).

What is not searched without ``thorough``: a ``cce-cr`` or ``cce-fr`` whose guard would enumerate more
than :data:`PATTERN_BUDGET` straggler sets (:func:`guard_patterns`: its near-contiguous sets number
~n·s²/2, twice that for cce-cr (worker order and point order), e.g. ~119,000 (cce-fr) or ~238,000 (cce-cr)
at n = 64, s = 60; 8 million at n = 256, s = 254) is
listed as not searched, with that count. Such a scheme computes ~n partitions per worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gcsim.errors import SchemeError
from gcsim.scenario import SchemeSpec
from gcsim.schemes import Scheme
from gcsim.schemes.base import ERROR_TOLERANCE, UNIT_ROUNDOFF, Message, Quorum

#: straggler sets a construction guard may enumerate before advise leaves the candidate out (unless
#: thorough): ~0.1-0.2 ms each in the guards' Python loops on this project's VM
PATTERN_BUDGET = 20_000
#: schemes advise does not build to time (module docstring); built on demand by :meth:`Candidate.real`
LAZY = ("gc-cr", "pgc-cr")
_NO_COEFFS = np.zeros((0, 1))


class Timing:
    """What the vector engine reads of a scheme, frozen to one phase (static: ``assignment_period`` 1):
    the plan (assignment lengths, message senders and payload fractions) and the quorum. A stand-in for
    timing only: it has no decoder."""

    assignment_period = 1

    def __init__(self, name: str, n: int, s: int, assignment: list, messages: list, quorum: Quorum):
        self.name, self.n, self.s = name, n, s
        self._assignment, self._messages, self._quorum = assignment, messages, quorum
        self.computation_load = max(len(a) for a in assignment)

    def assignment(self, iteration: int = 0):
        return self._assignment

    def messages(self, iteration: int = 0):
        return self._messages

    def quorum(self, iteration: int = 0):
        return self._quorum

    @classmethod
    def frozen(cls, scheme: Scheme) -> "Timing":
        """Phase 0 of ``scheme`` (for a pipelined scheme every phase has this plan)."""
        return cls(scheme.name, scheme.n, scheme.s, scheme.assignment(0), scheme.messages(0), scheme.quorum(0))

    @classmethod
    def one_message_each(cls, name: str, n: int, s: int, load: int, need: int, guaranteed: bool) -> "Timing":
        """Every worker computes ``load`` partitions (its cyclic support, as ranges) and sends one
        full-length message; one group, the first ``need`` arrivals used."""
        assignment = [range(w, w + load) for w in range(n)]  # the engine reads lengths only
        return cls(name, n, s, assignment, _full_messages(n),
                   Quorum(group=np.zeros(n, dtype=np.int64), need=need, pick="first", guaranteed=guaranteed))


_MESSAGES: dict[int, list] = {}


def _full_messages(n: int) -> list:
    """One full-length message per worker (message id = worker), shared by the stand-ins of one n."""
    if n not in _MESSAGES:
        _MESSAGES[n] = [Message(id=w, worker=w, coeffs=_NO_COEFFS, payload_fraction=1.0) for w in range(n)]
    return _MESSAGES[n]


def timing_key(timing) -> tuple:
    """Plan + quorum of phase 0 (module docstring; every scheme here is static or pipelined): equal keys,
    equal times on the same draws (for guaranteed quorums). ``guaranteed`` is not part of it."""
    assign, msgs = timing.assignment(0), timing.messages(0)
    d = tuple(len(a) for a in assign)
    q = timing.quorum(0)
    return (d, tuple((m.worker, d[m.worker], float(m.payload_fraction)) for m in msgs),
            tuple(int(g) for g in q.group), int(q.need), q.pick)


@dataclass
class Candidate:
    """One searched ``(scheme, s, m)`` for ``n`` workers.

    Attributes:
        spec: its :class:`~gcsim.scenario.SchemeSpec` (label ``<name>.s<s>.m<m>``, ``uncoded``).
        n: workers.
        info: ``exact``, ``computation_load`` (partitions per worker), ``communication_load`` (fraction
            of a gradient per message), as :meth:`Scheme.describe`.
        timing: what the vector engine times (the scheme, or a :class:`Timing` stand-in).
        key: :func:`timing_key`; guaranteed: its quorum is guaranteed (times = the quorum's).
        scheme: the built scheme, or None until :meth:`real` builds it (:data:`LAZY`).
    """

    spec: SchemeSpec
    n: int
    info: dict
    timing: object
    key: tuple
    guaranteed: bool
    scheme: Scheme | None = None

    @property
    def label(self) -> str:
        return self.spec.key

    def real(self) -> Scheme:
        """The scheme itself (built now for a lazy candidate). Raises SchemeError if it refuses."""
        if self.scheme is None:
            from gcsim.schemes import make_scheme
            sp = self.spec
            self.scheme = make_scheme(sp.name, self.n, sp.s, sp.m, sp.seed)
        return self.scheme


def _info(scheme) -> dict:
    return {"exact": bool(scheme.exact), "computation_load": int(scheme.computation_load),
            "communication_load": float(scheme.communication_load)}


def _built(spec: SchemeSpec, scheme: Scheme) -> Candidate:
    from gcsim.schemes.pipelined import PipelinedScheme
    if isinstance(scheme, PipelinedScheme):  # every phase has the first one's plan (module docstring)
        timing = Timing.frozen(scheme)
        key = timing_key(timing)
    elif scheme.assignment_period == 1:
        timing, key = scheme, timing_key(scheme)
    else:  # a plan that changes with the phase: timed as it is, in a class of its own
        timing, key = scheme, ("phased", spec.key, timing_key(scheme))
    return Candidate(spec=spec, n=scheme.n, info=_info(scheme), timing=timing, key=key,
                     guaranteed=bool(scheme.quorum(0).guaranteed), scheme=scheme)


def max_load(timing) -> int:
    """Most partitions a worker computes in one iteration (over the phases), as simulate_vector draws."""
    return max(max(len(a) for a in timing.assignment(t)) for t in range(timing.assignment_period))


def _lazy(spec: SchemeSpec, n: int) -> Candidate:
    s = spec.s
    if spec.name == "gc-cr":
        t = Timing.one_message_each("gc-cr", n, s, s + 1, n - s, guaranteed=False)
        info = {"exact": True, "computation_load": s + 1, "communication_load": 1.0}
    else:  # pgc-cr
        t = Timing.one_message_each("pgc-cr", n, s, 1, n - s, guaranteed=True)
        info = {"exact": False, "computation_load": 1, "communication_load": 1.0}
    return Candidate(spec=spec, n=n, info=info, timing=t, key=timing_key(t), guaranteed=t.quorum().guaranteed)


# ------------------------------------------------------------------ construction guards, screened

def guard_patterns(name: str, n: int, s: int, m: int) -> int:
    """Straggler sets the construction guard of ``cce-cr`` / ``cce-fr`` enumerates for (n, s, m) (before
    de-duplication; :func:`gcsim.schemes.patterns.straggler_sets`: all sets while C(N, t) is at most the
    scheme's exhaustive limit, else N contiguous + near-contiguous (one or two holes, every shift) + the
    random samples; ``cce-cr`` lists the structured sets twice, in worker order and in the order of its
    points on the real line, :func:`gcsim.schemes.cce_cr.guard_sets`); 0 for other schemes."""
    if name == "cce-cr":
        from gcsim.schemes.cce_cr import STABILITY_EXHAUSTIVE_MAX as most, STABILITY_SAMPLES as samples
        N = n
    elif name == "cce-fr":
        from gcsim.schemes.cce_fr import MINOR_EXHAUSTIVE_MAX as most, MINOR_SAMPLES as samples
        N = s + m
    else:
        return 0
    t = s
    if math.comb(N, t) <= most:
        return math.comb(N, t)
    count = N
    if t > 1:
        for h in (1, 2):
            if t + h > N:
                break
            count += math.comb(t + h - 2, h) * N
    return count * (2 if name == "cce-cr" else 1) + samples


def _slack(n: int) -> float:
    """Relative rounding by which two float64 evaluations of the same sums of at most ``n + 2`` terms
    can differ (twice gamma_{n+2}; Higham, Accuracy and Stability of Numerical Algorithms, §3.1)."""
    g = (n + 2) * UNIT_ROUNDOFF["float64"]
    return 2 * g / (1 - g)


def _over(res: float, bound: float, slack_res: float, slack_bound: float, dtype: str) -> bool:
    """Whether a guard computing (res, bound) within the given slacks of these values refuses."""
    if not (math.isfinite(res) and math.isfinite(bound)):
        return True
    return (res - slack_res > Scheme.residual_tolerance) or (bound - slack_bound > ERROR_TOLERANCE[dtype])


def _gc_mds_first(n: int, s: int, dtype: str) -> str | None:
    """The refusal of ``gc-mds`` (n, s) on its guard's first set (stragglers 0..s-1), or None."""
    from gcsim.schemes.cyclic import cyclic_support, least_squares_decoding
    from gcsim.schemes.gc_mds import cyclic_mds_generator
    g = cyclic_mds_generator(n, s)  # raises for n - s even, as the scheme does
    B = np.zeros((n, n))
    for i in range(n):
        B[i, cyclic_support(i, s + 1, n)] = g  # GcMds._coefficient_matrix
    used = list(range(s, n))
    BS = B[used]
    try:
        a, _, _ = least_squares_decoding(BS, n - s)
    except np.linalg.LinAlgError:
        return f"scheme gc-mds: s: stragglers [0..{s - 1}] cannot be solved for (n={n})"
    if not np.all(np.isfinite(a)):
        return f"scheme gc-mds: s: stragglers [0..{s - 1}] decode with non-finite weights (n={n})"
    # Scheme.decode_error with m = 1, coefficients C = B (residual max|a^T B_S - 1|, amp max sum|a| ||B_r||/sqrt(n))
    terms = np.abs(a)[:, None] * np.abs(BS)
    res = float(np.max(np.abs(a @ BS - 1.0)))
    amp = float(np.abs(a) @ np.sqrt(np.einsum("rj,rj->r", BS, BS))) / math.sqrt(n)
    u = UNIT_ROUNDOFF[dtype] + UNIT_ROUNDOFF["float64"]
    bound = res + u * amp
    sl = _slack(n)
    slack_res = sl * (float(terms.sum(axis=0).max()) + 1.0)
    if _over(res, bound, slack_res, slack_res + sl * u * amp, dtype):
        return (f"scheme gc-mds: s: expected a smaller s for n={n} with {dtype} payloads (stragglers [0..{s - 1}] "
                f"decode with residual {res:.1e}, error bound {bound:.1e} > {ERROR_TOLERANCE[dtype]:g}; "
                f"screened by advise on the guard's first set)")
    return None


class _CceCrFirstSet:
    """The guard of ``cce-cr`` on its first set (:func:`~gcsim.schemes.cce_cr.end_block`: the s smallest
    points, neighbours on the real line) for every (s, m) of one n: the
    weights from the scheme module's :class:`~gcsim.schemes.cce_cr.Decoder` on that set alone (the call
    the guard makes first, so the same numbers), the coefficient error from a few partitions' values
    (:func:`~gcsim.schemes.cce_cr.partition_values`)."""

    def __init__(self, n: int, dtype: str):
        from gcsim.schemes.cce_cr import default_theta
        self.n, self.dtype = n, dtype
        self.theta = default_theta(n)  # CceCr's default points

    def refused(self, s: int, m: int, partitions: int = 6) -> str | None:
        """The guard's refusal of (n, s, m) on its first set, judged from the rows of a few partitions of
        the decode's coefficient error, a lower bound on the guard's maximum; or None. Partitions, until
        one shows it: those held first and last by the first and last four stragglers (their rows lose
        holders), ``0``, ``n - 1``, ``partitions`` spread ones; then those of the other stragglers."""
        from gcsim.schemes.cce_cr import Decoder, end_block, partition_values
        n, d = self.n, s + m
        first = end_block(self.theta, s)
        W = Decoder(self.theta, n, s, m).weights(np.array(first, dtype=int)[None])[0]  # (n, m), 0 at `first`
        if not np.all(np.isfinite(W)):
            return f"scheme cce-cr: (n, s, m): stragglers {list(first)} decode with non-finite weights"
        late = set(first)
        held = lambda ws: [j for w in ws for j in (w, (w + d - 1) % n)]  # noqa: E731
        order = held(first[:4] + first[-4:]) + [0, n - 1, (s + n) // 2]
        order += np.linspace(0, n - 1, partitions).round().astype(int).tolist()
        stages = [list(dict.fromkeys(order))]
        stages.append([j for j in dict.fromkeys(held(first[4:-4])) if j not in set(stages[0])])
        sl = _slack(n)
        u = UNIT_ROUNDOFF[self.dtype] + UNIT_ROUNDOFF["float64"]
        res_lo, norms2 = 0.0, np.zeros(n)
        for js in (st for st in stages if st):
            values = partition_values(self.theta, n, s, m, js)  # (K, d, m): p_j^(v)(theta_i), holders j - q
            for j, vals in zip(js, values):
                holders = (j - np.arange(d)) % n
                keep = np.array([h not in late for h in holders.tolist()])  # arrived holders
                if not keep.any():
                    continue
                h, C = holders[keep], vals[keep]  # (h,), (h, m): the guard's C[i, j, v]
                Wr = W[h]  # (h, m)
                E = Wr.T @ C  # (m, m): the guard's E[u, j, v]
                # slack: the guard's own sum over the holders, and its C computed by the same function
                slack = sl * (np.abs(Wr).T @ (np.abs(C) * (1 + 2 * sl)) + 1.0)
                res_lo = max(res_lo, float(np.max(np.abs(E - np.eye(m)) * (1 - sl) - slack)))
                Clo = np.abs(C) * (1 - 2 * sl)  # |the guard's C| is at least this
                norms2[h] += np.sum(Clo * Clo, axis=1)
                amp_lo = float(np.max(np.abs(W).T @ np.sqrt(norms2))) / math.sqrt(n) * (1 - 4 * sl)
                bound_lo = max(res_lo, 0.0) + u * amp_lo
                if not (math.isfinite(res_lo) and math.isfinite(bound_lo)) or _over(res_lo, bound_lo, 0.0, 0.0,
                                                                                     self.dtype):
                    return (f"scheme cce-cr: (n, s, m): expected a combination whose worst-case decode error in "
                            f"{self.dtype} is <= {ERROR_TOLERANCE[self.dtype]:g} (stragglers {list(first)} give "
                            f"residual >= {res_lo:.1e}, error bound >= {bound_lo:.1e}; screened by advise on the "
                            f"guard's first set)")
        return None


# ------------------------------------------------------------------ the search space

def build_candidates(n: int, max_s: int, max_m: int, names=None, thorough: bool = False,
                     payload_dtype: str = "float64") -> tuple[list[Candidate], list, list]:
    """Every ``(scheme, s, m)`` the schemes accept for ``n`` (:func:`gcsim.advise.search.candidates`'s
    rule: ``0 <= s <= max_s``, ``1 <= m <= max_m``, a coded scheme at s = 0, m = 1 left out).

    Returns:
        ``(candidates, refused, not_searched)``: refused ``(scheme, s, m, reason)`` as before (an ``m > 1``
        refused by a scheme without m is not listed); not searched ``(scheme, s, m, reason)``: left out
        for the cost of their construction guard (module docstring; none when ``thorough``).
    """
    from gcsim.schemes import make_scheme, scheme_names
    out, refused, unsearched = [], [], []
    cce_cr = None
    for name in names or scheme_names():
        for s in range(0, min(max_s, n - 1) + 1):
            for m in range(1, max_m + 1):
                if s == 0 and m == 1 and name != "uncoded":
                    continue  # the same plan as uncoded
                label = name if name == "uncoded" else f"{name}.s{s}.m{m}"
                spec = SchemeSpec(name=name, s=s, m=m, seed=0, label=label)
                if not thorough:
                    if name in LAZY and m == 1:
                        out.append(_lazy(spec, n))
                        continue
                    why = None
                    if name == "gc-mds" and m == 1 and s > 0 and (n - s) % 2 == 1:
                        why = _gc_mds_first(n, s, payload_dtype)
                    elif name == "cce-cr" and s + m <= n:
                        cce_cr = cce_cr or _CceCrFirstSet(n, payload_dtype)
                        why = cce_cr.refused(s, m)
                    if why is not None:
                        refused.append((name, s, m, why))
                        continue
                    if (name == "cce-cr" and s + m <= n) or (name == "cce-fr" and n % (s + m) == 0):
                        count = guard_patterns(name, n, s, m)
                        if count > PATTERN_BUDGET:
                            unsearched.append((name, s, m, f"not searched: its construction guard would decode about "
                                                              f"{count:,} straggler sets (> {PATTERN_BUDGET:,}; "
                                                              f"--thorough builds it)"))
                            continue
                try:
                    sch = make_scheme(name, n, s, m, 0, payload_dtype)
                except SchemeError as e:
                    fld = (str(e).split(": ") + [""])[1]
                    if m == 1 or fld != "m":  # m > 1 refused by a scheme without m: not worth listing
                        refused.append((name, s, m, str(e)))
                    continue
                except MemoryError:
                    refused.append((name, s, m, "out of memory"))
                    continue
                out.append(_built(spec, sch))
    return out, refused, unsearched


__all__ = ["Candidate", "LAZY", "PATTERN_BUDGET", "Timing", "build_candidates", "guard_patterns", "max_load",
           "timing_key"]
