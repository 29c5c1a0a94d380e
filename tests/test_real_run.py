"""End-to-end real runs on a tiny CIFAR-10-layout data set written to disk (one Ray start).

Trace files in the gcsim/trace.py schema (the simulator's), injected delays equal to the scenario's
straggler draws, dead workers (up to s: keep going; s+1: clean failure, then --resume), Ctrl-C
(clean stop at a checkpoint, then --resume).
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pandas as pd
import pytest
import yaml

ray = pytest.importorskip("ray")
pytest.importorskip("torch")  # the runs train a model

from gcsim.cli import main  # noqa: E402
from gcsim.compare.rundir import read_run_dir  # noqa: E402
from gcsim.errors import RunFailedError  # noqa: E402
from gcsim.real.config import resolve_config  # noqa: E402
from gcsim.real.rundir import METRICS_COLUMNS, RealRunDir  # noqa: E402
from gcsim.real.runner import RunHooks, resume_real, run_real  # noqa: E402
from gcsim.scenario import load_scenario  # noqa: E402
from gcsim.stragglers import StragglerProcess  # noqa: E402
from gcsim.trace import ITERATION_COLUMNS, SUMMARY_COLUMNS, WORKER_COLUMNS  # noqa: E402
from factories import prepared_data, tiny_real_scenario  # noqa: E402

N, ITERS, SEED = 4, 6, 5


@pytest.fixture(scope="module")
def env(tmp_path_factory, module_ray):
    root = tmp_path_factory.mktemp("real")
    prepared_data(root)
    tiny_real_scenario(root / "tiny.yaml", n=N, iterations=ITERS, seed=SEED,
                       schemes=[{"name": "gc-fr", "s": 1}, {"name": "uncoded"}],
                       stragglers={"delay": {"dist": "bimodal", "p": 0.3, "delay": 0.3}})
    yield root


def _config(env, **over):
    opts = dict(batch_size=16, eval_every=3, checkpoint_every=3, data_dir=str(env / "data"))
    opts.update(over)
    return resolve_config("gc-fr", env / "tiny.yaml", **opts)


def _csv_header(path):
    return list(pd.read_csv(path, nrows=0).columns)


def test_run_writes_the_trace_format(env):
    spec = _config(env)
    scenario = spec.scenario
    res = run_real(spec, env / "run1", progress=False)
    assert res.status == "finished" and res.iterations_done == ITERS
    run = read_run_dir(env / "run1")  # the comparator's reader validates the whole directory
    assert run.executor == "real" and run.schemes == ["gc-fr"] and run.n_workers == N
    assert _csv_header(env / "run1" / "iterations.csv") == ITERATION_COLUMNS
    assert _csv_header(env / "run1" / "workers.csv") == WORKER_COLUMNS
    assert _csv_header(env / "run1" / "summary.csv") == SUMMARY_COLUMNS
    assert _csv_header(env / "run1" / "metrics.csv") == METRICS_COLUMNS
    it, wk = run.iterations, run.workers
    assert it.iteration.tolist() == list(range(ITERS)) and len(wk) == ITERS * N
    # the simulator writes the same columns for the same scenario
    from gcsim.sim.engine import simulate

    sim = simulate(load_scenario(env / "run1" / "config.yaml"), iterations=2)
    assert list(sim.iterations.columns) == list(it.columns) and list(sim.workers.columns) == list(wk.columns)
    assert set(wk.status) <= {"arrived", "late", "cancelled", "dead"}
    # injected delays are exactly the scenario's straggler draws (paired with the simulator)
    proc = StragglerProcess(scenario.stragglers, N, SEED)
    for t in range(ITERS):
        rows = wk[wk.iteration == t].sort_values("worker")
        np.testing.assert_allclose(rows.delay_s.to_numpy(), proc.draw(t).delay_s)
    assert (wk.delay_s > 0).any()
    # timestamps are consistent: dispatch <= start; start + delay + compute <= send <= arrival
    arr = wk[wk.status == "arrived"]
    assert (arr.compute_start_s >= arr.dispatch_s - 1e-3).all()
    assert (arr.send_s >= arr.compute_start_s + arr.delay_s + arr.compute_s - 1e-3).all()
    assert (arr.arrival_s >= arr.send_s - 1e-3).all()
    # the workers' own CPU clock: partitions took CPU, the call as a whole at least as much
    assert (arr.compute_cpu_s > 0).all() and (arr.cpu_s >= arr.compute_cpu_s).all()
    # Ray's work between calls is measured apart (trace version 4), a part of the call's non-partition CPU
    between = arr.between_calls_cpu_s
    assert np.isfinite(between).all() and (between >= 0).all()
    assert (between <= arr.cpu_s - arr.compute_cpu_s + 1e-9).all() and (between > 0).any()
    assert (wk[wk.used].status == "arrived").all()
    assert it.set_index("iteration").n_used.equals(wk[wk.used].groupby("iteration").size())
    assert (it.decodable_s >= it.start_s).all() and (it.end_s >= it.decodable_s).all()
    assert (it.start_s.to_numpy()[1:] >= it.end_s.to_numpy()[:-1]).all()
    # the CPU other processes took, measured in both phases of every iteration (trace version 3):
    # the simulator's workload.background is calibrated from these, so NaN here is a silent hole
    for col in ("other_cpu_wait_s", "other_cpu_finish_s"):
        assert np.isfinite(it[col]).all() and (it[col] >= 0).all(), col
    assert it.other_cpu_wait_s.sum() > 0  # the master itself works while it waits
    # the run's machine load, split by session (autogroup shares CPU between sessions first)
    load = run.meta["host_cpu_load"]
    assert load["this_session_cores"] > 0  # the workers and the master are in this session
    assert load["this_session_cores"] + load["other_sessions_cores"] == pytest.approx(load["busy_cores"], abs=2e-3) \
        or load["other_sessions_cores"] == 0.0
    assert load["autogroup"] in (True, False, None) and run.meta["cpu_model"]
    # the hypervisor's steal: a run-level share of the machine and one host.csv row per iteration
    from gcsim.real.hostcpu import HOST_COLUMNS, host_steal_cpu_s

    host = pd.read_csv(env / "run1" / "host.csv")
    assert _csv_header(env / "run1" / "host.csv") == HOST_COLUMNS
    assert host.iteration.tolist() == list(range(ITERS)) and (host.scheme == "gc-fr").all()
    np.testing.assert_allclose(host.end_s, it.end_s)
    assert (host.reading_wall_s > 0).all() and host.reading_wall_s.sum() <= it.end_s.max() + 60
    if np.isfinite(host_steal_cpu_s()):  # Linux: the steal field exists (zero on bare metal)
        assert (host.host_steal_cpu_s >= 0).all()
        assert 0 <= load["steal_cores"] <= load["busy_cores"] + 1e-3
    # the CPU-speed probe before the first and after the last iteration, on every worker
    for when in ("start", "end"):
        probe = run.meta["cpu_probe"][when]
        assert probe["workers"] == run.n_workers and probe["reps"] >= 1
        assert probe["median_cpu_s"] > 0 and all(v > 0 for v in probe["per_worker_median_cpu_s"])
    # metrics, checkpoint, status, config
    mt = pd.read_csv(env / "run1" / "metrics.csv")
    assert mt.iteration.tolist() == [2, 5] and mt.test_accuracy.between(0, 1).all()
    assert RealRunDir(env / "run1").load_checkpoint()["next_iteration"] == ITERS
    assert run.status["status"] == "finished"
    cfg_back = load_scenario(env / "run1" / "config.yaml")
    assert cfg_back.n_workers == N and [s.name for s in cfg_back.schemes] == ["gc-fr"]
    assert cfg_back.workload.gradient_bytes == 188810 * 4  # this run's real message size


def test_up_to_s_dead_workers_do_not_stop_the_run(env):
    def kill_one(it, pool):
        if it == 2:
            pool.kill(1)

    spec = _config(env)
    res = run_real(spec, env / "run2", progress=False, hooks=RunHooks(after_dispatch=kill_one))
    assert res.status == "finished" and res.iterations_done == ITERS
    wk = read_run_dir(env / "run2").workers
    dead = wk[(wk.worker == 1) & (wk.iteration >= 2)]
    assert (dead.status == "dead").all() and not dead.used.any() and len(dead) == ITERS - 2
    assert not (wk[wk.worker != 1].status == "dead").any()


def test_s_plus_one_dead_fails_cleanly_then_resume_and_ctrl_c(env):
    sigint_before = signal.getsignal(signal.SIGINT)  # SIG_IGN under nohup / a background job
    def kill_two(it, pool):
        if it == 3:
            pool.kill(0)
            pool.kill(2)

    spec = _config(env)
    with pytest.raises(RunFailedError, match=r"iteration 3: 2 workers lost .* more than the s=1"):
        run_real(spec, env / "run3", progress=False, hooks=RunHooks(after_dispatch=kill_two))
    rd = RealRunDir(env / "run3")
    status = rd.read_status()
    assert status["status"] == "failed" and "2 workers lost" in status["reason"]
    assert rd.load_checkpoint()["next_iteration"] == 3
    assert pd.read_csv(env / "run3" / "iterations.csv").iteration.tolist() == [0, 1, 2]
    assert not (env / "run3" / "meta.json").exists()  # the comparator skips it until it finishes

    # resume with fresh workers; a Ctrl-C in iteration 4 stops it cleanly at a checkpoint ...
    def interrupt(it, pool):
        if it == 4:
            os.kill(os.getpid(), signal.SIGINT)

    res = resume_real(env / "run3", progress=False, hooks=RunHooks(after_dispatch=interrupt))
    assert res.status == "interrupted" and res.iterations_done == 4
    assert rd.read_status()["status"] == "interrupted"
    assert rd.load_checkpoint()["next_iteration"] == 4
    assert signal.getsignal(signal.SIGINT) is sigint_before  # handler restored
    # ... and a second resume finishes the run, here from a real.yaml as runs before issue 11 wrote it
    # (the run facts of config.yaml repeated, agreeing)
    (env / "run3" / "real.yaml").write_text(yaml.safe_dump(spec.flat()))
    res = resume_real(env / "run3", progress=False)
    assert res.status == "finished" and res.iterations_done == ITERS
    run = read_run_dir(env / "run3")
    assert run.iterations.iteration.tolist() == list(range(ITERS))
    assert len(run.workers) == ITERS * N and not (run.workers.status == "dead").any()
    assert (run.iterations.start_s.diff().dropna() > 0).all()
    assert run.status["status"] == "finished" and run.status["sessions"] == 3
    # the run's wall time counts every session (an earlier one up to the checkpoint resumed from): the
    # last session alone was reported as the run's (found by a review)
    assert res.sessions == 3 and res.total_wall_s > res.wall_s > 0
    assert res.test_iteration == int(pd.read_csv(env / "run3" / "metrics.csv").iteration.iloc[-1]) == ITERS - 1
    assert run.meta["wall_s"] == pytest.approx(res.total_wall_s) and run.meta["session_wall_s"] == pytest.approx(res.wall_s)
    assert run.status["wall_s"] == pytest.approx(res.total_wall_s)
    # the machine's load and speed probe were measured in the last session alone: meta.json says which
    assert run.meta["host_cpu_load"]["session"] == 3 and run.meta["cpu_probe"]["session"] == 3
    # host.csv: each iteration once over the three sessions, in order
    assert pd.read_csv(env / "run3" / "host.csv").iteration.tolist() == list(range(ITERS))


def test_a_stop_signal_after_the_last_iteration_is_recorded_and_skips_the_end_probe(env, monkeypatch):
    # the signal comes while the late replies are drained after the last iteration: the run is complete;
    # before, it ended "finished" with no trace of the signal (review), and a study went on to its next run
    from gcsim.real.master import ParameterServer

    sigterm_before = signal.getsignal(signal.SIGTERM)
    drain = ParameterServer.drain

    def late(self, *a, **k):
        os.kill(os.getpid(), signal.SIGTERM)
        return drain(self, *a, **k)

    monkeypatch.setattr(ParameterServer, "drain", late)
    res = run_real(_config(env), env / "late", progress=False)
    monkeypatch.setattr(ParameterServer, "drain", drain)
    assert res.status == "finished" and res.iterations_done == ITERS and res.late_signal == "SIGTERM"
    run = read_run_dir(env / "late")
    assert run.status["status"] == "finished" and run.status["signal_after_last_iteration"] == "SIGTERM"
    assert run.meta["cpu_probe"]["start"] is not None and run.meta["cpu_probe"]["end"] is None
    assert run.iterations.iteration.tolist() == list(range(ITERS))
    assert signal.getsignal(signal.SIGTERM) is sigterm_before
    res = run_real(_config(env), env / "quiet", progress=False)  # no signal: no record, the end probe taken
    assert res.late_signal is None and "signal_after_last_iteration" not in read_run_dir(env / "quiet").status
    assert read_run_dir(env / "quiet").meta["cpu_probe"]["end"] is not None
    assert "session" not in read_run_dir(env / "quiet").meta["cpu_probe"]  # one session: nothing to say


def test_cli_real_run_and_errors(env, capsys):
    out = env / "run5"
    rc = main(["real", "--scheme", "gc-fr", "--scenario", str(env / "tiny.yaml"), "--iterations", "2",
               "--batch-size", "8", "--data-dir", str(env / "data"), "--out", str(out), "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 0 and "status: finished, iterations: 2" in text and "iteration time (s): mean" in text
    assert "(measured after 2 iterations)" in text  # which evaluation the accuracy is
    assert len(read_run_dir(out).iterations) == 2
    # missing data: one line telling how to prepare it, no run directory left behind
    rc = main(["real", "--scheme", "gc-fr", "--scenario", str(env / "tiny.yaml"),
               "--data-dir", str(env / "nodata"), "--out", str(env / "run6")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "gcsim data prepare --source /path/to/cifar10-jpeg.zip" in err[0]
    assert not (env / "run6").exists()
    # bad scheme parameters: one line naming the options
    rc = main(["real", "--scheme", "gc-fr", "--s", "2", "--scenario", str(env / "tiny.yaml"),
               "--data-dir", str(env / "data")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("gcsim: error: --scheme/--workers/--s/--m:")
    rc = main(["real", "--scheme", "nope", "--scenario", str(env / "tiny.yaml")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("gcsim: error: --scheme: expected one of") and "got 'nope'" in err


def test_out_that_is_a_file_or_a_non_empty_dir_is_refused_and_left_alone(env, capsys):
    """--out must be new or empty: a file was a traceback, a foreign non-empty directory got run files
    (config.yaml, workers.csv, ... of another tool's run) overwritten."""
    base = ["real", "--scheme", "gc-fr", "--scenario", str(env / "tiny.yaml"), "--iterations", "1",
            "--batch-size", "8", "--data-dir", str(env / "data"), "--no-progress", "--out"]
    afile = env / "a_file"
    afile.write_text("mine\n")
    rc = main(base + [str(afile)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("gcsim: error: --out: expected a new or empty directory")
    assert "not a directory" in err[0] and afile.read_text() == "mine\n"
    foreign = env / "foreign"
    foreign.mkdir()
    (foreign / "workers.csv").write_text("someone else's\n")
    rc = main(base + [str(foreign)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "holding workers.csv" in err[0]
    assert sorted(p.name for p in foreign.iterdir()) == ["workers.csv"]
    assert (foreign / "workers.csv").read_text() == "someone else's\n"
