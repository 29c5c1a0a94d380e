"""Files of a real run directory (everything written atomically: temp file + ``os.replace``).

Layout of ``runs/real/<scheme>-<UTC timestamp>/``:

* ``config.yaml`` – the resolved scenario narrowed to this run (loads with
  :func:`gcsim.scenario.load_scenario`; the simulator can replay it);
* ``real.yaml`` – the resolved :class:`gcsim.real.config.RealConfig` (training and Ray options; runs
  written before issue 11 also repeat the run facts of config.yaml, :data:`gcsim.real.config.LEGACY_RUN_KEYS`);
* ``iterations.csv``, ``workers.csv``, ``summary.csv`` – the :mod:`gcsim.trace` format;
* ``metrics.csv`` – :data:`METRICS_COLUMNS` (one row per evaluation);
* ``checkpoint.pt`` – model, optimizer, next iteration, torch RNG state, time offset;
* ``status.json`` – ``{"status": running|finished|failed|interrupted, "reason", "iterations_done", ...}``
  (:class:`gcsim.rundir.RunStatus`; a ``running`` run whose process is gone reads ``dead``);
* ``meta.json`` – written last, only when the run finished (:func:`gcsim.trace.write_meta`).
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import yaml

from gcsim.errors import RunDirError
from gcsim.rundir import RunStatus, atomic_write_bytes, atomic_write_text, read_status, write_status
from gcsim.trace import ITERATION_COLUMNS, WORKER_COLUMNS, read_table, write_csv
from gcsim.yamlio import YamlBoundsError, read_yaml

#: metrics.csv: ``iteration`` (0-based, the last iteration before the evaluation), ``loss`` (mean
#: training mini-batch loss over the iterations since the previous evaluation), ``test_loss`` and
#: ``test_accuracy`` (fraction 0..1) on the test set, ``elapsed_s`` (seconds from the time origin).
METRICS_COLUMNS = ["iteration", "loss", "test_loss", "test_accuracy", "elapsed_s"]


class RealRunDir:
    """Reader/writer of one real run directory ``path``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # ------------------------------------------------------------------ config
    def write_config(self, spec) -> None:
        """Write ``real.yaml`` (``spec.options``) and ``config.yaml`` (``spec.scenario``, the narrowed
        scenario) of a :class:`gcsim.real.config.RealRunSpec` into the existing run directory."""
        atomic_write_text(self.path / "real.yaml", yaml.safe_dump(spec.options.model_dump(mode="json"),
                                                                  sort_keys=False))
        atomic_write_text(self.path / "config.yaml", spec.scenario.to_yaml())

    def scheme(self) -> str | None:
        """The run's scheme as its traces name it (config.yaml's one ``schemes`` entry: label or name;
        ``real.yaml``'s ``scheme`` in a run written before issue 11), read without validating anything;
        None when neither says."""
        for name in ("config.yaml", "real.yaml"):
            try:
                _, data = read_yaml(self.path / name)
            except (OSError, UnicodeDecodeError, yaml.YAMLError, YamlBoundsError):  # the caller's reading says why
                continue
            if name == "config.yaml" and isinstance(data, dict) and isinstance(data.get("schemes"), list) \
                    and len(data["schemes"]) == 1 and isinstance(data["schemes"][0], dict):
                entry = data["schemes"][0]
                return entry.get("label") or entry.get("name")
            if name == "real.yaml" and isinstance(data, dict) and isinstance(data.get("scheme"), str):
                return data["scheme"]
        return None

    def read_real_config(self) -> dict:
        """``real.yaml`` as a dict. Raises RunDirError when missing or unreadable."""
        p = self.path / "real.yaml"
        if not p.is_file():
            raise RunDirError(f"{p}: missing (not a gcsim real run directory)")
        try:
            _, data = read_yaml(p)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise RunDirError(f"{p}: unreadable YAML ({type(e).__name__})") from None
        if not isinstance(data, dict):
            raise RunDirError(f"{p}: expected a mapping, got {type(data).__name__}")
        return data

    # ------------------------------------------------------------------ status
    def write_status(self, status: RunStatus | str, **fields) -> None:
        """Write ``status.json`` (:func:`gcsim.rundir.write_status`)."""
        write_status(self.path, status, **fields)

    def read_status(self) -> dict | None:
        """``status.json`` or None when absent (:func:`gcsim.rundir.read_status`; RunDirError when bad)."""
        return read_status(self.path)

    # ------------------------------------------------------------------ checkpoint
    @property
    def checkpoint_path(self) -> Path:
        return self.path / "checkpoint.pt"

    def save_checkpoint(self, state: dict) -> None:
        """``torch.save`` ``state`` to ``checkpoint.pt`` atomically (never a half-written file)."""
        import torch

        buf = io.BytesIO()
        torch.save(state, buf)
        atomic_write_bytes(self.checkpoint_path, buf.getvalue(), fsync=True)

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
