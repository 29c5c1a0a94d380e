"""Issue 13, deliverable 3: gc-cr and gc-mds decode a new arrival pattern through the left null space of
B (an s × s solve and O(n s), :mod:`gcsim.schemes.cyclic`) instead of a dense least-squares solve, and the
result passes the same checks as the dense one.

* random arrival patterns (seeded) at several (n, s), n = 12 … 256 and one n = 1024 case: the fast decoding
  vector satisfies ``a^T B_F = 1`` within the tolerance, as the dense one does, equals it (the solution is
  unique for n - s arrivals; with more, both are the minimum-norm one), and decodes random float64
  partition gradients to their sum; no dense solve was needed;
* a fast residual above the tolerance is solved again densely; one far above it is refused as it is;
* ``Decoding.cond`` is still cond(B_F), computed when first read; the sparse ``decode_error`` equals the
  dense formula for every kind of static scheme;
* gc-mds's closed-form kernel (Fourier vectors of E, FFT pseudo-inverse) is a left kernel of B.

The conformance kit (tests/test_scheme_conformance.py) runs on every registered scheme's examples.
No wall-clock assertions.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from gcsim.schemes import make_scheme
from gcsim.schemes.base import Decoding, Refusal, Scheme
from gcsim.schemes.cyclic import CyclicMatrixScheme, least_squares_decoding
from gcsim.schemes.gc_cr import GcCr
from gcsim.schemes.gc_mds import GcMds

CASES = [("gc-cr", 12, 3), ("gc-cr", 64, 8), ("gc-cr", 64, 16), ("gc-cr", 256, 32),
         ("gc-mds", 11, 4), ("gc-mds", 64, 5), ("gc-mds", 256, 5)]


def _dense_twin(sch):
    twin = type(sch)(sch.n, sch.s, seed=sch.seed)
    twin.fast_decode = False
    return twin


def _count_dense(monkeypatch) -> list:
    calls = []
    original = CyclicMatrixScheme._dense_decode

    def spy(self, used):
        calls.append(used)
        return original(self, used)

    monkeypatch.setattr(CyclicMatrixScheme, "_dense_decode", spy)
    return calls


def _full(dec, n):
    a = np.zeros(n)
    a[list(dec.used)] = dec.weights[:, 0]
    return a


def _check_against_dense(sch, dense, arrived, rng):
    fast, ref = sch.decode(arrived), dense.decode(arrived)
    assert fast is not None and ref is not None, arrived
    B_F = sch.B[list(fast.used)]
    assert fast.used == ref.used == tuple(sorted(arrived))
    for dec in (fast, ref):  # a^T B_F = 1 within the tolerance, checked like every exact decode
        assert np.max(np.abs(dec.weights[:, 0] @ B_F - 1.0)) <= Scheme.residual_tolerance
        assert dec.residual <= Scheme.residual_tolerance and dec.error_bound <= sch.error_tolerance
    # the same vector: unique for n - s arrivals, the minimum-norm one for more
    a, b = _full(fast, sch.n), _full(ref, sch.n)
    assert np.linalg.norm(a - b) <= 1e-6 * np.linalg.norm(b)
    # random float64 partition gradients decode to their sum
    L = 16
    g = rng.standard_normal((sch.k, L))
    payloads = {i: sch.encode(i, dict(enumerate(g))) for i in fast.used}
    out = sch.combine(fast, payloads, L)
    assert np.linalg.norm(out - g.sum(0)) <= 1e-6 * np.linalg.norm(g.sum(0))


@pytest.mark.parametrize("name,n,s", CASES)
def test_fast_decode_matches_the_dense_solve(name, n, s, monkeypatch):
    sch = make_scheme(name, n, s, seed=11)
    dense = _dense_twin(sch)
    rng = np.random.default_rng(n * 100 + s)
    calls = _count_dense(monkeypatch)
    patterns = [rng.permutation(n)[: n - s].tolist() for _ in range(12)]  # n - s arrivals, random order
    patterns += [rng.permutation(n)[: n - s + extra].tolist() for extra in (1, s // 2, s)]  # more: minimum norm
    for arrived in patterns:
        _check_against_dense(sch, dense, arrived, rng)
    # the dense twin's decodes only (one per new set): the fast path needed no fallback
    assert len(calls) == len({frozenset(p) for p in patterns})


def test_fast_decode_n1024():
    sch = GcCr(1024, 16, seed=2)
    rng = np.random.default_rng(1024)
    for _ in range(2):
        used = tuple(sorted(rng.permutation(1024)[:1008].tolist()))
        fast = sch._null_space_weights(used)
        assert fast is not None and fast[1] <= Scheme.residual_tolerance
        a, _, _ = least_squares_decoding(sch.B[list(used)], 1008)
        assert np.max(np.abs(a @ sch.B[list(used)] - 1.0)) <= Scheme.residual_tolerance
        assert np.linalg.norm(fast[0] - a) <= 1e-6 * np.linalg.norm(a)
        dec = sch.decode(used)
        assert dec is not None and dec.residual <= Scheme.residual_tolerance
        g = rng.standard_normal((1024, 4))
        out = sch.combine(dec, {i: sch.encode(i, dict(enumerate(g))) for i in dec.used}, 4)
        assert np.linalg.norm(out - g.sum(0)) <= 1e-6 * np.linalg.norm(g.sum(0))


def test_a_fast_residual_above_the_tolerance_is_solved_densely(monkeypatch):
    sch = GcCr(24, 4, seed=0)
    used = tuple(range(4, 24))
    ref = _dense_twin(sch).decode(used)
    original = CyclicMatrixScheme._null_space_weights
    monkeypatch.setattr(CyclicMatrixScheme, "_null_space_weights",
                        lambda self, u: (original(self, u)[0] * (1 + 1e-4), 1e-4))
    dec = sch.decode(used)
    np.testing.assert_array_equal(dec.weights, ref.weights)  # the dense solve's
    sch.clear_cache()
    monkeypatch.setattr(CyclicMatrixScheme, "_null_space_weights", lambda self, u: (original(self, u)[0] * 2.0, 1.0))
    assert sch.decode(used) is None  # too far off for the dense solve: refused as it is, never used
    assert "coefficient residual" in sch.last_refusal.reason


def test_refinement_reaches_the_tolerance_where_the_first_solve_misses():
    # seed 3 at n = 128, s = 16: B has singular values 6e-11 next to its kernel; one refinement step
    # brings the residual of every random set that the dense solve decodes within the tolerance
    sch = GcCr(128, 16, seed=3)
    rng = np.random.default_rng(128 * 1000 + 16)
    plain = GcCr(128, 16, seed=3)
    plain.refinement_steps = 0
    refined = 0
    for _ in range(60):
        st = set(rng.choice(128, 16, replace=False).tolist())
        used = tuple(w for w in range(128) if w not in st)
        a, _, _ = least_squares_decoding(sch.B[list(used)], 112)
        if not np.max(np.abs(a @ sch.B[list(used)] - 1.0)) <= 1e-6:
            continue
        fast = sch._null_space_weights(used)
        assert fast[1] <= Scheme.residual_tolerance
        refined += plain._null_space_weights(used)[1] > Scheme.residual_tolerance
    assert refined > 0  # some needed the step


def test_cond_is_computed_when_read():
    sch = GcCr(20, 4, seed=1)
    dec = sch.decode([0] + list(range(5, 20)))  # n - s = 16 arrivals
    assert "_lazy_cond" in dec.__dict__ and callable(dec.__dict__["_lazy_cond"])  # not computed by decode
    assert dec.cond == pytest.approx(np.linalg.cond(sch.B[list(dec.used)]))  # sigma_1 / sigma_16 of (16, 20)
    assert isinstance(dec.__dict__["_lazy_cond"], float)
    again = pickle.loads(pickle.dumps(sch.decode(list(range(2, 18)))))  # pickled with cond evaluated
    assert isinstance(again.cond, float) and again.residual == sch.decode(list(range(2, 18))).residual
    assert Decoding(used=(0,), weights=np.ones((1, 1)), exact=True).cond == 1.0
    ref = Refusal(arrived=(1,), residual=1.0, error_bound=1.0, cond=lambda: 7.0, reason="x")
    assert ref.cond == 7.0


@pytest.mark.parametrize("name,n,s,m", [("uncoded", 6, 0, 1), ("gc-fr", 8, 1, 1), ("gc-cr", 10, 3, 1),
                                        ("cce-fr", 8, 1, 3), ("cce-cr", 10, 2, 2), ("gc-mds", 11, 4, 1)])
def test_sparse_decode_error_equals_the_dense_formula(name, n, s, m):
    sch = make_scheme(name, n, s, m)
    rng = np.random.default_rng(5)
    C_all = np.stack([msg.coeffs for msg in sch.messages(0)])
    for _ in range(5):
        dec = sch.decode(rng.permutation(len(C_all)).tolist())
        C = C_all[list(dec.used)]
        W = dec.weights
        E = np.einsum("ru,rjv->ujv", W, C)
        E[np.arange(m), :, np.arange(m)] -= 1.0
        norms = np.sqrt(np.einsum("rjv,rjv->r", C, C))
        amp = float(np.max(np.abs(W).T @ norms)) / math.sqrt(sch.k)
        want = float(np.abs(E).max())
        # the two differ by the rounding of sums in another order: gamma_r * sum |w| |c| (Higham §3.1)
        slack = 2 * (len(W) + 2) * 2.0**-53 * float(np.einsum("ru,rjv->ujv", np.abs(W), np.abs(C)).max())
        res, bound = sch.decode_error(dec)
        assert abs(res - want) <= slack
        assert abs(bound - (want + 2.0**-53 * 2 * amp)) <= slack + 1e-12 * bound


@pytest.mark.parametrize("n,s", [(7, 2), (8, 3), (64, 5), (63, 6), (1024, 3)])
def test_gc_mds_closed_form_kernel(n, s):
    sch = GcMds(n, s)
    K = sch._left_kernel()
    B = sch.B
    assert K.Z.shape == (n, s)
    assert np.abs(K.Z.T @ K.Z - np.eye(s)).max() < 1e-13
    assert np.abs(K.Z.T @ B).max() < 1e-12 * np.abs(B).max()
    assert np.abs(K.y0 @ B - 1.0).max() < 1e-13 and np.abs(K.Z.T @ K.y0).max() < 1e-13
    t = np.random.default_rng(0).standard_normal(n) @ B  # in the row space
    y = K.pinv_t(t)
    assert np.abs(y @ B - t).max() < 1e-10 * np.abs(t).max() and np.abs(K.Z.T @ y).max() < 1e-10
