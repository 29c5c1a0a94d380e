"""Issue 16: never a wrong gradient marked exact.

Every exact decode is checked in the payload precision and refused (counted, with the pattern) when
not exact within tolerance; constructions whose known worst case fails are refused; checks try the
structured worst cases (contiguous / near-contiguous blocks) before random sets.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gcsim.cli import main
from gcsim.errors import SchemeError
from gcsim.scenario import validate_scenario
from gcsim.schemes import make_scheme, registry
from gcsim.schemes.base import UNIT_ROUNDOFF, Decoding, Refusal
from gcsim.schemes.cce_cr import (ADJACENT_POINTS, Decoder, cce_coefficients, decode_errors, default_theta,
                                   guard_sets, worst_decode)
from gcsim.schemes.cce_fr import CceFr, worst_minor
from gcsim.schemes.gc_cr import GcCr
from gcsim.schemes.patterns import contiguous_sets, count_straggler_sets, near_contiguous_sets, straggler_sets
from gcsim.schemes.pgc_cr import PgcCr
from gcsim.schemes.pgc_fr import PgcFr
from gcsim.schemes.verify import verify_scheme
from gcsim.sim.engine import simulate
from gcsim.trace import summarize


def _measured_error(sch, arrived, rng, L=64):
    """Relative error of the decoded sum of random float64 gradients whose payloads are rounded to the
    scheme's payload dtype; None when the scheme refuses (or cannot decode) the set."""
    dec = sch.decode(list(arrived))
    if dec is None:
        return None
    g = rng.standard_normal((sch.k, L))
    pl = {i: sch.encode(i, dict(enumerate(g))).astype(sch.payload_dtype) for i in dec.used}
    out = sch.combine(dec, pl, L)
    return float(np.linalg.norm(out - g.sum(0)) / np.linalg.norm(g.sum(0))), dec


# ----------------------------------------------------------------------------- patterns
def test_structured_patterns_are_blocks_and_near_blocks_at_every_shift():
    assert contiguous_sets(5, 2) == [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)]
    near = near_contiguous_sets(6, 2)
    # one hole: {i, i+2}; two holes: {i, i+3}; every shift, cyclic, no block among them
    assert set(near) == {tuple(sorted((i, (i + 2) % 6))) for i in range(6)} | {tuple(sorted((i, (i + 3) % 6))) for i in range(6)}
    assert not set(near) & set(contiguous_sets(6, 2))
    kinds = [k for k, _ in straggler_sets(10, 3, 4, np.random.default_rng(0), exhaustive_max=100)]
    first_random = kinds.index("random")
    assert kinds.count("contiguous") == 10 and kinds.count("random") == 4
    assert set(kinds[:first_random]) == {"contiguous", "near-contiguous"}  # structured ones first


@pytest.mark.parametrize("exhaustive_max", [1, 20, 10**6])
def test_pattern_count_equals_the_sets_yielded_without_building_them(exhaustive_max):
    for n in range(1, 15):
        for t in range(n + 1):
            got = count_straggler_sets(n, t, 3, exhaustive_max)
            want = sum(1 for _ in straggler_sets(n, t, 3, np.random.default_rng(0), exhaustive_max))
            assert got == want, (n, t)
    # the closed form at a size nobody enumerates: 2000 blocks, 2000 x 9 one-hole, 2000 x 45 two-hole
    assert count_straggler_sets(2000, 10, 7, 1000) == 2000 + 2000 * 9 + 2000 * 45 + 7
    with pytest.raises(ValueError, match="t: expected 0 <= t <= n=4, got 5"):
        count_straggler_sets(4, 5, 0, 1)


def test_verify_tries_as_many_patterns_as_counted_up_front():
    r = verify_scheme(make_scheme("gc-cr", n=12, s=3), max_patterns=50, samples=5)
    assert r.passed and r.sampled_sizes == [2, 3]
    assert r.patterns_tried == sum(count_straggler_sets(12, t, 5, 50) for t in range(4))


# ----------------------------------------------------------------------------- cce-fr
def test_cce_fr_48_0_48_is_refused_naming_m():
    with pytest.raises(SchemeError, match=r"scheme cce-fr: m: expected m <= 26 for s=0 with float64 payloads .*got 48"):
        make_scheme("cce-fr", 48, 0, 48)


