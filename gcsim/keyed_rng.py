"""Many keyed numpy streams at once: the uniforms of ``np.random.default_rng(key).random(width)`` for
a whole array of integer keys, bit for bit, without constructing one Generator per key.

The simulator keys one stream per (seed, worker, iteration) (:mod:`gcsim.stragglers`); constructing
``default_rng([seed, w, t])`` costs ~15 µs, i.e. minutes for n = 1024 workers × 10,000 iterations.
This module runs the same two algorithms vectorised over keys:

* ``numpy.random.SeedSequence`` (O'Neill's seed_seq hash, numpy ``bit_generator.pyx``): the entropy
  words are hashed into a pool of 4 uint32 words (``mix_entropy``), then ``generate_state(4, uint64)``;
  the hash constants evolve independently of the data, so they are shared by every key;
* ``PCG64`` (O'Neill, "PCG: A Family of Simple Fast Space-Efficient Statistically Good Algorithms for
  Random Number Generation", 2014; numpy ``pcg64.h``): 128-bit LCG ``state = state·M + inc`` with the
  XSL-RR output, seeded by ``pcg_setseq_128_srandom_r``; ``random()`` is ``(next_uint64 >> 11)·2**-53``.

128-bit arithmetic is done on pairs of uint64 (high, low) with 32-bit limbs for the 64×64 product.
:func:`keyed_uniforms` is tested against ``np.random.default_rng`` for equality
(``tests/test_keyed_rng.py``); it is only valid for keys whose every element is in ``[0, 2**32)``
(one uint32 word each, which is what ``SeedSequence`` makes of such integers).
"""

from __future__ import annotations

import numpy as np

_U32 = np.uint32
_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)
_S32 = _U64(32)

# SeedSequence constants (numpy/random/bit_generator.pyx)
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R = 0xCA01F9DD, 0x4973F715
_POOL = 4
# PCG64 default 128-bit multiplier (pcg64.h: PCG_DEFAULT_MULTIPLIER_HIGH/LOW)
_M_HI, _M_LO = _U64(2549297995355413924), _U64(4865540595714422341)
_TO_DOUBLE = 1.0 / 9007199254740992.0


def _hashmix(value: np.ndarray, hc: list[int]) -> np.ndarray:
    """seed_seq ``hashmix`` on uint32 arrays; ``hc`` is the one-element running hash constant."""
    with np.errstate(over="ignore"):
        value = value ^ _U32(hc[0])
        hc[0] = (hc[0] * _MULT_A) & 0xFFFFFFFF
        value = value * _U32(hc[0])
        return value ^ (value >> _U32(16))


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        r = _U32(_MIX_MULT_L) * x - _U32(_MIX_MULT_R) * y
        return r ^ (r >> _U32(16))


def _seed_states(words: np.ndarray) -> np.ndarray:
    """``SeedSequence(entropy).generate_state(4, uint64)`` for every row of ``words`` ``(N, E)`` uint32
    (the entropy words, no spawn key). Returns uint64 ``(N, 4)``."""
    N, E = words.shape
    hc = [_INIT_A]
    zero = np.zeros(N, dtype=_U32)
    pool = [_hashmix(words[:, i] if i < E else zero, hc) for i in range(_POOL)]
    for i_src in range(_POOL):
        for i_dst in range(_POOL):
            if i_src != i_dst:
                pool[i_dst] = _mix(pool[i_dst], _hashmix(pool[i_src], hc))
    for i_src in range(_POOL, E):
        for i_dst in range(_POOL):
            pool[i_dst] = _mix(pool[i_dst], _hashmix(words[:, i_src], hc))
    out = np.empty((N, 8), dtype=_U32)
    h = _INIT_B
    with np.errstate(over="ignore"):
        for i in range(8):
            v = pool[i % _POOL] ^ _U32(h)
            h = (h * _MULT_B) & 0xFFFFFFFF
            v = v * _U32(h)
            out[:, i] = v ^ (v >> _U32(16))
    return out.view("<u8").astype(_U64)  # little-endian pairs of words, as numpy does


