"""Measured iterations the model cannot produce: a stall of the machine inside a target run.

A measured iteration far longer than anything the prediction gives (the machine paused the run: the
hypervisor took the CPU, memory was reclaimed, a daemon blocked) is not a property of the scheme, and
one of them moves a run's mean by several percent. The comparator keeps it in the score (it did
happen) but says so: an observed iteration longer than :data:`STALL_FACTOR` times the simulated p99 is
named, with the mean error the run would have without such iterations.

Over the 217 committed predictions from ``uncoded-a`` (docs/validation/README.md, finding 24) one run
has iterations beyond 3 × the simulated p99: the seed-6 neighbour pass's ``uncoded-b``, iterations 50
(3.9 s) and 142 (12.7 s) against a p99 of 0.97 s; they make its mean error −20.0 % instead of −4.9 %.
In every other run the longest iteration is at most 1.65 × the simulated p99.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: An observed iteration longer than this many times the simulated p99 is called a stall.
STALL_FACTOR = 3.0


def stall_note(label: str, observed: pd.DataFrame, simulated_mean_s: float, simulated_p99_s: float,
               factor: float = STALL_FACTOR) -> str | None:
    """A one-line note naming the observed iterations longer than ``factor`` x the simulated p99.

    Args:
        label: the comparison's label (scheme, and run when several runs share a scheme).
        observed: the scored observed iterations (after the warm-up), columns ``iteration`` and
            ``duration_s`` (seconds).
        simulated_mean_s, simulated_p99_s: the prediction's mean and p99 iteration time, seconds.
        factor: the multiple of the simulated p99 above which an iteration is called a stall.
    Returns:
        None when no iteration is that long (or the p99 is not finite); else e.g. ``"uncoded (run):
        iteration 142 took 12.74 s, 13.2 x the predicted p99 (0.97 s): a stall of the machine, not of
        the scheme? Mean error −20.0 % with it, −8.7 % without"`` (seconds; error = simulated /
        observed − 1, as everywhere in the comparator).
    """
    if not np.isfinite(simulated_p99_s) or simulated_p99_s <= 0 or observed.empty:
        return None
    dur = pd.to_numeric(observed["duration_s"], errors="coerce").to_numpy(float)
    long = dur > factor * simulated_p99_s
    if not long.any():
        return None
    nums = observed["iteration"].to_numpy()[long]
    count, worst = len(nums), float(dur[long].max())
    which = (f"iteration {int(nums[0])} took {worst:.2f} s" if count == 1 else
             f"{count} iterations ({', '.join(str(int(i)) for i in nums[:5])}"
             f"{', …' if count > 5 else ''}) took up to {worst:.2f} s")
    with_err = simulated_mean_s / float(np.mean(dur)) - 1.0
    rest = dur[~long]
    them = "it" if count == 1 else "them"
    without = (f"{100 * (simulated_mean_s / float(np.mean(rest)) - 1.0):+.1f} % without" if rest.size
               else "no iteration left without")
    return (f"{label}: {which}, {worst / simulated_p99_s:.1f} x the predicted p99 ({simulated_p99_s:.2f} s): "
            f"a stall of the machine, not of the scheme? Mean error {100 * with_err:+.1f} % with {them}, {without}")


__all__ = ["STALL_FACTOR", "stall_note"]
