"""Comparator statistics and verdicts on synthetic samples with known answers."""

import numpy as np
import pandas as pd
import pytest

from gcsim.compare.stats import (compare_samples, drop_warmup, ecdf_band, ecdf_band_coverage, ks_statistic,
                                 quantile_pairs, rank_agreement, relative_error, wasserstein_relative)
from gcsim.compare.verdict import Bands, judge, worst
from gcsim.errors import ConfigError


@pytest.fixture(scope="module")
def sample():
    return np.random.default_rng(42).lognormal(np.log(0.05), 0.2, size=1000)


def test_identical_samples_pass_with_zero_error(sample):
    c = compare_samples(sample, sample, n_resamples=500, seed=1)
    for e in c.rel_error.values():
        assert e.value == 0.0 and e.low < 0 < e.high
    assert c.wasserstein_rel == 0.0 and c.ks_statistic == 0.0 and c.ecdf_coverage == 1.0
    v = judge(c)
    assert v.verdict == "pass" and v.reasons == ()


def test_twenty_percent_shift_fails_the_mean_band(sample):
    c = compare_samples(sample, 1.2 * sample, n_resamples=500, seed=1)
    e = c.rel_error["mean"]
    assert e.value == pytest.approx(0.2, abs=1e-12)
    assert 0.05 < e.low < 0.2 < e.high
    v = judge(c, Bands(mean=0.05, p95=None))
    assert v.verdict == "fail" and v.reasons[0].startswith("mean +20.0%") and "outside ±5%" in v.reasons[0]
    # a 30 % band accepts it: the shift's CI lies inside
    assert judge(c, Bands(mean=0.30, p95=0.30)).verdict == "pass"


def test_point_inside_but_ci_outside_is_a_warning():
    obs = np.random.default_rng(0).exponential(1.0, size=40)  # few, noisy iterations
    c = compare_samples(obs, 1.01 * obs, n_resamples=500, seed=0)
    assert abs(c.rel_error["mean"].value - 0.01) < 1e-12
    v = judge(c)
    assert v.verdict == "warn" and "CI not inside" in v.reason
    assert worst(["pass", "warn", "pass"]) == "warn" and worst(["warn", "fail"]) == "fail" and worst([]) == "pass"


def test_a_prediction_is_judged_on_its_errors_in_expectation(sample):
    # raw: the mean 20 % off -> fail; in expectation (the run's straggler luck taken out) 1 % off with a CI
    # of +-2 % -> pass; a non-finite expectation falls back to the raw error
    c = compare_samples(sample, 1.2 * sample, n_resamples=500, seed=1)
    assert judge(c, Bands(mean=0.05, p95=None)).verdict == "fail"
    v = judge(c, Bands(mean=0.05, p95=None), expectation={"mean": (0.01, -0.01, 0.03)})
    assert v.verdict == "pass" and v.reasons == ()
    v = judge(c, Bands(mean=0.05, p95=None), expectation={"mean": (0.04, 0.02, 0.06)})
    assert v.verdict == "warn" and v.reason == "mean in expectation +4.0% (CI +2.0%..+6.0%): CI not inside ±5%"
    v = judge(c, Bands(mean=0.05, p95=None), expectation={"mean": (0.052, 0.029, 0.079)})
    assert v.verdict == "fail" and v.reason.startswith("mean in expectation +5.2% (CI +2.9%..+7.9%) outside")
    nan = float("nan")
    v = judge(c, Bands(mean=0.05, p95=None), expectation={"mean": (nan, nan, nan)})
    assert v.verdict == "fail" and v.reason.startswith("mean +20.0%")


def test_quantile_error_matches_closed_form():
    obs = np.arange(1.0, 101.0)  # np.quantile (linear): p95 = 95.05, p50 = 50.5, p99 = 99.01
    sim = obs + 10.0
    for name, q in (("p50", 50.5), ("p95", 95.05), ("p99", 99.01)):
        assert relative_error(obs, sim, name, n_resamples=200).value == pytest.approx(10.0 / q, rel=1e-12)
    assert wasserstein_relative(obs, sim) == pytest.approx(10.0 / 50.5, rel=1e-12)
    assert ks_statistic(obs, obs + 1000)[0] == 1.0
    qo, qs = quantile_pairs(obs, sim, 9)
    np.testing.assert_allclose(qs - qo, 10.0)


def test_paired_bootstrap_of_a_constant_ratio_is_exact(sample):
    sim = np.stack([1.1 * sample, 1.1 * sample])  # (R=2, N): every resample has the same ratio
    e = relative_error(sample, sim, "mean", paired=True, n_resamples=300, seed=3)
    assert e.value == pytest.approx(0.1, abs=1e-12)
    assert e.low == pytest.approx(0.1, abs=1e-12) and e.high == pytest.approx(0.1, abs=1e-12)
    with pytest.raises(ConfigError, match=r"simulated: expected shape \(R, 1000\)"):
        relative_error(sample, sim[:, :10], "mean", paired=True)


