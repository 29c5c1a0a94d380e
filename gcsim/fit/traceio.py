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

Worker ids may be numbers or labels (``host-3``); the file is UTF-8 (a byte-order mark is skipped).

Errors: every problem is one :class:`~gcsim.errors.RunDirError` line naming the file, the line
(header = line 1) and the column: unreadable or non-UTF-8 file, missing column, empty / non-numeric /
non-finite / negative cell, a time above :data:`MAX_TIME_S` seconds (e.g. a wrong ``unit_s``), a
(worker, iteration) given twice, a worker missing inside the kept range, a trace shorter than
``min_iterations`` iterations.
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
#: largest time (seconds, after ``unit_s``) one worker-iteration may take: 10**6 s (11.6 days); larger is
#: taken for a wrong unit, and would overflow the fits and the simulated clock (gcsim.sim.engine.MAX_RUN_S)
MAX_TIME_S = 1.0e6


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
        raise RunDirError(f"{path}: expected a gcsim run directory or a CSV file of worker, iteration, duration, "
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


def _bad_cell(path, line, name: str, what: str, cell) -> RunDirError:
    cell = "" if cell is None or (isinstance(cell, float) and math.isnan(cell)) else str(cell).strip()
    given = "an empty cell" if cell == "" else repr(cell)
    return RunDirError(f"{path}:{line}: column {name!r}: expected {what}, got {given}")


def _numbers(raw, name: str, lines: np.ndarray, path, what: str = "a finite number", lo: float | None = None,
             hi: float | None = None, scale: float = 1.0) -> np.ndarray:
    """``raw`` cells as float64 (times ``scale``); the first empty / non-numeric / non-finite cell, or one
    outside ``[lo, hi]`` (after ``scale``), is a RunDirError naming file, line and column."""
    raw = np.asarray(raw, dtype=object)
    num = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=np.float64) * scale
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(num)
        if lo is not None:
            bad |= num < lo
        if hi is not None:
            bad |= num > hi
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _bad_cell(path, int(lines[i]), name, what, raw[i])
    return num


def _time_rule(unit_s: float) -> str:
    if unit_s == 1:
        return f"a number >= 0 and <= {MAX_TIME_S:g} (the worker's time for that iteration, seconds)"
    return (f"a number >= 0 and <= {MAX_TIME_S / unit_s:g} (the worker's time for that iteration, in units of "
            f"{unit_s:g} s: at most {MAX_TIME_S:g} s)")


