"""Straggler draws: keyed determinism, common random numbers, persistent Markov chain."""

import numpy as np
import pytest

from gcsim.latency import build_distribution
from gcsim.scenario import Stragglers
from gcsim.stragglers import StragglerProcess, worker_rng

SPEC = Stragglers(delay={"dist": "expon", "scale": 0.1}, slowdown={"dist": "lognorm", "s": 0.3},
                  worker_scale=[1.0, 2.0, 1.0, 0.5])


def test_draw_is_keyed_by_seed_worker_iteration():
    a = StragglerProcess(SPEC, 4, seed=7)
    b = StragglerProcess(SPEC, 4, seed=7)
    d5 = a.draw(5)
    for t in (3, 9, 0):
        b.draw(t)
    np.testing.assert_array_equal(b.draw(5).delay_s, d5.delay_s)
    # the delay is the inverse-CDF of the 2nd uniform of the worker's own stream
    u = worker_rng(7, 2, 5).random(3)
    assert d5.delay_s[2] == pytest.approx(-0.1 * np.log1p(-u[1]))
    assert not np.allclose(StragglerProcess(SPEC, 4, seed=8).draw(5).delay_s, d5.delay_s)
    assert len(set(np.round(d5.delay_s, 12))) == 4  # workers have their own streams


def test_worker_scale_multiplies_slowdown_and_worker_streams_ignore_n():
    p4 = StragglerProcess(SPEC, 4, seed=1)
    base = StragglerProcess(Stragglers(delay=SPEC.delay, slowdown=SPEC.slowdown), 4, seed=1)
    np.testing.assert_allclose(p4.draw(2).slowdown, base.draw(2).slowdown * np.array([1.0, 2.0, 1.0, 0.5]))
    p6 = StragglerProcess(Stragglers(delay=SPEC.delay), 6, seed=1)
    np.testing.assert_array_equal(p6.draw(2).delay_s[:4], base.draw(2).delay_s)


def test_block_matches_draw_and_compute_prefix_is_load_independent():
    p = StragglerProcess(SPEC, 4, seed=3, compute=build_distribution({"dist": "expon", "scale": 0.05}))
    b2 = p.draw_block(range(6), 2)
    b5 = p.draw_block(range(6), 5)
    np.testing.assert_array_equal(b2.compute_s, b5.compute_s[:, :, :2])
    np.testing.assert_array_equal(b2.delay_s, b5.delay_s)
    np.testing.assert_array_equal(p.draw(4).slowdown, b5.slowdown[4])
    assert b5.compute_s.shape == (6, 4, 5)


def test_persistent_chain_stationary_share_and_spell_length():
    pe, pl = 0.05, 0.2
    p = StragglerProcess(Stragglers(persistent={"p_enter": pe, "p_leave": pl, "slowdown": 3.0}), 20, seed=4)
    b = p.draw_block(range(2000))
    slow = b.slow
    share = slow.mean()
    assert abs(share - pe / (pe + pl)) < 0.03  # stationary law pi_slow = p_enter / (p_enter + p_leave)
    np.testing.assert_array_equal(b.slowdown, np.where(slow, 3.0, 1.0))
    # empirical leave probability = transitions slow->normal / slow states
    leave = np.sum(slow[:-1] & ~slow[1:]) / np.sum(slow[:-1])
    assert abs(leave - pl) < 0.03
    # random access gives the same chain
    q = StragglerProcess(Stragglers(persistent={"p_enter": pe, "p_leave": pl, "slowdown": 3.0}), 20, seed=4)
    np.testing.assert_array_equal(q.draw(1500).slow, slow[1500])


def test_no_stragglers_is_neutral():
    d = StragglerProcess(None, 3, seed=0).draw(0)
    assert d.delay_s.tolist() == [0.0] * 3 and d.slowdown.tolist() == [1.0] * 3 and not d.slow.any()
