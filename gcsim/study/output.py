"""Write a study's files into its output directory (default ``docs/validation/``).

Unlike ``gcsim compare``'s fresh timestamped directory, the study's output directory is long-lived
and may hold files written by people (e.g. ``README.md`` with the findings): the study only replaces
its own files. Everything is first assembled in a hidden temporary directory inside ``out_dir``; each
finished file is then moved into place with ``os.replace`` (so no file is ever half-written), files
that the previous study wrote but this one did not (listed in the previous ``study.json``, e.g. the
timeline of a scheme no longer studied) are removed, and ``study.json`` (the list of files, the
command and the machine) is written last.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from gcsim.rundir import atomic_write_text, ensure_dir, staging_dir

MANIFEST = "study.json"


def prepare_out_dir(out_dir: str | Path, field: str = "--out") -> Path:
    """Create ``out_dir`` (and parents) if needed and check it is a writable directory
    (:func:`gcsim.rundir.ensure_dir`).

    Raises:
        ConfigError: ``field`` (the option: ``--out`` or ``--runs-root``) when it is a file, under a
            file, or not writable.
    """
    return ensure_dir(out_dir, field)


def _previous_files(out: Path) -> list[str]:
    try:
        data = json.loads((out / MANIFEST).read_text())
        return [str(f) for f in data.get("files", []) if isinstance(f, str) and "/" not in f and f != MANIFEST]
    except (OSError, ValueError, AttributeError):
        return []


def publish(out_dir: str | Path, fill: Callable[[Path], list[str]], manifest: dict) -> dict[str, Path]:
    """Assemble files with ``fill(tmp_dir)`` and move them into ``out_dir``.

    Args:
        out_dir: the output directory (created if absent).
        fill: writes the files (flat, no sub-directories) into the temporary directory it is given
            and returns their names.
        manifest: extra fields of ``study.json`` (command, machine, ...).
    Returns:
        file name -> final path (``study.json`` included).
    Raises:
        ConfigError: as :func:`prepare_out_dir`.
    """
    out = prepare_out_dir(out_dir)
    with staging_dir(out, "study") as tmp:
        names = list(fill(tmp))
        previous = _previous_files(out)
        for name in names:
            os.replace(tmp / name, out / name)
        for stale in sorted(set(previous) - set(names)):
            (out / stale).unlink(missing_ok=True)
        files = {name: out / name for name in names}
        atomic_write_text(out / MANIFEST, json.dumps({**manifest, "files": sorted(names)}, indent=2, default=str))
        files[MANIFEST] = out / MANIFEST
    return files


__all__ = ["MANIFEST", "prepare_out_dir", "publish"]
