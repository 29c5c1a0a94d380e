"""The steady part of a calibration run: iterations during which a load came and went are left out.

Why (docs/validation/README.md, finding 18): a calibration describes the machine as the calibration
run saw it, and every prediction made from it assumes that machine. When another program takes CPU for
part of the run only (another user's job, a test suite, a simulation started in another terminal), the
calibration averages two machines – with and without that load – and predicts neither. Measured on
the exponential protocol pass of 2026-12-03: a 40-s simulation in another session during the second
half of ``uncoded-a`` (other processes' CPU 0.46–1.09 cores in its last six 20-iteration blocks after the
warm-up, 0.09–0.11 in the first four) made every coded scheme predicted from it +20 … +49 % too slow;
calibrated on iterations 10–89 alone the same schemes were within +0.4 … +7.6 %.

The rule (:func:`steady_window`): after the warm-up, cut the run into blocks of
:data:`BLOCK_ITERATIONS` iterations and measure in each the CPU every process but the workers took, in
cores (``other_cpu_wait_s + other_cpu_finish_s`` over the block's summed ``duration_s``;
:mod:`gcsim.real.hostcpu`). The run's own level is the lower quartile of the blocks (the master and
Ray cost the same in every block; a load that comes and goes only adds). Blocks more than
:func:`tolerance_cores` above that level are left out: the larger of 0.1 core (the measurement's
scatter on a quiet machine) and three times the run's own block-to-block scatter (runs whose
other-process CPU wanders by itself keep their wandering). This replaced max(0.15 cores, 50 % of the
level) (finding 19): beside a neighbour holding a core (level 1.07) that let +0.12 and +0.36 cores
pass, which cut the workers from 0.89 to 0.53-0.70 cores and made every coded scheme predicted from
that run +10 ... +20 % too slow. On the 196 committed real runs of docs/validation that measured it the rule
leaves out blocks in 19, each a visible transient. When fewer than
:data:`MIN_KEPT_FRACTION` of the blocks (or fewer than :data:`MIN_KEPT_BLOCKS`) would stay, the load
changed throughout and every iteration is kept (with a note). The warm-up iterations are kept in the
frames, so the warm-up rule downstream drops exactly the same ones.

Traces without the other-process columns (trace format < 3, or the simulator without a modelled
background) have nothing to judge by: every iteration is kept.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pandas as pd

from gcsim.compare.rundir import RunDir
from gcsim.errors import ConfigError

#: iterations per block of the steadiness test
BLOCK_ITERATIONS = 20
#: a block is left out when its other-process CPU exceeds the run's level by more than
#: max(ABS_TOLERANCE_CORES, SCATTER_FACTOR x the run's block-to-block scatter): tolerance_cores
ABS_TOLERANCE_CORES = 0.1
SCATTER_FACTOR = 3.0
#: at least this many blocks, and this fraction of them, must stay; else every iteration is kept
MIN_KEPT_BLOCKS = 3
MIN_KEPT_FRACTION = 1 / 3
#: the choices of ``--calibration-window``
CALIBRATION_WINDOWS = ("steady", "all")


@dataclasses.dataclass(frozen=True)
class SteadyWindow:
    """Outcome of :func:`steady_window` for one scheme of one run.

    Attributes:
        kept_iterations: iteration numbers to calibrate on (the warm-up ones included), sorted.
        dropped_iterations: those left out (empty when the run was steady).
        block_cores: ``(blocks,)`` other-process CPU of each post-warm-up block, cores.
        level_cores: the run's own level (lower quartile of ``block_cores``); NaN when not measured.
        note: one line for the calibration's notes (empty when nothing was left out or judged).
    """

    kept_iterations: tuple[int, ...]
    dropped_iterations: tuple[int, ...]
    block_cores: tuple[float, ...]
    level_cores: float
    note: str


def iteration_ranges(values: Sequence[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"3–5, 9"``."""
    out, v = [], sorted(values)
    i = 0
    while i < len(v):
        j = i
        while j + 1 < len(v) and v[j + 1] == v[j] + 1:
            j += 1
        out.append(f"{v[i]}–{v[j]}" if j > i else f"{v[i]}")
        i = j + 1
    return ", ".join(out)


