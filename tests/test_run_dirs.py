"""Run directories (gcsim/rundir.py): unique names, exclusive creation, cleanup, status, private Ray.

Concurrency is tested with real processes (``gcsim simulate`` started together) and with threads
racing on a frozen clock (every run "in the same second", deterministically). No assertion depends
on how fast the machine is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

import gcsim.rundir as rundir
from gcsim.errors import ConfigError, RunDirError, RunFailedError
from gcsim.rundir import CLAIM_NAME, RunStatus, effective_status, new_run_dir, read_status, write_status

SCENARIO_YAML = """\
name: par
n_workers: 4
iterations: 20
seed: 1
schemes: [{name: uncoded}, {name: gc-fr, s: 1}]
workload: {gradient_bytes: 1000, compute: {dist: constant, value: 0.01}}
stragglers: {delay: {dist: bimodal, p: 0.2, delay: 0.05}}
"""
GCSIM = [sys.executable, "-c", "import sys; from gcsim.cli import main; sys.exit(main())"]
REFUSAL = re.compile(r"^gcsim: error: --out: expected a new or empty directory, got '.*' "
                     r"\((another run is writing it|holding .*)\)\n$")


def _race(fn, k: int) -> list:
    """Run ``fn(i)`` in ``k`` threads released together; results (or exceptions) by i."""
    barrier, out = threading.Barrier(k), [None] * k

    def work(i):
        barrier.wait()
        try:
            out[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - the test inspects it
            out[i] = e
    threads = [threading.Thread(target=work, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_same_second_default_names_are_distinct(tmp_path, monkeypatch):
    monkeypatch.setattr(rundir, "utc_stamp", lambda: "20250101T000000Z")
    runs = _race(lambda i: new_run_dir(None, root=tmp_path / "runs", prefix="x"), 8)
    names = sorted(r.path.name for r in runs)
    assert names == sorted(["x-20250101T000000Z"] + [f"x-20250101T000000Z-{k}" for k in range(2, 9)])
    for r in runs:
        assert os.listdir(r.path) == [CLAIM_NAME]
        r.release()
        assert os.listdir(r.path) == []


def test_same_out_one_wins_the_others_are_refused(tmp_path):
    out = tmp_path / "same"
    results = _race(lambda i: new_run_dir(out, root=tmp_path, prefix="x"), 6)
    winners = [r for r in results if isinstance(r, rundir.NewRunDir)]
    losers = [r for r in results if isinstance(r, ConfigError)]
    assert len(winners) == 1 and len(losers) == 5
    assert all(str(e).startswith(f"--out: expected a new or empty directory, got '{out}' (") for e in losers)
    assert out.is_dir() and os.listdir(out) == [CLAIM_NAME]  # the losers removed nothing of the winner's


def test_discard_removes_the_run_and_the_parents_it_made_but_not_an_existing_empty_out(tmp_path):
    run = new_run_dir(None, root=tmp_path / "a" / "b", prefix="x")
    (run.path / "config.yaml").write_text("x")
    run.discard()
    assert list(tmp_path.iterdir()) == []
    here = tmp_path / "here"
    here.mkdir()
    run = new_run_dir(here, root=tmp_path, prefix="x")
    assert not run.created
    (here / "f.csv").write_text("1")
    run.discard()
    assert here.is_dir() and list(here.iterdir()) == []


def test_a_dir_being_created_by_another_run_is_refused(tmp_path):
    first = new_run_dir(tmp_path / "o", root=tmp_path, prefix="x")
    with pytest.raises(ConfigError, match=r"\(another run is writing it\)$"):
        new_run_dir(tmp_path / "o", root=tmp_path, prefix="x")
    first.release()


def test_status_vocabulary_and_dead_runs(tmp_path):
    write_status(tmp_path, RunStatus.FAILED, reason="x")
    data = read_status(tmp_path)
    assert data["status"] == "failed" and data["pid"] == os.getpid() and effective_status(data) is RunStatus.FAILED
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert effective_status({"status": "running", "pid": child.pid}) is RunStatus.DEAD
    assert effective_status({"status": "running", "pid": os.getppid()}) is RunStatus.RUNNING
    with pytest.raises(ValueError):
        write_status(tmp_path, RunStatus.DEAD)
    (tmp_path / "status.json").write_text(json.dumps({"status": "starting"}))
    with pytest.raises(RunDirError, match=r"status: expected one of running, finished, interrupted, failed, "
                                          r"got 'starting'$"):
        read_status(tmp_path)


# --------------------------------------------------------------------------- real processes
@pytest.fixture
def scen(tmp_path):
    (tmp_path / "par.yaml").write_text(SCENARIO_YAML)
    return tmp_path


def _start(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(GCSIM + ["simulate", "par.yaml", "--no-progress", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_parallel_simulations_get_their_own_directories(scen):
    seeds = [11, 12, 13, 14]
    procs = [_start(scen, "--seed", str(s)) for s in seeds]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(seeds), [o[1] for o in outs]
    wrote = [re.search(r"^wrote (.+)$", o[0], re.M).group(1) for o in outs]
    assert len(set(wrote)) == len(seeds)
    dirs = sorted((scen / "runs" / "sim").iterdir())
    assert len(dirs) == len(seeds)
    for seed, path in zip(seeds, wrote):
        d = scen / path
        assert yaml.safe_load((d / "config.yaml").read_text())["seed"] == seed
        assert json.loads((d / "meta.json").read_text())["seed"] == seed
        assert CLAIM_NAME not in os.listdir(d)


def test_two_simulations_with_the_same_out(scen):
    procs = [_start(scen, "--seed", str(s), "--out", "same") for s in (21, 22)]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    loser = outs[[p.returncode for p in procs].index(2)]
    assert REFUSAL.match(loser[1]), loser[1]
    winner_seed = (21, 22)[[p.returncode for p in procs].index(0)]
    assert yaml.safe_load((scen / "same" / "config.yaml").read_text())["seed"] == winner_seed


# --------------------------------------------------------------------------- real runs (no Ray needed)
def test_real_run_stopping_before_a_checkpoint_leaves_nothing(tmp_path):
    pytest.importorskip("torch")
    from gcsim.real.rundir import RealRunDir
    from gcsim.real.config import resolve_config
    from gcsim.real.runner import guard_run

    new = new_run_dir(tmp_path / "r", root=tmp_path, prefix="x")
    run = RealRunDir(new.path)
    run.write_config(resolve_config("uncoded"))

    def fails():
        run.write_status("running")
        raise ConfigError("--batch-size", "at most 8", 9)
    with pytest.raises(ConfigError):
        guard_run(run, fails, new)
    assert list(tmp_path.iterdir()) == []


def test_failed_real_run_with_a_checkpoint_says_how_to_resume(tmp_path):
    pytest.importorskip("torch")
    from gcsim.real.rundir import RealRunDir
    from gcsim.real.runner import guard_run

    new = new_run_dir(tmp_path / "r", root=tmp_path, prefix="x")
    run = RealRunDir(new.path)
    run.save_checkpoint({"next_iteration": 3})

    def fails():
        raise RunFailedError("4 workers dead, at most s=1 tolerated")
    with pytest.raises(RunFailedError) as e:
        guard_run(run, fails, new)
    assert str(e.value) == (f"4 workers dead, at most s=1 tolerated (checkpoint kept: continue with gcsim real "
                            f"--resume {tmp_path / 'r'})")
    assert (tmp_path / "r" / "checkpoint.pt").is_file()


def test_embedded_ray_is_private_whatever_ray_address_says(monkeypatch, tmp_path):
    ray = pytest.importorskip("ray")
    from gcsim.real.config import RealConfig  # noqa: F401  (the real extra is importable)
    from gcsim.real.runner import ray_session

    calls = []
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # a cluster that does not exist
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))

    class Cfg:
        address, ray_num_cpus, n_workers, connect_timeout_s = None, None, 3, 5.0

    def session():
        return ray_session(Cfg.address, num_cpus=Cfg.ray_num_cpus or Cfg.n_workers,
                           connect_timeout_s=Cfg.connect_timeout_s)
    with session():
        kw = calls[0]
        assert kw["address"] == "local" and kw["_node_ip_address"] == "127.0.0.1" and kw["num_cpus"] == 3
        assert kw["include_dashboard"] is False and Path(kw["_temp_dir"]).is_dir()
    assert calls[-1] == "shutdown" and not Path(kw["_temp_dir"]).exists()
    import socket
    import threading

    def serve(listener, answer: bytes):
        """Accept one connection, read the client's greeting, send ``answer`` (b"": stay silent)."""
        conn, _ = listener.accept()
        with conn:
            conn.recv(64)
            if answer:
                conn.sendall(answer)
            conn.recv(64)  # until the client closes

    settings = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # what a gRPC server (Ray's GCS) sends first: SETTINGS
    with socket.create_server(("127.0.0.1", 0)) as listener:  # a Ray head's GCS listens at --address
        threading.Thread(target=serve, args=(listener, settings), daemon=True).start()
        Cfg.address = f"127.0.0.1:{listener.getsockname()[1]}"
        calls.clear()
        with session():
            assert calls[0]["address"] == Cfg.address and "_temp_dir" not in calls[0]
    # something else listens there: an HTTP/1 server, or one that never answers (review: ray.init retried
    # such a port for 168 s, ignoring --connect-timeout)
    Cfg.connect_timeout_s = 0.5
    for answer, said in ((b"HTTP/1.1 400 Bad Request\r\n\r\n", r"answered 'HTTP/1\.1 400 Bad Request'\.\.\."),
                         (b"", r"sent nothing back within 0\.5 s \(--connect-timeout\)")):
        with socket.create_server(("127.0.0.1", 0)) as listener:
            threading.Thread(target=serve, args=(listener, answer), daemon=True).start()
            Cfg.address = f"127.0.0.1:{listener.getsockname()[1]}"
            calls.clear()
            with pytest.raises(ConfigError, match=r"^--address: expected the head of a Ray cluster .*, got "
                                                  r"'127\.0\.0\.1:\d+', which accepted a connection but is not a "
                                                  r"Ray GCS: to an HTTP/2 \(gRPC\) greeting it " + said + "$"):
                with session():
                    pass
            assert calls == []  # ray.init never called
    Cfg.connect_timeout_s = 5.0
    # closed now: nothing listens at the same port
    calls.clear()
    with pytest.raises(ConfigError, match=r"^--address: expected a reachable Ray cluster \(host:port of its head\), got '127\.0\.0\.1:\d+': no connection within 5 s"):
        with session():
            pass
    assert calls == []  # ray.init never called


