"""Several logical workers per Ray actor process (``gcsim real --workers-per-process K``, issue 10).

One Ray start for the module (``module_ray``: 2 CPUs); tiny synthetic data. With K = 2 and n = 4
(processes hosting workers {0, 1} and {2, 3}), gc-fr s = 1:

* the decoded gradient equals the full mini-batch gradient computed in one process (float64);
* stragglers held for ``HOLD_S`` are cancelled while running (their threads are freed: their next
  calls are needed and arrive) and recorded ``cancelled``; a held worker's process-mate replies
  meanwhile (the K workers of a process run concurrently); every worker has arrived trace rows with
  CPU > 0 (its thread's clock);
* killing a process loses both of its workers (more than s: the iteration fails naming them).

End to end: ``gcsim real`` with K = 3 (does not divide n = 4: processes of 3 and 1 workers) finishes,
and a bad K is a one-line error naming ``--workers-per-process`` (exit 2). No wall-clock assertion:
a worker that must not be waited for is held 10 minutes and cancelled as soon as the others decode.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

ray = pytest.importorskip("ray")
pytest.importorskip("torch")  # gcsim.real.model

from gcsim.cli import main  # noqa: E402
from gcsim.errors import RunFailedError  # noqa: E402
from gcsim.real.master import WorkerPool, fit_worker_cpus, resolve_workers_per_process  # noqa: E402
from gcsim.real.model import build_model, get_flat_weights  # noqa: E402
from gcsim.real.sampling import shard_indices  # noqa: E402
from gcsim.schemes import make_scheme  # noqa: E402
from factories import FixedDelays, full_batch_gradient, parameter_server, prepared_data, random_images, tiny_real_scenario, worker_setup  # noqa: E402

N, K, BATCH, SEED = 4, 2, 18, 3
HOLD_S = 600.0
DRAIN_S = 120.0


@pytest.fixture(scope="module")
def data(module_ray):
    return random_images(N * 12)


def _pool(images, labels, scheme):
    pool = WorkerPool(N, num_cpus=2 / N, workers_per_process=K)
    shards = shard_indices(len(labels), scheme.k, SEED)
    pool.setup(worker_setup(scheme, batch_size=BATCH, seed=SEED), images, labels, shards, timeout_s=DRAIN_S)
    return pool, shards


def _server(pool, scheme, stragglers, **kw):
    return parameter_server(pool, scheme, stragglers, batch_size=BATCH, **kw)


def _full_batch_gradient(model, images, labels, shards, iteration):
    return full_batch_gradient(model, images, labels, shards, iteration, batch_size=BATCH, seed=SEED)


def test_k_workers_share_a_process_decode_exactly_and_cancel(data):
    images, labels = data
    scheme = make_scheme("gc-fr", N, 1, 1)
    pool, shards = _pool(images, labels, scheme)
    try:
        assert pool.processes == [[0, 1], [2, 3]]
        pids = [i["pid"] for i in pool.info]
        assert pids[0] == pids[1] and pids[2] == pids[3] and pids[0] != pids[2]
        assert [i["process"] for i in pool.info] == [0, 0, 1, 1]
        # gc-fr groups {0, 1}, {2, 3}; iteration 0: workers 1 and 3 held (cancelled); iteration 1: 0 and 2
        # held, so 1's and 3's next calls are needed: they only run if the cancels freed their threads;
        # iteration 2: nobody held
        ps = _server(pool, scheme, FixedDelays(N, {0: {1: HOLD_S, 3: HOLD_S}, 1: {0: HOLD_S, 2: HOLD_S}}))
        model = build_model("small-cnn", seed=SEED, dtype="float64")
        weights = get_flat_weights(model)
        for t in range(3):
            res = ps.step(t, weights)
            ps.end_iteration()
            expected = _full_batch_gradient(model, images, labels, shards, t)
            assert np.max(np.abs(res.gradient - expected)) <= 1e-10 * np.max(np.abs(expected)), t
            assert res.exact
        ps.drain(timeout_s=DRAIN_S)
        wk = ps.workers_frame().set_index(["iteration", "worker"])
        assert len(wk) == 3 * N
        for t, w in ((0, 1), (0, 3), (1, 0), (1, 2)):
            assert wk.loc[(t, w)].status == "cancelled" and not wk.loc[(t, w)].used, (t, w)
        for t, w in ((0, 0), (0, 2), (1, 1), (1, 3)):  # iteration 1: after the cancel, in its thread
            assert wk.loc[(t, w)].used and wk.loc[(t, w)].status == "arrived", (t, w)
        # iteration 0: worker 0 replied while its process-mate 1 was held: the two ran concurrently
        arrived = wk[wk.status == "arrived"]
        assert set(arrived.index.get_level_values("worker")) == set(range(N))
        assert (arrived.compute_cpu_s > 0).all() and (arrived.cpu_s >= arrived.compute_cpu_s).all()
        between = arrived.between_calls_cpu_s  # the thread's own CPU between calls (trace version 4)
        assert np.isfinite(between).all() and (between >= 0).all()
        assert (between <= arrived.cpu_s - arrived.compute_cpu_s + 1e-9).all()
        probe = pool.probe(reps=1, timeout_s=DRAIN_S)
        assert probe["workers"] == N and all(v > 0 for v in probe["per_worker_median_cpu_s"])
    finally:
        pool.shutdown()


def test_a_process_death_loses_all_its_workers(data):
    """gc-fr n=4 s=1, K=2: killing worker 0's process kills workers 0 and 1 (a whole group), more than
    s: the iteration fails, and both are recorded dead."""
    images, labels = data
    scheme = make_scheme("gc-fr", N, 1, 1)
    pool, _ = _pool(images, labels, scheme)
    try:
        ps = _server(pool, scheme, FixedDelays(N, {}), after_dispatch=lambda it, p: p.kill(0) if it == 1 else None)
        weights = get_flat_weights(build_model("small-cnn", seed=SEED, dtype="float64"))
        ps.step(0, weights)
        ps.end_iteration()
        with pytest.raises(RunFailedError, match=r"iteration 1: 2 workers lost \(workers \[0, 1\]\)"):
            ps.step(1, weights)
        assert set(ps.deaths) == {0, 1} and all(d["iteration"] == 1 for d in ps.deaths.values())
        ps.abandon_iteration()
        ps.drain(timeout_s=DRAIN_S)
    finally:
        pool.shutdown()


def test_fit_and_auto():
    # one 2-CPU node, 64 workers 8 to a process: 8 processes of 8 x 0.03125 CPU
    assert fit_worker_cpus([2.0], 64, workers_per_process=8) == pytest.approx(0.0312)
    assert fit_worker_cpus([2.0], 6, workers_per_process=1) == fit_worker_cpus([2.0], 6)
    # four 1-CPU nodes, K=3: whole processes per node (4 x 3 workers fit at 1/3 CPU each)
    assert fit_worker_cpus([0.0, 1, 1, 1, 1], 12, workers_per_process=3) == pytest.approx(0.3333)
    with pytest.raises(RunFailedError, match="--workers-per-process"):
        fit_worker_cpus([1.0], 4, requested=1.0, workers_per_process=2)
    assert resolve_workers_per_process("auto", 8, [2.0]) == 1
    assert resolve_workers_per_process("auto", 16, [2.0]) == 1
    assert resolve_workers_per_process("auto", 64, [2.0]) == 4
    assert resolve_workers_per_process("auto", 64, [0.0, 1, 1, 1, 1]) == 1
    assert resolve_workers_per_process(3, 4, [2.0]) == 3
    with pytest.raises(ValueError, match="workers_per_process"):
        resolve_workers_per_process(5, 4, [2.0])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, module_ray):
    root = tmp_path_factory.mktemp("multi")
    prepared_data(root)
    tiny_real_scenario(root / "tiny.yaml", n=N, iterations=3, seed=SEED, schemes=[{"name": "gc-fr", "s": 1}],
                       stragglers={"delay": {"dist": "bimodal", "p": 0.3, "delay": 0.3}})
    return root


def test_run_with_k_not_dividing_n_and_cli_errors(tiny, capsys):
    """uncoded (waits for every worker, so each has arrived rows), K = 3 with n = 4."""
    out = tiny / "run"
    rc = main(["real", "--scheme", "uncoded", "--scenario", str(tiny / "tiny.yaml"), "--batch-size", "8",
               "--data-dir", str(tiny / "data"), "--workers-per-process", "3", "--out", str(out), "--no-progress"])
    assert rc == 0 and "status: finished, iterations: 3" in capsys.readouterr().out
    meta = json.loads((out / "meta.json").read_text())
    assert meta["ray"]["workers_per_process"] == 3 and meta["ray"]["worker_processes"] == 2
    assert yaml.safe_load((out / "real.yaml").read_text())["workers_per_process"] == 3
    import pandas as pd

    wk = pd.read_csv(out / "workers.csv")
    assert len(wk) == 3 * N and set(wk.worker) == set(range(N))
    arr = wk[wk.status == "arrived"]
    assert set(arr.worker) == set(range(N)) and (arr.compute_cpu_s > 0).all()
    for bad, given in (("0", "0"), ("two", "'two'"), ("5", "5")):
        rc = main(["real", "--scheme", "gc-fr", "--scenario", str(tiny / "tiny.yaml"), "--data-dir",
                   str(tiny / "data"), "--workers-per-process", bad, "--out", str(tiny / "bad")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and err[0].startswith("gcsim: error: --workers-per-process: expected")
        assert err[0].endswith(f"got {given}") and not (tiny / "bad").exists()