@pytest.mark.parametrize("s", [0, 1, 2, 3])
def test_cce_fr_large_m_either_refused_or_exact(s):
    """m = 24..48 in one group: the construction accepts exactly the m whose worst minor decodes within
    1e-6, and an accepted one decodes its contiguous worst case to <= 1e-6 measured error."""
    rng = np.random.default_rng(s)
    limit = CceFr.largest_stable_m(s + 48, s, 48)
    assert 22 <= limit <= 26  # the audit: 1e-6 is passed near m = 27, 26, 25, 24 for s = 0..3
    for m in (24, 25, 26, 27, 28, 32, 40, 48):
        d = s + m
        try:
            sch = make_scheme("cce-fr", d, s, m)
        except SchemeError as e:
            assert m > limit and f"m: expected m <= {limit} for s={s}" in str(e)
            continue
        _, bound, rows, _ = worst_minor(d, s, m, "float64")
        stragglers = [r for r in range(d) if r not in rows]
        err, dec = _measured_error(sch, [w for w in range(d) if w not in stragglers], rng)
        assert err <= 1e-6 and err <= bound and dec.exact


def test_cce_fr_float32_limit_is_lower_and_the_bound_covers_the_measured_error():
    assert make_scheme("cce-fr", 8, 0, 8, payload_dtype="float32").payload_dtype == "float32"
    with pytest.raises(SchemeError, match="with float32 payloads"):
        make_scheme("cce-fr", 16, 0, 16, payload_dtype="float32")
    sch = make_scheme("cce-fr", 16, 0, 16)  # fine in float64 ...
    sch.payload_dtype = "float32"  # ... but what if its payloads were float32?
    sch.clear_cache()
    assert sch.decode(range(16)) is None and "float32 error bound" in sch.last_refusal.reason


def test_cce_fr_batched_minor_bound_equals_the_generic_decode_bound():
    n, s, m = 12, 1, 5  # two groups of 6
    sch = make_scheme("cce-fr", n, s, m)
    _, bound, rows, _ = worst_minor(n, s, m, "float64")
    arrived = [q * 6 + r for q in range(2) for r in rows]
    dec = sch.decode(arrived)
    assert dec.error_bound == pytest.approx(bound, rel=1e-6)


# ----------------------------------------------------------------------------- cce-cr
@pytest.mark.parametrize("n,s,m,dtype", [(32, 4, 2, "float32"), (64, 3, 4, "float32"), (32, 4, 1, "float64")])
def test_cce_cr_guard_finds_the_exhaustive_worst(n, s, m, dtype):
    """The guard (worker-order and point-order blocks, then 2,000 random sets) reaches the worst error bound
    of all C(n, s) straggler sets; the worst sets are blocks of neighbouring points, not of workers."""
    theta = default_theta(n)
    resid, bound, strag, kinds = worst_decode(theta, n, s, m, dtype)
    assert kinds["exhaustive"] == 0 and kinds["contiguous"] == n and kinds[ADJACENT_POINTS] > 0
    C = cce_coefficients(theta, n, s, m)
    dec = Decoder(theta, n, s, m)
    every = np.array(list(itertools.combinations(range(n), s)))
    res, amp = decode_errors(dec.weights(every), C, n, s, m)
    u = UNIT_ROUNDOFF[dtype] + UNIT_ROUNDOFF["float64"]
    assert bound == pytest.approx(float(np.max(res + u * amp)), rel=1e-9)
    assert resid == pytest.approx(float(np.max(res)), rel=1e-9)
    kind = dict((st, k) for k, st in guard_sets(theta, n, s))
    assert kind[strag] == ADJACENT_POINTS
    order = np.argsort(theta)
    ranks = sorted(int(np.flatnonzero(order == w)[0]) for w in strag)
    assert ranks[-1] - ranks[0] <= s + 1  # neighbouring points (a window of s + 2 at most)


# ----------------------------------------------------------------------------- gc-mds / gc-cr
def test_gc_mds_contiguous_blocks_are_its_worst_sets_and_are_checked():
    sch = make_scheme("gc-mds", 41, 6)
    block = sch.decode([w for w in range(41) if w not in range(10, 16)])
    rng = np.random.default_rng(0)
    draws = [set(rng.choice(41, 6, replace=False).tolist()) for _ in range(40)]
    random_bounds = [sch.decode([w for w in range(41) if w not in st]).error_bound for st in draws]
    assert block.error_bound > 10 * max(random_bounds)
    err, _ = _measured_error(sch, block.used, rng)
    assert err <= 1e-6
    # float32: the block's bound (~6e-3, measured ~6e-4) is beyond 1e-4, so the construction refuses
    with pytest.raises(SchemeError, match=r"scheme gc-mds: s: .*float32 payloads \(stragglers \[0, 1, 2, 3, 4, 5\]"):
        make_scheme("gc-mds", 41, 6, payload_dtype="float32")
    with pytest.raises(SchemeError, match=r"scheme gc-mds: s: .*float32"):
        make_scheme("gc-mds", 64, 7, payload_dtype="float32")  # the audit: 0.04 relative error


