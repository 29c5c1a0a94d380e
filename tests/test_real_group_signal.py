"""A SIGTERM sent to ``gcsim real``'s whole process group (``timeout``, a batch scheduler, ``kill --
-PGID``) ended the private Ray's daemons too, which shared the group; the run then waited 60 s for the
dead GCS, or the Ray driver exited on its next call to the dead raylet, with the status left ``running``
(found by a review as a new user). Ray's daemons now lead process groups of their own, and the run
stops as after Ctrl-C: status ``interrupted`` with its checkpoint, the resume hint, exit 143 (128 + SIGTERM), promptly,
and no Ray process left. And a
``kill -9`` of the run must not leave Ray's processes running (the watcher of gcsim/real/reaper.py).
Two Ray starts, one per test: each run's own private Ray, in a subprocess of its own process group.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

pytest.importorskip("ray")
pytest.importorskip("torch")

from factories import GCSIM, prepared_data, tiny_real_scenario  # noqa: E402


def _group_members(pgid: int) -> list[tuple[int, str]]:
    """Live (non-zombie) processes of process group ``pgid``: ``(pid, command name)``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            text = open(f"/proc/{name}/stat").read()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append((int(name), text[text.index("(") + 1:text.rindex(")")]))
    return out


def _ray_descendants(root: int) -> dict[int, str]:
    """Descendants of ``root`` whose command line names Ray (``ray::`` actors and agents, raylet, GCS):
    pid -> start time in ticks."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                text = open(f"/proc/{name}/stat").read()
            except OSError:
                continue
            children.setdefault(int(text[text.rindex(")") + 2:].split()[1]), []).append(int(name))
    out, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            text = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        if b"ray::" in cmd or b"raylet" in cmd or b"gcs_server" in cmd:
            out[pid] = text[text.rindex(")") + 2:].split()[19]
    return out


def _alive(pid: int, ticks: str) -> bool:
    try:
        text = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    fields = text[text.rindex(")") + 2:].split()
    return fields[19] == ticks and fields[0] != "Z"


def _start_run(tmp_path, *extra: str, capture: bool) -> tuple[subprocess.Popen, object]:
    """``gcsim real`` on tiny data in a process group of its own (as a shell job or a batch job): the
    process and its run directory."""
    prepared_data(tmp_path)
    tiny_real_scenario(tmp_path / "tiny.yaml", n=4, iterations=400, seed=2, schemes=[{"name": "gc-fr", "s": 1}],
                       stragglers={"delay": {"dist": "bimodal", "p": 0.2, "delay": 0.05}})
    out = tmp_path / "run"
    args = ["real", "--scheme", "gc-fr", "--scenario", str(tmp_path / "tiny.yaml"), "--batch-size", "16",
            *extra, "--eval-every", "1000", "--data-dir", str(tmp_path / "data"), "--ray-num-cpus", "2",
            "--out", str(out), "--no-progress"]
    pipe = subprocess.PIPE if capture else subprocess.DEVNULL
    return subprocess.Popen(GCSIM + args, stdout=pipe, stderr=pipe, text=True, start_new_session=True), out


def _wait_for_iterations(proc: subprocess.Popen, out, k: int = 3) -> None:
    """Until the run's status.json counts ``k`` iterations (the run must not end before)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if json.loads((out / "status.json").read_text()).get("iterations_done", 0) >= k:
                return
        except (OSError, ValueError):
            pass
        assert proc.poll() is None, proc.communicate() if proc.stdout is not None else proc.returncode
        time.sleep(0.2)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process groups from /proc (Linux)")
def test_sigterm_to_the_process_group_stops_the_run_cleanly(tmp_path):
    proc, out = _start_run(tmp_path, "--checkpoint-every", "1", capture=True)
    ray_procs: dict[int, str] = {}
    try:
        _wait_for_iterations(proc, out)
        ray_procs = _ray_descendants(proc.pid)
        assert len(ray_procs) >= 3  # GCS, raylet, agents, workers
        # Ray's daemons lead process groups of their own (same session): the group signal is gcsim's alone
        assert not [p for p, _ in _group_members(proc.pid) if p in ray_procs]
        os.killpg(proc.pid, signal.SIGTERM)  # the group this test started
        t0 = time.monotonic()
        stdout, stderr = proc.communicate(timeout=120)
        took_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143, stderr  # 128 + SIGTERM, as a shell reports it
    assert took_s < 45, f"stopping took {took_s:.0f} s (Ray waits 60 s for a dead GCS)"
    assert "continue with: gcsim real --resume" in stdout
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "interrupted" and status["reason"] == "SIGTERM"
    assert status["checkpoint_iteration"] == status["iterations_done"] >= 3
    left, ray_left = [], {}
    for _ in range(50):  # nothing of the run's group, nor any Ray process it started, may outlive it
        left = _group_members(proc.pid)
        ray_left = {p: t for p, t in ray_procs.items() if _alive(p, t)}
        if not left and not ray_left:
            break
        time.sleep(0.2)
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    for pid, ticks in ray_left.items():  # by PID and start time: only what this test's run started
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the run's group still alive: {left}"
    assert not ray_left, f"Ray processes of the run still alive: {sorted(ray_left)}"


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads processes from /proc (Linux)")
def test_a_killed_run_leaves_no_ray_process_behind(tmp_path):
    # kill -9 of gcsim real: the GCS and raylet die with it, but the agents the raylet started were left
    # running for good (~170 MB each; found by a review); the watcher (gcsim/real/reaper.py) ends them
    proc, out = _start_run(tmp_path, capture=False)
    ray_procs: dict[int, str] = {}
    try:
        _wait_for_iterations(proc, out)
        ray_procs = _ray_descendants(proc.pid)
        assert len(ray_procs) >= 3  # GCS, raylet, agents, workers
        proc.kill()  # SIGKILL, the process this test started
        proc.wait(30)
        left = ray_procs
        for _ in range(100):
            left = {p: t for p, t in ray_procs.items() if _alive(p, t)}
            if not left:
                break
            time.sleep(0.2)
        assert not left, f"Ray processes of the killed run still alive after 20 s: {sorted(left)}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid, ticks in ray_procs.items():  # whatever this test's run left, by PID (and start time)
            if _alive(pid, ticks):
                os.kill(pid, signal.SIGKILL)
