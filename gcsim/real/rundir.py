"""Files of a real run directory (everything written atomically: temp file + ``os.replace``).

Layout of ``runs/real/<scheme>-<UTC timestamp>/``:

* ``config.yaml`` – the resolved scenario narrowed to this run (loads with
  :func:`gcsim.scenario.load_scenario`; the simulator can replay it);
* ``real.yaml`` – the resolved :class:`gcsim.real.config.RealConfig`;
* ``iterations.csv``, ``workers.csv``, ``summary.csv`` – the :mod:`gcsim.trace` format;
* ``metrics.csv`` – :data:`METRICS_COLUMNS` (one row per evaluation);
* ``checkpoint.pt`` – model, optimizer, next iteration, torch RNG state, time offset;
* ``status.json`` – ``{"status": running|finished|failed|interrupted, "reason", "iterations_done", ...}``;
* ``meta.json`` – written last, only when the run finished (:func:`gcsim.trace.write_meta`).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import yaml

from gcsim.errors import RunDirError
from gcsim.trace import (ITERATION_COLUMNS, WORKER_COLUMNS, atomic_write_text, make_public, read_table,
                          write_csv)

#: metrics.csv: ``iteration`` (0-based, the last iteration before the evaluation), ``loss`` (mean
#: training mini-batch loss over the iterations since the previous evaluation), ``test_loss`` and
#: ``test_accuracy`` (fraction 0..1) on the test set, ``elapsed_s`` (seconds from the time origin).
METRICS_COLUMNS = ["iteration", "loss", "test_loss", "test_accuracy", "elapsed_s"]
STATUSES = ("running", "finished", "failed", "interrupted")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class RealRunDir:
    """Reader/writer of one real run directory ``path``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # ------------------------------------------------------------------ config
    def write_config(self, real_config: dict, scenario_yaml: str) -> None:
        """Write ``real.yaml`` (run options) and ``config.yaml`` (narrowed scenario)."""
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path / "real.yaml", yaml.safe_dump(real_config, sort_keys=False))
        atomic_write_text(self.path / "config.yaml", scenario_yaml)

    def read_real_config(self) -> dict:
        """``real.yaml`` as a dict. Raises RunDirError when missing or unreadable."""
        p = self.path / "real.yaml"
        if not p.is_file():
            raise RunDirError(f"{p}: missing (not a gcsim real run directory)")
        try:
            data = yaml.safe_load(p.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise RunDirError(f"{p}: unreadable YAML ({type(e).__name__})") from None
        if not isinstance(data, dict):
            raise RunDirError(f"{p}: expected a mapping, got {type(data).__name__}")
        return data

    # ------------------------------------------------------------------ status
    def write_status(self, status: str, **fields) -> None:
        """Write ``status.json`` with ``status`` (one of :data:`STATUSES`) and extra fields."""
        if status not in STATUSES:
            raise ValueError(f"status: expected one of {STATUSES}, got {status!r}")
        data = {"status": status, "updated_utc": _now(), "pid": os.getpid(), **fields}
        atomic_write_text(self.path / "status.json", json.dumps(data, indent=2, default=str))

    def read_status(self) -> dict | None:
        """``status.json`` or None when absent."""
        p = self.path / "status.json"
        if not p.is_file():
            return None
        try:
            return json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise RunDirError(f"{p}: unreadable JSON ({e})") from None

    # ------------------------------------------------------------------ checkpoint
    @property
    def checkpoint_path(self) -> Path:
        return self.path / "checkpoint.pt"

    def save_checkpoint(self, state: dict) -> None:
        """``torch.save`` ``state`` to ``checkpoint.pt`` atomically (never a half-written file)."""
        import torch

        buf = io.BytesIO()
        torch.save(state, buf)
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".checkpoint.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(buf.getvalue())
                f.flush()
                os.fsync(f.fileno())
            make_public(Path(tmp))
            os.replace(tmp, self.checkpoint_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load_checkpoint(self) -> dict:
        """The checkpoint dict. Raises RunDirError when missing or unreadable."""
        import torch

        p = self.checkpoint_path
        if not p.is_file():
            raise RunDirError(f"{p}: missing (the run wrote no checkpoint yet, nothing to resume; start a new "
                              f"run with another --out)")
        try:
            return torch.load(p, map_location="cpu", weights_only=True)
        except Exception as e:  # torch raises several types for corrupt files
            raise RunDirError(f"{p}: unreadable checkpoint ({type(e).__name__}: {e})") from None

    # ------------------------------------------------------------------ traces
    def write_traces(self, iterations: pd.DataFrame, workers: pd.DataFrame, summary: pd.DataFrame | None,
                     metrics: pd.DataFrame) -> None:
        """Write iterations/workers/metrics (and summary when given) CSVs atomically."""
        from gcsim.trace import SUMMARY_COLUMNS

        write_csv(self.path / "iterations.csv", iterations, ITERATION_COLUMNS)
        write_csv(self.path / "workers.csv", workers, WORKER_COLUMNS)
        write_csv(self.path / "metrics.csv", metrics, METRICS_COLUMNS)
        if summary is not None:
            write_csv(self.path / "summary.csv", summary, SUMMARY_COLUMNS)

    def read_traces(self, before_iteration: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """``(iterations, workers, metrics)`` rows with ``iteration < before_iteration`` (for resume)."""
        it = read_table(self.path, "iterations.csv", ITERATION_COLUMNS)
        wk = read_table(self.path, "workers.csv", WORKER_COLUMNS)
        mp = self.path / "metrics.csv"
        mt = read_table(self.path, "metrics.csv", METRICS_COLUMNS) if mp.is_file() else pd.DataFrame(columns=METRICS_COLUMNS)
        keep = lambda df: df[df["iteration"] < before_iteration].reset_index(drop=True)  # noqa: E731
        return keep(it), keep(wk), keep(mt)
