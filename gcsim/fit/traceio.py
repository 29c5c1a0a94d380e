"""Read measured per-worker, per-iteration times into a worker × iteration grid.

Two inputs are accepted:

* a **gcsim run directory** (``gcsim simulate`` or ``gcsim real``): ``workers.csv`` rows of one scheme
  (``uncoded`` when present, else the first; ``scheme=``), a worker's time being
  ``send_s - dispatch_s`` (seconds from having the model to its message leaving: injected delay plus
  compute) and its load ``n_partitions``;
* a **CSV file** of the common shape ``worker, iteration (or time), duration``, one row per worker and
  iteration, in any order, extra columns ignored. Column names (case-insensitive) recognised:
  worker – :data:`WORKER_NAMES`; iteration – :data:`ITERATION_NAMES` (only orders the rows: the k-th
  distinct value is iteration k); duration – :data:`DURATION_NAMES`. ``worker_col=`` etc. override.
  Durations are in the file's unit; ``unit_s`` converts one unit to seconds (default 1: seconds).
  The Alibaba PAI mini-batch traces (``,worker,gpu,time,batch_time_norm``, normalised so the file's
  maximum is 1000) read as they are; their unit is relative, not seconds.

Ragged ends are trimmed: only the iterations from the first to the last one at which every worker has
a row are kept (PAI's job 2 ends with worker 0 alone); inside that range a missing (worker, iteration)
is an error. Workers are renumbered 0..W-1 in sorted order of their ids.

Errors: every problem is one :class:`~gcsim.errors.RunDirError` line naming the file, the line
(header = line 1) and the column: unreadable file, missing column, empty / non-numeric / non-finite /
negative cell, a (worker, iteration) given twice, a worker missing inside the kept range, a trace
shorter than ``min_iterations`` iterations.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from gcsim.errors import RunDirError

WORKER_NAMES = ("worker", "worker_id", "rank")
ITERATION_NAMES = ("iteration", "iter", "step", "time", "timestamp")
DURATION_NAMES = ("duration", "duration_s", "seconds", "iteration_time", "batch_time", "batch_time_norm", "time_s")


@dataclass(frozen=True)
class Trace:
    """A worker × iteration grid of measured times.

    Attributes:
        path: the file or run directory read.
        times: float64 ``(T, W)``: seconds (trace units × ``unit_s``) of worker ``w`` at iteration ``t``.
        workers: the ``W`` original worker ids (column ``w`` of ``times`` is ``workers[w]``).
        iterations: the ``T`` original iteration / time values (row ``t`` of ``times``).
        loads: int ``(T, W)`` partitions computed (run directories) or None (CSV: unknown, taken as 1).
        source: what was read (e.g. ``"CSV columns worker/time/batch_time_norm"``).
        unit_s: seconds per trace unit.
        notes: what was trimmed or assumed, one sentence each.
    """

    path: str
    times: np.ndarray
    workers: list
    iterations: np.ndarray
    loads: np.ndarray | None
    source: str
    unit_s: float = 1.0
    notes: list[str] = field(default_factory=list)

    @property
    def n_iterations(self) -> int:
        return int(self.times.shape[0])

    @property
    def n_workers(self) -> int:
        return int(self.times.shape[1])


def read_trace(path: str | Path, *, scheme: str | None = None, worker_col: str | None = None,
               iteration_col: str | None = None, duration_col: str | None = None, unit_s: float = 1.0,
               min_iterations: int = 20) -> Trace:
    """Read a run directory or CSV trace (see the module docstring).

    Args:
        path: a gcsim run directory or a CSV file.
        scheme: run directories: the scheme's rows to read (default ``uncoded`` if present, else the first).
        worker_col, iteration_col, duration_col: CSV column names overriding the recognised ones.
        unit_s: seconds per unit of the CSV's durations (> 0; ignored for run directories: seconds).
        min_iterations: fewest complete iterations accepted (>= 1).
    Returns:
        :class:`Trace`.
    Raises:
        RunDirError: one line naming the file, line and column of the first problem.
        ConfigError: ``unit_s`` not a finite number > 0.
    """
    from gcsim.errors import ConfigError

    if not (isinstance(unit_s, (int, float)) and math.isfinite(unit_s) and unit_s > 0):
        raise ConfigError("--unit-s", "a finite number of seconds per trace unit > 0", unit_s)
    p = Path(path)
    if p.is_dir():
        return _read_run_dir(p, scheme, min_iterations)
    if not p.is_file():
        raise RunDirError(f"{path}: expected a gcsim run directory or a CSV file of worker, iteration, duration; "
                          f"got a path that does not exist")
    return _read_csv(p, worker_col, iteration_col, duration_col, float(unit_s), min_iterations)


# ============================================================================ CSV
def _pick(header: list[str], given: str | None, names: tuple[str, ...], role: str, path: Path,
          taken: set[int]) -> int:
    low = [h.strip().lower() for h in header]
    if given is not None:
        if given.strip().lower() not in low:
            raise RunDirError(f"{path}:1: {role} column: expected one of the header's columns "
                              f"({', '.join(h for h in header if h)}), got {given!r}")
        return low.index(given.strip().lower())
    for name in names:
        if name in low and low.index(name) not in taken:
            return low.index(name)
    raise RunDirError(f"{path}:1: {role} column: expected a column named one of {', '.join(names)} "
                      f"(or pass --{role}-col), got columns {', '.join(repr(h) for h in header)}")


def _read_csv(path: Path, worker_col, iteration_col, duration_col, unit_s: float, min_iterations: int) -> Trace:
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise RunDirError(f"{path}:1: expected a header line naming the columns, got an empty file")
            wc = _pick(header, worker_col, WORKER_NAMES, "worker", path, set())
            dc = _pick(header, duration_col, DURATION_NAMES, "duration", path, {wc})
            ic = _pick(header, iteration_col, ITERATION_NAMES, "iteration", path, {wc, dc})
            cols = (wc, ic, dc)
            cells: list[list[str]] = [[], [], []]
            lines: list[int] = []
            for row in reader:
                if not row or all(not c.strip() for c in row):
                    continue
                for k, c in enumerate(cols):
                    cells[k].append(row[c] if c < len(row) else "")
                lines.append(reader.line_num)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise RunDirError(f"{path}: expected a readable CSV file, got {type(e).__name__}: {e}") from None
    names = [header[c] for c in cols]
    if not lines:
        raise RunDirError(f"{path}:2: expected rows of worker, iteration, duration, got none")
    line_arr = np.asarray(lines)
    values = []
    for k, (kind, name) in enumerate(zip(("worker", "iteration", "duration"), names)):
        raw = np.asarray(cells[k], dtype=object)
        num = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(num) | ((num < 0) if kind == "duration" else np.zeros(len(num), bool))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            cell = str(raw[i]).strip()
            what = ("a number >= 0 (the worker's time for that iteration)" if kind == "duration"
                    else "a finite number")
            given = "an empty cell" if cell == "" else repr(cell)
            raise RunDirError(f"{path}:{line_arr[i]}: column {name!r}: expected {what}, got {given}")
        values.append(num)
    w_ids, it_vals, dur = values
    if np.all(w_ids == np.round(w_ids)):
        w_ids = w_ids.astype(np.int64)
    df = pd.DataFrame({"worker": w_ids, "iteration": it_vals, "duration": dur * unit_s, "line": line_arr})
    trace = _to_grid(df, path, names, min_iterations)
    return Trace(path=str(path), times=trace[0], workers=trace[1], iterations=trace[2], loads=None,
                 source=f"CSV columns {names[0]}/{names[1]}/{names[2]}", unit_s=unit_s, notes=trace[3])


def _to_grid(df: pd.DataFrame, path: Path, names: list[str], min_iterations: int):
    """Pivot rows ``worker, iteration, duration, line`` into ``(T, W)`` (see the module docstring)."""
    workers = sorted(df["worker"].unique().tolist())
    its = np.sort(df["iteration"].unique())
    counts = df.groupby("iteration")["worker"].nunique().reindex(its).to_numpy()
    full = np.flatnonzero(counts == len(workers))
    notes: list[str] = []
    if len(full) == 0:
        raise RunDirError(f"{path}: column {names[0]!r}: expected at least one iteration at which all "
                          f"{len(workers)} workers have a row, got none")
    lo, hi = int(full[0]), int(full[-1])
    inside = counts[lo:hi + 1] != len(workers)
    if inside.any():
        it_bad = its[lo + int(np.flatnonzero(inside)[0])]
        rows = df[df["iteration"] == it_bad]
        missing = [w for w in workers if w not in set(rows["worker"])]
        raise RunDirError(f"{path}:{int(rows['line'].min())}: column {names[0]!r}: expected a row for every worker "
                          f"at every iteration between the first and last complete ones, got no row for worker "
                          f"{missing[0]} at {names[1]} {it_bad:g}")
    dropped = len(its) - (hi - lo + 1)
    if dropped:
        notes.append(f"{dropped} iteration(s) at the ends where not every worker has a row were dropped "
                     f"(kept {names[1]} {its[lo]:g} to {its[hi]:g}).")
    kept = its[lo:hi + 1]
    if len(kept) < min_iterations:
        raise RunDirError(f"{path}:{int(df['line'].max())}: column {names[1]!r}: expected at least {min_iterations} "
                          f"iterations at which every worker has a row, got {len(kept)}")
    sub = df[(df["iteration"] >= kept[0]) & (df["iteration"] <= kept[-1])]
    dup = sub.duplicated(["worker", "iteration"], keep="first")
    if dup.any():
        r = sub[dup].iloc[0]
        first = sub[(sub["worker"] == r["worker"]) & (sub["iteration"] == r["iteration"])].iloc[0]
        raise RunDirError(f"{path}:{int(r['line'])}: column {names[1]!r}: expected one row per worker and "
                          f"iteration, got worker {r['worker']} at {r['iteration']:g} again (first on line "
                          f"{int(first['line'])})")
    grid = sub.pivot(index="iteration", columns="worker", values="duration").reindex(index=kept, columns=workers)
    return grid.to_numpy(dtype=np.float64), workers, kept, notes


# ============================================================================ run directory
def _read_run_dir(path: Path, scheme: str | None, min_iterations: int) -> Trace:
    from gcsim.trace import read_table

    f = path / "workers.csv"
    cols = ["scheme", "iteration", "worker", "n_partitions", "dispatch_s", "send_s", "status"]
    df = read_table(path, "workers.csv", cols)
    df["line"] = np.arange(len(df)) + 2
    schemes = list(dict.fromkeys(df["scheme"].astype(str)))
    if scheme is None:
        scheme = "uncoded" if "uncoded" in schemes else (schemes[0] if schemes else None)
    if scheme not in schemes:
        raise RunDirError(f"{f}: column 'scheme': expected one of {', '.join(schemes) or 'any rows'}, got {scheme!r}")
    df = df[df["scheme"].astype(str) == scheme]
    dur = pd.to_numeric(df["send_s"], errors="coerce") - pd.to_numeric(df["dispatch_s"], errors="coerce")
    bad = ~np.isfinite(dur.to_numpy(dtype=np.float64))
    if bad.any():
        r = df[bad].iloc[0]
        raise RunDirError(f"{f}:{int(r['line'])}: column 'send_s': expected the worker's send time (every worker "
                          f"finishing; fit from an uncoded run or one with policy carry-over), got worker "
                          f"{r['worker']} iteration {r['iteration']} with status {r['status']}")
    frame = pd.DataFrame({"worker": df["worker"].to_numpy(), "iteration": df["iteration"].to_numpy(dtype=float),
                          "duration": dur.to_numpy(dtype=np.float64), "line": df["line"].to_numpy()})
    times, workers, its, notes = _to_grid(frame, f, ["worker", "iteration"], min_iterations)
    loads = (df.pivot(index="iteration", columns="worker", values="n_partitions")
             .reindex(index=its.astype(df["iteration"].dtype), columns=workers).to_numpy(dtype=np.int64))
    return Trace(path=str(path), times=times, workers=workers, iterations=its, loads=loads,
                 source=f"run directory, scheme {scheme}, send_s - dispatch_s", unit_s=1.0, notes=notes)
