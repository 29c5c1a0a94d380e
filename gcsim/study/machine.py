"""Describe the machine a study ran on (for ``headline.md``): CPUs, CPU model, memory, load and the
versions of the software that produced the numbers."""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata
from pathlib import Path

#: packages whose versions are recorded.
PACKAGES = ("gcsim", "torch", "torchvision", "ray", "numpy", "scipy", "simpy", "pandas")


def cpu_model_name(cpuinfo: str | Path = "/proc/cpuinfo") -> str:
    """The first ``model name`` of ``/proc/cpuinfo`` (``platform.processor()`` or ``"unknown"`` when
    the file is absent or has none)."""
    try:
        for line in Path(cpuinfo).read_text(errors="replace").splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_total_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """``MemTotal`` of ``/proc/meminfo`` in bytes (None when unavailable)."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024  # the file counts kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe_machine() -> dict:
    """Facts about this machine and software.

    Returns:
        ``{"host", "cpu_count" (os.cpu_count), "cpus_usable" (this process's CPU affinity),
        "cpu_model", "memory_bytes", "load_avg_1_5_15" (tuple), "platform", "python", "versions":
        {package: version}}``.
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    try:
        load = tuple(round(x, 2) for x in os.getloadavg())
    except OSError:
        load = None
    return {
        "host": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": cpu_model_name(),
        "memory_bytes": memory_total_bytes(),
        "load_avg_1_5_15": load,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {p: _version(p) for p in PACKAGES},
    }


__all__ = ["PACKAGES", "cpu_model_name", "describe_machine", "memory_total_bytes"]
