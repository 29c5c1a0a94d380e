"""End to end: a simulated run (same trace format as a real one) stands in for a measurement with a
known model; the comparator must recover that model and pass it, and must fail a wrong one."""

import numpy as np
import pytest
import yaml
from factories import simulated_run

from gcsim.compare.pipeline import CompareOptions, compare_runs
from gcsim.compare.rundir import read_run_dir
from gcsim.compare.verdict import Bands
from gcsim.errors import ConfigError

FR = {"name": "gc-fr", "s": 1}
CCE = {"name": "cce-fr", "s": 1, "m": 2}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e")
    return {
        "both": read_run_dir(simulated_run(d / "both", [{"name": "uncoded"}, FR], iterations=200)),
        "uncoded": read_run_dir(simulated_run(d / "uncoded", [{"name": "uncoded"}], iterations=200)),
        "cce": read_run_dir(simulated_run(d / "cce", [CCE], iterations=200)),
        "slow": read_run_dir(simulated_run(d / "slow", [{"name": "uncoded"}], iterations=200, compute_scale_s=0.013)),
        "long": read_run_dir(simulated_run(d / "long", [FR], iterations=800, seed=21)),
    }


def _opts(**kw):
    return CompareOptions(**{"replications": 2, "n_resamples": 400, "mode": "paired", **kw})


def test_a_run_compared_with_itself_passes_and_the_model_is_recovered(runs):
    run = runs["both"]
    res = compare_runs([(run, run.schemes)], options=_opts())
    assert [it.verdict.verdict for it in res.items] == ["pass", "pass"]
    assert res.ranking.same_order and res.ranking.observed_order == ["gc-fr", "uncoded"]
    cal = res.calibrations["both:uncoded"].describe()
    # the hidden model: lognormal(s=0.3, scale=10 ms) per partition, 0.5 ms + 4 MB / 2 GB/s per message,
    # 2 ms master decode
    assert cal["compute_per_partition_mean_s"] == pytest.approx(0.01 * np.exp(0.3 ** 2 / 2), rel=0.03)
    assert cal["transfer_mean_s"] == pytest.approx(0.0025, rel=1e-6)
    assert cal["master_overhead_mean_s"] == pytest.approx(0.002, rel=1e-6)
    assert cal["compute_censored_rows"] == 0
    assert res.calibrations["both:gc-fr"].describe()["compute_censored_rows"] > 0  # cancelled stragglers


def test_scenario_mode_predicts_within_the_bands(runs):
    run = runs["long"]
    res = compare_runs([(run, run.schemes)], options=_opts(mode="scenario", replications=3))
    (it,) = res.items
    assert abs(it.comparison.rel_error["mean"].value) < 0.05
    assert abs(it.comparison.rel_error["p95"].value) < 0.10
    assert it.verdict.verdict in ("pass", "warn")
    assert it.simulated_iterations["replication"].nunique() == 3


def test_measure_once_predict_other_schemes(runs):
    targets = [(runs["both"], ["gc-fr"]), (runs["cce"], ["cce-fr"])]
    res = compare_runs(targets, calibrate_from=runs["uncoded"], options=_opts())
    assert list(res.calibrations) == ["uncoded"]
    assert [it.label for it in res.items] == ["gc-fr", "cce-fr"]
    for it in res.items:  # 190 iterations: the mean is pinned down, the p95 CI (bimodal delays) is wide
        assert it.comparison.rel_error["mean"].inside(0.05)
        assert abs(it.comparison.rel_error["p95"].value) < 0.10
        assert it.verdict.verdict in ("pass", "warn")


def test_a_wrong_calibration_fails(runs):
    res = compare_runs([(runs["uncoded"], ["uncoded"])], calibrate_from=runs["slow"], options=_opts())
    (it,) = res.items
    assert it.verdict.verdict == "fail" and it.comparison.rel_error["mean"].low > 0.05


def test_paired_mode_refuses_a_run_whose_delays_it_cannot_replay(runs, tmp_path):
    import shutil

    d = tmp_path / "reseeded"
    shutil.copytree(runs["uncoded"].path, d)
    cfg = yaml.safe_load((d / "config.yaml").read_text())
    cfg["seed"] = 12345
    (d / "config.yaml").write_text(yaml.safe_dump(cfg))
    run = read_run_dir(d)
    with pytest.raises(ConfigError, match=r"^--mode: expected scenario for run reseeded .*delay_s differ"):
        compare_runs([(run, run.schemes)], options=_opts())
    res = compare_runs([(run, run.schemes)], options=_opts(mode="scenario", bands=Bands(mean=0.5, p95=0.5)))
    assert res.items[0].verdict.verdict in ("pass", "warn")
