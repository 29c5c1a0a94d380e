"""Calibration of compute, transfer and master overhead from measured traces; the matching scenario."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from factories import make_trace, write_run_dir

from gcsim.compare.calibrate import (build_scenario, calibrate, compute_distribution, fit_transfer,
                                     match_partition_spread, per_partition_compute, require_same_n)
from gcsim.compare.rundir import read_run_dir
from gcsim.errors import ConfigError, RunDirError

ROOT = Path(__file__).resolve().parents[1]


def _config(n=6, schemes=({"name": "gc-fr", "s": 1},), seed=11, **extra):
    cfg = {"name": "measured", "n_workers": n, "iterations": 40, "seed": seed, "schemes": list(schemes),
           "workload": {"gradient_bytes": 2.0e6, "model_bytes": 3.0e6, "compute": {"dist": "constant", "value": 0.01}},
           "stragglers": {"delay": {"dist": "bimodal", "p": 0.1, "delay": 0.05}, "slowdown": None,
                          "persistent": None, "worker_scale": None},
           "policy": "carry-over", "cancel_latency_s": 0.002}
    cfg.update(extra)
    return cfg


def test_fit_transfer_recovers_a_line_from_two_payload_sizes():
    b = np.array([1e6, 1e6, 4e6, 4e6])
    fit, notes = fit_transfer(b, 0.0005 + b / 2e9)
    assert fit.identified and notes == []
    assert fit.latency_s == pytest.approx(0.0005, rel=1e-9)
    assert fit.bandwidth_bytes_per_s == pytest.approx(2e9, rel=1e-9)


def test_fit_transfer_with_one_size_keeps_the_mean():
    big, notes = fit_transfer(np.full(3, 4e6), np.array([0.001, 0.002, 0.003]))
    assert not big.identified and big.latency_s == 0.0 and big.bandwidth_bytes_per_s == pytest.approx(2e9)
    assert "bandwidth" in notes[0]
    small, notes = fit_transfer(np.full(2, 1000.0), np.array([0.001, 0.003]))
    assert small.latency_s == pytest.approx(0.002) and small.bandwidth_bytes_per_s == float("inf")
    assert "latency" in notes[0]


def test_compute_is_divided_by_partitions_and_slowdown_and_cancelled_rows_are_censored():
    wk = pd.DataFrame({
        "iteration": [0, 0, 0, 0], "worker": [0, 1, 2, 3], "n_partitions": [2, 2, 2, 2],
        "compute_start_s": [0.0, 0.0, 0.0, 0.0], "compute_s": [0.04, 0.06, 0.5, 0.5],
        "delay_s": [0.0, 0.0, 0.01, 0.2], "slowdown": [2.0, 1.0, 1.0, 1.0],
        "send_s": [0.04, 0.06, np.nan, np.nan], "status": ["arrived", "arrived", "cancelled", "cancelled"]})
    its = pd.DataFrame({"iteration": [0], "decodable_s": [0.07]})
    groups = per_partition_compute(wk, its, cancel_latency_s=0.01)
    done, cut = groups[2]
    np.testing.assert_allclose(done, [0.01, 0.03])
    # worker 2 computed from 0.01 until the cancel at 0.08: 0.07 s of 2 partitions; worker 3 never started
    np.testing.assert_allclose(cut, [0.035])
    np.testing.assert_allclose(compute_distribution(done, np.array([])), done)
    km = compute_distribution(done, cut)  # KM: 1/2 mass at 0.01, rest at 0.03, censored 0.035 → top
    assert km.size == 2000 and np.mean(km == 0.01) == pytest.approx(1 / 3, abs=1e-3)
    assert np.mean(km == 0.03) == pytest.approx(1 / 3, abs=1e-3) and np.mean(km == 0.035) == pytest.approx(1 / 3, abs=1e-3)
    with pytest.raises(ValueError, match="no worker finished"):
        compute_distribution(np.array([]), cut)


def test_match_partition_spread_restores_the_per_partition_variance():
    rng = np.random.default_rng(5)
    x = rng.gamma(25.0, 0.002, size=(20000, 3))  # per-partition draws, d = 3 per worker
    means = x.mean(axis=1)
    assert means.std() == pytest.approx(x.std() / np.sqrt(3), rel=0.03)  # what resampling means would give
    v = match_partition_spread(means, 3)
    assert v.min() > 0 and v.mean() == pytest.approx(means.mean(), rel=1e-12)
    assert v.std() == pytest.approx(x.std(), rel=0.03)
    np.testing.assert_array_equal(match_partition_spread(means, 1), means)
    assert match_partition_spread(np.array([0.0, 1.0, 2.0]), 4).tolist() == [0.0, 1.0, 3.0]  # clipped at 0


def test_calibrate_from_a_trace(tmp_path):
    its, wks = make_trace("gc-fr", n=6, s=1, iterations=40, seed=2, overhead_s=0.004, dispatch_lag_s=0.0025,
                          transfer_s=0.002, partitions=1)
    run = read_run_dir(write_run_dir(tmp_path / "r", {"gc-fr": (its, wks)}, n=6, config=_config(),
                                     params={"gc-fr": (1, 1)}))
    cal = calibrate(run, warmup=5)
    kept = wks[wks.iteration >= 5]
    np.testing.assert_allclose(np.sort(cal.compute_values_s), np.sort(kept.compute_s.to_numpy()))
    np.testing.assert_allclose(cal.master_values_s, 0.004, rtol=1e-6)
    assert cal.start_lag_s == pytest.approx(0.0025, rel=1e-6) and cal.n_censored == 0
    # the broadcast is its own draw (network.dispatch), not a point of the gradient transfer fit:
    # gradients 2 MB in 2 ms (one size -> bandwidth), every worker idle at the start lags 2.5 ms
    assert not cal.transfer.identified and cal.transfer.payload_sizes_bytes == (2e6,)
    assert cal.transfer.latency_s == 0.0 and cal.transfer.bandwidth_bytes_per_s == pytest.approx(1e9, rel=1e-6)
    np.testing.assert_allclose(cal.dispatch_values_s, 0.0025, rtol=1e-6)
    assert cal.network_spec()["dispatch"]["values"] == pytest.approx(list(cal.dispatch_values_s))


def test_build_scenario_copies_the_run_and_uses_the_calibration(tmp_path):
    tr = make_trace("gc-fr", n=6, s=1, iterations=30, seed=1)
    run = read_run_dir(write_run_dir(tmp_path / "r", {"gc-fr": tr}, n=6,
                                     config=_config(schemes=[{"name": "gc-fr", "s": 1, "seed": 4}]),
                                     params={"gc-fr": (1, 1)}))
    cal = calibrate(run)
    sc = build_scenario(run, "gc-fr", cal)
    assert (sc.n_workers, sc.iterations, sc.seed, sc.policy, sc.cancel_latency_s) == (6, 40, 11, "carry-over", 0.002)
    assert [(s.name, s.s, s.m, s.seed) for s in sc.schemes] == [("gc-fr", 1, 1, 4)]
    assert sc.stragglers.delay.p == 0.1 and sc.stragglers.delay.delay == 0.05
    assert (sc.workload.gradient_bytes, sc.workload.model_bytes) == (2.0e6, 3.0e6)
    np.testing.assert_allclose(sc.workload.compute.values, cal.compute_values_s)
    assert sc.network.latency_s == cal.transfer.latency_s
    assert build_scenario(run, "gc-fr", cal, seed=99).seed == 99
    shuffled = build_scenario(run, "gc-fr", cal, permutation_seed=1).workload.compute.values
    assert sorted(shuffled) == sorted(sc.workload.compute.values) and shuffled != sc.workload.compute.values


def test_runs_without_gradient_size_or_with_another_n_are_refused(tmp_path):
    tr = make_trace("uncoded", n=4, iterations=20)
    cfg = _config(n=4, schemes=[{"name": "uncoded"}])
    del cfg["workload"]["gradient_bytes"]
    write_run_dir(tmp_path / "no-size" / "small", {"uncoded": tr}, n=4, config=cfg)
    with pytest.raises(RunDirError, match=r"small/config.yaml: workload.gradient_bytes: expected"):
        read_run_dir(tmp_path / "no-size" / "small")  # the scenario refuses it: nothing to calibrate
    small = read_run_dir(write_run_dir(tmp_path / "small", {"uncoded": tr}, n=4,
                                       config=_config(n=4, schemes=[{"name": "uncoded"}])))
    big = read_run_dir(write_run_dir(tmp_path / "big", {"gc-fr": make_trace("gc-fr", n=6, s=1, iterations=20)},
                                     n=6, config=_config(), params={"gc-fr": (1, 1)}))
    with pytest.raises(ConfigError, match=r"^n: expected 6 \(as in calibration run big\), got 4 \(run small\)$"):
        require_same_n(big, small)


@pytest.mark.parametrize("warmup", [9, 10, 25])
def test_calibrate_refuses_a_warmup_that_leaves_no_iterations(tmp_path, warmup):
    """`gcsim calibrate` of a 10-iteration run with --warmup 10 or 25 calibrated silently from its last
    iteration alone; without --warmup it drops min(10, iterations // 5) = 2, as `gcsim compare`. The
    limit is gcsim compare's: at least 2 iterations left (9 leaves one)."""
    from gcsim.compare.scenario_file import write_calibrated_scenario

    its, wks = make_trace("gc-fr", n=6, s=1, iterations=10, seed=2, partitions=1)
    run = read_run_dir(write_run_dir(tmp_path / "r", {"gc-fr": (its, wks)}, n=6, config=_config(),
                                     params={"gc-fr": (1, 1)}))
    with pytest.raises(ConfigError, match=rf"^--warmup: expected at most 8 \(run .*r, scheme gc-fr has 10 "
                                          rf"iterations\), got {warmup}$"):
        write_calibrated_scenario(run, tmp_path / "cal.yaml", command="gcsim calibrate", warmup=warmup)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r"]
    def written(folder, **kw):
        """The calibrated scenario (comment lines left out: they carry the time) and its CSV files."""
        (tmp_path / folder).mkdir()
        path, side = write_calibrated_scenario(run, tmp_path / folder / "cal.yaml", command="gcsim calibrate", **kw)
        return [ln for ln in path.read_text().splitlines() if not ln.startswith("#")], \
            {q.name: q.read_bytes() for q in side}
    two = written("two", warmup=2)
    assert (tmp_path / "two" / "cal.yaml").is_file()
    assert written("default") == two  # the default dropped the same 2 iterations as --warmup 2
    assert written("three", warmup=3) != two  # (the warm-up changes the calibration: the check can fail)


def test_a_simulated_run_is_not_pooled_with_a_real_one(tmp_path):
    # a simulated run's times are the model's output: pooled, it counted as a second measurement of the
    # machine and narrowed the prediction interval's drift (found by a review as a new user)
    import yaml

    from gcsim.cli import main

    real = ROOT / "docs/validation/protocol-seed8-2026-12-05/runs/real_expon/uncoded-a"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_config(schemes=[{"name": "uncoded"}])))
    sim = tmp_path / "sim"
    assert main(["simulate", str(tmp_path / "s.yaml"), "--out", str(sim), "--no-progress"]) == 0
    with pytest.raises(ConfigError, match=r"^calibration runs: expected runs of one executor .*got uncoded-a \(real\) "
                                          r"and sim \(sim\)$"):
        calibrate([read_run_dir(real), read_run_dir(sim)])
    assert main(["calibrate", str(real), str(sim), "--out", str(tmp_path / "c.yaml")]) == 2
    assert not (tmp_path / "c.yaml").exists()