@pytest.mark.parametrize("name,n,s,dtype", [("gc-cr", 24, 4, "float32"), ("gc-cr", 20, 5, "float64"),
                                             ("gc-mds", 31, 4, "float32"), ("cce-fr", 24, 2, "float32")])
def test_no_decode_marked_exact_is_wrong(name, n, s, dtype):
    """Over every structured set and 60 random ones: a returned decoding is within the payload
    precision's tolerance (measured); anything else is a recorded refusal."""
    sch = make_scheme(name, n, s, 6 if name == "cce-fr" else 1, payload_dtype=dtype)
    rng = np.random.default_rng(1)
    refused = 0
    for _, strag in straggler_sets(n, s, 60, rng, exhaustive_max=0):
        got = _measured_error(sch, [w for w in range(n) if w not in strag], rng)
        if got is None:
            assert isinstance(sch.last_refusal, Refusal) and not set(strag) & set(sch.last_refusal.arrived)
            refused += 1
            continue
        err, dec = got
        assert err <= sch.error_tolerance and dec.residual <= 1e-6 and dec.error_bound <= sch.error_tolerance
    if (name, dtype) == ("gc-cr", "float32"):
        assert refused > 0  # random gc-cr at n = 24, s = 4 has sets float32 cannot decode (12 here)


def test_a_wrong_decoder_is_refused_not_returned():
    class Wrong(GcCr):
        name = "wrong-cr"

        def _decode(self, arrived):
            d = super()._decode(arrived)
            return Decoding(used=d.used, weights=d.weights * (1.001 if 0 not in arrived else 1.0), exact=True)

    sch = Wrong(6, 1)
    assert sch.decode([1, 2, 3, 4, 5]) is None
    ref = sch.last_refusal
    assert ref.arrived == (1, 2, 3, 4, 5) and "coefficient residual" in ref.reason and ref.residual > 1e-4
    assert sch.decode([1, 2, 3, 4, 5]) is None and sch.last_refusal is ref  # cached, still reported
    assert sch.decode([0, 1, 2, 3, 4]).exact and sch.last_refusal is None


def test_payload_dtype_is_validated_and_described():
    assert make_scheme("gc-fr", 4, 1, payload_dtype=np.float32).describe()["payload_dtype"] == "float32"
    with pytest.raises(SchemeError, match=r"scheme gc-fr: payload_dtype: expected float64 or float32, got 'float16'"):
        make_scheme("gc-fr", 4, 1, payload_dtype="float16")


# ----------------------------------------------------------------------------- run-time counting
class _RefuseWithout0(GcCr):
    """gc-cr whose decoder is wrong (so refused) whenever worker 0's message is missing."""

    def _decode(self, arrived):
        d = super()._decode(arrived)
        return Decoding(used=d.used, weights=d.weights * (1.0 if 0 in arrived else 1.01), exact=True, cond=d.cond)


@pytest.mark.parametrize("engine", ["simpy", "vector"])
def test_simulator_counts_refusals_in_summary_with_the_pattern(monkeypatch, engine):
    from gcsim.sim.vector import simulate_vector

    registry.scheme_names()  # load the built-in schemes first, or they replace the patched entry
    monkeypatch.setitem(registry._REGISTRY, "gc-cr", _RefuseWithout0)
    sc = validate_scenario({
        "name": "refuse", "n_workers": 5, "iterations": 60, "seed": 3,
        "schemes": [{"name": "gc-cr", "s": 1}],
        "workload": {"gradient_bytes": 0, "compute": {"dist": "expon", "scale": 0.1}},
    })
    res = simulate(sc) if engine == "simpy" else simulate_vector(sc)
    its = res.iterations
    late0 = int((its["n_used"] > 4).sum())  # waited past n - s = 4 arrivals: worker 0 was not among them
    assert late0 > 0
    assert int(res.summary.loc[0, "refusals"]) == late0
    items = res.refusals["gc-cr"]
    assert len({it for it, _ in items}) == late0
    assert all(0 not in ref.arrived and len(ref.arrived) == 4 for _, ref in items)
    assert set(its.loc[its["n_used"] > 4, "iteration"]) == {it for it, _ in items}


