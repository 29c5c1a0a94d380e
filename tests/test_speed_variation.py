"""The machine's speed common to every worker of an iteration (``workload.speed_variation``): the AR(1)
factor series, how both engines apply it, and its estimate from the workers' CPU clocks."""

import numpy as np
import pandas as pd
import pytest
from factories import make_trace, write_run_dir

from gcsim.compare.calibrate import calibrate
from gcsim.compare.rundir import read_run_dir
from gcsim.compare.scenario_build import scenario_data
from gcsim.compare.speed_variation import (fit_speed_variation, iteration_log_factors, remove_iteration_factor,
                                           speed_moments)
from gcsim.errors import ConfigError
from gcsim.latency import build_distribution
from gcsim.scenario import SpeedVariation, Stragglers, validate_scenario
from gcsim.sim.engine import simulate
from gcsim.sim.vector import simulate_vector
from gcsim.stragglers import StragglerProcess, speed_factors


def test_factors_have_the_asked_sd_lag1_and_unit_mean():
    spec = SpeedVariation(sd=0.08, lag1=0.6)
    f = speed_factors(spec, seed=5, iterations=40_000)
    a = np.log(f)
    # stationary AR(1): sd of the log factor, lag-1 autocorrelation, E[f] = 1 (the -sd²/2 shift)
    assert a.std() == pytest.approx(0.08, rel=0.03)
    assert np.corrcoef(a[:-1], a[1:])[0, 1] == pytest.approx(0.6, abs=0.02)
    # SE of the mean of an AR(1): sd/sqrt(N) * sqrt((1+rho)/(1-rho)) = 0.0008
    assert f.mean() == pytest.approx(1.0, abs=0.003)
    # seeded, keyed per iteration: a prefix does not depend on the length; another seed differs
    np.testing.assert_array_equal(speed_factors(spec, 5, 100), f[:100])
    assert not np.allclose(speed_factors(spec, 6, 100), f[:100])
    np.testing.assert_array_equal(speed_factors(SpeedVariation(sd=0.0), 5, 7), np.ones(7))
    np.testing.assert_array_equal(speed_factors(None, 5, 3), np.ones(3))
    with pytest.raises(ValueError, match="iterations"):
        speed_factors(spec, 5, -1)


def test_draws_multiply_compute_of_every_worker_and_leave_delays_and_overhead():
    strag = Stragglers(delay={"dist": "expon", "scale": 0.1})
    comp, over = build_distribution({"dist": "lognorm", "s": 0.2, "scale": 0.03}), build_distribution(
        {"dist": "constant", "value": 0.002})
    spec = SpeedVariation(sd=0.1, lag1=0.5)
    base = StragglerProcess(strag, 4, 9, compute=comp, call_overhead=over).draw_block(range(30), 3)
    proc = StragglerProcess(strag, 4, 9, compute=comp, call_overhead=over, speed_variation=spec)
    # drawn out of order (the factor series is grown as needed): the same numbers
    late = proc.draw_block(range(20, 30), 3)
    sped = proc.draw_block(range(30), 3)
    np.testing.assert_array_equal(late.compute_s, sped.compute_s[20:])
    f = speed_factors(spec, 9, 30)
    np.testing.assert_allclose(sped.compute_s, base.compute_s * f[:, None, None], rtol=1e-14)
    np.testing.assert_array_equal(sped.call_overhead_s, base.call_overhead_s)  # the per-call CPU as measured
    np.testing.assert_array_equal(sped.delay_s, base.delay_s)
    # a seed of its own: another path, the rest of the draws the same
    own = StragglerProcess(strag, 4, 9, compute=comp, call_overhead=over,
                           speed_variation=SpeedVariation(sd=0.1, lag1=0.5, seed=77)).draw_block(range(30), 3)
    np.testing.assert_allclose(own.compute_s, base.compute_s * speed_factors(spec, 77, 30)[:, None, None], rtol=1e-14)
    # a constant compute becomes one value per iteration, shared by the workers
    const = StragglerProcess(None, 4, 9, compute=build_distribution({"dist": "constant", "value": 0.05}),
                             speed_variation=spec).draw_block(range(30), 2)
    np.testing.assert_allclose(const.compute_s, 0.05 * np.broadcast_to(f[:, None, None], (30, 4, 2)), rtol=1e-14)


