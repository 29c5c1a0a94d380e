"""Ray's processes after the process that started a private Ray is killed (``kill -9``, the OOM killer).

``ray.init()`` starts the GCS and the raylet bound to the driver's life (Linux ``PR_SET_PDEATHSIG``), but
the processes the raylet starts in turn — the dashboard agent, the runtime-env agent, idle workers —
were found alive minutes after a ``kill -9`` of ``gcsim real``, reparented to init and holding ~170 MB
each (a fresh-user review, 2026-12-05). Nothing in the killed process can run, so a small watcher does
it: a separate process (its own session, so a signal to the run's process group does not end it) that
records, once a second, this process's descendants that are Ray's (a command line naming Ray: ``ray::``
actors and agents, Ray's binaries, or the private Ray's temporary directory) with their start times, and
when this process is gone — its end of a pipe closes, however it ended — sends SIGKILL to the recorded
ones still alive with the same start time (never a later process that got a recycled PID), then
removes the private Ray's temporary directory. A process that ends normally closes the pipe after
``ray.shutdown()``, so the watcher finds nothing left or ends what Ray's own shutdown left.

Linux only (``/proc``); elsewhere :func:`start_ray_reaper` returns None and nothing is watched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: The watcher (run as ``python -c``; argv: parent pid, the private Ray's temporary directory). Kept
#: free of gcsim imports so it starts in a few milliseconds and does not depend on the package.
_WATCHER = r"""
import os, select, shutil, signal, sys, time
parent, temp_dir = int(sys.argv[1]), sys.argv[2]
marks = (b"ray::", b"/ray/", b"raylet", b"gcs_server", temp_dir.encode())

def stat(pid):
    try:
        text = open(f"/proc/{pid}/stat", "rb").read()
    except OSError:
        return None
    fields = text[text.rindex(b")") + 2:].split()
    return int(fields[1]), fields[19]  # ppid, start time in ticks

def rays_below(root, known):
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = stat(int(name))
            if st is not None:
                children.setdefault(st[0], []).append(int(name))
    todo, out = list(children.get(root, [])), dict(known)
    while todo:
        pid = todo.pop()
        if pid == os.getpid():
            continue  # this watcher (its own command line names Ray's marks)
        todo += children.get(pid, [])
        st = stat(pid)
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if st is not None and any(m in cmd for m in marks):
            out[pid] = st[1]
    return out

known = {}
while True:
    known = rays_below(parent, known)
    if select.select([sys.stdin], [], [], 1.0)[0] and not os.read(sys.stdin.fileno(), 1024):
        break  # the parent closed its end: it ended (normally or killed)
time.sleep(1.0)  # a normal end has just run ray.shutdown(): let its processes finish on their own
for pid, ticks in known.items():
    st = stat(pid)
    if st is not None and st[1] == ticks:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
shutil.rmtree(temp_dir, ignore_errors=True)
"""


def start_ray_reaper(temp_dir: str | Path) -> subprocess.Popen | None:
    """Start the watcher of the module docstring for this process and the private Ray whose temporary
    directory is ``temp_dir``. Returns it (call :func:`stop_ray_reaper` after ``ray.shutdown()``), or None
    where ``/proc`` is missing (not Linux) or it could not start."""
    if not os.path.isdir("/proc/self"):
        return None
    try:
        return subprocess.Popen([sys.executable, "-c", _WATCHER, str(os.getpid()), str(temp_dir)],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError:
        return None


def stop_ray_reaper(reaper: subprocess.Popen | None, timeout_s: float = 10.0) -> None:
    """Close the watcher's pipe (it then ends what Ray left of this process's descendants) and wait for it
    up to ``timeout_s`` seconds."""
    if reaper is None:
        return
    try:
        reaper.stdin.close()
        reaper.wait(timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        pass