def _span(cores: np.ndarray) -> str:
    """``"0.21–0.44"`` (cores), or one value when the range collapses at two decimals."""
    lo, hi = f"{float(np.min(cores)):.2f}", f"{float(np.max(cores)):.2f}"
    return lo if lo == hi else f"{lo}–{hi}"


def block_other_cores(iterations: pd.DataFrame, warmup: int, block: int = BLOCK_ITERATIONS) -> list[tuple[list[int], float]]:
    """``[(iteration numbers, other-process cores), ...]`` per block of ``block`` iterations after the
    first ``warmup`` (by position); a last block shorter than half of ``block`` joins the one before.
    Cores = summed ``other_cpu_wait_s + other_cpu_finish_s`` over summed ``duration_s`` (NaN when
    either is missing)."""
    its = iterations.sort_values("iteration").iloc[warmup:]
    nums = its["iteration"].astype(int).to_list()
    other = (pd.to_numeric(its.get("other_cpu_wait_s"), errors="coerce")
             + pd.to_numeric(its.get("other_cpu_finish_s"), errors="coerce")).to_numpy(float) \
        if "other_cpu_wait_s" in its and "other_cpu_finish_s" in its else np.full(len(its), np.nan)
    dur = pd.to_numeric(its["duration_s"], errors="coerce").to_numpy(float)
    bounds = list(range(0, len(nums), block))
    if len(bounds) > 1 and len(nums) - bounds[-1] < block / 2:
        bounds.pop()
    out = []
    for k, a in enumerate(bounds):
        b = bounds[k + 1] if k + 1 < len(bounds) else len(nums)
        d = float(np.sum(dur[a:b]))
        o = other[a:b]
        cores = float(np.sum(o)) / d if d > 0 and np.isfinite(o).all() else float("nan")
        out.append((nums[a:b], cores))
    return out


def block_scatter_cores(block_cores: np.ndarray) -> float:
    """Robust standard deviation of a run's block-to-block scatter, in cores: the median absolute
    difference of consecutive blocks times 1.4826 / sqrt(2) (the MAD's normal consistency factor,
    Rousseeuw & Croux, JASA 88:1273, 1993; differences of two blocks have twice the variance). A load
    that comes and goes moves only the differences at its ends, so it hardly moves the median."""
    d = np.abs(np.diff(np.asarray(block_cores, dtype=float)))
    return float(1.4826 * np.median(d) / np.sqrt(2.0)) if d.size else 0.0


def tolerance_cores(scatter_cores: float = 0.0) -> float:
    """How far above the run's level a block's other-process CPU may lie and still count as steady, in
    cores: the larger of :data:`ABS_TOLERANCE_CORES` (the measurement's own scatter on a quiet machine)
    and :data:`SCATTER_FACTOR` x ``scatter_cores`` (:func:`block_scatter_cores`: a run whose other-process
    CPU wanders by itself keeps its wandering)."""
    return max(ABS_TOLERANCE_CORES, SCATTER_FACTOR * float(scatter_cores))


