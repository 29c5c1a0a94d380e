"""What the machine did to a target run that no prediction can know: stalls and slow stretches.

A measured iteration far longer than anything the prediction gives (the machine paused the run: the
hypervisor took the CPU, memory was reclaimed, a daemon blocked) is not a property of the scheme, and
one of them moves a run's mean by several percent. The comparator keeps it in the score (it did
happen) but says so: an observed iteration longer than :data:`STALL_FACTOR` times the simulated p99 is
named, with the mean error the run would have without such iterations.

Over the 217 committed predictions from ``uncoded-a`` (docs/validation/README.md, finding 24) one run
has iterations beyond 3 × the simulated p99: the seed-6 neighbour pass's ``uncoded-b``, iterations 50
(3.9 s) and 142 (12.7 s) against a p99 of 0.97 s; they make its mean error −20.0 % instead of −4.9 %.
In every other run the longest iteration is at most 1.65 × the simulated p99.

A *slow stretch* is the VM's CPU slowing for a part of a target run (finding 25): blocks of
:data:`SLOW_BLOCK_ITERATIONS` iterations after the warm-up whose median CPU-seconds per partition, on
the workers' own clocks, exceed :data:`SLOW_BLOCK_FACTOR` times the median over the run's blocks. A
prediction is made for the calibration run's speed; a target whose machine slowed by half for a
quarter of its iterations is scored against a machine the calibration never saw. Over the 308 (run,
scheme) traces committed under docs/validation the largest block is at most 1.29 × its run's median in
99 % of them (median 1.07 ×: the VM's routine wander, which ``workload.speed_variation`` models); three
exceed 1.3 ×: the seed-6 neighbour pass's exponential gc-fr (1.61 ×, iterations 150–189), a gc-fr
run of the CCE CPU check (1.36 ×) and the 2026-12-02 neighbour pass's exponential cce-fr (1.31 ×).
Like stalls they stay in the score; the note gives the mean error without them.

Two more notes say what a score cannot see: a target run whose other-process load differed from the
calibration's by more than :data:`LOAD_NOTE_CORES` cores (:func:`load_change_note`), and one too short
to judge its p95 (:func:`short_target_note`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from gcsim.compare.estimators import finished_partition_cpu_s
from gcsim.compare.steady import iteration_ranges

if TYPE_CHECKING:
    from gcsim.compare.stats import SampleComparison

#: An observed iteration longer than this many times the simulated p99 is called a stall.
STALL_FACTOR = 3.0
#: iterations per block of the slow-stretch test
SLOW_BLOCK_ITERATIONS = 20
#: a block whose median CPU per partition exceeds this many times the median over the run's blocks is slow
SLOW_BLOCK_FACTOR = 1.3
#: fewest blocks for a median to judge by
MIN_SLOW_BLOCKS = 3


def _pct(fraction: float) -> str:
    """``-0.1289`` -> ``"-12.9 %"``; never ``"-0.0 %"`` (a rounding of zero keeps its sign otherwise)."""
    return f"{round(100 * fraction, 1) + 0.0:+.1f} %"


def stall_note(label: str, observed: pd.DataFrame, simulated_mean_s: float, simulated_p99_s: float,
               factor: float = STALL_FACTOR, *, stalled: np.ndarray | None = None) -> str | None:
    """A one-line note naming the observed iterations longer than ``factor`` x the simulated p99.

    Args:
        label: the comparison's label (scheme, and run when several runs share a scheme).
        observed: the scored observed iterations (after the warm-up), columns ``iteration`` and
            ``duration_s`` (seconds).
        simulated_mean_s, simulated_p99_s: the prediction's mean and p99 iteration time, seconds.
        factor: the multiple of the simulated p99 above which an iteration is called a stall.
        stalled: :func:`stalled_iterations` of ``observed`` when the caller has it already.
    Returns:
        None when no iteration is that long (or the p99 is not finite); else e.g. ``"uncoded (run):
        iteration 142 took 12.74 s, 13.2 x the predicted p99 (0.97 s): a stall of the machine, not of
        the scheme? Mean error −20.0 % with it, −8.7 % without"`` (seconds; error = simulated /
        observed − 1, as everywhere in the comparator).
    """
    nums = stalled if stalled is not None else stalled_iterations(observed, simulated_p99_s, factor)
    if not len(nums):
        return None
    dur = pd.to_numeric(observed["duration_s"], errors="coerce").to_numpy(float)
    count, worst = len(nums), float(dur[np.isin(observed["iteration"].to_numpy(), nums)].max())
    which = (f"iteration {int(nums[0])} took {worst:.2f} s" if count == 1 else
             f"{count} iterations ({', '.join(str(int(i)) for i in nums[:5])}"
             f"{', …' if count > 5 else ''}) took up to {worst:.2f} s")
    with_err = simulated_mean_s / float(np.mean(dur)) - 1.0
    them = "it" if count == 1 else "them"
    rest = mean_error_without(observed, simulated_mean_s, nums)
    without = f"{_pct(rest)} without" if np.isfinite(rest) else "no iteration left without"
    return (f"{label}: {which}, {worst / simulated_p99_s:.1f} x the predicted p99 ({simulated_p99_s:.2f} s): "
            f"a stall of the machine, not of the scheme? Mean error {_pct(with_err)} with {them}, {without}")


def stalled_iterations(observed: pd.DataFrame, simulated_p99_s: float, factor: float = STALL_FACTOR) -> np.ndarray:
    """int ``(k,)``: the iteration numbers of ``observed`` (columns ``iteration``, ``duration_s``,
    seconds) longer than ``factor`` x ``simulated_p99_s``; empty when the p99 is not finite and positive."""
    if not np.isfinite(simulated_p99_s) or simulated_p99_s <= 0 or observed.empty:
        return np.zeros(0, dtype=int)
    dur = pd.to_numeric(observed["duration_s"], errors="coerce").to_numpy(float)
    return observed["iteration"].to_numpy()[dur > factor * simulated_p99_s].astype(int)


@dataclass(frozen=True)
class SlowStretch:
    """The slow blocks of one target run (:func:`slow_stretch`).

    Attributes:
        iterations: ``(k,)`` int, the iteration numbers in the slow blocks, sorted.
        block_cpu_s: ``(B,)`` median CPU-seconds per partition of every block after the warm-up.
        reference_cpu_s: the median of ``block_cpu_s`` (seconds).
        worst_ratio: the slowest block's median over ``reference_cpu_s``.
    """

    iterations: np.ndarray
    block_cpu_s: np.ndarray
    reference_cpu_s: float
    worst_ratio: float


def slow_stretch(workers: pd.DataFrame, warmup: int, factor: float = SLOW_BLOCK_FACTOR,
                 block: int = SLOW_BLOCK_ITERATIONS) -> SlowStretch | None:
    """The blocks of ``block`` iterations after ``warmup`` whose median CPU-seconds per partition (the
    workers' own clocks, rows that sent; :func:`gcsim.compare.estimators.finished_partition_cpu_s`)
    exceed ``factor`` x the median over the blocks.

    Args:
        workers: workers.csv rows of one scheme of one run (columns ``iteration``, ``status``,
            ``n_partitions``, ``compute_cpu_s``).
        warmup: iterations dropped at the start (block 0 starts at iteration ``warmup``).
        factor: the multiple of the run's median block above which a block is slow (> 1).
        block: iterations per block (>= 1).
    Returns:
        None without CPU clocks, with fewer than :data:`MIN_SLOW_BLOCKS` blocks, or when no block is
        slow; else the :class:`SlowStretch`.
    Raises:
        ValueError: ``factor`` <= 1 or ``block`` < 1 (names the value).
    """
    if not factor > 1.0:
        raise ValueError(f"factor must be > 1 (a multiple of the run's median block), got {factor!r}")
    if int(block) < 1:
        raise ValueError(f"block must be >= 1 iteration, got {block!r}")
    it = pd.to_numeric(workers["iteration"], errors="coerce").to_numpy(float)
    per = finished_partition_cpu_s(workers)
    ok = np.isfinite(per) & (it >= warmup)
    if not ok.any():
        return None
    index = ((it[ok] - warmup) // int(block)).astype(int)
    medians = pd.Series(per[ok]).groupby(index).median()
    if len(medians) < MIN_SLOW_BLOCKS:
        return None
    reference = float(np.median(medians.to_numpy(float)))
    slow = medians.index[medians.to_numpy(float) > factor * reference].to_numpy(int)
    if not len(slow):
        return None
    iterations = np.unique(it[ok][np.isin(index, slow)].astype(int))
    return SlowStretch(iterations=iterations, block_cpu_s=medians.to_numpy(float), reference_cpu_s=reference,
                       worst_ratio=float(medians.max()) / reference)


def mean_error_without(observed: pd.DataFrame, simulated_mean_s: float, iterations) -> float:
    """``simulated_mean_s / mean(observed duration_s outside iterations) - 1``; NaN when none is left."""
    keep = ~np.isin(observed["iteration"].to_numpy(), np.asarray(list(iterations), dtype=int))
    dur = pd.to_numeric(observed["duration_s"], errors="coerce").to_numpy(float)[keep]
    return simulated_mean_s / float(np.mean(dur)) - 1.0 if dur.size else float("nan")


def slow_stretch_note(label: str, observed: pd.DataFrame, workers: pd.DataFrame, warmup: int,
                      simulated_mean_s: float, factor: float = SLOW_BLOCK_FACTOR, *,
                      stretch: SlowStretch | None = None) -> str | None:
    """A one-line note naming a target run's slow blocks (:func:`slow_stretch`), with the mean error
    without them.

    Args:
        label: the comparison's label.
        observed: the scored observed iterations (after the warm-up), columns ``iteration``, ``duration_s``.
        workers: the run's workers.csv rows of this scheme; warmup: iterations dropped.
        simulated_mean_s: the prediction's mean iteration time, seconds.
        stretch: :func:`slow_stretch` of ``workers`` when the caller has it already (else computed here).
    Returns:
        None when no block is slow; else e.g. ``"gc-fr: iterations 150–189 ran at up to 1.61 x the run's
        median CPU per partition (42.9 ms against 26.6 ms, the workers' own clocks): the machine slowed
        during this run, which a prediction made at the calibration run's speed cannot know. Mean error
        −15.4 % with them, −4.0 % without"``.
    """
    slow = stretch if stretch is not None else slow_stretch(workers, warmup, factor)
    if slow is None or observed.empty:
        return None
    dur = pd.to_numeric(observed["duration_s"], errors="coerce").to_numpy(float)
    with_err = simulated_mean_s / float(np.mean(dur)) - 1.0
    without = mean_error_without(observed, simulated_mean_s, slow.iterations)
    rest = (f"{_pct(without)} without" if np.isfinite(without) else "no iteration left without")
    return (f"{label}: iterations {iteration_ranges(slow.iterations)} ran at up to {slow.worst_ratio:.2f} x the run's median "
            f"CPU per partition ({slow.block_cpu_s.max() * 1e3:.1f} ms against {slow.reference_cpu_s * 1e3:.1f} ms, "
            f"the workers' own clocks): the machine slowed during this run, which a prediction made at the "
            f"calibration's speed cannot know. Mean error {_pct(with_err)} with them, {rest}")


__all__ = ["MIN_SLOW_BLOCKS", "SLOW_BLOCK_FACTOR", "SLOW_BLOCK_ITERATIONS", "STALL_FACTOR", "SlowStretch",
           "mean_error_without", "slow_stretch", "slow_stretch_note", "stall_note", "stalled_iterations"]


#: a target whose other-process load (``meta.json`` ``host_cpu_load.other_cores``) differs from the
#: calibration runs' by more than this many cores gets a note: the prediction is for the calibration's load
LOAD_NOTE_CORES = 0.3
#: fewer scored iterations than this: the note says the run is too short to judge its p95
SHORT_TARGET_ITERATIONS = 100


def _meta_other_cores(run) -> float:
    load = (getattr(run, "meta", None) or {}).get("host_cpu_load") or {}
    value = load.get("other_cores")
    return float(value) if isinstance(value, (int, float)) else float("nan")


def wait_load_cores(run, scheme: str | None = None) -> float:
    """Other-process CPU while the master waits for replies, in cores: ``Σ other_cpu_wait_s / Σ
    (decodable_s - start_s)`` over ``scheme``'s iterations (default: the run's first scheme). This is
    what the calibration's background is fitted on (:func:`gcsim.compare.estimators.background_cores`),
    everything but the workers: the master, Ray, and any other program, niced or not, in any session.
    NaN when the trace has no such column (runs before trace version 3, simulated runs)."""
    try:
        its = run.iterations_of(scheme if scheme is not None else run.schemes[0])
    except (AttributeError, IndexError, KeyError):
        return float("nan")
    if "other_cpu_wait_s" not in its or its.empty:
        return float("nan")
    cpu = pd.to_numeric(its["other_cpu_wait_s"], errors="coerce").to_numpy(float)
    wait = (pd.to_numeric(its["decodable_s"], errors="coerce") - pd.to_numeric(its["start_s"], errors="coerce")
            ).to_numpy(float)
    ok = np.isfinite(cpu) & np.isfinite(wait) & (wait > 0)
    return float(cpu[ok].sum() / wait[ok].sum()) if ok.any() else float("nan")


_TRACE_LOAD = "iterations.csv other_cpu_wait_s, while the master waited"


def _other_load(run, scheme: str | None = None) -> tuple[float, str]:
    """``(cores, where)``: :func:`wait_load_cores` where the trace has it, else ``meta.json``
    ``host_cpu_load.other_cores`` (every process but the workers and the master, niced ones left out)."""
    v = wait_load_cores(run, scheme)
    if np.isfinite(v):
        return v, _TRACE_LOAD
    return _meta_other_cores(run), "meta.json host_cpu_load.other_cores"


def load_change_note(label: str, target, sources, scheme: str | None = None) -> str | None:
    """A note when the other processes' CPU while the master waited differed during ``target`` (its
    scheme ``scheme``) from the calibration runs' by more than :data:`LOAD_NOTE_CORES` cores
    (:func:`wait_load_cores`; runs without it: ``meta.json`` ``host_cpu_load.other_cores``): a
    prediction is made for the calibration's load and cannot know the target's; ``--load-from target``
    takes the target's measured load instead (a diagnostic, not a prediction). None when the loads agree
    or are not recorded.

    The trace's measure counts a niced job in another session, which ``other_cores`` leaves out with
    the niced workers: such a job beside the calibration run alone made a +50 % error with no note
    (found by a review)."""
    t, where = _other_load(target, scheme)
    loads = [_other_load(r) for r in sources]
    s = np.array([v for v, w in loads if w == where], float)
    s = s[np.isfinite(s)]
    if not np.isfinite(t) or not s.size or abs(t - float(s.mean())) <= LOAD_NOTE_CORES:
        return None
    return (f"{label}: other processes took {t:.2f} cores during this run against {float(s.mean()):.2f} during "
            f"the calibration run(s) ({where}): the prediction is for the "
            f"calibration's load; --load-from target predicts at this run's (a diagnostic, not a prediction)")


def pooled_load_note(sources) -> str | None:
    """A note when pooled calibration runs ran under other-process loads more than
    :data:`LOAD_NOTE_CORES` cores apart (measured as in :func:`load_change_note`): the calibration (and
    its drift) then describes their mix, a machine state neither run had. None for one run, agreeing
    loads, or loads not recorded."""
    loads = [(getattr(r, "label", "?"), *_other_load(r)) for r in sources]
    wheres = {w for _, v, w in loads if np.isfinite(v)}
    where = _TRACE_LOAD if _TRACE_LOAD in wheres else next(iter(wheres), "")
    known = [(label, v) for label, v, w in loads if np.isfinite(v) and w == where]
    if len(known) < 2 or max(v for _, v in known) - min(v for _, v in known) <= LOAD_NOTE_CORES:
        return None
    return ("calibration runs " + ", ".join(f"{label} ({v:.2f} cores)" for label, v in known)
            + f" ran under other-process loads that differ ({where}): pooled, the "
            "calibration describes their mix, which neither run had; calibrate on runs made under one load")


def short_target_note(label: str, observed: pd.DataFrame, comparison: "SampleComparison") -> str | None:
    """A note when fewer than :data:`SHORT_TARGET_ITERATIONS` iterations were scored: the p95 of so short
    a run rests on a handful of iterations (its CI is given), so only the mean is worth judging."""
    n = len(observed)
    if n >= SHORT_TARGET_ITERATIONS:
        return None
    err = comparison.rel_error.get("p95")
    ci = (f" (its error's 95 % CI {err.low:+.0%} … {err.high:+.0%})"
          if err is not None and np.isfinite(err.low) and np.isfinite(err.high) else "")
    return (f"{label}: only {n} iterations scored after the warm-up: too few to judge the p95{ci}; "
            f"{2 * SHORT_TARGET_ITERATIONS} or more make it informative")