def test_a_claim_left_by_a_killed_run_is_taken_over_a_live_one_is_not(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)  # that process has exited: what a SIGKILLed or SIGTERMed run leaves
    out = tmp_path / "killed"
    out.mkdir()
    (out / CLAIM_NAME).write_text(f"{dead_pid}\n")
    rundir.check_out_dir(out)  # free, not "another run is writing it"
    run = new_run_dir(out, root=tmp_path, prefix="x")
    assert (out / CLAIM_NAME).read_text().split()[0] == str(os.getpid())
    run.release()
    half = tmp_path / "half"  # killed after it wrote part of its output: refused, and said so
    half.mkdir()
    (half / CLAIM_NAME).write_text(f"{dead_pid}\n")
    (half / "validation.csv").write_text("x\n")
    with pytest.raises(ConfigError, match=rf"left half-written by a gcsim run that was killed, pid {dead_pid}: "
                                          r"it holds validation.csv; remove the directory or choose another"):
        new_run_dir(half, root=tmp_path, prefix="x")
    assert (half / "validation.csv").read_text() == "x\n"
    live = tmp_path / "live"
    live.mkdir()
    (live / CLAIM_NAME).write_text(f"{os.getppid()}\n")  # a process that is running
    with pytest.raises(ConfigError, match="another run is writing it"):
        new_run_dir(live, root=tmp_path, prefix="x")
    assert (live / CLAIM_NAME).read_text().strip() == str(os.getppid())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process start times come from /proc (Linux)")
