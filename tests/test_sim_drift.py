"""The prediction range of ``gcsim simulate`` under the machine's CPU-speed drift (``workload.speed_drift``,
:mod:`gcsim.sim.drift`): every distribution scales exactly, the range has its closed form on a
deterministic run, ``gcsim calibrate`` writes the drift it measured and ``gcsim simulate`` shows it."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from gcsim.cli import main
from gcsim.compare.pipeline import calibration_speed_cv, calibration_speed_dof
from gcsim.compare.rundir import read_run_dir
from gcsim.errors import ConfigError
from gcsim.latency import build_distribution, parse_spec, scaled_spec
from gcsim.scenario import validate_scenario
from gcsim.sim.drift import batch_count, batch_means_se, mean_ranges, scale_cpu_work
from gcsim.sim.vector import simulate_with

ROOT = Path(__file__).resolve().parents[1]
QUIET_UNCODED = ROOT / "docs/validation/protocol-seed8-2026-12-05/runs/real_expon/uncoded-a"

SPECS = [
    {"dist": "constant", "value": 0.2},
    {"dist": "shifted_expon", "shift": 0.05, "scale": 0.1},
    {"dist": "bimodal", "p": 0.3, "delay": 1.0, "base": {"dist": "constant", "value": 0.02}},
    {"dist": "mixture", "components": [{"weight": 0.4, "spec": {"dist": "constant", "value": 0.1}},
                                       {"weight": 0.6, "spec": {"dist": "expon", "scale": 0.2}}]},
    {"dist": "empirical", "values": [0.01, 0.02, 0.05], "scale": 2.0},
    {"dist": "lognorm", "s": 0.5, "scale": 0.1, "loc": 0.01},
    {"dist": "pareto", "b": 2.5},
]


@pytest.mark.parametrize("raw", SPECS, ids=[s["dist"] for s in SPECS])
def test_a_scaled_distribution_draws_every_value_times_the_factor(raw):
    spec = parse_spec(raw)
    base, scaled = build_distribution(spec), build_distribution(scaled_spec(spec, 1.3))
    u = np.random.default_rng(7).random((500, base.n_uniforms))
    np.testing.assert_allclose(scaled.from_uniform(u), 1.3 * base.from_uniform(u), rtol=1e-12)
    assert scaled.mean() == pytest.approx(1.3 * base.mean(), rel=1e-12)


def test_a_bad_factor_is_named():
    with pytest.raises(ValueError, match=r"^factor must be a finite number > 0, got -1$"):
        scaled_spec(parse_spec({"dist": "constant", "value": 1}), -1)


def _scenario(stragglers=None, **workload):
    return validate_scenario({
        "name": "d", "n_workers": 4, "iterations": 200, "seed": 2,
        "schemes": [{"name": "uncoded"}, {"name": "gc-fr", "s": 1}],
        "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.1}, **workload},
        "network": {"latency_s": 0.001}, **({"stragglers": stragglers} if stragglers else {}),
    })


@pytest.mark.parametrize("overhead_s", [0.0, 0.02])
def test_the_range_has_its_closed_form_on_a_deterministic_run(overhead_s):
    # no stragglers, constant work: an iteration is call overhead + compute x partitions + latencies,
    # so the means at 1 -+ sd differ by exactly 2 sd x (overhead + compute x partitions) and the
    # sampling error is 0
    # (a call overhead is CPU work on shared cores: 4 cores for 4 workers, none waits for another)
    extra = {"call_overhead": {"dist": "constant", "value": overhead_s}, "cores": 4} if overhead_s else {}
    sc = _scenario(speed_drift={"sd": 0.1}, **extra)
    its = simulate_with(sc, trace="iterations").iterations
    ranges = mean_ranges(sc, its, lambda s: simulate_with(s, trace="iterations").iterations).set_index("scheme")
    for label, partitions in (("uncoded", 1), ("gc-fr", 2)):
        r = ranges.loc[label]
        cpu_s = overhead_s + 0.1 * partitions
        assert r.mean_slow_s - r.mean_fast_s == pytest.approx(2 * 0.1 * cpu_s, rel=1e-9)
        assert r.sampling_se_s == pytest.approx(0.0, abs=1e-15)
        half = 1.959963984540054 * 0.1 * cpu_s
        assert (r.mean_lo_s, r.mean_hi_s) == pytest.approx((r.mean_s - half, r.mean_s + half), rel=1e-9)


def test_an_estimated_drift_takes_students_t_and_adds_the_sampling_error():
    sc = _scenario({"delay": {"dist": "bimodal", "p": 0.2, "delay": 0.5}}, speed_drift={"sd": 0.05, "dof": 6})
    its = simulate_with(sc, "vector", trace="iterations").iterations
    r = mean_ranges(sc, its, lambda s: simulate_with(s, "vector", trace="iterations").iterations).set_index("scheme").loc["gc-fr"]
    from scipy import stats
    drift = stats.t.ppf(0.975, 6) * abs(r.mean_slow_s - r.mean_fast_s) / 2
    assert r.drift_half_width_s == pytest.approx(drift, rel=1e-12)
    x = its.loc[its["scheme"] == "gc-fr", "duration_s"].to_numpy()
    assert r.sampling_se_s == pytest.approx(batch_means_se(x), rel=1e-12) and r.sampling_se_s > 0
    assert r.sampling_dof == 19  # 20 batches
    assert r.mean_hi_s - r.mean_s == pytest.approx(np.hypot(drift, stats.t.ppf(0.975, 19) * r.sampling_se_s), rel=1e-12)


def test_batch_means_se_of_independent_draws_is_the_usual_one():
    x = np.repeat(np.arange(20.0), 5)  # batches of 5 equal values: batch means 0..19
    assert batch_means_se(x) == pytest.approx(np.std(np.arange(20.0), ddof=1) / np.sqrt(20), rel=1e-12)
    # a short series: fewer batches of 2 values (was NaN: a 30-iteration run's range had no sampling error)
    y = np.array([0.0, 2.0, 4.0, 6.0, 1.0, 3.0, 5.0])  # 3 batches of 2, the 7th value left over
    assert batch_count(7) == 3 and batch_means_se(y) == pytest.approx(np.std([1.0, 5.0, 2.0], ddof=1) / np.sqrt(3))
    assert batch_count(3) == 0 and np.isnan(batch_means_se(np.ones(3)))  # fewer than 4 values: none


def test_a_short_simulation_keeps_its_sampling_error_in_the_range(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    data = {"name": "d", "n_workers": 4, "iterations": 10, "seed": 2, "schemes": [{"name": "uncoded"}],
            "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.1}},
            "stragglers": {"delay": {"dist": "expon", "scale": 0.2}}}
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path), "--out", str(tmp_path / "a"), "--no-progress", "--speed-drift", "0"]) == 0
    r = pd.read_csv(tmp_path / "a" / "prediction_range.csv").iloc[0]
    its = pd.read_csv(tmp_path / "a" / "iterations.csv")["duration_s"].to_numpy()
    assert r.sampling_dof == 4 and r.sampling_se_s > 0 and r.sampling_se_s == pytest.approx(batch_means_se(its), rel=1e-8)
    assert r.mean_hi_s - r.mean_s == pytest.approx(stats.t.ppf(0.975, 4) * r.sampling_se_s, rel=1e-8)
    capsys.readouterr()
    data["iterations"] = 3  # too few for any sampling error: the range says it has none
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path), "--out", str(tmp_path / "b"), "--no-progress", "--speed-drift", "0.05"]) == 0
    assert "no sampling error in the range of uncoded: fewer than 4 iterations" in capsys.readouterr().out


def test_scale_cpu_work_scales_the_partitions_and_the_calls_only():
    sc = _scenario(call_overhead={"dist": "constant", "value": 0.01}, cores=4)
    out = scale_cpu_work(sc, 2.0)
    assert out.workload.compute.value == pytest.approx(0.2) and out.workload.call_overhead.value == pytest.approx(0.02)
    assert out.stragglers == sc.stragglers and out.network == sc.network and out.master == sc.master
    assert sc.workload.compute.value == 0.1 and sc.workload.call_overhead.value == 0.01  # the original unchanged
    assert scale_cpu_work(_scenario(), 3.0).workload.call_overhead is None  # none set: none added


def test_simulate_writes_the_range_and_refuses_a_bad_drift(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    data = {"name": "d", "n_workers": 4, "iterations": 100, "seed": 2, "schemes": [{"name": "uncoded"}],
            "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.1}}}
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path), "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    assert not (tmp_path / "a" / "prediction_range.csv").exists()  # no drift: no range
    assert main(["simulate", str(path), "--out", str(tmp_path / "b"), "--no-progress", "--speed-drift", "0.2"]) == 0
    out = capsys.readouterr().out
    r = pd.read_csv(tmp_path / "b" / "prediction_range.csv").iloc[0]
    assert r.mean_hi_s - r.mean_lo_s == pytest.approx(2 * 1.959963984540054 * 0.2 * 0.1, rel=1e-7)  # CSV: 10 digits
    assert f"{r.mean_lo_s:.4f}-{r.mean_hi_s:.4f}" in out and "drifting by 20 % (one SD; --speed-drift)" in out
    assert "Not in it: one run's own straggler luck" in out  # what the range leaves out is said
    assert "under-states" not in out  # a drift the user gives is not one run's blocks
    data["workload"]["speed_drift"] = {"sd": 0.05, "dof": 9}  # as gcsim calibrate writes it
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path), "--out", str(tmp_path / "m"), "--no-progress"]) == 0
    assert "a drift measured on one run's own blocks under-states the drift between runs" in capsys.readouterr().out
    # auto, as gcsim compare takes it: the scenario's measured drift, the same range as the default
    assert main(["simulate", str(path), "--out", str(tmp_path / "auto"), "--no-progress", "--speed-drift", "auto"]) == 0
    assert "9 degrees of freedom" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "auto" / "prediction_range.csv"),
                                  pd.read_csv(tmp_path / "m" / "prediction_range.csv"))
    del data["workload"]["speed_drift"]
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path), "--out", str(tmp_path / "auto2"), "--no-progress", "--speed-drift", "auto"]) == 0
    assert "no mean_95%_range_s: the scenario has no workload.speed_drift" in capsys.readouterr().out
    assert not (tmp_path / "auto2" / "prediction_range.csv").exists()
    assert main(["simulate", str(path), "--out", str(tmp_path / "c"), "--speed-drift", "1"]) == 2
    assert capsys.readouterr().err.strip() == ("gcsim: error: --speed-drift: expected auto, none or a fraction in "
                                               "[0, 1), got '1'")
    assert not (tmp_path / "c").exists()
    for bad, field in (({"sd": -0.1}, "workload.speed_drift.sd"), ({"sd": 0.05, "dof": 0.001}, "workload.speed_drift.dof")):
        data["workload"]["speed_drift"] = bad
        path.write_text(yaml.safe_dump(data))
        assert main(["simulate", str(path), "--out", str(tmp_path / "d")]) == 2
        assert field in capsys.readouterr().err
    # 0 in the file or on the line: the sampling error alone; none: no range
    data["workload"]["speed_drift"] = {"sd": 0.05}
    path.write_text(yaml.safe_dump(data))
    assert main(["simulate", str(path), "--out", str(tmp_path / "e"), "--speed-drift", "none"]) == 0
    assert not (tmp_path / "e" / "prediction_range.csv").exists()
    assert main(["simulate", str(path), "--out", str(tmp_path / "f"), "--speed-drift", "0"]) == 0
    r = pd.read_csv(tmp_path / "f" / "prediction_range.csv").iloc[0]
    assert r.speed_drift_sd == 0 and r.mean_lo_s == pytest.approx(r.mean_s) == pytest.approx(r.mean_hi_s)


def test_the_lower_end_is_never_below_zero():
    sc = _scenario(speed_drift={"sd": 0.9, "dof": 1})  # t(1): a half-width far beyond the mean
    its = simulate_with(sc, "vector", trace="iterations").iterations
    r = mean_ranges(sc, its, lambda s: simulate_with(s, "vector", trace="iterations").iterations)
    assert (r["mean_lo_s"] == 0.0).all() and (r["mean_hi_s"] > 2 * r["mean_s"]).all()


def test_calibrate_writes_the_drift_it_measured(tmp_path, capsys):
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(QUIET_UNCODED), "--out", str(out)]) == 0
    written = yaml.safe_load(out.read_text())["workload"]["speed_drift"]
    run = read_run_dir(QUIET_UNCODED)
    assert written["sd"] == pytest.approx(calibration_speed_cv([run], 10), abs=1e-6)
    assert written["dof"] == calibration_speed_dof([run], 10)
    assert "workload.speed_drift: sd" in out.read_text()


def test_a_simulated_run_writes_no_machine_drift(tmp_path):
    # a simulated run measures no machine: its "drift" (every scheme counted as a run, 891 degrees of
    # freedom) was written as if measured (found by a review)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({
        "name": "s", "n_workers": 4, "iterations": 200, "seed": 1, "schemes": [{"name": "uncoded"}, {"name": "gc-fr", "s": 1}],
        "workload": {"gradient_bytes": 1000, "cores": 2, "compute": {"dist": "expon", "scale": 0.03}}}))
    assert main(["simulate", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    assert main(["calibrate", str(tmp_path / "run"), "--out", str(tmp_path / "c.yaml")]) == 0
    assert "speed_drift" not in yaml.safe_load((tmp_path / "c.yaml").read_text())["workload"]


def test_a_call_overhead_without_cores_is_refused_not_dropped():
    # both engines model it as CPU work on the shared cores; without cores it used to vanish silently
    # (an iteration took the same time with or without it)
    with pytest.raises(ConfigError, match=r"^workload\.call_overhead: expected workload\.cores set with it "
                                          r"\(.*set workload\.cores, e\.g\. 2, or remove call_overhead\), "
                                          r"got a call_overhead with cores unset$"):
        _scenario(call_overhead={"dist": "constant", "value": 0.02})
    with_cores = _scenario(call_overhead={"dist": "constant", "value": 0.02}, cores=4)
    without = _scenario(cores=4)
    mean = lambda sc: simulate_with(sc, trace="iterations").iterations["duration_s"].mean()  # noqa: E731
    assert mean(with_cores) - mean(without) == pytest.approx(0.02, rel=1e-9)  # one call per worker-iteration


def test_calibrate_names_pooled_runs_made_under_different_loads(tmp_path, capsys):
    # a quiet run and one beside a busy neighbour, pooled: gcsim compare said so, gcsim calibrate did not
    noisy = ROOT / "docs/validation/protocol-seed9-2026-12-05/runs-noisy/real_expon/uncoded-a"
    out = tmp_path / "pooled.yaml"
    assert main(["calibrate", str(QUIET_UNCODED), str(noisy), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "note: calibration runs uncoded-a (" in err and "ran under other-process loads that differ" in err
    data = yaml.safe_load(out.read_text())
    assert data["seed"] not in {read_run_dir(QUIET_UNCODED).scenario.seed, read_run_dir(noisy).scenario.seed}