def test_bootstrap_is_seeded(sample):
    a = relative_error(sample, sample * 1.03, "p95", n_resamples=300, seed=7)
    b = relative_error(sample, sample * 1.03, "p95", n_resamples=300, seed=7)
    c = relative_error(sample, sample * 1.03, "p95", n_resamples=300, seed=8)
    assert a == b and (a.low, a.high) != (c.low, c.high)


def test_ranking_catches_a_swapped_order():
    obs = {"uncoded": 1.0, "gc-fr": 0.6, "cce-fr": 0.5}
    same = rank_agreement(obs, {"uncoded": 1.1, "gc-fr": 0.7, "cce-fr": 0.4})
    assert same.tau == pytest.approx(1.0) and same.same_order and same.discordant == []
    swapped = rank_agreement(obs, {"uncoded": 1.1, "gc-fr": 0.4, "cce-fr": 0.7})
    assert swapped.tau == pytest.approx(1 / 3) and not swapped.same_order
    assert swapped.observed_order == ["cce-fr", "gc-fr", "uncoded"]
    assert swapped.predicted_order == ["gc-fr", "cce-fr", "uncoded"]
    assert swapped.discordant == [("cce-fr", "gc-fr")]
    two = rank_agreement({"a": 1.0, "b": 2.0}, {"a": 2.0, "b": 1.0})
    assert two.tau == pytest.approx(-1.0) and not two.same_order
    with pytest.raises(ConfigError, match="schemes: expected the observed schemes"):
        rank_agreement({"a": 1.0}, {"b": 1.0})
    assert same.verdict() == "same order" and swapped.verdict() == "ORDER DIFFERS"


def test_a_predicted_tie_is_not_a_wrong_order():
    # the same scheme run twice, predicted from one calibration: exactly equal predictions
    tie = rank_agreement({"uncoded-b": 0.52, "uncoded-a": 0.50, "gc-fr": 0.30},
                         {"uncoded-b": 0.41, "uncoded-a": 0.41, "gc-fr": 0.33})
    assert tie.same_order and tie.discordant == []
    assert tie.predicted_ties == [("uncoded-a", "uncoded-b")]
    assert tie.verdict() == "same order but for predicted ties: uncoded-a = uncoded-b"
    assert tie.predicted_text() == "gc-fr < uncoded-a = uncoded-b"
    # a wrong order elsewhere still names the ties
    both = rank_agreement({"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}, {"a": 0.2, "b": 0.1, "c": 0.5, "d": 0.5})
    assert both.verdict() == "ORDER DIFFERS (predicted ties: c = d)"
    assert both.predicted_text() == "b < a < c = d"
    assert both.observed_text() == "a < b < c < d" and tie.observed_text() == "gc-fr < uncoded-a < uncoded-b"


def test_equal_observed_means_are_shown_as_ties():
    # a simulated run computes schemes of one timing model identically: "<" between them read as an order
    rk = rank_agreement({"ignore-stragglers": 0.2666, "pgc-fr": 0.2666, "gc-fr": 0.24}, {"ignore-stragglers": 0.27,
                                                                                        "pgc-fr": 0.27, "gc-fr": 0.25})
    assert rk.observed_text() == "gc-fr < ignore-stragglers = pgc-fr"


def test_ecdf_band_brackets_the_ecdf_and_coverage_detects_a_shift(sample):
    band = ecdf_band(sample)
    assert np.all(band.low <= band.cdf) and np.all(band.cdf <= band.high)
    assert band.cdf[-1] == 1.0 and band.x.size == np.unique(sample).size
    assert ecdf_band_coverage(sample, sample * 1.3) < 0.2


def test_drop_warmup_per_scheme_and_replication():
    df = pd.DataFrame({"scheme": ["a"] * 5 + ["b"] * 4, "iteration": [4, 0, 1, 2, 3, 0, 1, 2, 3],
                       "duration_s": np.arange(9.0)})
    kept = drop_warmup(df, 2)
    assert sorted(kept[kept.scheme == "a"].iteration) == [2, 3, 4]
    assert sorted(kept[kept.scheme == "b"].iteration) == [2, 3]
    rep = pd.concat([df.assign(replication=0), df.assign(replication=1)])
    assert len(drop_warmup(rep, 1)) == 2 * (4 + 3)
    with pytest.raises(ConfigError, match=r"--warmup: expected at most 2 .*got 3"):
        drop_warmup(df, 3)
    with pytest.raises(ConfigError, match="--warmup: expected an integer >= 0, got -1"):
        drop_warmup(df, -1)


def test_bands_are_validated():
    with pytest.raises(ConfigError, match=r"--mean-band: expected a fraction in \(0, 10\].*got -0.1"):
        Bands(mean=-0.1)
    with pytest.raises(ConfigError, match="bands: expected at least one"):
        Bands(mean=None, p95=None)
    assert Bands(p99=0.2).judged() == {"mean": 0.05, "p95": 0.10, "p99": 0.2}