def _scenario(**workload):
    return validate_scenario({
        "name": "speed", "n_workers": 4, "iterations": 40, "seed": 2, "schemes": [{"name": "uncoded"}],
        "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.1}, **workload},
        "network": {"latency_s": 0.001, "bandwidth_bytes_per_s": 1e9},
        "master": {"decode_s": {"dist": "constant", "value": 0.002}}})


@pytest.mark.parametrize("engine", [simulate, simulate_vector])
def test_both_engines_scale_every_iteration_by_its_factor(engine):
    # no stragglers, a constant 0.1 s per partition, one partition per worker: the iteration lasts
    # latency + 0.1·f_t + latency + decode, so it exceeds the unvaried run by exactly 0.1·(f_t - 1)
    spec = {"sd": 0.1, "lag1": 0.7}
    plain = engine(_scenario()).iterations["duration_s"].to_numpy()
    varied = engine(_scenario(speed_variation=spec)).iterations["duration_s"].to_numpy()
    f = speed_factors(SpeedVariation(**spec), 2, 40)
    np.testing.assert_allclose(varied - plain, 0.1 * (f - 1.0), atol=1e-12)
    assert np.ptp(f) > 0.1  # the check above is not vacuous


def test_scenario_refuses_a_lag1_of_one():
    with pytest.raises(ConfigError, match=r"workload\.speed_variation\.lag1"):
        _scenario(speed_variation={"sd": 0.1, "lag1": 1.0})
    with pytest.raises(ConfigError, match=r"workload\.speed_variation\.sd"):
        _scenario(speed_variation={"sd": -0.1})


def _synthetic_rows(sd_a, lag1, sd_e, iterations=3000, k=6, seed=0, mu=np.log(0.03)):
    rng = np.random.default_rng(seed)
    a = np.empty(iterations)
    a[0] = sd_a * rng.standard_normal()
    for t in range(1, iterations):
        a[t] = lag1 * a[t - 1] + np.sqrt(1 - lag1 ** 2) * sd_a * rng.standard_normal()
    log_c = mu + a[:, None] + sd_e * rng.standard_normal((iterations, k))
    parts = rng.integers(1, 4, size=(iterations, k))
    status = np.where(rng.random((iterations, k)) < 0.1, "cancelled", "arrived")
    return pd.DataFrame({"iteration": np.repeat(np.arange(iterations), k), "worker": np.tile(np.arange(k), iterations),
                         "n_partitions": parts.ravel(), "status": status.ravel(),
                         "compute_cpu_s": (np.exp(log_c) * parts).ravel()}), a


def test_estimate_recovers_the_common_and_own_parts():
    rows, _ = _synthetic_rows(sd_a=0.08, lag1=0.6, sd_e=0.10)
    fit = fit_speed_variation([speed_moments(rows)])
    assert fit.sd == pytest.approx(0.08, rel=0.08)
    assert fit.lag1 == pytest.approx(0.6, abs=0.06)
    assert fit.sd_within == pytest.approx(0.10, rel=0.03)
    assert fit.spec() == {"sd": pytest.approx(fit.sd, abs=1e-6), "lag1": pytest.approx(fit.lag1, abs=1e-6)}
    # no common part: the per-worker noise in the iteration means is not mistaken for one
    none, _ = _synthetic_rows(sd_a=0.0, lag1=0.0, sd_e=0.10, seed=1)
    assert fit_speed_variation([speed_moments(none)]).sd < 0.015
    # two runs at different speeds, pooled: each keeps its own mean (a drift between runs is not
    # variation within one)
    slow = rows.assign(compute_cpu_s=rows.compute_cpu_s * 1.3)
    pooled = fit_speed_variation([speed_moments(rows), speed_moments(slow)])
    assert pooled.sd == pytest.approx(fit.sd, rel=1e-9)
    assert fit_speed_variation([speed_moments(rows.iloc[:30])]).n_iterations == 0  # too few iterations


