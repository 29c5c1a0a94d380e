"""The pipelined schemes' per-phase tables (issue 13): the staleness matrix computed with whole arrays
equals the definition worker by worker, and the phase cache stays within its byte bound while every
phase still gives the same messages."""

import numpy as np
import pytest

from gcsim.schemes import make_scheme


def _staleness_by_definition(sch, t: int) -> np.ndarray:
    """Worker i computes position (offset_i + t') mod (s+1) at iteration t' (gcsim.schemes.pipelined)."""
    h = sch.s + 1
    out = np.full((sch.n, sch.k), -1, dtype=int)
    for i in range(sch.n):
        for q, j in enumerate(sch._held[i]):
            age = (sch._offset(i) + t - q) % h
            if t - age >= 0:
                out[i, j] = age
            elif sch.warmup == "reference":
                out[i, j] = t + 1
    return out


@pytest.mark.parametrize("name,n,s", [("pgc-fr", 6, 1), ("pgc-fr", 8, 3), ("pgc-fr", 12, 5), ("pgc-cr", 7, 2),
                                      ("pgc-cr", 10, 4), ("pgc-cr", 9, 0)])
@pytest.mark.parametrize("warmup", ["zeros", "reference"])
def test_staleness_matrix_is_the_definition(name, n, s, warmup):
    sch = make_scheme(name, n, s)
    sch = type(sch)(n=n, s=s, warmup=warmup)
    for t in range(3 * (s + 1) + 2):
        np.testing.assert_array_equal(sch.staleness_matrix(t), _staleness_by_definition(sch, t))


def test_phase_cache_is_bounded_and_rebuilt_phases_are_equal():
    sch = make_scheme("pgc-cr", 64, 40)
    per_phase = 3 * 64 * 41 * 8 + 200 * 64  # what pipelined.py counts per phase
    sch.PHASE_CACHE_BYTES = 5 * per_phase + 1  # room for 5 of the 2s+1 = 81 phases
    first = {t: [m.coeffs.copy() for m in sch.messages(t)] for t in range(90)}
    assert len(sch._per_phase) == 5
    for t in (0, 3, 41, 89):  # evicted long ago: rebuilt, identical
        assert all(np.array_equal(a, m.coeffs) for a, m in zip(first[t], sch.messages(t)))
    d1 = sch.decode(list(range(64)), 60)
    np.testing.assert_array_equal(d1.staleness, sch.staleness_matrix(60)[list(d1.used)])
    assert len(sch._per_phase) <= 5


def test_decode_cache_is_bounded_in_bytes():
    sch = make_scheme("pgc-fr", 64, 7)
    one = sch.decode(list(range(64)), 20)
    size = one.weights.nbytes + one.staleness.nbytes
    sch.clear_cache()
    sch.cache_bytes = 3 * size  # three pipelined decodings
    first = {t: sch.decode(list(range(64)), t) for t in range(40)}
    assert len(sch._cache) == 3 and sch._cache_nbytes == 3 * size
    again = sch.decode(list(range(64)), 2)  # evicted: decoded again, the same
    assert again is not first[2] and again.used == first[2].used
    np.testing.assert_array_equal(again.staleness, first[2].staleness)
    sch.clear_cache()
    assert sch._cache_nbytes == 0 and not sch._cache
