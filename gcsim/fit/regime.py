"""The two-state Markov (normal / slow) regime of persistent stragglers, fitted from a time grid.

Classification: worker ``w`` is *slow* at iteration ``t`` when its time exceeds ``threshold ×`` its
median time (default 1.5). Transition probabilities are the maximum-likelihood estimates of a
two-state Markov chain from the observed state sequences (Anderson & Goodman, Ann. Math. Statist. 28,
1957): ``p_enter = #(normal→slow) / #(normal at t−1)``, ``p_leave = #(slow→normal) / #(slow at t−1)``,
pooled over workers.

The regime is *shown by the data* (``present``) when slow iterations persist: at least
:data:`MIN_SPELLS` slow spells and ``P(slow_t | slow_{t−1}) = 1 − p_leave`` at least twice the
stationary ``P(slow)`` and at least 0.5 (i.i.d. tail events would give ``1 − p_leave ≈ P(slow)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: fewest slow spells (maximal runs of slow iterations, over all workers) to report a regime
MIN_SPELLS = 3


@dataclass(frozen=True)
class RegimeFit:
    """The fitted regime.

    Attributes:
        slow: bool ``(T, W)``: classified slow iterations.
        p_enter, p_leave: per-iteration transition probabilities (NaN where undefined).
        pi_slow: fraction of slow worker-iterations.
        stay_slow: ``1 − p_leave``.
        n_spells: number of slow spells.
        present: the data shows a persistent regime (module docstring rule).
        reason: one sentence saying why it is or is not present.
        threshold: the factor of the worker's median above which an iteration is slow.
    """

    slow: np.ndarray
    p_enter: float
    p_leave: float
    pi_slow: float
    stay_slow: float
    n_spells: int
    present: bool
    reason: str
    threshold: float


def fit_regime(times: np.ndarray, threshold: float = 1.5) -> RegimeFit:
    """Fit the two-state regime to ``times`` ``(T, W)`` (seconds, T >= 2).

    Raises:
        ValueError: ``times`` not a 2-D array with at least 2 rows, or ``threshold`` <= 1.
    """
    x = np.asarray(times, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"times: expected a (T, W) array with T >= 2, got shape {x.shape}")
    if not threshold > 1:
        raise ValueError(f"threshold: expected a factor > 1, got {threshold!r}")
    slow = x > threshold * np.median(x, axis=0)[None, :]
    prev, cur = slow[:-1], slow[1:]
    n_norm, n_slow = int((~prev).sum()), int(prev.sum())
    p_enter = float((~prev & cur).sum() / n_norm) if n_norm else float("nan")
    p_leave = float((prev & ~cur).sum() / n_slow) if n_slow else float("nan")
    pi = float(slow.mean())
    spells = int(slow[0].sum() + (~prev & cur).sum())
    stay = 1.0 - p_leave if n_slow else float("nan")
    if spells < MIN_SPELLS:
        present, reason = False, (f"{spells} slow spell(s) (time > {threshold:g} x the worker's median); "
                                  f"at least {MIN_SPELLS} needed")
    elif not (stay >= 0.5 and stay >= 2 * pi):
        present, reason = False, (f"slow iterations do not persist: P(slow | slow before) = {stay:.3f} vs "
                                  f"P(slow) = {pi:.3f} (needs >= 0.5 and >= 2 x P(slow))")
    else:
        present, reason = True, (f"{spells} slow spells, P(slow | slow before) = {stay:.3f} vs P(slow) = {pi:.3f}: "
                                 f"persistent")
    return RegimeFit(slow=slow, p_enter=p_enter, p_leave=p_leave, pi_slow=pi, stay_slow=stay, n_spells=spells,
                     present=present, reason=reason, threshold=float(threshold))
