"""Prediction intervals that carry the machine's CPU-speed drift (issue 9, docs/validation/README.md
findings 13-16): the drift a run measures on itself (:func:`speed_drift_cv`), its propagation through
the simulator (:func:`drift_half_width`) and the interval it widens (:func:`prediction_interval`)."""


import json

import numpy as np
import pandas as pd
import pytest

from gcsim.cli import main
from gcsim.compare.estimators import speed_drift_cv
from gcsim.compare.pipeline import CompareOptions, calibration_speed_cv, compare_runs, prediction_interval
from gcsim.compare.rundir import read_run_dir
from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate

C = 0.03  # CPU-seconds per partition


def _workers(block_cpu_s, block=20, warmup_rows=True):
    """workers.csv rows: 3 workers x 20 iterations per block, each row 2 partitions at the block's CPU
    per partition; a cancelled row and a warm-up iteration with absurd CPU that must not count."""
    rows = []
    for b, c in enumerate(block_cpu_s):
        for it in range(b * block, (b + 1) * block):
            for w in range(3):
                rows.append({"iteration": it + 2, "worker": w, "status": "arrived", "n_partitions": 2,
                             "compute_cpu_s": 2 * c * (1 + 0.01 * (w - 1))})
    rows.append({"iteration": 5, "worker": 3, "status": "cancelled", "n_partitions": 2, "compute_cpu_s": 9.0})
    if warmup_rows:
        rows += [{"iteration": i, "worker": 0, "status": "arrived", "n_partitions": 2, "compute_cpu_s": 5.0}
                 for i in range(2)]
    return pd.DataFrame(rows)


def test_speed_drift_cv_is_the_spread_of_block_medians():
    w = _workers([0.030, 0.033, 0.036])
    expected = np.std([0.030, 0.033, 0.036], ddof=1) / 0.033
    assert speed_drift_cv(w, warmup=2) == pytest.approx(expected, rel=1e-12)
    assert speed_drift_cv(_workers([0.03, 0.03, 0.03]), warmup=2) == pytest.approx(0.0, abs=1e-15)
    assert np.isnan(speed_drift_cv(_workers([0.03, 0.033]), warmup=2))  # two blocks: too few
    assert np.isnan(speed_drift_cv(w.drop(columns="compute_cpu_s")))  # no CPU clocks


def test_a_partial_last_block_counts_only_from_half_a_block():
    from gcsim.compare.estimators import speed_block_medians

    two = _workers([0.030, 0.033])
    # one iteration more (a 51-iteration run, warm-up 10): it made a third "block" of one iteration, and a
    # drift twice too large on 2 degrees of freedom (review); ten more make half a block, which counts
    for extra, blocks in ((1, 2), (9, 2), (10, 3)):
        tail = pd.DataFrame([{"iteration": 42 + i, "worker": w, "status": "arrived", "n_partitions": 2,
                              "compute_cpu_s": 2 * 0.045} for i in range(extra) for w in range(3)])
        meds = speed_block_medians(pd.concat([two, tail]), warmup=2)
        assert len(meds) == blocks and (blocks == 2 or meds[-1] == pytest.approx(0.045))
    assert np.isnan(speed_drift_cv(pd.concat([two, tail.iloc[:3]]), warmup=2))  # 2 blocks and 1 iteration: none


def test_prediction_interval_widens_the_ci_in_quadrature():
    out = prediction_interval(0.10, 0.07, 0.12, 0.04)
    assert out["err_mean_pi_lo"] == pytest.approx(0.10 - 0.05) and out["err_mean_pi_hi"] == pytest.approx(0.10 + np.hypot(0.02, 0.04))
    assert out["pi_covers"] is False and out["err_mean_drift"] == 0.04
    assert prediction_interval(0.03, -0.01, 0.06, 0.0)["pi_covers"] is True
    none = prediction_interval(0.1, 0.0, 0.2, float("nan"))
    assert none["pi_covers"] is None and np.isnan(none["err_mean_pi_lo"])


def _run(tmp_path, name, compute_s, schemes, iterations=60, call_overhead_s=0.0):
    from gcsim.sim.output import write_sim_run

    overhead = {"call_overhead": {"dist": "constant", "value": call_overhead_s}} if call_overhead_s else {}
    sc = validate_scenario({
        "name": name, "n_workers": 6, "iterations": iterations, "seed": 3, "schemes": schemes,
        "workload": {"gradient_bytes": 0, "cores": 2.0, "compute": {"dist": "constant", "value": compute_s},
                     **overhead},
        "master": {"decode_s": {"dist": "constant", "value": 0.002}},
        "stragglers": {"delay": {"dist": "constant", "value": 0.0}}})
    out = write_sim_run(simulate(sc), sc, tmp_path / name)
    meta = json.loads((out / "meta.json").read_text())
    (out / "meta.json").write_text(json.dumps({**meta, "executor": "real"}))  # a stand-in for a measured run
    return read_run_dir(out)


