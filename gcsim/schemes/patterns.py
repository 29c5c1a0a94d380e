"""Straggler patterns to check a scheme on: the structured worst cases first, then random samples.

A uniformly random sample of straggler sets almost never hits the sets that break a code: for the
cyclic and polynomial codes (Tandon et al., ICML 2017, §3.2; Raviv et al., ICML 2018, §3; Ye & Abbe,
ICML 2018, §3) the worst-conditioned decodes are those whose stragglers are *contiguous* (or nearly
so) in worker order – the arrived rows of B, or the arrived Vandermonde nodes, then cluster – and
that is also what one slow host with consecutive worker ids produces. Every check in gcsim
(:mod:`gcsim.schemes.verify`, the construction-time guards of ``cce-cr``, ``cce-fr`` and ``gc-mds``)
therefore tries, for a straggler-set size ``t`` over ``n`` workers:

1. ``contiguous``: the cyclic blocks ``{i, ..., i+t-1} mod n`` for every shift ``i`` (``n`` sets);
2. ``near-contiguous``: ``t`` stragglers inside a cyclic window of ``t+1`` or ``t+2`` consecutive
   workers that are not a block (one or two holes), for every shift;
3. ``random``: sets drawn uniformly (``rng.choice`` without replacement), after the structured ones.

Sets are sorted tuples of worker ids; structured sets are de-duplicated.
"""

from __future__ import annotations

import itertools
from typing import Iterator

import numpy as np

#: the kinds of pattern, in the order checks try them (``exhaustive`` replaces all three when the
#: size is small enough to enumerate)
PATTERN_KINDS = ("exhaustive", "contiguous", "near-contiguous", "random")


def contiguous_sets(n: int, t: int) -> list[tuple[int, ...]]:
    """The distinct cyclic blocks ``{i..i+t-1 mod n}``, ``i = 0..n-1`` (one set when t is 0 or n)."""
    if t <= 0:
        return [()]
    out = dict.fromkeys(tuple(sorted((i + q) % n for q in range(t))) for i in range(n))
    return list(out)


def near_contiguous_sets(n: int, t: int, max_holes: int = 2, shifts=None) -> list[tuple[int, ...]]:
    """Distinct sets of ``t`` workers inside a cyclic window of ``t + h`` consecutive workers
    (``h = 1..max_holes`` holes, holes not at the window's ends) starting at every shift (or only at
    ``shifts``, an iterable of worker ids); blocks excluded."""
    if t <= 1:
        return []
    blocks = set(contiguous_sets(n, t))
    out: dict[tuple[int, ...], None] = {}
    for h in range(1, max_holes + 1):
        w = t + h
        if w > n:
            break
        for holes in itertools.combinations(range(1, w - 1), h):
            offsets = [q for q in range(w) if q not in holes]
            for i in (range(n) if shifts is None else shifts):
                st = tuple(sorted((i + q) % n for q in offsets))
                if st not in blocks:
                    out[st] = None
    return list(out)


def straggler_sets(n: int, t: int, samples: int, rng: np.random.Generator,
                   exhaustive_max: int) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Yield ``(kind, straggler set)`` for size ``t``: every set (kind ``exhaustive``) while
    ``C(n, t) <= exhaustive_max``; else the ``contiguous`` and ``near-contiguous`` sets, then
    ``samples`` ``random`` ones drawn with ``rng``.

    Args:
        n: workers; t: straggler-set size (``0 <= t <= n``); samples: random sets (>= 0);
        rng: numpy generator for the random sets; exhaustive_max: enumeration bound.
    """
    import math

    if math.comb(n, t) <= exhaustive_max:
        for st in itertools.combinations(range(n), t):
            yield "exhaustive", st
        return
    for st in contiguous_sets(n, t):
        yield "contiguous", st
    for st in near_contiguous_sets(n, t):
        yield "near-contiguous", st
    for _ in range(samples):
        yield "random", tuple(sorted(int(x) for x in rng.choice(n, size=t, replace=False)))


def count_straggler_sets(n: int, t: int, samples: int, exhaustive_max: int) -> int:
    """How many sets :func:`straggler_sets` yields for size ``t`` (duplicates among the random ones
    counted), without building them.

    ``C(n, t)`` while that is at most ``exhaustive_max``. Else ``n`` blocks (one when ``t`` is 0 or
    ``n``), ``n (t - 1)`` one-hole and ``n C(t, 2)`` two-hole near-contiguous sets, then ``samples``:
    for ``n >= t + 5`` the gap outside a window (``n - t - h >= 3`` workers) is longer than any hole
    (at most 2), so a set fixes its window and hole positions and no two (shift, holes) pairs give
    the same set. Smaller ``n`` is counted by building the sets.

    Raises:
        ValueError: ``t`` outside ``0..n`` or ``samples < 0``.
    """
    import math

    if not 0 <= t <= n:
        raise ValueError(f"t: expected 0 <= t <= n={n}, got {t}")
    if samples < 0:
        raise ValueError(f"samples: expected >= 0, got {samples}")
    if math.comb(n, t) <= exhaustive_max:
        return math.comb(n, t)
    if n >= t + 5:
        structured = n + (n * (t - 1) + n * math.comb(t, 2) if t >= 2 else 0)
    else:
        structured = len(contiguous_sets(n, t)) + len(near_contiguous_sets(n, t))
    return structured + samples


def count_kinds(kinds) -> dict[str, int]:
    """``{kind: count}`` over :data:`PATTERN_KINDS` (zeros included) from an iterable of kinds."""
    out = dict.fromkeys(PATTERN_KINDS, 0)
    for k in kinds:
        out[k] += 1
    return out


def format_kinds(counts: dict[str, int]) -> str:
    """``"12 exhaustive, 0 contiguous, ..."`` for printing a check's pattern counts."""
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in PATTERN_KINDS)
