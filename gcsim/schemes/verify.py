"""Verify that a scheme decodes every straggler pattern it promises to tolerate (pure function).

Used by ``gcsim schemes check`` and by the tests. For every straggler set T with ``|T| <= s``
(exhaustively for each size t with ``C(n, t) <= max_patterns``; otherwise first the structured worst
cases – the contiguous and near-contiguous blocks at every cyclic shift, :mod:`gcsim.schemes.patterns`
– then ``samples`` sets of that size drawn with ``numpy.random.default_rng(seed)``), the
non-stragglers arrive in a random order (same generator) and the scheme is decoded on that arrival
list. Random float64 partition gradients are encoded with :meth:`Scheme.encode`, rounded to the
scheme's ``payload_dtype`` (as the real executor's workers send them) and combined with
:meth:`Scheme.combine`:

* exact schemes must decode (a refusal, :class:`~gcsim.schemes.base.Refusal`, fails the pattern with
  its reason), use only arrived messages, have coefficient residual ``max |a^T B_S - 1|``
  (:meth:`Scheme.residual`) ``<= residual_tolerance`` and relative error of the decoded sum against
  the true float64 ``sum_j g_j`` ``<=`` the payload precision's ``error_tolerance`` (both replaced by
  ``tolerance`` when one is given);
* approximate schemes must follow their stated rule: use exactly the first ``n - s`` arrivals with
  weight ``n / ((n - s) h)`` each (h = partitions a worker holds: 1 for ignore-stragglers, s+1 for the
  pipelined schemes), so the decoded vector equals that scale times the sum of the used workers'
  latest gradients; for pipelined schemes the pattern is checked at iteration ``index mod 2(s+1)``
  against an independent replay of the round-robin history (gradient of partition j computed at
  iteration t' is a fresh random vector per (t', j)), and ``Decoding.staleness`` must match it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.base import Scheme
from gcsim.schemes.patterns import PATTERN_KINDS, count_straggler_sets, straggler_sets


@dataclass
class VerifyResult:
    """Outcome of :func:`verify_scheme`.

    Attributes:
        scheme, n, s, m: what was checked; payload_dtype: the precision payloads were rounded to.
        exact: whether the scheme claims an exact sum.
        patterns_tried: straggler sets decoded.
        kinds: straggler sets decoded per kind (:data:`gcsim.schemes.patterns.PATTERN_KINDS`:
            exhaustive, contiguous, near-contiguous, random).
        exhaustive_sizes / sampled_sizes: straggler-set sizes enumerated fully / sampled.
        samples, seed: sample size per sampled size and the generator seed.
        tolerance: the pass threshold of the relative error (the residual's is ``residual_tolerance``).
        residual_tolerance: the pass threshold of the coefficient residual.
        worst_residual: largest coefficient residual (exact schemes; NaN for approximate ones).
        worst_error: largest relative error of the decoded vector against its target.
        worst_cond: largest condition number reported by a decoding.
        failed_pattern: the first straggler set that failed (sorted worker ids), or None.
        failure: why it failed, or None.
    """

    scheme: str
    n: int
    s: int
    m: int
    exact: bool
    tolerance: float
    samples: int
    seed: int
    payload_dtype: str = "float64"
    residual_tolerance: float = 1e-6
    patterns_tried: int = 0
    kinds: dict = field(default_factory=lambda: dict.fromkeys(PATTERN_KINDS, 0))
    exhaustive_sizes: list[int] = field(default_factory=list)
    sampled_sizes: list[int] = field(default_factory=list)
    worst_residual: float = float("nan")
    worst_error: float = 0.0
    worst_cond: float = 1.0
    failed_pattern: tuple[int, ...] | None = None
    failure: str | None = None

    @property
    def passed(self) -> bool:
        """True when every tried pattern met the rule (``failure`` is None)."""
        return self.failure is None


def straggler_patterns(n: int, s: int, max_patterns: int, samples: int, rng: np.random.Generator,
                       result: VerifyResult):
    """Yield straggler sets (sorted tuples) of sizes 0..s (:func:`gcsim.schemes.patterns.straggler_sets`:
    each size exhaustive while ``C(n, t) <= max_patterns``, else its structured worst cases then
    ``samples`` random sets); records which sizes were which and counts the sets per kind."""
    for t in range(s + 1):
        (result.exhaustive_sizes if math.comb(n, t) <= max_patterns else result.sampled_sizes).append(t)
        for kind, st in straggler_sets(n, t, samples, rng, max_patterns):
            result.kinds[kind] += 1
            yield st


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    scale = max(float(np.linalg.norm(want)), 1e-300)
    return float(np.linalg.norm(got - want)) / scale


def _history(scheme: Scheme, iterations: int) -> list[list[dict[int, int]]]:
    """Per iteration t and worker w: partition -> iteration it was last computed (<= t; -1 for the
    computation before step 0 of a pipelined scheme with ``warmup="reference"``)."""
    pre = getattr(scheme, "warmup", None) == "reference"
    last: list[dict[int, int]] = [dict.fromkeys(scheme.held_partitions(w) if pre else [], -1) for w in range(scheme.n)]
    out = []
    for t in range(iterations):
        for w, parts in enumerate(scheme.assignment(t)):
            for j in parts:
                last[w][j] = t
        out.append([dict(d) for d in last])
    return out


def verify_scheme(scheme: Scheme, max_patterns: int = 100_000, samples: int = 2000, seed: int = 0,
                  tolerance: float | None = None, gradient_length: int = 11, progress: bool = False) -> VerifyResult:
    """Check every straggler pattern of size <= s, BLAS pinned to one thread (see
    :func:`_verify_scheme`, which documents the arguments)."""
    from gcsim.threads import one_blas_thread

    with one_blas_thread():
        return _verify_scheme(scheme, max_patterns, samples, seed, tolerance, gradient_length, progress)


def _verify_scheme(scheme: Scheme, max_patterns: int, samples: int, seed: int, tolerance: float | None,
                   gradient_length: int, progress: bool) -> VerifyResult:
    """Check every straggler pattern of size <= s (see module docstring).

    Args:
        scheme: a built scheme.
        max_patterns: enumerate a size t exhaustively while ``C(n, t) <= max_patterns``.
        samples: random straggler sets per size beyond that.
        seed: seed of the sampling, arrival orders and gradients.
        tolerance: pass threshold for residual and relative error (default: ``scheme.residual_tolerance``
            for the residual, ``scheme.error_tolerance`` – the payload precision's – for the error).
        gradient_length: length l of the random partition gradients (odd, to exercise chunk padding).
        progress: show a tqdm bar (patterns checked, rate) on stderr; long checks are otherwise silent.
    Returns:
        :class:`VerifyResult`; stops at the first failing pattern. (Runs with BLAS pinned to one
        thread, :func:`gcsim.threads.one_blas_thread`: decoding is many small solves.)
    Raises:
        SchemeError: ``max_patterns`` or ``samples`` < 1.
    """
    if max_patterns < 1:
        raise SchemeError(f"max-patterns: expected an integer >= 1, got {max_patterns!r}")
    if samples < 1:
        raise SchemeError(f"samples: expected an integer >= 1, got {samples!r}")
    tol = scheme.error_tolerance if tolerance is None else float(tolerance)
    rtol = scheme.residual_tolerance if tolerance is None else float(tolerance)
    rng = np.random.default_rng(seed)
    n, s, k, L = scheme.n, scheme.s, scheme.k, gradient_length
    pdt = np.dtype(scheme.payload_dtype)
    res = VerifyResult(scheme=scheme.name, n=n, s=s, m=scheme.m, exact=scheme.exact, tolerance=tol,
                       samples=samples, seed=seed, payload_dtype=scheme.payload_dtype, residual_tolerance=rtol)
    period = 2 * scheme.assignment_period if not scheme.exact else 1
    if scheme.exact:
        g = rng.standard_normal((k, L))
        true_sum = g.sum(axis=0)
        payloads = [{i: scheme.encode(i, dict(enumerate(g)), 0).astype(pdt) for i in range(len(scheme.messages(0)))}]
        res.worst_residual = 0.0
    else:
        G = rng.standard_normal((period + 1, k, L))  # G[t + 1, j]: gradient of partition j computed at iteration t
        hist = _history(scheme, period)
        payloads = []
        for t in range(period):
            latest = [{j: G[tt + 1, j] for j, tt in hist[t][w].items()} for w in range(n)]
            try:
                payloads.append({mid: scheme.encode(mid, latest[msg.worker], t).astype(pdt)
                                 for mid, msg in enumerate(scheme.messages(t))})
            except SchemeError as e:
                res.failed_pattern, res.failure = (), f"iteration {t}: a message needs a gradient never computed ({e})"
                return res

    from tqdm import tqdm

    total = sum(count_straggler_sets(n, t, samples, max_patterns) for t in range(s + 1))
    patterns = tqdm(straggler_patterns(n, s, max_patterns, samples, rng, res), desc=f"checking {scheme.name}",
                    total=total, unit="pattern", disable=not progress, mininterval=0.5, dynamic_ncols=True)
    for idx, pattern in enumerate(patterns):
        res.patterns_tried += 1
        t = idx % period
        stragglers = set(pattern)
        arrived = [int(i) for i in rng.permutation(len(scheme.messages(t))) if scheme.messages(t)[i].worker not in stragglers]
        dec = scheme.decode(arrived, t)

        def fail(why: str) -> VerifyResult:
            res.failed_pattern, res.failure = tuple(pattern), why
            return res

        if dec is None:
            ref = scheme.last_refusal
            return fail("not decodable" if ref is None else f"{ref.reason} (decode refused)")
        if not set(dec.used) <= set(arrived):
            return fail(f"decoding uses messages that did not arrive: {sorted(set(dec.used) - set(arrived))}")
        res.worst_cond = max(res.worst_cond, float(dec.cond))
        out = scheme.combine(dec, payloads[t], L)
        if scheme.exact:
            r = scheme.residual(dec, t)
            err = _relative_error(out, true_sum)
            res.worst_residual = max(res.worst_residual, r)
            res.worst_error = max(res.worst_error, err)
            if not r <= rtol:
                return fail(f"coefficient residual {r:.3e} > {rtol:g}")
            if not err <= tol:
                return fail(f"relative error of the decoded sum {err:.3e} > {tol:g}")
            continue
        # approximate: the stated rule
        first = sorted(arrived[: n - s])
        if sorted(dec.used) != first:
            return fail(f"used {sorted(dec.used)}, expected the first n-s arrivals {first}")
        h = len(scheme.held_partitions(scheme.messages(t)[first[0]].worker))
        scale = n / ((n - s) * h)
        if not np.allclose(dec.weights, scale, rtol=1e-12, atol=0):
            return fail(f"weights {np.unique(dec.weights).tolist()}, expected all {scale}")
        hist_t = hist[t]
        workers = [scheme.messages(t)[i].worker for i in first]
        want = scale * sum(G[tt + 1, j] for w in workers for j, tt in hist_t[w].items())
        err = _relative_error(out, want)
        res.worst_error = max(res.worst_error, err)
        if not err <= tol:
            return fail(f"iteration {t}: decoded vector differs from the rule by {err:.3e} (relative)")
        if scheme.assignment_period > 1:
            want_stale = np.full((len(first), k), -1, dtype=int)
            for r_, w in enumerate(workers):
                for j, tt in hist_t[w].items():
                    want_stale[r_, j] = t - tt
            order = np.argsort(dec.used)
            if dec.staleness is None or not np.array_equal(np.asarray(dec.staleness)[order], want_stale):
                return fail(f"iteration {t}: staleness {dec.staleness!r}, expected {want_stale.tolist()}")
    return res
