"""The all-reduce baseline (``gcsim real --scheme allreduce``, :mod:`gcsim.real.allreduce`): one
Ray Train run of n = 2 ranks on a tiny CIFAR-10-layout data set (one Ray start for the module).

Checks: the run directory holds the trace format (the comparator's reader accepts it, the simulator
writes the same columns for its config.yaml), the injected delays and slowdowns are the keyed
straggler draws, host.csv holds the hypervisor's steal per iteration, every rank holds the same
model, and that model equals a single-process reference (same global mini-batches, same SGD): the
all-reduced gradient is the full mini-batch gradient. No wall-clock assertions. Bad input: one line
naming the option, exit 2, before Ray starts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")
pytest.importorskip("ray.train")

from gcsim.cli import main  # noqa: E402
from gcsim.compare.rundir import read_run_dir  # noqa: E402
from gcsim.real.allreduce import (ALLREDUCE, RANK_STEP_COLUMNS, RANK_STEPS_FILE, resolve_allreduce_config,  # noqa: E402
                                  ring_allreduce_bytes, ring_allreduce_s, run_allreduce, trace_tables)
from gcsim.real.data import load_split  # noqa: E402
from gcsim.real.model import build_model, get_flat_weights, set_flat_grad, slice_gradient  # noqa: E402
from gcsim.real.rundir import METRICS_COLUMNS  # noqa: E402
from gcsim.real.sampling import shard_indices, slice_positions, slice_sizes  # noqa: E402
from gcsim.scenario import load_scenario  # noqa: E402
from gcsim.stragglers import StragglerProcess  # noqa: E402
from gcsim.trace import ITERATION_COLUMNS, SUMMARY_COLUMNS, WORKER_COLUMNS  # noqa: E402
from factories import prepared_data, tiny_real_scenario  # noqa: E402

N, ITERS, SEED, BATCH = 2, 4, 2, 16  # seed 2: each rank is delayed in two of the four iterations


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("allreduce")
    prepared_data(root)
    tiny_real_scenario(root / "tiny.yaml", n=N, iterations=ITERS, seed=SEED, schemes=[{"name": "uncoded"}],
                       stragglers={"delay": {"dist": "bimodal", "p": 0.4, "delay": 0.2},
                                   "slowdown": {"dist": "bimodal", "p": 0.3, "delay": 0.5,
                                                "base": {"dist": "constant", "value": 1.0}}})
    return root


@pytest.fixture(scope="module")
def run(env, module_ray):
    spec = resolve_allreduce_config(env / "tiny.yaml", batch_size=BATCH, eval_every=2,
                                    data_dir=str(env / "data"), dtype="float64")
    res = run_allreduce(spec, env / "run", progress=False)
    assert res.status == "finished" and res.iterations_done == ITERS
    return env / "run", spec, spec.scenario


def _header(path):
    return list(pd.read_csv(path, nrows=0).columns)


def test_run_directory_holds_the_trace_format(run):
    path, cfg, _ = run
    rd = read_run_dir(path)  # the comparator's reader validates the whole directory
    assert rd.executor == "real" and rd.schemes == [ALLREDUCE] and rd.n_workers == N
    assert rd.meta["collective"] == ALLREDUCE and rd.meta["scheme"] == ALLREDUCE
    assert _header(path / "iterations.csv") == ITERATION_COLUMNS
    assert _header(path / "workers.csv") == WORKER_COLUMNS
    assert _header(path / "summary.csv") == SUMMARY_COLUMNS
    assert _header(path / "metrics.csv") == METRICS_COLUMNS
    assert _header(path / RANK_STEPS_FILE) == RANK_STEP_COLUMNS
    assert rd.status["status"] == "finished"
    it, wk = rd.iterations, rd.workers
    assert it.iteration.tolist() == list(range(ITERS)) and len(wk) == ITERS * N
    assert (it.n_arrived == N).all() and (it.n_used == N).all()
    assert set(wk.status) == {"arrived"} and wk.used.all()
    # an all-reduce returns after every rank joined, and the iteration ends after the last step
    last_send = wk.groupby("iteration")["send_s"].max().to_numpy()
    assert (wk.groupby("iteration")["arrival_s"].min().to_numpy() >= last_send).all()
    assert (it.decodable_s.to_numpy() <= it.end_s.to_numpy()).all()
    mt = pd.read_csv(path / "metrics.csv")
    assert mt.iteration.tolist() == [1, 3] and mt.test_accuracy.between(0, 1).all()
    # config.yaml: uncoded's timing labelled allreduce, ring bytes per rank, no model broadcast
    sc = load_scenario(path / "config.yaml")
    assert [(s.name, s.label) for s in sc.schemes] == [("uncoded", ALLREDUCE)]
    assert sc.workload.model_bytes == 0.0
    assert sc.workload.gradient_bytes == pytest.approx(ring_allreduce_bytes(N, rd.meta["gradient_full_bytes"]))
    from gcsim.sim.engine import simulate

    sim = simulate(sc, iterations=2)
    assert list(sim.iterations.columns) == list(it.columns) and list(sim.workers.columns) == list(wk.columns)
    assert set(sim.iterations.scheme) == {ALLREDUCE}


def test_host_csv_records_the_steal_per_iteration(run):
    # the hypervisor's steal, as the PS run records it: one host.csv row per iteration, and the run's
    # average in meta.json's host CPU load
    from gcsim.real.hostcpu import HOST_COLUMNS, host_steal_cpu_s

    path, _, _ = run
    assert _header(path / "host.csv") == HOST_COLUMNS
    host, it = pd.read_csv(path / "host.csv"), pd.read_csv(path / "iterations.csv")
    assert host.iteration.tolist() == list(range(ITERS)) and (host.scheme == ALLREDUCE).all()
    np.testing.assert_allclose(host.end_s, it.end_s)  # the iteration's end (the latest rank's)
    assert (host.reading_wall_s > 0).all() and host.reading_wall_s.sum() <= it.end_s.max() + 60
    load = read_run_dir(path).meta["host_cpu_load"]
    assert "steal_cores" in load
    if np.isfinite(host_steal_cpu_s()):  # Linux: the steal field exists (zero on bare metal)
        assert np.isfinite(host.host_steal_cpu_s).all() and (host.host_steal_cpu_s >= 0).all()
        assert 0 <= load["steal_cores"] <= load["busy_cores"] + 1e-3


def test_injected_delays_are_the_keyed_draws(run):
    path, cfg, scenario = run
    wk = pd.read_csv(path / "workers.csv").sort_values(["iteration", "worker"])
    block = StragglerProcess(scenario.stragglers, N, SEED).draw_block(range(ITERS))
    np.testing.assert_array_equal(wk.delay_s.to_numpy().reshape(ITERS, N), block.delay_s)
    np.testing.assert_array_equal(wk.slowdown.to_numpy().reshape(ITERS, N), block.slowdown)
    assert (block.delay_s > 0).any(axis=0).all()  # every rank slept in some iteration
    # causality, not speed: a rank enters the all-reduce only after its delay
    assert (wk.send_s - wk.compute_start_s >= wk.delay_s).all()


def test_model_equals_single_process_reference(run, env):
    path, spec, _ = run
    cfg, seed = spec.options, spec.seed
    ckpt = torch.load(path / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert ckpt["next_iteration"] == ITERS
    assert read_run_dir(path).meta["replica_max_abs_diff"] == 0.0  # every rank holds the same model
    got = build_model(cfg.model, seed=seed, dtype=cfg.dtype)
    got.load_state_dict(ckpt["model"])
    # reference: one process, the same global mini-batch per iteration (uncoded's n partitions), same SGD
    x, y = load_split(env / "data", train=True)
    shards = shard_indices(len(y), N, seed)
    sizes = slice_sizes(cfg.batch_size, N)
    ref = build_model(cfg.model, seed=seed, dtype=cfg.dtype)
    opt = torch.optim.SGD(ref.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    for t in range(ITERS):
        total = 0.0
        for j in range(N):
            pos = slice_positions(len(shards[j]), int(sizes[j]), seed, t, j)
            g, _ = slice_gradient(ref, x[shards[j]][pos], y[shards[j]][pos], cfg.batch_size)
            total = total + g.astype(np.float64)
        set_flat_grad(ref, total)
        opt.step()
    w_ref, w_got = get_flat_weights(ref), get_flat_weights(got)
    assert np.abs(w_got - get_flat_weights(build_model(cfg.model, seed=seed, dtype=cfg.dtype))).max() > 1e-6
    np.testing.assert_allclose(w_got, w_ref, rtol=0, atol=1e-10)


def test_compare_treats_it_as_one_more_scheme(run, tmp_path):
    path, _, _ = run
    rc = main(["compare", str(path), "--replications", "2", "--bootstrap", "200", "--warmup", "0",
               "--no-progress", "--out", str(tmp_path / "cmp")])
    assert rc in (0, 1)  # PASS/WARN or FAIL: four iterations decide nothing, the row must exist
    val = pd.read_csv(tmp_path / "cmp" / "validation.csv")
    assert val.scheme.tolist() == [ALLREDUCE]


def test_trace_tables_refuse_missing_ranks():
    rec = {"begin": 0.0, "send": 1.0, "arrival": 2.0, "end": 3.0, "delay_s": 0.0, "slowdown": 1.0,
           "compute_s": 1.0, "cpu_s": 1.0, "compute_cpu_s": 1.0}
    rows = [{**rec, "iteration": 0, "worker": 0}, {**rec, "iteration": 0, "worker": 1},
            {**rec, "iteration": 1, "worker": 0}]
    with pytest.raises(ValueError, match="iteration 1 has ranks"):
        trace_tables(rows, t0=0.0)


def test_ring_allreduce_formula():
    # Patarasuk & Yuan 2009: 2(n-1) steps of bytes/n each
    assert ring_allreduce_bytes(6, 600.0) == pytest.approx(1000.0)
    assert ring_allreduce_bytes(1, 600.0) == 0.0
    assert ring_allreduce_s(4, 4e6, 1e9, 1e-3) == pytest.approx(6e-3 + 6e-3)
    assert ring_allreduce_s(4, 4e6, float("inf"), 0.0) == 0.0
    for bad in (dict(n=0, nbytes=1.0, bandwidth_bytes_per_s=1.0, latency_s=0.0),
                dict(n=2, nbytes=-1.0, bandwidth_bytes_per_s=1.0, latency_s=0.0),
                dict(n=2, nbytes=1.0, bandwidth_bytes_per_s=0.0, latency_s=0.0),
                dict(n=2, nbytes=1.0, bandwidth_bytes_per_s=1.0, latency_s=-1.0)):
        with pytest.raises(ValueError):
            ring_allreduce_s(**bad)


@pytest.mark.parametrize("args, field", [
    (["--s", "1"], "--s"), (["--m", "2"], "--m"), (["--address", "127.0.0.1:1"], "--address"),
    (["--batch-size", "1"], "--batch-size"), (["--lr", "-1"], "--lr"),
])
def test_bad_input_is_one_line_exit_2(env, capsys, args, field):
    rc = main(["real", "--scheme", ALLREDUCE, "--scenario", str(env / "tiny.yaml"), "--data-dir",
               str(env / "data"), "--out", str(env / "never"), *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and field in err
    assert not (env / "never").exists()


def test_resume_of_an_allreduce_run_is_refused(run, capsys):
    path, _, _ = run
    rc = main(["real", "--resume", str(path)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "--resume" in err