def test_simulate_cli_prints_refusals(monkeypatch, tmp_path, capsys):
    from gcsim.cli.simulate_cmd import refusal_lines

    ref = Refusal(arrived=(1, 2, 3, 4), residual=0.01, error_bound=0.01, cond=3.0, reason="coefficient residual 1.0e-02 > 1e-06")
    lines = refusal_lines({"gc-cr": [(4, ref), (4, ref), (9, ref)], "gc-fr": []})
    assert lines == ["gc-cr: 2 iterations waited past a refused decode (3 refusals; first: iteration 4, "
                     "arrived [1, 2, 3, 4]: coefficient residual 1.0e-02 > 1e-06)"]


def test_real_master_refusal_status_reaches_summary():
    from gcsim.real.master import ParameterServer

    ps = ParameterServer.__new__(ParameterServer)
    ref = Refusal(arrived=(1, 2), residual=1.0, error_bound=1.0, cond=1.0, reason="coefficient residual 1.0e+00 > 1e-06")
    ps.label, ps.refusals = "gc-cr", [(0, ref), (0, ref), (2, ref)]
    ps.deaths, ps.prior_deaths = {4: {"iteration": 1, "cause": "ActorDiedError: x"}}, 1  # one lost now, one before
    ps.iteration_rows = [{"scheme": "gc-cr", "iteration": i, "start_s": i, "decodable_s": i + 0.5, "end_s": i + 1,
                          "duration_s": 1.0, "n_arrived": 3, "n_used": 3, "other_cpu_wait_s": np.nan,
                          "other_cpu_finish_s": np.nan} for i in range(2)]  # iteration 2 not committed
    assert ps.refusal_status() == {"refused_iterations": 1, "refusals": 2,
                                   "first_refusal": {"iteration": 0, "arrived": [1, 2], "reason": ref.reason}}
    summary = summarize(ps.iterations_frame(), {"gc-cr": make_scheme("gc-cr", 3, 1).describe()})
    assert summary.loc[0, "refusals"] == 1 and summary.loc[0, "dead_workers"] == 2


# ----------------------------------------------------------------------------- verify / CLI
def test_cli_check_reports_kinds_and_refuses_float32_construction(capsys):
    assert main(["schemes", "check", "gc-mds", "--n", "21", "--s", "4", "--max-patterns", "1000", "--samples", "7"]) == 0
    out = capsys.readouterr().out
    # sizes 0-2 exhaustive (1 + 21 + 210); size 3: 21 blocks, 2 one-hole + 3 two-hole shapes x 21 shifts;
    # size 4: 21 blocks, 3 one-hole + 6 two-hole shapes x 21 shifts; 7 random sets per sampled size
    assert "by kind:         232 exhaustive, 42 contiguous, 294 near-contiguous, 14 random" in out
    assert main(["schemes", "check", "cce-fr", "--n", "16", "--s", "0", "--m", "16", "--payload-dtype", "float32"]) == 2
    assert "scheme cce-fr: m: expected m <=" in capsys.readouterr().err


# ----------------------------------------------------------------------------- pipelined warm-up
@pytest.mark.parametrize("cls", [PgcCr, PgcFr])
def test_pipelined_reference_warm_up_sends_every_partition_from_step_0(cls):
    sch = cls(6, 2, warmup="reference")
    assert all(np.all(msg.coeffs[msg.partitions, 0] == 1) and len(msg.partitions) == 3 for msg in sch.messages(0))
    st = sch.staleness_matrix(0)
    assert sorted(st[st >= 0].reshape(6, 3)[0].tolist()) == [0, 1, 1]  # fresh + two computed before step 0
    assert verify_scheme(sch).passed
    zeros = cls(6, 2)
    assert zeros.warmup == "zeros" and all(len(m.partitions) == 1 for m in zeros.messages(0))
    with pytest.raises(SchemeError, match=r"warmup: expected zeros or reference, got 'none'"):
        cls(6, 2, warmup="none")
    assert ("this project's extension" in PgcFr.reference) and ("extension" not in PgcCr.reference)
