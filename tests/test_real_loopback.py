"""The private Ray that ``gcsim real`` starts listens on loopback only (issue 10, item 8).

One Ray start in this module: :func:`gcsim.real.runner.ray_session` without ``--address``, a task run
on it, then every listening TCP socket of this process's descendants (GCS, raylet, agents, workers)
read with ``ss``: each must be bound to 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

ray = pytest.importorskip("ray")

from gcsim.real.runner import ray_session  # noqa: E402

pytestmark = pytest.mark.ray


def _descendants(root: int) -> set[int]:
    """PIDs of every live descendant of ``root`` (from /proc/<pid>/stat's parent field)."""
    parent = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    text = f.read()
                parent[int(pid)] = int(text[text.rindex(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, frontier = set(), {root}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in out}
        out |= frontier
    return out


def _listening(pids: set[int]) -> list[tuple[str, int]]:
    """(local address, pid) of every listening TCP socket owned by one of ``pids`` (``ss -ltnpH``)."""
    text = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in text.splitlines():
        fields = line.split()
        for part in line.split("pid=")[1:]:
            pid = int(part.split(",")[0])
            if pid in pids:
                found.append((fields[3].rsplit(":", 1)[0], pid))
    return found


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs iproute2's ss to list sockets")
def test_private_ray_listens_on_loopback_only():
    from ray._private import ray_constants

    assert not ray.is_initialized()
    before = ray_constants.ENABLE_RAY_CLUSTER
    with ray_session(num_cpus=1):  # one CPU, as RealConfig's n_workers=1 gave
        assert ray_constants.ENABLE_RAY_CLUSTER == before  # the switch is restored after the start

        @ray.remote
        def pid():
            return os.getpid()

        task_pid = ray.get(pid.remote())
        mine = _descendants(os.getpid()) | {os.getpid()}
        assert task_pid in mine  # the task ran in a process this test started
        sockets = _listening(mine)
        assert len(sockets) >= 2  # at least the GCS and the raylet
        assert [s for s in sockets if s[0] not in ("127.0.0.1", "[::ffff:127.0.0.1]")] == []
    assert not ray.is_initialized()
