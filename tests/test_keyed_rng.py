"""Vectorised keyed streams equal numpy's own, bit for bit (gcsim.keyed_rng)."""

import numpy as np
import pytest

from gcsim.keyed_rng import keyed_uniforms, stream_keys
from gcsim.latency import build_distribution
from gcsim.scenario import Stragglers
from gcsim.stragglers import MASTER_STREAM, StragglerProcess, master_rng, master_uniforms, worker_rng


@pytest.mark.parametrize("keys", [
    [[1, 2, 3], [0, 0, 0], [2**32 - 1, 5, 9999], [7, 2**32 - 1, 1]],
    [[0], [12345], [2**32 - 1]],
    [[1, 2, 3, 1], [0, 0, 0, 0], [5, 6, 7, 8]],
    [[3, 1, 4, 1, 5, 9], [2, 7, 1, 8, 2, 8]],  # more words than the pool (4)
])
def test_equal_to_default_rng(keys):
    k = np.array(keys, dtype=np.uint64)
    ref = np.stack([np.random.default_rng([int(x) for x in row]).random(7) for row in keys])
    assert np.array_equal(keyed_uniforms(k, 7), ref)


def test_many_keys_across_chunks_and_zero_width():
    keys = stream_keys(11, np.arange(40)[None, :], np.arange(1000)[:, None])  # 40,000 keys > one chunk
    u = keyed_uniforms(keys, 2)
    for i in (0, 1, 32767, 32768, 39999):
        w, t = int(keys[i, 1]), int(keys[i, 2])
        assert np.array_equal(u[i], worker_rng(11, w, t).random(2))
    assert keyed_uniforms(keys[:3], 0).shape == (3, 0)


def test_refuses_multiword_elements():
    with pytest.raises(ValueError):
        keyed_uniforms(np.array([[2**32, 1]], dtype=np.uint64), 1)


def test_straggler_block_equals_per_key_streams():
    """The layout of stragglers.py: Markov uniform, delay uniforms, compute uniforms per partition,
    each from default_rng([seed, w, t]); overhead from default_rng([seed, w, t, 1])."""
    spec = Stragglers.model_validate({"delay": {"dist": "bimodal", "p": 0.3, "delay": 1.0,
                                                "base": {"dist": "expon", "scale": 0.1}},
                                      "persistent": {"p_enter": 0.2, "p_leave": 0.5, "slowdown": 3.0}})
    compute = build_distribution({"dist": "expon", "scale": 0.05})
    over = build_distribution({"dist": "expon", "scale": 0.01})
    proc = StragglerProcess(spec, 5, 9, compute=compute, call_overhead=over)
    b = proc.draw_block(range(6), 2)
    delay = build_distribution(spec.delay)
    for t in range(6):
        for w in range(5):
            u = worker_rng(9, w, t).random(1 + 2 + 2)
            assert b.delay_s[t, w] == delay.from_uniform(u[None, 1:3])[0]
            assert np.array_equal(b.compute_s[t, w], compute.from_uniform(u[3:5, None]))
            uo = np.random.default_rng([9, w, t, 1]).random(1)
            assert b.call_overhead_s[t, w] == over.from_uniform(uo[None, :])[0]
    # Markov chain advanced from the same first uniforms, whatever the block boundaries
    other = StragglerProcess(spec, 5, 9)
    parts = np.concatenate([other.draw_block(range(0, 2)).slow, other.draw_block(range(2, 6)).slow])
    assert np.array_equal(parts, b.slow)
    fresh = StragglerProcess(spec, 5, 9)
    assert np.array_equal(fresh.draw_block([4, 1]).slow, b.slow[[4, 1]])


def test_master_uniforms():
    u = master_uniforms(3, np.arange(5), 2)
    for t in range(5):
        assert np.array_equal(u[t], master_rng(3, t).random(2))
    assert MASTER_STREAM == 2**32 - 1


def test_grid_uniforms_equal_to_keyed_streams():
    """grid_uniforms hashes key elements before broadcasting them: the same numbers as keyed_uniforms of
    the expanded keys (and as default_rng), across chunk boundaries, with more words than the pool."""
    from gcsim import keyed_rng
    from gcsim.keyed_rng import grid_uniforms

    w, t = np.arange(37)[None, :], np.arange(1000)[:, None]  # 37,000 keys: several chunks, ragged rows
    g = grid_uniforms([11, w, t], 3)
    assert g.shape == (1000, 37, 3)
    assert np.array_equal(g.reshape(-1, 3), keyed_uniforms(stream_keys(11, w, t), 3))
    for tt, ww in ((0, 0), (442, 36), (999, 17)):
        assert np.array_equal(g[tt, ww], worker_rng(11, ww, tt).random(3))
    g6 = grid_uniforms([3, np.arange(4)[:, None], 2**32 - 1, np.arange(5)[None, :], 7, 0], 2)
    for a in range(4):
        for b in range(5):
            assert np.array_equal(g6[a, b], np.random.default_rng([3, a, 2**32 - 1, b, 7, 0]).random(2))
    old = keyed_rng._CHUNK
    try:
        keyed_rng._CHUNK = 16  # fewer keys per pass than one row of workers
        assert np.array_equal(grid_uniforms([11, w, t[:5]], 3), g[:5])
    finally:
        keyed_rng._CHUNK = old
    assert grid_uniforms([5, 6], 4).shape == (4,)
    assert np.array_equal(grid_uniforms([5, 6], 4), np.random.default_rng([5, 6]).random(4))
    assert grid_uniforms([1, np.arange(0)[:, None], w], 2).shape == (0, 37, 2)
    assert grid_uniforms([1, w], 0).shape == (1, 37, 0)
    with pytest.raises(ValueError):
        grid_uniforms([1, np.array([-1, 2])], 1)


def test_grid_uniforms_start_skips_leading_numbers():
    from gcsim.keyed_rng import grid_uniforms

    w, t = np.arange(6)[None, :], np.arange(4)[:, None]
    full = grid_uniforms([2, w, t], 5)
    for start in (0, 1, 4, 5):
        np.testing.assert_array_equal(grid_uniforms([2, w, t], 5, start), full[:, :, start:])
    with pytest.raises(ValueError):
        grid_uniforms([2, w], 2, 3)
