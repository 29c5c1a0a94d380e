"""``gcsim real --address`` on a real multi-node Ray cluster (issue 10).

One loopback cluster per module (``ray.cluster_utils.Cluster``: a head with no CPUs, so every worker
actor lives on a worker node, plus one node of 1 CPU per worker), with its own temp dir (``RAY_TMPDIR``
and ``temp_dir``), so no other Ray session on the machine is seen or touched. Nodes are killed by the
PID of their raylet (SIGKILL), exactly the processes this module started; at the end, whatever names
the module's temp dir in its command line is killed by PID.

Loopback: with Ray's "local clusters only" switch (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) a
``127.0.0.1`` address stays loopback; without it Ray replaced the address by the host's outward IP,
where the loopback-bound GCS did not answer, and ``ray.init`` hung (the reason this module was parked
until 2026-12-02). Node health checks are shortened (:data:`HEALTH_CHECK`) so a killed node is
declared dead within the run.

* one worker node lost with s = 1: the run finishes, no iteration lost, the death is reported;
* two lost with s = 1: a clean failure with a checkpoint; ``--resume`` finishes on the nodes left;
* SIGTERM to a ``gcsim real --address`` process: a checkpoint, status ``interrupted`` naming SIGTERM;
  ``--resume`` finishes it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("torch")

import pandas as pd  # noqa: E402
from ray import cluster_utils  # noqa: E402
from ray._private import ray_constants  # noqa: E402

from gcsim.compare.rundir import read_run_dir  # noqa: E402
from gcsim.errors import RunFailedError  # noqa: E402
from gcsim.real.config import resolve_config  # noqa: E402
from gcsim.real.rundir import RealRunDir  # noqa: E402
from gcsim.real.runner import RunHooks, resume_real, run_real  # noqa: E402
from factories import GCSIM, kill_processes_naming, prepared_data, tiny_real_scenario  # noqa: E402

pytestmark = pytest.mark.ray

N, ITERS = 4, 8
LONG = 40  # iterations of a run that must outlive a node's death being noticed (~1 s)
#: Ray's node health checks (GCS), shortened: a dead node is declared within about a second
HEALTH_CHECK = {"RAY_health_check_initial_delay_ms": "0", "RAY_health_check_period_ms": "200",
                "RAY_health_check_timeout_ms": "300", "RAY_health_check_failure_threshold": "3"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("cluster")
    prepared_data(root)
    tiny_real_scenario(root / "tiny.yaml", n=N, iterations=ITERS, seed=3, schemes=[{"name": "gc-fr", "s": 1}],
                       stragglers={"delay": {"dist": "constant", "value": 0.05}})
    base = tempfile.mkdtemp(prefix="gcsim-rc-")  # short: Ray's unix sockets live under it
    temp = os.path.join(base, "ray")  # Ray's own layout: <RAY_TMPDIR>/ray
    os.makedirs(temp)
    mp = pytest.MonkeyPatch()
    mp.setenv("RAY_TMPDIR", base)  # Cluster writes its address file under it, not /tmp/ray
    # loopback only: Ray replaces a 127.0.0.1 address by the host's outward IP (and its daemons listen on
    # every interface) unless its "local clusters only" switch is set; Cluster.add_node, unlike
    # `ray start`, still starts more nodes then. Subprocesses (gcsim real, Ray's daemons) read the
    # variable, this process (Ray already imported) the constant.
    mp.setenv(ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR, "0")
    mp.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)
    # a killed node is declared dead after Ray's health checks (default 5 x 3 s); short here, so the
    # death is seen within a run of a few seconds (the GCS reads these at start)
    for key, value in HEALTH_CHECK.items():
        mp.setenv(key, value)
    c = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "node_ip_address": "127.0.0.1", "temp_dir": temp, "include_dashboard": False})
    c.root, c.temp, c.base = root, temp, base
    try:
        yield c
    finally:
        c.shutdown()
        mp.undo()
        kill_processes_naming(base)
        shutil.rmtree(base, ignore_errors=True)


def _nodes(cluster, k: int) -> None:
    """Bring the cluster to exactly ``k`` live worker nodes of 1 CPU (adding what is missing)."""
    while len(cluster.worker_nodes) < k:
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1", temp_dir=cluster.temp)
    cluster.wait_for_nodes()


def _kill_raylet(cluster, node_id: str) -> int:
    """SIGKILL the raylet of the worker node ``node_id`` (hex); returns its PID."""
    for node in list(cluster.worker_nodes):
        if node.node_id == node_id:
            pid = node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid
            os.kill(pid, signal.SIGKILL)
            cluster.remove_node(node, allow_graceful=False)  # reap what is left of it, by its PIDs
            return pid
    raise AssertionError(f"no worker node {node_id}")


def _kill_nodes_of(cluster, workers: list[int], at_iteration: int):
    """An ``after_dispatch`` hook that kills the nodes of ``workers`` once, at ``at_iteration``, and the
    list it appends the killed raylets' PIDs to."""
    killed: list[int] = []

    def hook(it, pool):
        if it == at_iteration and not killed:
            killed.extend(_kill_raylet(cluster, pool.info[w]["node_id"]) for w in workers)

    return hook, killed


