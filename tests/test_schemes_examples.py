"""Worked examples from the papers, FR patterns beyond s, construction properties and caching."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gcsim.errors import SchemeError
from gcsim.schemes import make_scheme
from gcsim.schemes.cce_cr import CceCr, cce_polynomials
from gcsim.schemes.gc_cr import GcCr


def full_decoder(decoding, n):
    a = np.zeros(n)
    a[list(decoding.used)] = decoding.weights[:, 0]
    return a


def test_tandon_n3_s1_worked_example():
    # Tandon et al. 2017, Fig. 1: B and the decoders for stragglers W1, W2, W3
    B = [[0.5, 1, 0], [0, 1, -1], [0.5, 0, 1]]
    sch = GcCr.from_matrix(B, s=1)
    assert sch.assignment() == [[0, 1], [1, 2], [2, 0]]
    for straggler, want in [(0, [0, 1, 2]), (1, [1, 0, 1]), (2, [2, -1, 0])]:
        d = sch.decode([w for w in range(3) if w != straggler])
        np.testing.assert_allclose(full_decoder(d, 3), want, atol=1e-12)
        assert d.cond == pytest.approx(np.linalg.cond(np.asarray(B)[list(d.used)]))


def test_gc_cr_is_seeded_and_rows_span_a_null_space_of_dim_n_minus_s():
    n, s = 9, 3
    a, b, c = (make_scheme("gc-cr", n, s, seed=x) for x in (5, 5, 6))
    np.testing.assert_array_equal(a.B, b.B)
    assert not np.allclose(a.B, c.B)
    assert np.linalg.matrix_rank(a.B) == n - s  # rows in null(H), H is s x n of full rank
    for i in range(n):
        assert a.B[i, i] == 1.0
        assert np.count_nonzero(a.B[i]) == s + 1
    # the all-ones vector lies in the row space (that is what makes decoding possible)
    x, *_ = np.linalg.lstsq(a.B.T, np.ones(n), rcond=None)
    np.testing.assert_allclose(a.B.T @ x, 1.0, atol=1e-10)


@pytest.mark.parametrize("n,s,row", [(7, 2, [1, 2 * np.cos(np.pi / 7), 1]),
                                     (8, 3, [1, 1 + np.sqrt(2), 1 + np.sqrt(2), 1])])
def test_gc_mds_generator_rows(n, s, row):
    sch = make_scheme("gc-mds", n, s)
    for i in range(n):
        expect = np.zeros(n)
        expect[[(i + t) % n for t in range(s + 1)]] = row
        np.testing.assert_allclose(sch.B[i], expect, atol=1e-12)


def test_cce_cr_worked_example_n4_s1_m2():
    # field notes, "Ye & Abbe 2018 (CCE), cyclic form": theta = (1, 1.5, -1, -1.5). The construction is in
    # the Chebyshev basis: p_0^(1) = x - 1.5 = T_1 - 1.5 T_0 as in the notes; p_0^(2) has T-coefficients
    # (0, 1) at indices 1, 2: (x - 1.5)(2x + 3) = 2x^2 - 4.5 = T_2 - 3.5 T_0, twice the notes' monic
    # x^2 - 2.25 (T_2 = 2x^2 - 1), so the u = 2 coefficients of a message are twice the notes' ones
    theta = [1, 1.5, -1, -1.5]
    P = cce_polynomials(np.array(theta, dtype=float), 4, 1, 2)
    np.testing.assert_allclose(P[0, 0], [-1.5, 1, 0])  # p_0^(1) = T_1 - 1.5
    np.testing.assert_allclose(P[0, 1], [-3.5, 0, 1])  # p_0^(2) = T_2 - 3.5 = 2x^2 - 4.5
    sch = CceCr(n=4, s=1, m=2, theta=theta)
    # worker 0 sends -0.5 g0^(1) - 2.5 g0^(2) + 2 g1^(1) + 2.5 g2^(1) - 2.5 g2^(2)
    # (the notes: -0.5 g0^(1) - 1.25 g0^(2) + 2 g1^(1) + 2.5 g2^(1) - 1.25 g2^(2))
    np.testing.assert_allclose(sch.messages()[0].coeffs, [[-0.5, -2.5], [2, 0], [2.5, -2.5], [0, 0]], atol=1e-12)
    rng = np.random.default_rng(0)
    g = {j: rng.standard_normal(6) for j in range(4)}
    payloads = {i: sch.encode(i, g) for i in range(4)}
    assert payloads[0].shape == (3,)
    for straggler in range(4):
        d = sch.decode([w for w in range(4) if w != straggler])
        np.testing.assert_allclose(sch.combine(d, payloads, 6), sum(g.values()), rtol=1e-12)


def test_cce_cr_refuses_unstable_parameters_and_accepts_stable_ones():
    with pytest.raises(SchemeError, match=r"cce-cr: \(n, s, m\): expected .*got \(64, 10, 1\)"):
        make_scheme("cce-cr", 64, 10, 1)
    with pytest.raises(SchemeError, match=r"cce-cr: \(n, s, m\): expected .* in float32 .*got \(64, 3, 4\)"):
        make_scheme("cce-cr", 64, 3, 4, 0, "float32")
    assert make_scheme("cce-cr", 20, 2, 2).worst_residual < 1e-8
    assert make_scheme("cce-cr", 30, 3, 3).worst_error_bound < 1e-9  # refused by the monomial construction
    with pytest.raises(SchemeError, match="theta"):
        CceCr(n=4, s=1, m=2, theta=[1, 1, -1, 2])


def test_cce_fr_with_m1_equals_gc_fr():
    n, s = 6, 2
    fr, cce = make_scheme("gc-fr", n, s), make_scheme("cce-fr", n, s, 1)
    np.testing.assert_array_equal(fr.encoding_matrix(), cce.encoding_matrix())
    assert fr.assignment() == cce.assignment()
    rng = np.random.default_rng(3)
    g = {j: rng.standard_normal(5) for j in range(n)}
    pf = {i: fr.encode(i, g) for i in range(n)}
    pc = {i: cce.encode(i, g) for i in range(n)}
    for r in range(n + 1):
        for arrived in itertools.combinations(range(n), r):
            df, dc = fr.decode(arrived), cce.decode(arrived)
            assert (df is None) == (dc is None), arrived
            if df is not None:
                np.testing.assert_allclose(cce.combine(dc, pc, 5), fr.combine(df, pf, 5), rtol=1e-12)


@pytest.mark.parametrize("name,n,s,m", [("gc-fr", 6, 1, 1), ("gc-fr", 9, 2, 1), ("cce-fr", 8, 2, 2), ("cce-fr", 9, 1, 2)])
def test_fr_decodes_exactly_when_every_group_has_m_arrivals(name, n, s, m):
    """FR-type schemes decode every arrival set with >= m arrivals per group, including sets with
    far more than s stragglers, and no other set."""
    sch = make_scheme(name, n, s, m)
    d_ = s + m
    rng = np.random.default_rng(1)
    g = {j: rng.standard_normal(7) for j in range(n)}
    payloads = {i: sch.encode(i, g) for i in range(n)}
    beyond_s = 0
    for r in range(n + 1):
        for arrived in itertools.combinations(range(n), r):
            per_group = np.bincount([w // d_ for w in arrived], minlength=n // d_)
            d = sch.decode(arrived)
            assert (d is not None) == bool(per_group.min() >= m), arrived
            if d is not None:
                np.testing.assert_allclose(sch.combine(d, payloads, 7), sum(g.values()), rtol=1e-10)
                beyond_s += n - r > s
    assert beyond_s > 0


def test_pgc_warm_up_messages_and_staleness():
    sch = make_scheme("pgc-cr", 5, 2)
    # iteration 0: only the fresh partition has been computed
    for w, msg in enumerate(sch.messages(0)):
        assert msg.partitions == (w,)
    d0 = sch.decode([0, 1, 2], 0)
    np.testing.assert_array_equal(d0.staleness[0], [0, -1, -1, -1, -1])
    d1 = sch.decode([0, 1, 2], 1)  # worker 0 computed 0 at t=0 and 1 at t=1
    np.testing.assert_array_equal(d1.staleness[0], [1, 0, -1, -1, -1])
    d5 = sch.decode([0, 1, 2], 5)  # steady state: t=5 computes position 2; positions 0, 1 at t=3, 4
    np.testing.assert_array_equal(d5.staleness[0], [2, 1, 0, -1, -1])
    assert sch.held_partitions(4) == [0, 1, 4]


def test_decode_caches_by_the_right_key():
    ign = make_scheme("ignore-stragglers", 6, 2)
    a = ign.decode([0, 1, 2, 3, 4])
    assert ign.decode([3, 2, 1, 0, 5]) is a  # same first n-s set, later arrivals ignored
    assert ign.decode([0, 1, 2, 4, 3]).used == (0, 1, 2, 4)
    pgc = make_scheme("pgc-fr", 4, 1)
    assert pgc.decode([0, 1, 2], 1) is pgc.decode([2, 0, 1, 3], 3)  # same first n-s set, same steady phase
    assert pgc.decode([0, 1, 2], 0) is not pgc.decode([0, 1, 2], 2)  # warm-up vs steady
    cr = make_scheme("gc-cr", 6, 2)
    cr.cache_size = 2
    for arrived in ([0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5]):
        assert cr.decode(arrived) is not None
    assert len(cr._cache) == 2
    cr.clear_cache()
    assert len(cr._cache) == 0