def test_drift_propagates_linearly_through_a_deterministic_run(tmp_path):
    # constant compute, no stragglers: the iteration time is affine in the CPU work, so the drift's
    # half-width is proportional to sigma, and a target at the calibration's speed is predicted exactly
    src = _run(tmp_path, "src", C, [{"name": "uncoded"}])
    tgt = _run(tmp_path, "tgt", C, [{"name": "gc-fr", "s": 1}])
    opts = dict(replications=1, warmup=2, cpu_source="measured", n_resamples=200)
    half = {}
    for sigma in (0.05, 0.10):
        res = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src, options=CompareOptions(speed_drift=sigma, **opts))
        row = res.table().iloc[0]
        half[sigma] = row["err_mean_drift"]
        assert row["speed_cv"] == sigma and abs(row["err_mean"]) < 1e-9
        assert row["speed_dof"] == np.inf  # a drift given, not estimated: the normal quantile
        assert row["err_mean_pi_lo"] <= row["err_mean_lo"] and row["err_mean_pi_hi"] >= row["err_mean_hi"]
        assert row["pi_covers"]
    assert half[0.05] > 0.01  # a compute-bound run: a 5 % slower CPU is several % of the iteration
    assert half[0.10] == pytest.approx(2 * half[0.05], rel=1e-9)
    # the drift of this run, measured on itself, is 0 (constant compute): the interval is the CI
    auto = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src, options=CompareOptions(**opts)).table().iloc[0]
    assert auto["speed_cv"] == pytest.approx(0.0, abs=1e-12) and auto["err_mean_drift"] == 0.0
    assert auto["err_mean_pi_lo"] == pytest.approx(auto["err_mean_lo"])
    off = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src, options=CompareOptions(speed_drift="none", **opts))
    assert off.table().iloc[0]["pi_covers"] is None
    # in sample (no --calibrate-from) there is no prediction, hence no prediction interval
    own = compare_runs([(tgt, ["gc-fr"])], options=CompareOptions(**opts)).table().iloc[0]
    assert np.isnan(own["err_mean_drift"]) and np.isnan(own["speed_dof"])