def _config(cluster, **over):
    opts = dict(batch_size=16, eval_every=4, checkpoint_every=2, data_dir=str(cluster.root / "data"),
                address=cluster.address, fetch_timeout_s=20.0, setup_timeout_s=120.0, placement_timeout_s=60.0)
    opts.update(over)
    return resolve_config("gc-fr", cluster.root / "tiny.yaml", **opts)


def test_one_node_lost_within_s_the_run_finishes_and_says_so(cluster):
    _nodes(cluster, N)
    hook, killed = _kill_nodes_of(cluster, [1], at_iteration=3)
    spec = _config(cluster, iterations=LONG)
    out = cluster.root / "lose-one"
    res = run_real(spec, out, progress=False, hooks=RunHooks(after_dispatch=hook))
    assert killed and res.status == "finished" and res.iterations_done == LONG
    run = read_run_dir(out)
    assert run.iterations.iteration.tolist() == list(range(LONG))  # no iteration lost
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "finished"
    assert [d["worker"] for d in status["dead_workers"]] == [1] and status["dead_workers"][0]["iteration"] >= 3
    assert int(pd.read_csv(out / "summary.csv")["dead_workers"].iloc[0]) == 1
    wk = run.workers
    assert not wk[(wk.worker == 1) & (wk.iteration > 4)].used.any()


def test_two_nodes_lost_with_s_1_fail_cleanly_and_resume_finishes_on_the_rest(cluster):
    _nodes(cluster, N)
    kill_two, killed = _kill_nodes_of(cluster, [0, 1], at_iteration=3)

    spec = _config(cluster)
    out = cluster.root / "lose-two"
    with pytest.raises(RunFailedError, match=r"--resume"):
        run_real(spec, out, progress=False, hooks=RunHooks(after_dispatch=kill_two))
    rd = RealRunDir(out)
    status = rd.read_status()
    assert status["status"] == "failed" and status["reason"]
    assert {d["worker"] for d in status["dead_workers"]} <= {0, 1} and len(status["dead_workers"]) >= 1
    done = rd.load_checkpoint()["next_iteration"]
    assert done == status["iterations_done"] and pd.read_csv(out / "iterations.csv").iteration.tolist() == list(range(done))

    # two nodes of 1 CPU are left for 4 workers: the resume fits them at 0.5 CPU each and finishes
    res = resume_real(out, progress=False, overrides={"address": cluster.address})  # --resume --address
    assert res.status == "finished" and res.iterations_done == ITERS
    run = read_run_dir(out)
    assert run.iterations.iteration.tolist() == list(range(ITERS))
    assert run.status["sessions"] == 2


def test_sigterm_checkpoints_and_resume_finishes(cluster):
    _nodes(cluster, N)
    out = cluster.root / "term"
    env = {**os.environ, "RAY_TMPDIR": cluster.base}
    args = ["real", "--scheme", "gc-fr", "--scenario", str(cluster.root / "tiny.yaml"), "--iterations", "200",
            "--batch-size", "16", "--checkpoint-every", "1", "--eval-every", "100", "--data-dir", str(cluster.root / "data"), "--address", cluster.address,
            "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(GCSIM + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                st = json.loads((out / "status.json").read_text())
            except (OSError, ValueError):
                st = {}
            if st.get("iterations_done", 0) >= 3:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, stderr  # 128 + SIGTERM, as a shell reports it
    assert "continue with: gcsim real --resume" in stdout
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "interrupted" and status["reason"] == "SIGTERM"
    done = status["iterations_done"]
    assert 3 <= done < 200 and status["checkpoint_iteration"] == done
    assert pd.read_csv(out / "iterations.csv").iteration.tolist() == list(range(done))

    rc = subprocess.run(GCSIM + ["real", "--resume", str(out), "--iterations", str(done + 2), "--no-progress"],
                        env=env, capture_output=True, text=True, timeout=300)
    assert rc.returncode == 0, rc.stderr
    run = read_run_dir(out)
    assert run.status["status"] == "finished" and run.iterations.iteration.tolist() == list(range(done + 2))