def _mul64(a: np.ndarray, b: np.uint64) -> tuple[np.ndarray, np.ndarray]:
    """Full 64×64 -> 128-bit product of uint64 arrays: (high, low)."""
    a0, a1 = a & _MASK32, a >> _S32
    b0, b1 = b & _MASK32, b >> _S32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> _S32) + (p01 & _MASK32) + (p10 & _MASK32)
    lo = (mid << _S32) | (p00 & _MASK32)
    hi = p11 + (p01 >> _S32) + (p10 >> _S32) + (mid >> _S32)
    return hi, lo


def _step(hi: np.ndarray, lo: np.ndarray, inc_hi: np.ndarray, inc_lo: np.ndarray):
    """One PCG64 LCG step ``state = state·M + inc (mod 2**128)``."""
    with np.errstate(over="ignore"):
        ph, pl = _mul64(lo, _M_LO)
        ph = ph + lo * _M_HI + hi * _M_LO
        nl = pl + inc_lo
        carry = (nl < pl).astype(_U64)
        return ph + inc_hi + carry, nl


def _output(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """XSL-RR output: ``rotr64(hi ^ lo, hi >> 58)``."""
    x = hi ^ lo
    rot = hi >> _U64(58)
    return (x >> rot) | (x << ((_U64(64) - rot) & _U64(63)))


def keyed_uniforms(keys: np.ndarray, width: int) -> np.ndarray:
    """``out[i] == np.random.default_rng(list(keys[i])).random(width)`` for every row, bit for bit.

    Args:
        keys: integer array ``(N, E)``, every element in ``[0, 2**32)`` (E >= 1).
        width: uniforms per key (>= 0).
    Returns:
        float64 ``(N, width)`` in ``[0, 1)``.
    Raises:
        ValueError: a key element outside ``[0, 2**32)`` (numpy would use more than one word for it).
    """
    keys = np.asarray(keys)
    if keys.ndim != 2 or keys.shape[1] < 1:
        raise ValueError(f"keys: expected an (N, E >= 1) integer array, got shape {keys.shape}")
    if keys.size and (keys.min() < 0 or keys.max() >= 2**32):
        raise ValueError("keys: expected elements in [0, 2**32)")
    N = keys.shape[0]
    out = np.empty((N, width), dtype=np.float64)
    for a in range(0, N, _CHUNK):  # chunks small enough for the temporaries to stay in cache
        out[a:a + _CHUNK] = _uniforms_chunk(keys[a:a + _CHUNK].astype(_U32), width)
    return out


#: keys per vectorised pass (~20 temporaries of 8 bytes per key stay in a 1-2 MB cache)
_CHUNK = 32768


def _uniforms_chunk(words: np.ndarray, width: int) -> np.ndarray:
    N = words.shape[0]
    out = np.empty((width, N), dtype=np.float64)
    if N == 0 or width == 0:
        return out.T
    st = _seed_states(words)
    # pcg64_set_seed: initstate = (st[0] << 64) | st[1], initseq = (st[2] << 64) | st[3]
    s_hi, s_lo, q_hi, q_lo = st[:, 0], st[:, 1], st[:, 2], st[:, 3]
    inc_hi = (q_hi << _U64(1)) | (q_lo >> _U64(63))
    inc_lo = (q_lo << _U64(1)) | _U64(1)
    hi, lo = inc_hi, inc_lo  # the first step from state 0 gives inc
    with np.errstate(over="ignore"):
        nl = lo + s_lo
        hi = hi + s_hi + (nl < lo).astype(_U64)
    lo = nl
    hi, lo = _step(hi, lo, inc_hi, inc_lo)
    for j in range(width):
        hi, lo = _step(hi, lo, inc_hi, inc_lo)
        out[j] = (_output(hi, lo) >> _U64(11)).astype(np.float64) * _TO_DOUBLE
    return out.T


def stream_keys(*parts) -> np.ndarray:
    """Keys for :func:`keyed_uniforms` from key elements broadcast against each other: e.g.
    ``stream_keys(seed, workers[None, :], iterations[:, None])`` is the ``(I·n, 3)`` array of
    ``[seed, w, t]`` in ``(t, w)`` row-major order. Every part must be an integer (array) in ``[0, 2**32)``."""
    arrs = np.broadcast_arrays(*[np.asarray(p, dtype=np.uint64) for p in parts])
    return np.stack([a.ravel() for a in arrs], axis=1)
