"""Shared by the benchmarks: representative scheme parameters at a given n."""

from __future__ import annotations

import contextlib
import signal
import time

from gcsim.errors import SchemeError
from gcsim.schemes import make_scheme

#: a refusal that took longer than this (seconds) was a conditioning check, not a divisibility/parity rule
_SLOW_REFUSAL_S = 0.1


class _OutOfTime(Exception):
    pass


@contextlib.contextmanager
def _deadline(at: float | None):
    """Interrupt the block (``_OutOfTime``) at ``time.monotonic() == at`` (SIGALRM; main thread only)."""
    if at is None:
        yield
        return
    left = at - time.monotonic()
    if left <= 0:
        raise _OutOfTime

    def _fire(signum, frame):
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, left)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _around(target: int, hi: int):
    """s = target, target - 1, target + 1, ... within [1, hi]."""
    seen = set()
    for delta in range(0, max(target, hi) + 1):
        for s in (target - delta, target + delta):
            if 1 <= s <= hi and s not in seen:
                seen.add(s)
                yield s


def representative_params(name: str, n: int, budget_s: float | None = None) -> dict | None:
    """The accepted (s, m) closest to s = n/8 with 1 <= s <= n/4 (m = 2 for CCE; uncoded: s = 0), or None.

    Tries s = n/8, n/8 - 1, n/8 + 1, ... so that divisibility (FR, CCE-FR), parity (gc-mds) and the
    conditioning check (cce-cr) can all be met.

    ``budget_s`` (for large n, where one refused construction of gc-mds or cce-cr takes seconds to
    minutes): give up (None) after that many seconds of constructions, interrupting one in progress
    (SIGALRM), and after a refusal that took longer than 0.1 s (a conditioning check: a larger s is
    worse conditioned) try only smaller s, from half of the refused one (n = 1024 gc-mds: 127, 63, 31,
    15, 7 refused, 3 accepted)."""
    if name == "uncoded":
        return {}
    hi, target = max(1, n // 4), max(1, n // 8)
    deadline = None if budget_s is None else time.monotonic() + budget_s
    while True:
        for s in _around(target, hi):
            p = {"s": s, "m": 2} if name.startswith("cce") else {"s": s}
            t0 = time.monotonic()
            try:
                with _deadline(deadline):
                    make_scheme(name, n=n, **p)
                return p
            except _OutOfTime:
                return None
            except SchemeError:
                if deadline is not None and time.monotonic() - t0 > _SLOW_REFUSAL_S:
                    hi, target = s - 1, max(1, s // 2)
                    break
        else:
            return None
        if hi < 1:
            return None