def _decode(path: Path) -> str:
    """The file's text (UTF-8, a byte-order mark skipped); a byte that is not UTF-8 names its line."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise RunDirError(f"{path}: expected a readable CSV file, got {type(e).__name__}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = data.count(b",", data.rfind(b"\n", 0, e.start) + 1, e.start) + 1
        raise RunDirError(f"{path}:{line}: column {col}: expected UTF-8 text, got byte "
                          f"0x{data[e.start]:02x} (save the file as UTF-8)") from None


def _read_csv(path: Path, worker_col, iteration_col, duration_col, unit_s: float, min_iterations: int) -> Trace:
    import io
    text = _decode(path)
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
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
    except csv.Error as e:
        raise RunDirError(f"{path}:{reader.line_num}: expected CSV rows, got a malformed line ({e})") from None
    names = [header[c] for c in cols]
    if not lines:
        raise RunDirError(f"{path}:2: expected rows of worker, iteration, duration, got none")
    line_arr = np.asarray(lines)
    w_raw = np.asarray([c.strip() for c in cells[0]], dtype=object)
    w_num = pd.to_numeric(pd.Series(w_raw), errors="coerce").to_numpy(dtype=np.float64)
    if np.isfinite(w_num).all():
        w_ids = w_num.astype(np.int64) if np.all(w_num == np.round(w_num)) else w_num
    else:  # labels (host names, "w3"): kept as text; only an empty cell is refused
        empty = np.flatnonzero(w_raw == "")
        if len(empty):
            raise _bad_cell(path, int(line_arr[empty[0]]), names[0], "a worker id (number or label)", "")
        w_ids = w_raw.astype(str)
    it_vals = _numbers(cells[1], names[1], line_arr, path,
                       "a finite number (the iteration or time that orders the worker's rows)")
    dur = _numbers(cells[2], names[2], line_arr, path, _time_rule(unit_s), lo=0.0, hi=MAX_TIME_S, scale=unit_s)
    df = pd.DataFrame({"worker": w_ids, "iteration": it_vals, "duration": dur, "line": line_arr})
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
        if len(workers) > 1 and counts.max() == 1:  # e.g. per-worker wall-clock timestamps
            raise RunDirError(f"{path}:2: column {names[1]!r}: expected values the workers share at one iteration "
                              f"(an iteration or step number; pass --iteration-col), got {len(its)} distinct values "
                              f"in {len(df)} rows (no two workers share one)")
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
    steps = np.unique(np.diff(kept))
    if len(steps) == 1 and steps[0] > 1:  # sampled every k-th iteration (a trace of held or smoothed values)
        notes.append(f"column {names[1]!r} steps by {steps[0]:g}: if it counts iterations, the rows are every "
                     f"{steps[0]:g}th one, fitted here as consecutive iterations (the slow regime's p_enter / "
                     f"p_leave are then per row, not per iteration).")
    if len(kept) < min_iterations:
        raise RunDirError(f"{path}:{int(df['line'].max())}: column {names[1]!r}: expected at least {min_iterations} "
                          f"iterations at which every worker has a row, got {len(kept)}")
    sub = df[(df["iteration"] >= kept[0]) & (df["iteration"] <= kept[-1])]
    dup = sub.duplicated(["worker", "iteration"], keep="first")
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        w, it, line = sub["worker"].to_numpy()[i], float(sub["iteration"].to_numpy()[i]), int(sub["line"].to_numpy()[i])
        first = int(sub["line"].to_numpy()[((sub["worker"] == w) & (sub["iteration"] == it)).to_numpy()][0])
        raise RunDirError(f"{path}:{line}: column {names[1]!r}: expected one row per worker and "
                          f"iteration, got worker {w} at {it:g} again (first on line {first})")
    grid = sub.pivot(index="iteration", columns="worker", values="duration").reindex(index=kept, columns=workers)
    return grid.to_numpy(dtype=np.float64), workers, kept, notes


# ============================================================================ run directory
def _read_run_dir(path: Path, scheme: str | None, min_iterations: int) -> Trace:
    from gcsim.trace import read_table

    f = path / "workers.csv"
    if not f.is_file():
        raise RunDirError(f"{path}: expected a gcsim run directory (with workers.csv) or a CSV file of worker, "
                          f"iteration, duration, got a directory without workers.csv")
    cols = ["scheme", "iteration", "worker", "n_partitions", "dispatch_s", "send_s", "status"]
    df = read_table(path, "workers.csv", cols)
    df["line"] = np.arange(len(df)) + 2
    schemes = list(dict.fromkeys(df["scheme"].astype(str)))
    if scheme is None:
        scheme = "uncoded" if "uncoded" in schemes else (schemes[0] if schemes else None)
    if scheme not in schemes:
        raise RunDirError(f"{f}: column 'scheme': expected one of {', '.join(schemes) or 'any rows'}, got {scheme!r}")
    df = df[df["scheme"].astype(str) == scheme]
    lines = df["line"].to_numpy()
    num = {c: _numbers(df[c].to_numpy(dtype=object), c, lines, f) for c in ("iteration", "worker", "dispatch_s")}
    num["n_partitions"] = _numbers(df["n_partitions"].to_numpy(dtype=object), "n_partitions", lines, f,
                                   "a whole number >= 0", lo=0.0)
    send_raw = df["send_s"].to_numpy(dtype=object)
    send = pd.to_numeric(pd.Series(send_raw), errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(send)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        if not pd.isna(send_raw[i]):  # text or inf in the cell
            raise _bad_cell(f, int(lines[i]), "send_s", "a finite number (seconds)", send_raw[i])
        r = df.iloc[i]
        raise RunDirError(f"{f}:{int(r['line'])}: column 'send_s': expected the worker's send time (every worker "
                          f"finishing; fit from an uncoded run or one with policy carry-over), got worker "
                          f"{r['worker']} iteration {r['iteration']} with status {r['status']}")
    dur = send - num["dispatch_s"]
    bad = ~((dur >= 0) & (dur <= MAX_TIME_S))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _bad_cell(f, int(lines[i]), "send_s", f"send_s - dispatch_s in [0, {MAX_TIME_S:g}] s",
                        f"{send[i]!r} (dispatch_s {num['dispatch_s'][i]!r})")
    w = num["worker"]
    frame = pd.DataFrame({"worker": w.astype(np.int64) if np.all(w == np.round(w)) else w,
                          "iteration": num["iteration"], "duration": dur, "line": lines})
    times, workers, its, notes = _to_grid(frame, f, ["worker", "iteration"], min_iterations)
    loads = (frame.assign(load=num["n_partitions"]).pivot(index="iteration", columns="worker", values="load")
             .reindex(index=its, columns=workers).to_numpy(dtype=np.int64))
    return Trace(path=str(path), times=times, workers=workers, iterations=its, loads=loads,
                 source=f"run directory, scheme {scheme}, send_s - dispatch_s", unit_s=1.0, notes=notes)