def _with_block_speeds(run, factors, warmup=2, block=20):
    """Rewrite ``run``'s workers.csv so the CPU per partition of block ``b`` (``block`` iterations after
    ``warmup``) is scaled by ``factors[b]``; the run read again."""
    path = run.path / "workers.csv"
    w = pd.read_csv(path)
    b = ((w["iteration"] - warmup) // block).clip(lower=0).astype(int)
    w["compute_cpu_s"] = w["compute_cpu_s"] * np.asarray(factors)[b.to_numpy()]
    w.to_csv(path, index=False)
    return read_run_dir(run.path)


def test_one_run_predicts_the_difference_of_two_run_speeds(tmp_path):
    # one calibration run: the target's speed differs from it by the difference of two run means,
    # sqrt(2) x the drift the run measures on itself (finding 16)
    a = _with_block_speeds(_run(tmp_path, "a", C, [{"name": "uncoded"}]), [1.0, 1.1, 1.2])
    within = np.std([1.0, 1.1, 1.2], ddof=1) / 1.1
    assert speed_drift_cv(a.workers_of("uncoded"), 2) == pytest.approx(within, rel=1e-6)
    assert calibration_speed_cv([a], 2) == pytest.approx(within * np.sqrt(2.0), rel=1e-6)


def test_a_drift_measured_on_few_blocks_takes_students_t(tmp_path):
    # 60 iterations, warm-up 2: three 20-iteration blocks, two degrees of freedom; the measured drift's
    # interval is wider than a given drift's of the same size by t(0.975, 2) / z(0.975)
    from scipy import stats

    from gcsim.compare.pipeline import calibration_speed_dof, drift_half_width

    a = _with_block_speeds(_run(tmp_path, "a", C, [{"name": "uncoded"}]), [1.0, 1.1, 1.2])
    assert calibration_speed_dof([a], 2) == 2.0
    tgt = _run(tmp_path, "tgt", C, [{"name": "gc-fr", "s": 1}])
    opts = CompareOptions(replications=1, warmup=2, cpu_source="measured", n_resamples=200)
    cal = compare_runs([(tgt, ["gc-fr"])], calibrate_from=a, options=opts).items[0].calibration
    known = drift_half_width(tgt, "gc-fr", cal, opts, 0.05, 2)
    measured = drift_half_width(tgt, "gc-fr", cal, opts, 0.05, 2, dof=2.0)
    assert measured == pytest.approx(known * stats.t.ppf(0.975, 2) / stats.norm.ppf(0.975), rel=1e-9)
    auto = compare_runs([(tgt, ["gc-fr"])], calibrate_from=a, options=opts).table().iloc[0]
    sigma = auto["speed_cv"]
    assert auto["speed_dof"] == 2.0  # the t quantile's degrees of freedom, recorded beside sigma
    assert auto["err_mean_drift"] == pytest.approx(drift_half_width(tgt, "gc-fr", cal, opts, sigma, 2, dof=2.0), rel=1e-9)


def test_pooled_calibration_averages_the_spread_within_and_between_runs(tmp_path):
    a = _run(tmp_path, "a", C, [{"name": "uncoded"}])
    b = _run(tmp_path, "b", 1.1 * C, [{"name": "uncoded"}])
    between = np.std([C, 1.1 * C], ddof=1) / np.mean([C, 1.1 * C])
    # no drift within either run: sigma_run^2 = (0 + between^2) / 2, and R = 2 runs
    assert calibration_speed_cv([a, b], 2) == pytest.approx(between / np.sqrt(2.0) * np.sqrt(1.5), rel=1e-6)
    assert calibration_speed_cv([a], 2) == pytest.approx(0.0, abs=1e-12)
    c = _with_block_speeds(_run(tmp_path, "c", C, [{"name": "uncoded"}]), [1.0, 1.1, 1.2])
    within = np.std([1.0, 1.1, 1.2], ddof=1) / 1.1 / np.sqrt(2.0)  # rms over the two runs (b has none)
    med_c = np.median(pd.read_csv(c.path / "workers.csv").query("iteration >= 2 and status == 'arrived'")["compute_cpu_s"])
    between = np.std([med_c, 1.1 * C], ddof=1) / np.mean([med_c, 1.1 * C])
    # c's median lies near b's (1.1 C): the runs agree better than c's own blocks spread, so the pooled
    # drift is not made smaller than what the runs show within themselves (a floor, finding 27)
    assert between < within
    assert calibration_speed_cv([c, b], 2) == pytest.approx(within * np.sqrt(1.5), rel=1e-6)


def test_speed_drift_option_is_checked(tmp_path, capsys):
    with pytest.raises(ConfigError, match="--speed-drift"):
        CompareOptions(speed_drift=1.5)
    src = _run(tmp_path, "src", C, [{"name": "uncoded"}])
    assert main(["compare", str(src.path), "--speed-drift", "lots", "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "gcsim: error: --speed-drift: expected auto, none or a fraction in [0, 1), got 'lots'"
    assert not (tmp_path / "cmp").exists()


def _median_cpu_per_partition(run, warmup=2):
    w = pd.read_csv(run.path / "workers.csv").query(f"iteration >= {warmup} and status == 'arrived'")
    return float(np.median(w["compute_cpu_s"] / w["n_partitions"]))


def _satterthwaite(terms):
    return sum(c for c, _ in terms) ** 2 / sum(c ** 2 / nu for c, nu in terms)


def test_pooled_calibration_dof_is_satterthwaites(tmp_path):
    # sigma_run^2 = mean(cv_r^2) / 2 + between^2 / 2: each run's share on its B_r - 1 degrees of freedom,
    # between on R - 1 = 1, combined by Satterthwaite's formula, not summed
    from gcsim.compare.pipeline import calibration_speed_dof

    a = _with_block_speeds(_run(tmp_path, "a", C, [{"name": "uncoded"}]), [1.0, 1.1, 1.2])
    b = _run(tmp_path, "b", C, [{"name": "uncoded"}])
    cv_a = np.std([1.0, 1.1, 1.2], ddof=1) / 1.1
    meds = [_median_cpu_per_partition(a), _median_cpu_per_partition(b)]
    between = np.std(meds, ddof=1) / np.mean(meds)
    assert between ** 2 > cv_a ** 2 / 2  # further apart than their blocks spread: within and between pooled
    expected = _satterthwaite([(cv_a ** 2 / 4, 2), (between ** 2 / 2, 1)])  # b's own spread is 0
    assert calibration_speed_dof([a, b], 2) == pytest.approx(expected, rel=1e-9)
    assert 1.0 < expected < 4.0  # fewer than the blocks: two runs that disagree say little
    # two runs at one constant speed: nothing spreads; the within estimates alone (2 + 2)
    assert calibration_speed_dof([b, _run(tmp_path, "b2", C, [{"name": "uncoded"}])], 2) == 4.0
    # runs of one speed each but different: the within part is 0 and between's single degree is all
    c = _run(tmp_path, "c", 1.1 * C, [{"name": "uncoded"}])
    assert calibration_speed_dof([b, c], 2) == pytest.approx(1.0, rel=1e-9)


def test_pooled_runs_of_unequal_length_weigh_their_blocks(tmp_path):
    # 3 and 6 blocks (2 and 5 degrees of freedom): each run's within share on its own, not 7 in one
    from gcsim.compare.pipeline import calibration_speed_cv, calibration_speed_dof

    a = _with_block_speeds(_run(tmp_path, "a", C, [{"name": "uncoded"}]), [1.0, 1.1, 1.2])
    long_run = _run(tmp_path, "long", C, [{"name": "uncoded"}], iterations=122)
    d = _with_block_speeds(long_run, [1.0, 1.05, 1.0, 1.05, 1.0, 1.05])
    cv_a = np.std([1.0, 1.1, 1.2], ddof=1) / 1.1
    cv_d = np.std([1.0, 1.05] * 3, ddof=1) / 1.025
    meds = [_median_cpu_per_partition(a), _median_cpu_per_partition(d)]
    between = np.std(meds, ddof=1) / np.mean(meds)
    within2 = (cv_a ** 2 + cv_d ** 2) / 2
    assert between ** 2 < within2  # closer than their blocks spread: the within part alone (the floor)
    terms = [(cv_a ** 2 / 2, 2), (cv_d ** 2 / 2, 5)]
    assert calibration_speed_dof([a, d], 2) == pytest.approx(_satterthwaite(terms), rel=1e-6)
    assert calibration_speed_cv([a, d], 2) == pytest.approx(np.sqrt(sum(c for c, _ in terms) * 1.5), rel=1e-6)


def test_at_speed_scales_the_workers_cpu_and_nothing_else(tmp_path):
    src = _run(tmp_path, "src", C, [{"name": "uncoded"}], call_overhead_s=0.01)
    cal = compare_runs([(src, ["uncoded"])], options=CompareOptions(replications=1, warmup=2, cpu_source="measured",
                                                                   n_resamples=200)).items[0].calibration
    assert cal.overhead_values_s.size and cal.overhead_values_s.mean() > 0.005  # the calls' CPU was calibrated
    slow = cal.at_speed(1.25)
    np.testing.assert_allclose(slow.compute_values_s, 1.25 * cal.compute_values_s, rtol=1e-12)
    np.testing.assert_allclose(slow.overhead_values_s, 1.25 * cal.overhead_values_s, rtol=1e-12)
    np.testing.assert_array_equal(slow.master_values_s, cal.master_values_s)
    assert (slow.background_wait_cores, slow.idle_cores_per_worker, slow.transfer) == (
        cal.background_wait_cores, cal.idle_cores_per_worker, cal.transfer)
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="speed factor"):
            cal.at_speed(bad)


def test_the_drift_moves_the_per_call_cpu_too(tmp_path):
    # a CPU drift slows every CPU-second of the workers: with 10 ms per call beside 2 x 30 ms of
    # partitions, the half-width grows with the calls' share of the work
    import dataclasses

    from gcsim.compare.pipeline import drift_half_width

    src = _run(tmp_path, "src", C, [{"name": "uncoded"}], call_overhead_s=0.01)
    tgt = _run(tmp_path, "tgt", C, [{"name": "gc-fr", "s": 1}], call_overhead_s=0.01)
    opts = CompareOptions(replications=1, warmup=2, cpu_source="measured", n_resamples=200)
    cal = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src, options=opts).items[0].calibration
    with_calls = drift_half_width(tgt, "gc-fr", cal, opts, 0.05, 2)
    partitions_only = drift_half_width(tgt, "gc-fr", dataclasses.replace(cal, overhead_values_s=np.zeros(0)), opts,
                                       0.05, 2)
    assert with_calls > 1.1 * partitions_only > 0


def test_a_simulated_calibration_run_gives_no_drift_and_says_why(tmp_path):
    # a simulated run's block spread is the model's noise: it gave an interval "(sigma 1.1 %, 207 dof)"
    # as if it were a machine's drift (review); a drift given by hand still applies
    src = _run(tmp_path, "src", C, [{"name": "uncoded"}])
    meta = json.loads((src.path / "meta.json").read_text())
    (src.path / "meta.json").write_text(json.dumps({**meta, "executor": "sim"}))
    src = read_run_dir(src.path)
    tgt = _run(tmp_path, "tgt", C, [{"name": "gc-fr", "s": 1}])
    opts = dict(replications=1, warmup=2, cpu_source="measured", n_resamples=200)
    res = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src, options=CompareOptions(**opts))
    row = res.table().iloc[0]
    assert np.isnan(row["speed_cv"]) and np.isnan(row["speed_dof"]) and row["pi_covers"] is None
    assert res.missing_notes() == ["no prediction interval: the calibration run(s) src are simulated: their spread "
                                   "is the model's own, not a machine's drift (--speed-drift F gives one by hand)"]
    given = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src, options=CompareOptions(speed_drift=0.05, **opts))
    assert given.table().iloc[0]["speed_cv"] == 0.05 and given.missing_notes() == []
