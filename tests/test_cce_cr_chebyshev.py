"""Issue 13: ``cce-cr`` built in the Chebyshev basis on strided Chebyshev points, usable at n = 64-256.

What is checked: the polynomials' defining properties; the orthogonality decoder against a dense solve;
exact decodes of random float64 partition gradients on every contiguous straggler set and a seeded
sample of random sets at n = 64, 128, 256 (s = 1, 2; m = 1, 2, 4; float64 and float32 payloads); an
explicit theta (dense decoder) still conforming; where the guard stops at n = 64 (the README table) and
that it refuses with a one-line SchemeError. Deterministic: fixed seeds, no timing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.polynomial import chebyshev as cheb

from gcsim.errors import SchemeError
from gcsim.schemes import make_scheme
from gcsim.schemes.cce_cr import (CceCr, Decoder, cce_coefficients, cce_polynomials, decode_errors, default_theta,
                                   is_chebyshev_set, node_stride)
from gcsim.schemes.chebyshev import chebyshev_nodes
from gcsim.schemes.conformance import check_scheme
from gcsim.schemes.patterns import contiguous_sets


@pytest.mark.parametrize("n,s,m", [(9, 2, 3), (16, 1, 4), (12, 0, 2), (7, 3, 4), (64, 2, 4)])
def test_polynomials_unit_top_coefficients_zero_at_non_holders(n, s, m):
    theta = default_theta(n)
    P = cce_polynomials(theta, n, s, m)  # (n, m, n-s) Chebyshev coefficients
    nd = n - s - m
    np.testing.assert_allclose(P[:, :, nd:], np.broadcast_to(np.eye(m), (n, m, m)), atol=1e-9)
    C = cce_coefficients(theta, n, s, m)
    for j in range(n):
        scale = np.abs(P[j]).sum()
        non_holders = [(j + t) % n for t in range(1, nd + 1)]
        for u in range(m):
            assert np.all(np.abs(cheb.chebval(theta[non_holders], P[j, u])) <= 1e-10 * scale)
            holders = [(j - q) % n for q in range(s + m)]
            np.testing.assert_allclose(C[holders, j, u], cheb.chebval(theta[holders], P[j, u]),
                                       rtol=1e-8, atol=1e-11 * scale)
        assert not np.any(C[non_holders, j])  # exactly zero where j is not held


def test_default_points_are_strided_chebyshev_points():
    assert [node_stride(n) for n in (2, 4, 6, 10, 64, 256)] == [1, 1, 1, 3, 25, 97]
    for n in (5, 64, 256):
        theta = default_theta(n)
        assert is_chebyshev_set(theta) and len(np.unique(theta)) == n
    assert not is_chebyshev_set(np.linspace(-1, 1, 8))


@pytest.mark.parametrize("n,s,m", [(32, 3, 2), (64, 2, 4), (17, 4, 1)])
def test_orthogonality_decoder_equals_dense_solve(n, s, m):
    theta = default_theta(n)
    fast = Decoder(theta, n, s, m)
    dense = Decoder(theta, n, s, m)
    dense.orthogonal = False  # force the (n-s) x (n-s) solve with V_S
    rng = np.random.default_rng(5)
    T = np.array(contiguous_sets(n, s)[:8] + [tuple(sorted(rng.choice(n, s, replace=False))) for _ in range(8)])
    Wf, Wd = fast.weights(T), dense.weights(T)
    assert np.all(Wf[np.arange(len(T))[:, None], T] == 0)
    np.testing.assert_allclose(Wf, Wd, atol=1e-9 * np.abs(Wd).max())
    C = cce_coefficients(theta, n, s, m)
    assert decode_errors(Wf, C, n, s, m)[0].max() < 1e-9


def _decode_sets(sch: CceCr, sets, seed: int, length: int):
    """Decode random float64 partition gradients (payloads rounded to the scheme's payload dtype) on each
    straggler set; return the worst relative error (asserting every set decodes)."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((sch.n, length))
    true = g.sum(axis=0)
    grads = dict(enumerate(g))
    payloads = {i: sch.encode(i, grads).astype(sch.payload_dtype).astype(np.float64) for i in range(sch.n)}
    worst = 0.0
    for st in sets:
        arrived = [w for w in rng.permutation(sch.n).tolist() if w not in set(st)]
        dec = sch.decode(arrived)
        assert dec is not None, (st, sch.last_refusal)
        assert dec.residual <= sch.residual_tolerance and dec.error_bound <= sch.error_tolerance
        out = sch.combine(dec, payloads, length)
        worst = max(worst, float(np.linalg.norm(out - true) / np.linalg.norm(true)))
    return worst


@pytest.mark.parametrize("n", [64, 128, 256])
@pytest.mark.parametrize("s", [1, 2])
@pytest.mark.parametrize("m", [1, 2, 4])
def test_large_n_decodes_contiguous_and_sampled_sets_float64(n, s, m):
    sch = make_scheme("cce-cr", n, s, m)
    rng = np.random.default_rng(1000 * n + 10 * s + m)
    sets = contiguous_sets(n, s) + [tuple(sorted(rng.choice(n, s, replace=False).tolist())) for _ in range(24)]
    assert _decode_sets(sch, sets, seed=n + s + m, length=4 * m + 3) <= sch.error_tolerance  # 1e-6
    assert sch.worst_error_bound <= 1e-9  # far inside the tolerance (README "Schemes" table)


@pytest.mark.parametrize("n", [64, 256])
@pytest.mark.parametrize("s,m", [(1, 4), (2, 2), (2, 4)])
def test_large_n_decodes_float32_payloads(n, s, m):
    sch = make_scheme("cce-cr", n, s, m, 0, "float32")  # gcsim real's payload precision
    rng = np.random.default_rng(7 * n + s + m)
    sets = contiguous_sets(n, s) + [tuple(sorted(rng.choice(n, s, replace=False).tolist())) for _ in range(24)]
    assert _decode_sets(sch, sets, seed=3 * n + s, length=4 * m + 1) <= sch.error_tolerance  # 1e-4


#: (s, m) the guard accepts at n = 64 (README "Schemes": the same at n = 32..256 for s <= 4, m in 1, 2, 4)
ACCEPTED_64 = {"float64": {(s, m) for s in (1, 2, 3, 4) for m in (1, 2, 4)},
               "float32": {(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4), (3, 1), (3, 2), (4, 1)}}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_where_the_guard_stops_at_n64(dtype):
    for s in (1, 2, 3, 4):
        for m in (1, 2, 4):
            try:
                sch = make_scheme("cce-cr", 64, s, m, 0, dtype)
            except SchemeError as e:
                assert (s, m) not in ACCEPTED_64[dtype], e
                assert "\n" not in str(e)
                assert str(e).startswith("scheme cce-cr: (n, s, m): expected a combination whose worst-case decode "
                                         f"error in {dtype} is <= ") and str(e).endswith(f"got (64, {s}, {m})")
                continue
            assert (s, m) in ACCEPTED_64[dtype]
            assert sch.worst_residual <= 1e-6 and sch.worst_error_bound <= sch.error_tolerance


@pytest.mark.parametrize("n,s,m,dtype", [(64, 10, 1, "float64"), (256, 7, 2, "float64"), (256, 3, 4, "float32"),
                                          (128, 5, 1, "float32")])
def test_guard_refuses_beyond_the_limits_in_one_line(n, s, m, dtype):
    with pytest.raises(SchemeError) as info:
        CceCr(n, s, m, payload_dtype=dtype)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("scheme cce-cr: (n, s, m): ") and f"got ({n}, {s}, {m})" in msg
    assert "stragglers [" in msg


def test_explicit_theta_still_decodes_exactly():
    # any distinct reals, in worker order, decoded by the dense V_S solve (not the orthogonality formula)
    def equispaced(**kw):
        return CceCr(**kw, theta=np.linspace(-1.0, 1.0, kw["n"]))

    check_scheme(equispaced, [dict(n=9, s=2, m=2), dict(n=6, s=1, m=3)], tolerance=1e-8)
    natural = CceCr(16, 2, 2, theta=chebyshev_nodes(16))  # the points unstrided: still orthogonal
    assert natural._decoder.orthogonal and not equispaced(n=9, s=2, m=2)._decoder.orthogonal
    assert _decode_sets(natural, contiguous_sets(16, 2), seed=4, length=9) <= 1e-6
    # cond is cond(V_S) of the arrived points, computed when read
    dec = natural.decode(list(range(2, 16)))
    V = cheb.chebvander(natural.theta[list(range(2, 16))], 13)
    assert dec.cond == pytest.approx(np.linalg.cond(V), rel=1e-6) and math.isfinite(dec.cond)
