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
    """seed_seq ``hashmix`` on uint32 arrays; ``hc`` is the one-element running hash constant. (Array
    operations wrap modulo 2**32 without a warning: no errstate needed; the arguments are never 0-d.)"""
    value = value ^ _U32(hc[0])
    hc[0] = (hc[0] * _MULT_A) & 0xFFFFFFFF
    value *= _U32(hc[0])
    value ^= value >> _U32(16)
    return value


def _mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    r = _U32(_MIX_MULT_L) * x - _U32(_MIX_MULT_R) * y
    r ^= r >> _U32(16)
    return r


def _seed_states(words) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``SeedSequence(entropy).generate_state(4, uint64)`` for every key, the entropy words given as a
    list of E uint32 arrays that broadcast against each other (no spawn key). Returns four uint64
    arrays of the broadcast shape (the state words 0..3).

    The hash is computed on the arrays as given: a word shared by many keys (the seed; a worker index
    along one axis, an iteration along the other) is hashed once, and pool words stay small until
    they mix with a word of another axis (numpy broadcasting does the bookkeeping)."""
    E = len(words)
    shape = np.broadcast_shapes(*(np.shape(w) for w in words))
    hc = [_INIT_A]
    zero = np.zeros((1,) * len(shape), dtype=_U32)
    pool = [_hashmix(words[i] if i < E else zero, hc) for i in range(_POOL)]
    for i_src in range(_POOL):
        for i_dst in range(_POOL):
            if i_src != i_dst:
                pool[i_dst] = _mix(pool[i_dst], _hashmix(pool[i_src], hc))
    for i_src in range(_POOL, E):
        for i_dst in range(_POOL):
            pool[i_dst] = _mix(pool[i_dst], _hashmix(words[i_src], hc))
    # generate_state(4, uint64): 8 uint32 words, read as little-endian pairs (numpy views the uint32
    # state as uint64): word 2k is the low half of state word k. Written straight into that layout.
    words_out = np.empty(shape + (4, 2), dtype=_U32)
    h = _INIT_B
    with np.errstate(over="ignore"):
        for i in range(8):
            v = pool[i % _POOL] ^ _U32(h)
            h = (h * _MULT_B) & 0xFFFFFFFF
            v *= _U32(h)
            np.bitwise_xor(v, v >> _U32(16), out=words_out[..., i // 2, i % 2])
    state = words_out.view("<u8")[..., 0]  # shape + (4,)
    return tuple(state[..., k] for k in range(4))


_M128 = (int(_M_HI) << 64) | int(_M_LO)


def _jump(k: int) -> tuple[int, int]:
    """``(M**k, 1 + M + ... + M**(k-1)) mod 2**128``: ``k`` LCG steps from ``x`` give ``x·A + inc·C``."""
    A, C = 1, 0
    for _ in range(k):
        A, C = (A * _M128) & (2**128 - 1), (C * _M128 + 1) & (2**128 - 1)
    return A, C


class _Pcg:
    """PCG64 streams stepped in place on preallocated uint64 buffers (one pass of numpy ufuncs per
    operation, no temporaries): ``state = state·M + inc (mod 2**128)`` and the XSL-RR output."""

    def __init__(self, s_hi, s_lo, q_hi, q_lo, steps: int = 1):
        """Seeded as numpy's ``pcg64_set_seed``, then ``steps - 1`` further steps (``steps >= 1``, one
        jump ``x·M**k + inc·(1 + ... + M**(k-1))`` instead of k steps)."""
        # pcg64_set_seed: initstate = (st0 << 64) | st1, initseq = (st2 << 64) | st3; inc = initseq·2 + 1
        self.inc_hi = (q_hi << _U64(1)) | (q_lo >> _U64(63))
        self.inc_lo = (q_lo << _U64(1)) | _U64(1)
        N = self.inc_lo.shape
        self.a, self.b, self.c, self.d = (np.empty(N, dtype=_U64) for _ in range(4))
        # pcg_setseq_128_srandom_r: state = 0; step (state = inc); state += initstate; step; then the
        # further steps: with x = inc + initstate, state = x·M**k + inc·C_k = initstate·A + inc·(A + C)
        A, C = _jump(steps)
        self.lo, self.hi = np.empty(N, dtype=_U64), np.empty(N, dtype=_U64)
        self._mul_const(s_hi, s_lo, A, self.hi, self.lo)
        e_hi, e_lo = np.empty(N, dtype=_U64), np.empty(N, dtype=_U64)
        self._mul_const(self.inc_hi, self.inc_lo, (A + C) & (2**128 - 1), e_hi, e_lo)
        np.add(self.lo, e_lo, out=self.lo)
        np.less(self.lo, e_lo, out=self.a, casting="unsafe")  # carry of the low add
        np.add(self.hi, e_hi, out=self.hi)
        np.add(self.hi, self.a, out=self.hi)

    def _mulhi(self, x, b0: np.uint64, b1: np.uint64, out) -> None:
        """``out = high word of x·(b1·2**32 + b0)`` by 32-bit limbs: ``t = a1·b0 + (a0·b0 >> 32)``,
        ``w = (t & mask) + a0·b1``, ``mulhi = a1·b1 + (t >> 32) + (w >> 32)`` (no partial sum overflows).
        Uses buffers a, c, d; ``out`` may be b."""
        a, c, d = self.a, self.c, self.d
        np.bitwise_and(x, _MASK32, out=a)           # a0
        np.right_shift(x, _S32, out=out)            # a1
        np.multiply(a, b0, out=c)
        np.right_shift(c, _S32, out=c)
        np.multiply(out, b0, out=d)
        np.add(c, d, out=c)                         # t
        np.multiply(a, b1, out=a)                   # a0·b1
        np.bitwise_and(c, _MASK32, out=d)
        np.add(d, a, out=d)                         # w
        np.multiply(out, b1, out=out)               # a1·b1
        np.right_shift(c, _S32, out=c)
        np.add(out, c, out=out)
        np.right_shift(d, _S32, out=d)
        np.add(out, d, out=out)

    def _mul_const(self, hi, lo, K: int, out_hi, out_lo) -> None:
        """``(out_hi, out_lo) = (hi, lo)·K mod 2**128`` (``out_*`` distinct from the inputs)."""
        k_hi, k_lo = _U64(K >> 64), _U64(K & (2**64 - 1))
        self._mulhi(lo, k_lo & _MASK32, k_lo >> _S32, out_hi)
        np.multiply(lo, k_hi, out=self.a)
        np.add(out_hi, self.a, out=out_hi)
        np.multiply(hi, k_lo, out=self.a)
        np.add(out_hi, self.a, out=out_hi)
        np.multiply(lo, k_lo, out=out_lo)

    _B0, _B1 = _M_LO & _MASK32, _M_LO >> _S32  # 32-bit halves of the low multiplier word

    def step(self) -> None:
        """One LCG step: ``hi' = mulhi(lo, M_LO) + lo·M_HI + hi·M_LO + inc_hi + carry``,
        ``lo' = lo·M_LO + inc_lo``."""
        lo, hi, a, b = self.lo, self.hi, self.a, self.b
        self._mulhi(lo, self._B0, self._B1, b)
        np.multiply(hi, _M_LO, out=hi)
        np.add(hi, b, out=hi)
        np.multiply(lo, _M_HI, out=a)
        np.add(hi, a, out=hi)
        np.add(hi, self.inc_hi, out=hi)
        np.multiply(lo, _M_LO, out=lo)
        np.add(lo, self.inc_lo, out=lo)
        np.less(lo, self.inc_lo, out=a, casting="unsafe")  # carry of the low add
        np.add(hi, a, out=hi)

    def uniform(self, out: np.ndarray) -> None:
        """``random()``: ``(rotr64(hi ^ lo, hi >> 58) >> 11) · 2**-53`` into the float64 array ``out``."""
        lo, hi, a, b, c = self.lo, self.hi, self.a, self.b, self.c
        np.bitwise_xor(hi, lo, out=a)               # x
        np.right_shift(hi, _U64(58), out=b)         # rot
        np.right_shift(a, b, out=c)
        np.subtract(_U64(64), b, out=b)
        np.bitwise_and(b, _U64(63), out=b)
        np.left_shift(a, b, out=a)
        np.bitwise_or(a, c, out=a)
        np.right_shift(a, _U64(11), out=a)
        np.multiply(a, _TO_DOUBLE, out=out, casting="unsafe")


