"""The mean error in expectation (gcsim.compare.control_variate, issue 9): a control variate built from
the target run's own straggler draws, replayed through the prediction's calibration."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gcsim.compare.control_variate import MIN_PAIRS, control_variate_error
from gcsim.compare.pipeline import CompareOptions, compare_runs
from gcsim.compare.rundir import read_run_dir
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate


def test_a_control_equal_to_the_observation_gives_exactly_the_prediction():
    # y == C: beta = 1 and y_cv = E_f, so the error in expectation is 0 whatever the luck of the draws
    rng = np.random.default_rng(0)
    c = 0.3 + (rng.random(140) < 0.47)
    e = 0.3 + (rng.random(700) < 0.47)
    out = control_variate_error(c, c, e, n_resamples=300)
    assert out.value == pytest.approx(0.0, abs=1e-12)
    assert out.beta == pytest.approx(1.0) and out.rho == pytest.approx(1.0)
    assert out.lo <= 0.0 <= out.hi and out.hi - out.lo < 1e-9
    assert out.observed_mean_s == pytest.approx(e.mean())


def test_an_affine_response_is_recovered_in_closed_form():
    # y = a + b C exactly: beta = b, y_cv = a + b E_f, error E_f / (a + b E_f) - 1
    rng = np.random.default_rng(1)
    c = 0.3 + rng.exponential(0.2, 200)
    e = 0.3 + rng.exponential(0.2, 900)
    a, b = 0.05, 1.2
    out = control_variate_error(a + b * c, c, e, n_resamples=300)
    assert out.beta == pytest.approx(b)
    assert out.value == pytest.approx(e.mean() / (a + b * e.mean()) - 1.0, rel=1e-10)
    assert out.observed_mean_s == pytest.approx(a + b * e.mean())


def test_the_interval_covers_the_true_error_and_is_narrower_than_the_raw_one():
    # bimodal stragglers: uncoded waits 1 s when any of 6 workers straggles (p = 0.1 each); the
    # "measured" times are 10 % slower than the model plus noise, so the true error in expectation is
    # 1/1.1 - 1 whatever the draws; the raw error carries the luck of 140 draws
    p_any = 1 - 0.9 ** 6
    truth = 1 / 1.1 - 1
    covered, widths, raw_errs = 0, [], []
    for seed in range(120):
        rng = np.random.default_rng(seed)
        c = 0.3 + (rng.random(140) < p_any)
        y = 1.1 * c + rng.normal(0, 0.02, c.size)
        e = 0.3 + (rng.random(700) < p_any)
        out = control_variate_error(y, c, e, n_resamples=400, seed=seed, block=1)  # iid iterations
        covered += out.lo <= truth <= out.hi
        widths.append(out.hi - out.lo)
        raw_errs.append(e.mean() / y.mean() - 1)
    assert covered / 120 >= 0.88  # nominal 0.95; iterations independent here
    raw_spread = 2 * 1.96 * np.std(raw_errs)  # the raw error's own sampling spread
    assert np.mean(widths) < raw_spread / 5


def test_autocorrelated_residuals_widen_the_interval():
    # the part of y the draws do not fix wanders slowly (a machine's speed): resampling iterations
    # independently understates its uncertainty, blocks of consecutive iterations do not
    rng = np.random.default_rng(3)
    c = 0.3 + (rng.random(200) < 0.47)
    wander = np.repeat(rng.normal(0, 0.03, 10), 20)  # ten stretches of 20 iterations
    y = c + wander
    e = 0.3 + (rng.random(1000) < 0.47)
    iid = control_variate_error(y, c, e, block=1, n_resamples=1000)
    blocks = control_variate_error(y, c, e, block=20, n_resamples=1000)
    assert blocks.value == iid.value
    assert (blocks.hi - blocks.lo) > 2.5 * (iid.hi - iid.lo)


def test_without_a_usable_control_it_says_so():
    y = np.linspace(0.2, 0.4, 50)
    flat = control_variate_error(y, np.full(50, 0.3), y)
    assert np.isnan(flat.value) and np.isnan(flat.beta) and flat.reason == "the replayed iteration times do not vary"
    few = control_variate_error(y[:MIN_PAIRS - 1], y[:MIN_PAIRS - 1], y)
    assert np.isnan(few.value)
    with pytest.raises(ValueError, match="aligned"):
        control_variate_error(y, y[:-1], y)
    with pytest.raises(ValueError, match="confidence"):
        control_variate_error(y, y, y, confidence=1.0)


def _sim_run(tmp_path, name, schemes, seed=3, iterations=120):
    from gcsim.sim.output import write_sim_run

    sc = validate_scenario({
        "name": name, "n_workers": 6, "iterations": iterations, "seed": seed, "schemes": schemes,
        "workload": {"gradient_bytes": 0, "cores": 2.0, "compute": {"dist": "constant", "value": 0.03}},
        "master": {"decode_s": {"dist": "constant", "value": 0.002}},
        "stragglers": {"delay": {"dist": "bimodal", "p": 0.1, "delay": 1.0}}})
    return read_run_dir(write_sim_run(simulate(sc), sc, tmp_path / name))


def test_a_prediction_of_a_run_of_the_same_model_is_exact_in_expectation(tmp_path):
    # a simulated "measurement" of the model itself: the raw mean error is the luck of its 120 draws,
    # the error in expectation is ~0 with a tight interval, and beta ~ 1
    src = _sim_run(tmp_path, "src", [{"name": "uncoded"}], seed=5)
    tgt = _sim_run(tmp_path, "tgt", [{"name": "gc-fr", "s": 1}], seed=3)
    opts = dict(replications=3, warmup=5, cpu_source="measured", n_resamples=300, speed_drift="none")
    row = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src, options=CompareOptions(**opts)).table().iloc[0]
    assert abs(row["err_mean_cv"]) < 0.01 and row["err_mean_cv_lo"] - 1e-9 <= 0.0 <= row["err_mean_cv_hi"] + 1e-9
    assert row["err_mean_cv_hi"] - row["err_mean_cv_lo"] < (row["err_mean_hi"] - row["err_mean_lo"]) / 3
    assert row["cv_beta"] == pytest.approx(1.0, abs=0.05) and row["cv_rho"] > 0.95
    assert abs(row["err_p95_cv"]) < 0.03
    assert row["err_p95_cv_lo"] - 1e-9 <= 0.0 <= row["err_p95_cv_hi"] + 1e-9
    off = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src,
                       options=CompareOptions(control_variate=False, **opts)).table().iloc[0]
    assert np.isnan(off["err_mean_cv"]) and off["err_mean"] == pytest.approx(row["err_mean"])
    assert off["cv_note"] == "--no-control-variate" and row["cv_note"] == ""
    paired = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src,
                          options=CompareOptions(mode="paired", **opts)).table().iloc[0]
    assert np.isnan(paired["err_mean_cv"]) and paired["cv_note"] == "paired mode"  # a model check: nothing to estimate
    assert np.isnan(paired["err_mean_drift_cv"]) and paired["pi_covers_cv"] is None  # nothing to cover
    own = compare_runs([(tgt, ["gc-fr"])], options=CompareOptions(**opts)).table().iloc[0]
    assert np.isnan(own["err_mean_cv"])  # in sample: the replay would track the run by construction
    assert own["cv_note"] == "in sample"


def test_a_run_not_driven_by_the_keyed_draws_gets_no_control(tmp_path):
    src = _sim_run(tmp_path, "src", [{"name": "uncoded"}], seed=5)
    tgt = _sim_run(tmp_path, "tgt", [{"name": "gc-fr", "s": 1}], seed=3)
    wk = pd.read_csv(tgt.path / "workers.csv")
    wk["delay_s"] = np.roll(wk["delay_s"].to_numpy(), 7)  # delays no longer those of seed 3
    wk.to_csv(tgt.path / "workers.csv", index=False)
    result = compare_runs([(read_run_dir(tgt.path), ["gc-fr"])], calibrate_from=src,
                          options=CompareOptions(replications=2, warmup=5, cpu_source="measured", n_resamples=200,
                                                 speed_drift="none"))
    row = result.table().iloc[0]
    assert np.isnan(row["err_mean_cv"]) and np.isfinite(row["err_mean"])
    # it says why, with the share of worker-iterations whose recorded delay is not the replayed draw
    assert result.items[0].expectation.failed and "recorded delay_s differ" in row["cv_note"]
    assert float(row["cv_note"].split(" in ")[1].split("%")[0]) > 5
    from gcsim.compare.output import write_compare_outputs
    from gcsim.rundir import new_run_dir
    files = write_compare_outputs(result, new_run_dir(tmp_path / "cmp", root=tmp_path, prefix=""), command="test")
    report = Path(files["report.md"]).read_text()
    assert f"- gc-fr (mean): {row['cv_note']}" in report and f"- gc-fr (p95): {row['cv_p95_note']}" in report


# ---- the p95 in expectation (control_variate_quantile_error) ----

def _bimodal_model(rng, n, p_slow=0.1):
    """Iteration times, seconds: ~0.3 s, or 1.3-1.9 s when an uncovered 1 s straggler is drawn (p_slow):
    the p95 lies inside the slow cluster, where it moves with how many slow iterations a run drew."""
    slow = rng.random(n) < p_slow
    return 0.3 + 0.02 * rng.standard_normal(n) + slow * (1.0 + 0.6 * rng.random(n))


def test_a_run_of_the_model_itself_has_no_quantile_error():
    # the observation is its control and the prediction the control's own sample: exactly 0
    from gcsim.compare.control_variate import control_variate_quantile_error
    c = _bimodal_model(np.random.default_rng(1), 200)
    res = control_variate_quantile_error(c, c, c, 0.95, n_resamples=200)
    assert res.value == 0.0 and res.observed_quantile_s == pytest.approx(np.quantile(c, 0.95))
    assert res.beta == pytest.approx(1.0)  # the paired slope of y on itself


def test_the_p95_in_expectation_removes_the_draws_luck():
    # a machine 10 % slower than the model: the true p95 error is 1/1.1 - 1 = -9.1 % whatever the run drew;
    # the raw p95 of 190 iterations moves with how many slow iterations the run drew, the controlled one
    # hardly does, and its interval holds the truth
    from gcsim.compare.control_variate import control_variate_quantile_error
    truth = 1 / 1.1 - 1
    fresh = _bimodal_model(np.random.default_rng(99), 20_000)
    raw, cv = [], []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        control = _bimodal_model(rng, 190)                      # the run's draws replayed through the model
        observed = 1.1 * control * (1 + 0.01 * rng.standard_normal(190))
        raw.append(np.quantile(fresh, 0.95) / np.quantile(observed, 0.95) - 1)
        res = control_variate_quantile_error(observed, control, fresh, 0.95, n_resamples=300, seed=seed)
        cv.append(res.value)
        assert res.lo <= truth <= res.hi
    assert max(abs(v - truth) for v in cv) < 0.015
    assert np.std(cv) < np.std(raw) / 5


@pytest.mark.parametrize("p_slow", [0.04, 0.06])
def test_the_p95_in_expectation_holds_beside_the_cliff(p_slow):
    # 190 iterations and a slow share of 4 or 6 %: a run's raw p95 falls on either side of the cliff between
    # ~0.3 s and ~1.3 s by luck (errors of -70 % or +250 %); the controlled one stays on the model's side even
    # when no bootstrap resample of the run crosses the cliff (the slope comes from the paired iterations).
    # Like the mean's, it scores the model (the truth: 1/1.1 - 1), not on which side of the cliff the
    # prediction's own 950 fresh draws happened to put its p95.
    from gcsim.compare.control_variate import control_variate_quantile_error
    n, truth = 190, 1 / 1.1 - 1
    raw, errs, covered = [], [], 0
    for seed in range(30):
        rng = np.random.default_rng(seed + 100)
        slow = rng.random(n) < p_slow
        control = 0.3 + slow + 0.02 * rng.standard_normal(n)                 # the replay carries its own noise
        observed = 1.1 * (0.3 + slow + 0.02 * rng.standard_normal(n))    # a machine 10 % slower than the model
        fresh = 0.3 + (rng.random(5 * n) < p_slow) + 0.02 * rng.standard_normal(5 * n)
        res = control_variate_quantile_error(observed, control, fresh, 0.95, n_resamples=300, seed=seed)
        errs.append(res.value - truth)
        covered += res.lo <= truth <= res.hi
        raw.append(np.quantile(fresh, 0.95) / np.quantile(observed, 0.95) - 1 - truth)
    assert max(abs(v) for v in errs) < 0.08 and abs(np.mean(errs)) < 0.01 and covered >= 27
    assert max(abs(v) for v in raw) > 0.5  # the raw one jumps across the cliff


def test_the_p95_in_expectation_refuses_too_few_pairs_a_flat_control_and_bad_arguments():
    from gcsim.compare.control_variate import MIN_PAIRS, control_variate_quantile_error
    c = np.linspace(0.1, 0.2, MIN_PAIRS - 1)
    res = control_variate_quantile_error(c, c, c, 0.95, n_resamples=50)
    assert np.isnan(res.value) and f"{MIN_PAIRS - 1} paired iterations" in res.reason
    flat = control_variate_quantile_error(np.linspace(1, 2, 50), np.ones(50), np.linspace(1, 2, 50), 0.95,
                                          n_resamples=50)
    assert np.isnan(flat.value) and flat.reason == "the replayed iteration times do not vary"
    with pytest.raises(ValueError, match="q must be in"):
        control_variate_quantile_error(np.ones(20), np.ones(20), np.ones(20), 1.5)
    with pytest.raises(ValueError, match="n_resamples must be >= 2"):
        control_variate_quantile_error(c, c, c, 0.95, n_resamples=1)


def test_a_given_simulated_standard_error_sets_the_simulation_part_of_the_interval():
    # y = a + b C exactly: the pairs leave no uncertainty (beta = b in every resample), so the interval
    # is the simulated mean's alone, err(E) = E / (a + b E) - 1 at E ± z se: the default se is
    # sd / sqrt(M), a given one (e.g. from replication means) replaces it
    rng = np.random.default_rng(5)
    c = 0.3 + (rng.random(150) < 0.47)
    e = 0.3 + (rng.random(750) < 0.47)
    y = 0.1 + 0.5 * c
    err = lambda m: m / (0.1 + 0.5 * m) - 1  # noqa: E731
    for se in (None, 0.02):
        out = control_variate_error(y, c, e, n_resamples=4000, seed=1, simulated_mean_se_s=se)
        s_e = se if se is not None else e.std(ddof=1) / np.sqrt(e.size)
        assert out.value == pytest.approx(err(e.mean()), rel=1e-12)
        assert out.hi - out.lo == pytest.approx(err(e.mean() + 1.96 * s_e) - err(e.mean() - 1.96 * s_e), rel=0.08)


def test_the_p95_interval_resamples_an_autocorrelated_simulation_in_blocks():
    # the prediction's iterations carry a slowly wandering speed factor (AR(1), lag-1 0.95): its p95
    # is less certain than that of as many independent values, and the interval says so (the same
    # values shuffled give a narrower one). y = a + b C exactly, so only the simulation's part is left.
    from gcsim.compare.control_variate import control_variate_quantile_error

    rng = np.random.default_rng(8)
    c = 0.25 + 0.05 * rng.random(190)
    a = np.zeros(950)
    for t in range(1, a.size):
        a[t] = 0.95 * a[t - 1] + np.sqrt(1 - 0.95 ** 2) * 0.1 * rng.standard_normal()
    e = (0.25 + 0.05 * rng.random(950)) * np.exp(a)
    y = 0.1 + 0.5 * c
    wandering = control_variate_quantile_error(y, c, e, n_resamples=1000, seed=2)
    shuffled = control_variate_quantile_error(y, c, rng.permutation(e), n_resamples=1000, seed=2)
    assert wandering.value == pytest.approx(shuffled.value, abs=1e-12)  # the same values, the same p95
    assert (wandering.hi - wandering.lo) > 1.5 * (shuffled.hi - shuffled.lo)


def test_monte_carlo_standard_errors_from_replications_and_batches():
    from gcsim.compare.pipeline import simulated_mean_se
    from gcsim.study.protocol import batch_mean_se

    sim = pd.DataFrame({"replication": [0, 0, 1, 1, 2, 2], "duration_s": [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]})
    assert simulated_mean_se(sim) == pytest.approx(1.0 / np.sqrt(3))  # means 1, 2, 3: sd 1
    assert np.isnan(simulated_mean_se(sim[sim.replication == 0]))
    assert batch_mean_se([1.0, 1.0, 3.0, 3.0], 2) == pytest.approx(1.0)  # means 1, 3: sd sqrt(2)
    assert np.isnan(batch_mean_se([1.0, 2.0], 1)) and np.isnan(batch_mean_se([1.0], 2))