def test_removing_the_factor_leaves_each_workers_own_part_and_the_mean():
    rows, a = _synthetic_rows(sd_a=0.1, lag1=0.5, sd_e=0.0, iterations=200)
    g = iteration_log_factors(rows)
    # no per-worker noise: the iteration factor is exactly a_t, centred
    np.testing.assert_allclose(g.to_numpy(), (a - a.mean())[g.index], atol=1e-12)
    cpu = rows.compute_cpu_s.to_numpy()
    flat = remove_iteration_factor(rows, cpu)
    per_part = flat / rows.n_partitions.to_numpy()
    np.testing.assert_allclose(per_part, per_part[0], rtol=1e-12)  # every row alike once the factor is out
    assert flat.sum() == pytest.approx(cpu.sum(), rel=1e-12)


def test_removing_the_factor_keeps_the_whole_per_worker_spread():
    # the deviation from an iteration's mean of k rows carries (1 - 1/k) of the per-worker variance;
    # what stays in workload.compute must carry all of it (sd_e), not sd_e·sqrt(1 - 1/k)
    rows, _ = _synthetic_rows(sd_a=0.05, lag1=0.7, sd_e=0.12, iterations=4000, k=4, seed=6)
    rows = rows.assign(status="arrived")
    flat = remove_iteration_factor(rows, rows.compute_cpu_s.to_numpy())
    assert np.std(np.log(flat / rows.n_partitions.to_numpy())) == pytest.approx(0.12, rel=0.03)
    assert flat.sum() == pytest.approx(rows.compute_cpu_s.sum(), rel=1e-12)


def test_calibration_models_the_shared_part_and_writes_it_to_the_scenario(tmp_path):
    its, wks = make_trace("uncoded", n=6, iterations=120, seed=4)
    rows, _ = _synthetic_rows(sd_a=0.09, lag1=0.7, sd_e=0.05, iterations=120, k=6, seed=3)
    wks = wks.sort_values(["iteration", "worker"]).reset_index(drop=True)
    wks["compute_cpu_s"] = rows.compute_cpu_s.to_numpy() / rows.n_partitions.to_numpy()  # one partition each
    wks["cpu_s"] = wks["compute_cpu_s"] + 0.001
    cfg = {"name": "m", "n_workers": 6, "iterations": 120, "seed": 1, "schemes": [{"name": "uncoded"}],
           "workload": {"gradient_bytes": 1e6, "model_bytes": 1e6, "cores": 2,
                        "compute": {"dist": "constant", "value": 0.01}}, "policy": "cancel"}
    run = read_run_dir(write_run_dir(tmp_path / "r", {"uncoded": (its, wks)}, n=6, config=cfg))
    cal = calibrate(run, warmup=5, use_measured_cpu=True)
    assert 0.05 < cal.speed_variation.sd < 0.13 and cal.speed_variation.lag1 > 0.4
    sv = scenario_data(run, "uncoded", cal)["workload"]["speed_variation"]
    assert sv == cal.speed_spec() and "seed" not in sv
    # paired replications (permutation_seed) each get a path of the machine's speed of their own
    seeds = {scenario_data(run, "uncoded", cal, permutation_seed=r)["workload"]["speed_variation"]["seed"]
             for r in range(1, 5)}
    assert len(seeds) == 4
    # the shared part is out of the per-partition values: their spread is about the per-worker 5 %
    kept = wks[wks.iteration >= 5]
    assert np.std(np.log(cal.compute_values_s)) < 0.7 * np.std(np.log(kept.compute_cpu_s))
    assert cal.compute_values_s.mean() == pytest.approx(kept.compute_cpu_s.mean(), rel=1e-9)
    assert any("machine speed per iteration" in n for n in cal.notes)
    off = calibrate(run, warmup=5, use_measured_cpu=True, speed_variation=False)
    assert off.speed_variation is None and "speed_variation" not in scenario_data(run, "uncoded", off)["workload"]
    assert calibrate(run, warmup=5).speed_variation is None  # wall-time calibration: not modelled