def _check_part(p) -> np.ndarray:
    a = np.asarray(p)
    if a.size and (a.min() < 0 or a.max() >= 2**32):
        raise ValueError("keys: expected elements in [0, 2**32)")
    return a.astype(_U32)


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
    words = _check_part(keys)
    return grid_uniforms([words[:, e] for e in range(words.shape[1])], width)


def grid_uniforms(parts, width: int, start: int = 0) -> np.ndarray:
    """The uniforms of ``np.random.default_rng([p[idx] for p in parts]).random(width)[start:]`` for every
    index ``idx`` of the broadcast shape of ``parts`` (key elements that broadcast against each other, e.g.
    ``[seed, workers[None, :], iterations[:, None]]``), bit for bit; float64 ``shape + (width - start,)``
    (the first ``start`` numbers of each stream are stepped over, not converted).

    The same numbers as :func:`keyed_uniforms` of :func:`stream_keys` ``(*parts)``, faster: the key
    elements are hashed before they are broadcast (a seed or a worker index shared by many keys is hashed
    once). Every element must be in ``[0, 2**32)`` (ValueError otherwise)."""
    parts = [_check_part(p) for p in parts]
    if not parts:
        raise ValueError("keys: expected at least one key element")
    if not 0 <= start <= width:
        raise ValueError(f"start: expected 0 <= start <= width={width}, got {start}")
    cols = width - start
    given = np.broadcast_shapes(*(p.shape for p in parts))
    shape = given if given else (1,)
    parts = [p.reshape((1,) * (len(shape) - p.ndim) + p.shape) for p in parts]
    out = np.empty(shape + (cols,), dtype=np.float64)
    if out.size == 0:
        return out.reshape(given + (cols,))
    inner = int(np.prod(shape[1:], dtype=np.int64))
    rows = max(1, _CHUNK // max(1, inner))
    flat_out = out.reshape(shape[0], inner, cols)
    for a in range(0, shape[0], rows):  # chunks small enough for the temporaries to stay in cache
        b = min(shape[0], a + rows)
        sub = [p[a:b] if p.shape[0] > 1 else p for p in parts]
        st = [s.reshape(-1) for s in _seed_states(sub)]
        if cols == 0:
            continue
        # random() #j outputs the state after j + 2 steps from x = inc + initstate: jump to #start
        pcg = _Pcg(*st, steps=start + 2)
        dst = flat_out[a:b].reshape(-1, cols)
        for j in range(start, width):
            if j > start:
                pcg.step()
            pcg.uniform(dst[:, j - start])
    return out.reshape(given + (cols,))


#: keys per vectorised pass (a few uint64 buffers of this length stay in a 1-2 MB cache)
_CHUNK = 32768


def stream_keys(*parts) -> np.ndarray:
    """Keys for :func:`keyed_uniforms` from key elements broadcast against each other: e.g.
    ``stream_keys(seed, workers[None, :], iterations[:, None])`` is the ``(I·n, 3)`` array of
    ``[seed, w, t]`` in ``(t, w)`` row-major order. Every part must be an integer (array) in ``[0, 2**32)``."""
    arrs = np.broadcast_arrays(*[np.asarray(p, dtype=np.uint64) for p in parts])
    return np.stack([a.ravel() for a in arrs], axis=1)