def steady_window(run: RunDir, scheme: str, warmup: int) -> SteadyWindow:
    """The iterations of ``run``'s ``scheme`` to calibrate on (module docstring: the rule and why).

    Args:
        run: a measured run. scheme: its scheme label. warmup: iterations dropped at its start
            (they are kept in the window; the calibration drops them).
    Returns:
        :class:`SteadyWindow`.
    """
    its = run.iterations_of(scheme)
    every = tuple(int(i) for i in its["iteration"])
    blocks = block_other_cores(its, warmup)
    cores = np.array([c for _, c in blocks], dtype=float)
    if len(blocks) < MIN_KEPT_BLOCKS or not np.isfinite(cores).all():
        return SteadyWindow(every, (), tuple(cores), float("nan"), "")
    level = float(np.percentile(cores, 25))
    limit = level + tolerance_cores(block_scatter_cores(cores))
    keep = cores <= limit
    if keep.all():
        return SteadyWindow(every, (), tuple(cores), level, "")
    span, rest = _span(cores[~keep]), _span(cores[keep])
    if keep.sum() < max(MIN_KEPT_BLOCKS, MIN_KEPT_FRACTION * len(blocks)):
        note = (f"{run.label}: the CPU other processes took changed throughout the run ({cores.min():.2f}–"
                f"{cores.max():.2f} cores in {BLOCK_ITERATIONS}-iteration blocks); no steady part long "
                f"enough, calibrated on every iteration")
        return SteadyWindow(every, (), tuple(cores), level, note)
    dropped = sorted(i for (nums, _), k in zip(blocks, keep) if not k for i in nums)
    dropped_set = set(dropped)
    kept = tuple(i for i in every if i not in dropped_set)
    if keep[-1]:
        why = ("a load that came and went during the run; the prediction assumes the machine without it; "
               "--calibration-window all keeps them")
    else:  # the load was still there when the run ended: it may not have gone
        last_kept = int(np.flatnonzero(keep)[-1])
        start = blocks[last_kept + 1][0][0]  # first iteration of the dropped stretch that reaches the end
        why = (f"a load from iteration {start} to the end of the run; the prediction assumes the machine without "
               f"it: if that load is still there, calibrate with --calibration-window all, or on a new run")
    note = (f"{run.label}: calibrated on its steady part, iterations {iteration_ranges([i for i in kept[warmup:]])}; left out "
            f"{iteration_ranges(dropped)}, where other processes took {span} cores against {rest} in the rest ({why})")
    return SteadyWindow(kept, tuple(dropped), tuple(cores), level, note)


def restrict_to_steady(run: RunDir, warmup: int) -> tuple[RunDir, list[str]]:
    """``run`` with the iterations :func:`steady_window` leaves out removed from its iterations and
    workers frames (every scheme), and the notes saying so.

    Args:
        run: a measured run. warmup: iterations dropped at the start of each scheme (kept here).
    Returns:
        ``(run, notes)``: the same object when nothing is left out.
    """
    drop: dict[str, set[int]] = {}
    notes: list[str] = []
    for sch in run.schemes:
        win = steady_window(run, sch, warmup)
        if win.note:
            notes.append(win.note)
        if win.dropped_iterations:
            drop[sch] = set(win.dropped_iterations)
    if not drop:
        return run, notes

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        out = np.ones(len(frame), dtype=bool)
        for sch, its in drop.items():
            out &= ~((frame["scheme"].astype(str) == sch).to_numpy() & frame["iteration"].isin(its).to_numpy())
        return frame[out]

    return dataclasses.replace(run, iterations=keep(run.iterations), workers=keep(run.workers)), notes


def calibration_runs(runs: Sequence[RunDir], window: str, warmup: int) -> tuple[list[RunDir], list[str]]:
    """The calibration runs for ``--calibration-window``: restricted to their steady part
    (``"steady"``, :func:`restrict_to_steady` with the same ``warmup`` for every run) or as given
    (``"all"``), and the notes saying what was left out.

    Raises:
        ConfigError: ``window`` not one of :data:`CALIBRATION_WINDOWS` (field ``--calibration-window``).
    """
    check_window(window)
    if window == "all":
        return list(runs), []
    out, notes = [], []
    for run in runs:
        restricted, ns = restrict_to_steady(run, warmup)
        out.append(restricted)
        notes += ns
    return out, notes


def check_window(window: str) -> None:
    """Raise ConfigError (field ``--calibration-window``) unless ``window`` is one of :data:`CALIBRATION_WINDOWS`."""
    if window not in CALIBRATION_WINDOWS:
        raise ConfigError("--calibration-window", f"one of {', '.join(CALIBRATION_WINDOWS)}", window)


__all__ = ["ABS_TOLERANCE_CORES", "BLOCK_ITERATIONS", "CALIBRATION_WINDOWS", "MIN_KEPT_BLOCKS", "MIN_KEPT_FRACTION",
           "SCATTER_FACTOR", "SteadyWindow", "block_other_cores", "block_scatter_cores",
           "calibration_runs", "check_window", "restrict_to_steady", "steady_window", "tolerance_cores"]
