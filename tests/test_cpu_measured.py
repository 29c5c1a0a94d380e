"""Measured CPU per worker-iteration (trace format 2): the simulator writes the CPU work it drew, and
calibration takes partition work and per-call CPU from ``compute_cpu_s`` / ``cpu_s`` when present."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from factories import make_trace, shared_cpu_scenario, write_run_dir

from gcsim.compare.calibrate import calibrate, measured_cpu, split_idle_cpu, worker_idle_s
from gcsim.compare.pipeline import CompareOptions, _with_scheduler, compare_runs
from gcsim.compare.rundir import read_run_dir
from gcsim.compare.scenario_build import build_scenario, scenario_data
from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate


def _scenario(**workload):
    return shared_cpu_scenario(5, **workload)


def test_sim_cpu_is_the_drawn_work():
    # cores = 2, 0.1 CPU-s per partition + 0.02 CPU-s call overhead; worker 3 (scale 3) idles after
    # its partition (slowdown is a sleep) and only then runs its overhead
    res = simulate(validate_scenario(_scenario(cores=2, call_overhead={"dist": "constant", "value": 0.02})))
    w = res.workers.set_index(["scheme", "worker"])
    np.testing.assert_allclose(w.loc["uncoded"].cpu_s, 0.12, rtol=1e-12)
    np.testing.assert_allclose(w.loc["uncoded"].compute_cpu_s, 0.1, rtol=1e-12)
    # ignore-stragglers cancels worker 3 during its idle time: partition done, overhead never started
    ig = w.loc["ignore-stragglers"]
    np.testing.assert_allclose(ig.loc[3].cpu_s, 0.1, rtol=1e-12)
    np.testing.assert_allclose(ig.loc[[0, 1, 2]].cpu_s, 0.12, rtol=1e-12)
    assert res.workers[["cpu_s", "compute_cpu_s"]].notna().all().all()
    # without cores: the partitions' drawn work compute x slowdown, no overhead job
    free = simulate(validate_scenario(_scenario())).workers
    u = free[free.scheme == "uncoded"].set_index("worker")
    np.testing.assert_allclose(u.cpu_s.groupby(level=0).first(), [0.1, 0.1, 0.1, 0.3], rtol=1e-12)
    np.testing.assert_allclose(u.compute_cpu_s, u.cpu_s, rtol=0)


def _measured_run(tmp_path, part_cpu_s, call_cpu_s, d=2):
    # wall times of a toy trace (lognormal ~10 ms per partition, unrelated to the CPU figures)
    its, wks = make_trace("gc-fr", n=6, s=1, iterations=40, seed=4, partitions=d)
    rng = np.random.default_rng(9)
    scale = 1.0 + 0.1 * rng.standard_normal(len(wks))  # per-row noise on the partitions' CPU
    wks["compute_cpu_s"] = part_cpu_s * d * scale
    wks["cpu_s"] = wks["compute_cpu_s"] + call_cpu_s
    cfg = {"name": "m", "n_workers": 6, "iterations": 40, "seed": 1, "schemes": [{"name": "gc-fr", "s": 1}],
           "workload": {"gradient_bytes": 1e6, "model_bytes": 1e6, "cores": 2,
                        "compute": {"dist": "constant", "value": 0.01}},
           "policy": "cancel"}
    path = write_run_dir(tmp_path / "r", {"gc-fr": (its, wks)}, n=6, config=cfg, params={"gc-fr": (1, 1)})
    return path, wks[wks.iteration >= 5], scale


def test_calibration_recovers_measured_partition_and_call_cpu(tmp_path):
    path, kept, _ = _measured_run(tmp_path, part_cpu_s=0.027, call_cpu_s=0.008)
    cal = calibrate(read_run_dir(path), warmup=5, use_measured_cpu=True)
    assert cal.cores == 2
    # per-partition work: the measured compute_cpu_s / d (mean kept; spread restored by match_partition_spread)
    assert cal.compute_values_s.mean() == pytest.approx((kept.compute_cpu_s / 2).mean(), rel=1e-9)
    np.testing.assert_allclose(cal.overhead_values_s, 0.008, rtol=1e-9)
    assert any("CPU measured by the workers" in n for n in cal.notes)
    # the same trace without CPU columns (a version-1 trace) falls back to de-contended wall time
    wk = pd.read_csv(path / "workers.csv").drop(columns=["cpu_s", "compute_cpu_s"])
    wk.to_csv(path / "workers.csv", index=False)
    meta = json.loads((path / "meta.json").read_text())
    meta["trace_format_version"] = 1
    (path / "meta.json").write_text(json.dumps(meta))
    old = calibrate(read_run_dir(path), warmup=5)
    assert read_run_dir(path).workers.cpu_s.isna().all()
    assert abs(old.compute_values_s.mean() - 0.027) > 0.01  # ~10 ms wall per partition, not 27 ms CPU
    assert not any("CPU measured" in n for n in old.notes)


def test_measured_cpu_falls_back_row_by_row():
    wk = pd.DataFrame({"cpu_s": [0.05, np.nan, 0.03, 0.02], "compute_cpu_s": [0.04, np.nan, 0.035, 0.02],
                       "send_s": [1.0, 1.0, 1.0, np.nan]})
    parts, over = measured_cpu(wk, np.array([9.0, 8.0, 7.0, 6.0]), np.array([0.5, 0.4, 0.3, 0.2]))
    np.testing.assert_allclose(parts, [0.04, 8.0, 0.035, 0.02])
    # row 2: cpu_s < compute_cpu_s (clock granularity) is clipped at 0; row 3 never sent: its fallback
    np.testing.assert_allclose(over, [0.01, 0.4, 0.0, 0.2])


def test_wall_is_the_default_cpu_source_even_with_measured_columns(tmp_path):
    path, _, _ = _measured_run(tmp_path, part_cpu_s=0.027, call_cpu_s=0.008)
    wall = calibrate(read_run_dir(path), warmup=5)
    assert not any("CPU measured" in n for n in wall.notes)
    assert abs(wall.compute_values_s.mean() - 0.027) > 0.01


def test_worker_idle_is_the_gap_between_calls_plus_the_delay():
    # two workers, three iterations starting at 0, 1, 2 s; worker 1 is cancelled in iteration 1
    wk = pd.DataFrame({"iteration": [0, 0, 1, 1, 2, 2], "worker": [0, 1, 0, 1, 0, 1],
                       # stamps in seconds since the run's start, as both executors write them
                       "compute_start_s": [0.01, 0.02, 1.01, 1.03, 2.02, 2.01],
                       "delay_s": [0.0, 0.0, 0.5, 0.0, 0.0, 0.0],
                       "compute_s": [0.1, 0.2, 0.1, 0.05, 0.1, 0.1],
                       "send_s": [0.2, 0.3, 1.7, np.nan, 2.2, 2.2]})
    idle = worker_idle_s(wk)
    assert np.isnan(idle[0]) and np.isnan(idle[1])  # first calls: no previous end
    # worker 0: previous call ended at 0.2, this one starts at 1.01 and sleeps 0.5 s
    np.testing.assert_allclose(idle[[2, 4]], [1.01 - 0.2 + 0.5, 2.02 - 1.7])
    # worker 1: ended at 0.3; cancelled call ended at 1.03 + 0 + 0.05 (no send_s)
    np.testing.assert_allclose(idle[[3, 5]], [1.03 - 0.3, 2.01 - 1.08])


def test_idle_cpu_is_split_from_the_per_call_cpu(tmp_path):
    # per-call CPU = 6 ms of work + 0.005 cores while the worker waits: calibration must charge 6 ms
    # per call and give the 6 processes' 0.03 cores to the steady background
    path, _, _ = _measured_run(tmp_path, part_cpu_s=0.027, call_cpu_s=0.0)
    run = read_run_dir(path)
    wk = run.workers_of("gc-fr").copy()
    idle = worker_idle_s(wk)
    wk["cpu_s"] = wk["compute_cpu_s"] + 0.006 + 0.005 * np.nan_to_num(idle)
    wk.to_csv(path / "workers.csv", index=False)
    its = run.iterations_of("gc-fr").copy()
    its["other_cpu_wait_s"] = 0.1 * (its["decodable_s"] - its["start_s"])
    its["other_cpu_finish_s"] = 0.1 * (its["end_s"] - its["decodable_s"])
    its.to_csv(path / "iterations.csv", index=False)
    cal = calibrate(read_run_dir(path), warmup=5, use_measured_cpu=True)
    np.testing.assert_allclose(cal.overhead_values_s, 0.006, atol=1e-9)
    assert cal.background_wait_cores == pytest.approx(0.1 + 6 * 0.005, rel=1e-6)
    assert cal.background_finish_cores == pytest.approx(0.1 + 6 * 0.005, rel=1e-6)
    assert any("cores per worker process while it waits" in n for n in cal.notes)


def test_split_idle_cpu_keeps_a_constant_overhead():
    over = np.array([0.008, 0.008, 0.008, 0.008])
    per_call, rate = split_idle_cpu(over, np.array([0.1, 0.5, 1.0, np.nan]))
    assert rate == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(per_call, 0.008)


def test_the_calibrated_scheduler_is_the_runs_or_the_validated_one(tmp_path):
    # a real run is simulated with one run queue per core (findings 23-24); a simulated run keeps its
    # own setting; gcsim compare --scheduler overrides
    path, _, _ = _measured_run(tmp_path, part_cpu_s=0.027, call_cpu_s=0.008)
    run = read_run_dir(path)
    cal = calibrate(run, warmup=5, use_measured_cpu=True)
    assert cal.scheduler == "per-core"
    assert scenario_data(run, "gc-fr", cal)["workload"]["scheduler"] == "per-core"
    its, wks = make_trace("gc-fr", n=6, s=1, iterations=40, seed=4, partitions=2)
    cfg = {"name": "m", "n_workers": 6, "iterations": 40, "seed": 1, "schemes": [{"name": "gc-fr", "s": 1}],
           "workload": {"gradient_bytes": 1e6, "model_bytes": 1e6, "cores": 2, "scheduler": "processor-sharing",
                        "compute": {"dist": "constant", "value": 0.01}}, "policy": "cancel"}
    sim = read_run_dir(write_run_dir(tmp_path / "s", {"gc-fr": (its, wks)}, n=6, config=cfg,
                                     params={"gc-fr": (1, 1)}, executor="sim"))
    assert calibrate(sim, warmup=5).scheduler == "processor-sharing"
    forced = _with_scheduler(cal, CompareOptions(scheduler="processor-sharing"))
    assert forced.scheduler == "processor-sharing" and _with_scheduler(cal, CompareOptions()).scheduler == "per-core"
    assert any("workload.scheduler: processor-sharing" in n for n in forced.notes)
    assert build_scenario(run, "gc-fr", forced).workload.scheduler == "processor-sharing"
    with pytest.raises(ConfigError, match="--scheduler"):
        CompareOptions(scheduler="fair")


def test_the_targets_own_load_keeps_the_workers_idle_cpu(tmp_path):
    # --load-from target replaces the other processes' CPU by the target's own; the workers' CPU while
    # they wait between calls (in their clocks, not in the others') stays: n × idle rate on top
    path, _, _ = _measured_run(tmp_path, part_cpu_s=0.027, call_cpu_s=0.0)
    run = read_run_dir(path)
    wk = run.workers_of("gc-fr").copy()
    wk["cpu_s"] = wk["compute_cpu_s"] + 0.006 + 0.005 * np.nan_to_num(worker_idle_s(wk))
    wk.to_csv(path / "workers.csv", index=False)
    its = run.iterations_of("gc-fr").copy()
    its["other_cpu_wait_s"] = 0.1 * (its["decodable_s"] - its["start_s"])
    its["other_cpu_finish_s"] = 0.1 * (its["end_s"] - its["decodable_s"])
    its.to_csv(path / "iterations.csv", index=False)
    run = read_run_dir(path)
    seen = []

    def fake_simulate(sc, iterations, progress):
        seen.append(sc.workload.background)
        return simulate(sc, iterations=iterations, progress=progress)

    opts = CompareOptions(cpu_source="measured", load_from="target", background="measured", replications=1,
                          n_resamples=100, control_variate=False, speed_drift="none")
    compare_runs([(run, ["gc-fr"])], calibrate_from=run, options=opts, simulate=fake_simulate)
    assert seen and seen[-1].wait.value == pytest.approx(0.1 + 6 * 0.005, rel=1e-6)
    assert seen[-1].finish.value == pytest.approx(0.1 + 6 * 0.005, rel=1e-6)


def test_a_scheduler_with_no_shared_cores_says_it_did_nothing(tmp_path):
    path, _, _ = _measured_run(tmp_path, part_cpu_s=0.027, call_cpu_s=0.008)
    cal = dataclasses.replace(calibrate(read_run_dir(path), warmup=5), cores=None)
    same = _with_scheduler(cal, CompareOptions(scheduler="per-core"))
    assert same.scheduler == cal.scheduler
    assert any(n.startswith("--scheduler per-core: no effect") for n in same.notes)
