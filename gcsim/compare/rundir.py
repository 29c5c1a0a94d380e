"""Read, validate and discover run directories in the gcsim/trace.py format.

A run directory (real: ``runs/real/<scheme>-<timestamp>/``; simulated: what ``gcsim simulate`` writes)
holds ``meta.json`` (written last), ``config.yaml``, ``iterations.csv``, ``workers.csv`` and
``summary.csv``; a real run adds ``metrics.csv`` and ``status.json``. Anything missing, half-written or
of another trace-format version raises a one-line :class:`~gcsim.errors.RunDirError` naming the file.
``config.yaml`` is read as what both executors write there, a :class:`gcsim.scenario.Scenario`: the
readers use its attributes, so every default lives in the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import yaml

from gcsim.errors import ConfigError, RunDirError
from gcsim.rundir import RunStatus, effective_status, read_status
from gcsim.scenario import Scenario, validate_scenario
from gcsim.yamlio import YamlBoundsError, read_yaml
from gcsim.trace import (ITERATION_COLUMNS, SUMMARY_COLUMNS, TRACE_FORMAT_VERSION, WORKER_COLUMNS, read_meta,
                         read_table)

@dataclass
class RunDir:
    """One validated run directory.

    Attributes:
        path: the directory.
        meta: parsed ``meta.json`` (``trace_format_version`` == TRACE_FORMAT_VERSION).
        scenario: ``config.yaml`` validated (:class:`gcsim.scenario.Scenario`: what the run was, every
            default filled in; ``scenario.model_fields_set`` tells which fields the file gave).
        iterations: ``iterations.csv`` (gcsim/trace.py ITERATION_COLUMNS), seconds.
        workers: ``workers.csv`` (WORKER_COLUMNS), seconds.
        summary: ``summary.csv`` (SUMMARY_COLUMNS).
        status: parsed ``status.json`` if present, else None.
    """

    path: Path
    meta: dict
    scenario: Scenario
    iterations: pd.DataFrame
    workers: pd.DataFrame
    summary: pd.DataFrame
    status: dict | None = None

    @property
    def executor(self) -> str:
        """``"real"`` or ``"sim"`` (from meta.json; ``"?"`` if absent)."""
        return str(self.meta.get("executor", "?"))

    @property
    def schemes(self) -> list[str]:
        """Scheme names in this run, in order of first appearance in iterations.csv."""
        return list(dict.fromkeys(self.iterations["scheme"].astype(str)))

    @property
    def n_workers(self) -> int:
        """Number of workers: ``config.yaml`` ``n_workers``."""
        return self.scenario.n_workers

    @property
    def created_utc(self) -> datetime:
        """``meta.json`` ``created_utc`` (aware datetime); the meta.json mtime when absent or unparsable."""
        return _created_utc(self.meta, self.path)

    def scheme_row(self, scheme: str) -> dict:
        """The summary.csv row of ``scheme`` as a dict (n, s, m, loads, ...). Raises RunDirError if absent."""
        rows = self.summary[self.summary["scheme"].astype(str) == scheme]
        if rows.empty:
            raise RunDirError(f"{self.path / 'summary.csv'}: no row for scheme {scheme!r} "
                              f"(iterations.csv has it)")
        return rows.iloc[0].to_dict()

    def iterations_of(self, scheme: str) -> pd.DataFrame:
        """iterations.csv rows of ``scheme``, sorted by iteration."""
        return self.iterations[self.iterations["scheme"].astype(str) == scheme].sort_values("iteration")

    def workers_of(self, scheme: str) -> pd.DataFrame:
        """workers.csv rows of ``scheme``, sorted by (iteration, worker)."""
        return self.workers[self.workers["scheme"].astype(str) == scheme].sort_values(["iteration", "worker"])

    @property
    def label(self) -> str:
        """Short name for tables: the directory name."""
        return self.path.name


def _created_utc(meta: dict, run_dir: Path) -> datetime:
    try:
        dt = datetime.fromisoformat(str(meta.get("created_utc")))
        return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    except ValueError:
        return datetime.fromtimestamp((run_dir / "meta.json").stat().st_mtime, tz=timezone.utc)


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        raise RunDirError(f"{path}: missing")
    try:
        _, data = read_yaml(path)
    except YamlBoundsError as e:
        raise RunDirError(f"{path}: expected YAML with {e.allowed}, got {e.given}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        msg = str(e).replace("\n", " ")
        raise RunDirError(f"{path}: unreadable YAML ({msg})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: expected a mapping of configuration fields, got {type(data).__name__}")
    return data


def _read_scenario(path: Path) -> Scenario:
    """``config.yaml`` (read as :func:`_read_yaml`) validated by :func:`gcsim.scenario.validate_scenario`,
    relative file names against the run directory. Raises RunDirError: ``<path>: <field>: expected ...``."""
    data = _read_yaml(path)
    try:
        return validate_scenario(data, base_dir=path.parent)
    except ConfigError as e:
        raise RunDirError(f"{path}: {e}") from None


def _read_status(run_dir: Path) -> dict | None:
    """``status.json`` (:func:`gcsim.rundir.read_status`), refused while the run is still going."""
    status = read_status(run_dir)
    if status is not None and status["status"] == RunStatus.RUNNING:
        alive = effective_status(status) is RunStatus.RUNNING
        hint = ""
        if not alive and (run_dir / "checkpoint.pt").is_file():
            hint = f"; gcsim real --resume {run_dir} continues it from its last checkpoint"
        raise RunDirError(f"{run_dir / 'status.json'}: status: expected a finished run, got 'running' "
                          f"({'still running' if alive else 'its process is gone: dead, or half-written'}){hint}")
    return status


def _check_finite(path: Path, df: pd.DataFrame, columns: list[str], positive: tuple[str, ...] = ()) -> None:
    for c in columns:
        v = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(v)
        if bad.any():
            raise RunDirError(f"{path}: column {c}: expected finite numbers, got {int(bad.sum())} empty or "
                              f"non-numeric rows (half-written?)")
        if c in positive and (v <= 0).any():
            raise RunDirError(f"{path}: column {c}: expected positive seconds, got {float(v.min())!r}")


def read_run_dir(path: str | Path) -> RunDir:
    """Read and validate a run directory.

    Checks, in order: the directory exists; ``status.json`` (if any) does not say the run is still
    going, nor (without ``meta.json``) that it stopped unfinished (``interrupted`` / ``failed``);
    ``meta.json`` exists, parses and has ``trace_format_version == TRACE_FORMAT_VERSION``; ``config.yaml``
    is a valid scenario (:class:`gcsim.scenario.Scenario`); the three CSVs exist with their columns;
    iterations.csv has rows with finite ``start_s, end_s, duration_s > 0``; workers.csv has finite
    ``iteration, worker, n_partitions``; no (scheme, iteration) / (scheme, iteration, worker) row is
    given twice; workers.csv covers the same (scheme, iteration) pairs; summary.csv has
    a row per scheme.

    Args:
        path: the run directory.
    Returns:
        :class:`RunDir`.
    Raises:
        RunDirError: one line naming the offending file and what is wrong.
    """
    run_dir = Path(path)
    if not run_dir.is_dir():
        what = "a path that is not a directory" if run_dir.exists() else "a path that does not exist"
        raise RunDirError(f"{run_dir}: expected a gcsim run directory, got {what}")
    status = _read_status(run_dir)  # before meta.json: a stopped real run has none, say why
    state = (status or {}).get("status")
    if not (run_dir / "meta.json").is_file() and state is not None and state != RunStatus.FINISHED:
        raise RunDirError(f"{run_dir / 'status.json'}: status: expected 'finished', got {state!r} (continue it "
                          f"with gcsim real --resume {run_dir})")
    meta = read_meta(run_dir)
    scenario = _read_scenario(run_dir / "config.yaml")
    iterations = read_table(run_dir, "iterations.csv", ITERATION_COLUMNS)
    workers = read_table(run_dir, "workers.csv", WORKER_COLUMNS)
    summary = read_table(run_dir, "summary.csv", SUMMARY_COLUMNS)
    it_path, wk_path, su_path = run_dir / "iterations.csv", run_dir / "workers.csv", run_dir / "summary.csv"
    if iterations.empty:
        raise RunDirError(f"{it_path}: no rows (half-written?)")
    if workers.empty:
        raise RunDirError(f"{wk_path}: no rows (half-written?)")
    if iterations["scheme"].isna().any():
        raise RunDirError(f"{it_path}: column scheme: expected a scheme name on every row, got empty rows")
    _check_finite(it_path, iterations, ["iteration", "start_s", "end_s", "duration_s"], positive=("duration_s",))
    _check_finite(wk_path, workers, ["iteration", "worker", "n_partitions"])
    for df in (iterations, workers, summary):
        df["scheme"] = df["scheme"].astype(str)
    for path, df, key in ((it_path, iterations, ["scheme", "iteration"]),
                          (wk_path, workers, ["scheme", "iteration", "worker"])):
        dup = df.duplicated(key)
        if dup.any():
            first = ", ".join(f"{k}={v}" for k, v in zip(key, df.loc[dup, key].iloc[0].tolist()))
            raise RunDirError(f"{path}: expected one row per ({', '.join(key)}), got {int(dup.sum())} duplicate "
                              f"row(s), first at {first} (hand-edited?)")
    it_pairs = set(zip(iterations["scheme"], iterations["iteration"].astype(int)))
    wk_pairs = set(zip(workers["scheme"], workers["iteration"].astype(int)))
    if it_pairs != wk_pairs:
        missing = sorted(it_pairs - wk_pairs)[:3] or sorted(wk_pairs - it_pairs)[:3]
        raise RunDirError(f"{wk_path}: expected worker rows for the same (scheme, iteration) pairs as "
                          f"iterations.csv, got a mismatch at {missing} (half-written?)")
    missing_schemes = sorted(set(iterations["scheme"]) - set(summary["scheme"]))
    if missing_schemes:
        raise RunDirError(f"{su_path}: missing rows for schemes {missing_schemes}")
    return RunDir(run_dir, meta, scenario, iterations, workers, summary, status)


@dataclass(frozen=True)
class FoundRun:
    """A run directory chosen by :func:`newest_runs` and the schemes to compare from it."""

    path: Path
    schemes: tuple[str, ...]


def read_distinct_run_dirs(paths, field: str) -> list[RunDir]:
    """:func:`read_run_dir` of each of ``paths`` (a pooled calibration's runs).

    Raises:
        ConfigError: ``field`` (the CLI argument or option) when a directory is given twice (it would
            count double in the pool).
        RunDirError: as :func:`read_run_dir`.
    """
    paths = [str(p) for p in paths]
    if len({Path(p).resolve() for p in paths}) < len(paths):
        raise ConfigError(field, "distinct run directories (a run given twice would count double)", " ".join(paths))
    return [read_run_dir(p) for p in paths]


def as_runs(runs: "RunDir | Sequence[RunDir]") -> list[RunDir]:
    """One run or several as a list (the pooled-calibration arguments accept both)."""
    return [runs] if isinstance(runs, RunDir) else list(runs)


def newest_runs(runs_root: str | Path, *, skipped: list[str] | None = None) -> list[FoundRun]:
    """The newest complete run per scheme under ``runs_root`` (e.g. ``runs/real``).

    Every direct sub-directory whose name does not start with ``.`` is considered. Directories that
    are incomplete (no ``meta.json``: still running or crashed) or of another trace-format version are
    skipped (their one-line reason is appended to ``skipped`` if given). "Newest" is meta.json's
    ``created_utc``, ties broken by directory name. A run holding several schemes (a simulated run)
    may be the newest for several.

    Args:
        runs_root: directory holding run directories.
        skipped: optional list that receives ``"<dir>: <reason>"`` for every skipped directory.
    Returns:
        list of :class:`FoundRun`, ordered by first scheme name.
    Raises:
        ConfigError: ``runs_root`` is not a directory, or holds no complete run (field ``--runs-root``).
    """
    root = Path(runs_root)
    if not root.is_dir():
        raise ConfigError("--runs-root", "a directory holding run directories", str(root))
    best: dict[str, tuple] = {}
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            meta = read_meta(d)
            _read_status(d)
            schemes = pd.read_csv(d / "iterations.csv", usecols=["scheme"])["scheme"].astype(str)
        except RunDirError as e:
            if skipped is not None:
                skipped.append(str(e))
            continue
        except (OSError, ValueError, pd.errors.ParserError) as e:
            if skipped is not None:
                skipped.append(f"{d / 'iterations.csv'}: unreadable ({type(e).__name__})")
            continue
        created = _created_utc(meta, d)
        for sch in dict.fromkeys(schemes):
            key = (created, d.name)
            if sch not in best or key > best[sch][0]:
                best[sch] = (key, d)
    if not best:
        raise ConfigError("--runs-root", f"a directory with complete trace-format-{TRACE_FORMAT_VERSION} run "
                          f"directories", str(root))
    by_dir: dict[Path, list[str]] = {}
    for sch in sorted(best):
        by_dir.setdefault(best[sch][1], []).append(sch)
    return [FoundRun(d, tuple(s)) for d, s in by_dir.items()]


__all__ = ["FoundRun", "RunDir", "as_runs", "newest_runs", "read_distinct_run_dirs", "read_run_dir"]