def test_a_claim_whose_pid_was_reused_is_stale(tmp_path):
    # the claim records its process's start time: a live process with that PID but another start time
    # is a later process, not the run that wrote the claim
    ppid = os.getppid()
    real_ticks = rundir.process_start_ticks(ppid)
    assert real_ticks is not None and real_ticks.isdigit()
    reused = tmp_path / "reused"
    reused.mkdir()
    (reused / CLAIM_NAME).write_text(f"{ppid} {int(real_ticks) + 1}\n")
    assert rundir.stale_claim(reused / CLAIM_NAME)
    new_run_dir(reused, root=tmp_path, prefix="x").release()
    same = tmp_path / "same"
    same.mkdir()
    (same / CLAIM_NAME).write_text(f"{ppid} {real_ticks}\n")
    assert not rundir.stale_claim(same / CLAIM_NAME)
    assert rundir.claim_text().split() == [str(os.getpid()), rundir.process_start_ticks(os.getpid())]


def _dead_pid() -> int:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(gone.stdout)  # that process has exited


def test_two_takeovers_of_one_stale_claim_let_exactly_one_through(tmp_path, monkeypatch):
    # B opens the stale marker and is about to lock it when A takes it over: B must not proceed (it
    # did when a takeover was unlink + O_EXCL, since B's staleness check had been made on the old file)
    marker = tmp_path / CLAIM_NAME
    marker.write_text(f"{_dead_pid()}\n")
    opened, go = threading.Event(), threading.Event()
    real_lock = rundir._try_lock

    def lock_after_a(fd, mode):
        if threading.current_thread().name == "B":
            opened.set()
            assert go.wait(10)
        return real_lock(fd, mode)

    monkeypatch.setattr(rundir, "_try_lock", lock_after_a)
    result = {}
    b = threading.Thread(target=lambda: result.setdefault("B", rundir.take_claim(tmp_path)), name="B")
    b.start()
    assert opened.wait(10)  # B holds the stale marker open
    a = rundir.take_claim(tmp_path)
    go.set()
    b.join(10)
    assert a is not None and result["B"] is None
    assert marker.read_text().split()[0] == str(os.getpid())
    a.release()
    assert not marker.exists()


def test_a_live_claim_is_known_by_its_lock_and_freed_when_its_process_is_killed(tmp_path):
    # the lock, not the PID text, says a claim is live (a process in another PID namespace, e.g. another
    # container on the same volume, has a PID this process cannot see); SIGKILL drops it
    out = tmp_path / "out"
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from gcsim.rundir import new_run_dir; "
         "new_run_dir(sys.argv[1], root=sys.argv[2], prefix='x'); print('claimed', flush=True); time.sleep(120)",
         str(out), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "claimed"
        marker = out / CLAIM_NAME
        assert marker.read_text().split()[0] == str(child.pid)
        with open(marker, "r+") as f:  # a PID this process cannot see as alive
            f.write(f"{_dead_pid()}\n")
        assert not rundir.stale_claim(marker)
        with pytest.raises(ConfigError, match="another run is writing it"):
            new_run_dir(out, root=tmp_path, prefix="x")
    finally:
        child.kill()  # only the process this test started
        child.wait(10)
    assert rundir.stale_claim(out / CLAIM_NAME)
    run = new_run_dir(out, root=tmp_path, prefix="x")
    assert (out / CLAIM_NAME).read_text().split()[0] == str(os.getpid())
    run.release()
    assert os.listdir(out) == []
