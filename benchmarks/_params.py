"""Shared by the benchmarks: representative scheme parameters at a given n."""

from __future__ import annotations

from gcsim.errors import SchemeError
from gcsim.schemes import make_scheme


def representative_params(name: str, n: int) -> dict | None:
    """The accepted (s, m) closest to s = n/8 with 1 <= s <= n/4 (m = 2 for CCE; uncoded: s = 0), or None.

    Tries s = n/8, n/8 - 1, n/8 + 1, ... so that divisibility (FR, CCE-FR), parity (gc-mds) and the
    conditioning check (cce-cr) can all be met."""
    if name == "uncoded":
        return {}
    target = max(1, n // 8)
    for delta in range(0, n):
        for s in (target - delta, target + delta):
            if not 1 <= s <= max(1, n // 4):
                continue
            p = {"s": s, "m": 2} if name.startswith("cce") else {"s": s}
            try:
                make_scheme(name, n=n, **p)
                return p
            except SchemeError:
                continue
    return None
