"""One conformance battery, run against every registered scheme for several (n, s, m).

Exact schemes: every pattern of exactly s stragglers decodes, the decoded combination of random
float64 partition gradients equals the true sum to 1e-8 relative, patterns theory rules out give
None. Approximate schemes: the first n-s arrivals, scale n/((n-s)h), staleness from a replay of the
round-robin history. Loads equal the theory for every scheme.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gcsim.schemes import make_scheme, scheme_names
from gcsim.schemes.base import Refusal

# (scheme, n, s, m) per scheme; every registered scheme must appear here.
CASES = {
    "uncoded": [(1, 0, 1), (5, 0, 1)],
    "ignore-stragglers": [(5, 0, 1), (6, 2, 1), (7, 3, 1)],
    "gc-fr": [(6, 1, 1), (6, 2, 1), (8, 3, 1), (5, 4, 1)],
    "gc-cr": [(3, 1, 1), (7, 2, 1), (10, 3, 1), (12, 5, 1)],
    "gc-mds": [(5, 0, 1), (7, 2, 1), (8, 3, 1), (11, 4, 1)],
    "cce-fr": [(6, 1, 2), (8, 2, 2), (9, 1, 2), (6, 2, 1), (6, 0, 3)],
    "cce-cr": [(4, 1, 2), (8, 2, 2), (10, 3, 2), (7, 1, 3), (6, 0, 2), (5, 1, 1)],
    "pgc-fr": [(4, 0, 1), (6, 1, 1), (6, 2, 1), (8, 3, 1)],
    "pgc-cr": [(5, 1, 1), (7, 2, 1), (8, 3, 1)],
}
PARAMS = [pytest.param(name, *c, id=f"{name}-n{c[0]}-s{c[1]}-m{c[2]}") for name, cs in CASES.items() for c in cs]
L = 13  # gradient length, not a multiple of m: exercises chunk padding


def test_every_registered_scheme_is_in_the_battery():
    assert list(CASES) == scheme_names()


def expected_computation_load(name, s, m):
    return {"uncoded": 1, "ignore-stragglers": 1, "pgc-fr": 1, "pgc-cr": 1,
            "cce-fr": s + m, "cce-cr": s + m}.get(name, s + 1)


@pytest.mark.parametrize("name,n,s,m", PARAMS)
def test_loads_equal_theory(name, n, s, m):
    sch = make_scheme(name, n=n, s=s, m=m)
    assert sch.computation_load == expected_computation_load(name, s, m)
    assert sch.communication_load == pytest.approx(1.0 / m)
    assert sch.messages_per_worker == 1
    held = s + 1 if name.startswith(("gc-", "pgc-")) else (s + m if name.startswith("cce") else 1)
    assert all(len(sch.held_partitions(w)) == held for w in range(n))
    # every partition is held by at least s+1 workers (Tandon et al. lower bound)
    counts = np.bincount([j for w in range(n) for j in sch.held_partitions(w)], minlength=n)
    assert counts.min() >= (s + 1 if sch.exact else 1)


def _assert_messages_follow_assignment(sch, it):
    asg = sch.assignment(it)
    for mid, msg in enumerate(sch.messages(it)):
        assert msg.id == mid
        assert msg.coeffs.shape == (sch.k, sch.m)
        assert msg.after == len(asg[msg.worker])
        assert set(msg.partitions) <= set(sch.held_partitions(msg.worker))


def _undecodable_patterns(name, n, s, m):
    """Arrival sets that theory says cannot give the exact sum."""
    if name == "uncoded":
        return [list(range(1, n))] if n > 1 else [[]]
    if name in ("gc-fr", "cce-fr"):
        d = s + m
        # group 0 keeps only m-1 arrivals, every other worker arrives (s+1 stragglers)
        return [list(range(m - 1)) + list(range(d, n))]
    # cyclic: workers 0..s all missing -> partition s has no holder (gc-cr, gc-mds); for cce-cr
    # the arrivals number n-s-1 < n-s = unknowns of the Vandermonde system
    return [list(range(s + 1, n))]


@pytest.mark.parametrize("name,n,s,m", [p for p in PARAMS if make_scheme(*p.values).exact])
def test_exact_every_s_pattern_decodes_to_the_true_sum(name, n, s, m):
    sch = make_scheme(name, n=n, s=s, m=m)
    _assert_messages_follow_assignment(sch, 0)
    rng = np.random.default_rng(n * 100 + s * 10 + m)
    g = {j: rng.standard_normal(L) for j in range(sch.k)}
    true_sum = sum(g.values())
    payloads = {i: sch.encode(i, g) for i in range(n)}
    assert all(p.shape == (-(-L // m),) for p in payloads.values())
    tried = 0
    for stragglers in itertools.combinations(range(n), s):
        arrived = [int(i) for i in rng.permutation(n) if i not in stragglers]
        d = sch.decode(arrived)
        assert d is not None, f"stragglers {stragglers} not decodable"
        assert d.exact and set(d.used) <= set(arrived)
        assert d.weights.shape == (len(d.used), m)
        out = sch.combine(d, payloads, L)
        assert np.linalg.norm(out - true_sum) <= 1e-8 * np.linalg.norm(true_sum), stragglers
        assert sch.residual(d) <= 1e-8
        tried += 1
    assert tried == len(list(itertools.combinations(range(n), s)))


@pytest.mark.parametrize("name,n,s,m", [p for p in PARAMS if make_scheme(*p.values).exact])
def test_exact_patterns_theory_rules_out_are_none(name, n, s, m):
    sch = make_scheme(name, n=n, s=s, m=m)
    for arrived in _undecodable_patterns(name, n, s, m):
        assert sch.decode(arrived) is None, arrived
        assert not sch.is_decodable(arrived)
        if name in ("gc-cr", "gc-mds", "cce-cr") and arrived:
            # the linear algebra itself (not only the arrival count) must refuse: the residual check
            # of Scheme.decode turns the least-squares answer into a Refusal
            checked = sch._checked(sch._decode(tuple(arrived)), tuple(arrived), 0)
            assert isinstance(checked, Refusal) and "coefficient residual" in checked.reason, arrived


def _replay(sch, iterations):
    """Per iteration t and worker w: partition -> iteration it was last computed (<= t)."""
    last = [dict() for _ in range(sch.n)]
    out = []
    for t in range(iterations):
        for w, parts in enumerate(sch.assignment(t)):
            assert len(parts) == 1
            last[w][parts[0]] = t
        out.append([dict(x) for x in last])
    return out


@pytest.mark.parametrize("name,n,s,m", [p for p in PARAMS if not make_scheme(*p.values).exact])
def test_approximate_rule_scaling_and_staleness(name, n, s, m):
    sch = make_scheme(name, n=n, s=s, m=m)
    h = 1 if name == "ignore-stragglers" else s + 1
    scale = n / ((n - s) * h)
    iterations = 2 * (s + 1) + 1
    hist = _replay(sch, iterations)
    rng = np.random.default_rng(7)
    G = rng.standard_normal((iterations, n, L))  # gradient of partition j computed at iteration t
    if h > 1:  # round-robin: a worker computes each held partition once per s+1 iterations, and
        # every partition is computed fresh by exactly one worker per iteration
        for w in range(n):
            assert sorted(sch.assignment(t)[w][0] for t in range(3, 3 + h)) == sch.held_partitions(w)
        for t in range(iterations):
            assert sorted(p[0] for p in sch.assignment(t)) == list(range(n))
    for t in range(iterations):
        _assert_messages_follow_assignment(sch, t)
        # messages carry exactly the partitions computed so far (never-computed: coefficient 0)
        for w, msg in enumerate(sch.messages(t)):
            assert set(msg.partitions) == set(hist[t][w]), (t, w)
        payloads = {w: sch.encode(w, {j: G[tt, j] for j, tt in hist[t][w].items()}, t) for w in range(n)}
        for stragglers in itertools.combinations(range(n), s):
            order = [int(i) for i in rng.permutation(n) if i not in stragglers] + list(stragglers)
            assert sch.decode(order[: n - s - 1], t) is None  # fewer than n-s arrivals
            d = sch.decode(order, t)  # stragglers arrive last: must be ignored
            first = sorted(order[: n - s])
            assert sorted(d.used) == first and not d.exact
            np.testing.assert_allclose(d.weights, scale, rtol=1e-15)
            want = scale * sum(G[tt, j] for w in first for j, tt in hist[t][w].items())
            np.testing.assert_allclose(sch.combine(d, payloads, L), want, rtol=1e-12, atol=1e-12)
            if name == "ignore-stragglers":
                assert d.staleness is None
                continue
            want_stale = np.full((n - s, n), -1)
            for r, w in enumerate(d.used):
                for j, tt in hist[t][w].items():
                    want_stale[r, j] = t - tt
            np.testing.assert_array_equal(d.staleness, want_stale)
            assert d.staleness.max() == min(t, s)  # at most s iterations stale, less during warm-up
