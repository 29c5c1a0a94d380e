"""Rank agreement over the pairs the measurement resolves (gcsim.study.protocol.resolved_rank_agreement)."""

import math

import numpy as np
import pandas as pd
import pytest

from gcsim.study.protocol import (mean_se, observed_mean_se, resolved_rank_agreement, summarize_protocol,
                                  _resolved_text)


def _rows(obs, sim, se, sim_se=None, targets=None, comparison="from-uncoded"):
    targets = targets or [f"t{k}" for k in range(len(obs))]
    d = {"model": "m", "comparison": comparison, "target": targets, "exact": True,
         "obs_mean_s": obs, "sim_mean_s": sim, "obs_mean_se_s": se,
         "err_mean": [s / o - 1 for o, s in zip(obs, sim)], "err_p95": 0.0}
    if sim_se is not None:
        d["sim_mean_se_s"] = sim_se
    return pd.DataFrame(d)


def test_separated_means_in_the_predicted_order_agree_fully():
    r = resolved_rank_agreement(_rows([1.0, 2.0, 3.0], [1.1, 2.2, 3.3], [0.01] * 3))
    assert r == {"resolved_pairs": 3, "concordant_resolved": 3, "discordant_resolved": 0, "tied_resolved": 0,
                 "rank_gamma_resolved": 1.0}


def test_one_resolved_pair_swapped_is_one_discordant_pair():
    r = resolved_rank_agreement(_rows([1.0, 2.0, 3.0], [1.1, 3.3, 2.2], [0.01] * 3))
    assert (r["resolved_pairs"], r["concordant_resolved"], r["discordant_resolved"], r["tied_resolved"]) == (3, 2, 1, 0)
    assert r["rank_gamma_resolved"] == pytest.approx(1 / 3)


def test_overlapping_observed_means_are_not_resolved_whatever_the_prediction():
    # 1.00 vs 1.02 with se 0.01 each: |diff| 0.02 < 1.96 * sqrt(2) * 0.01 = 0.0277 -> a coin flip, not scored
    r = resolved_rank_agreement(_rows([1.00, 1.02, 2.0], [1.05, 1.00, 2.1], [0.01] * 3))
    assert (r["resolved_pairs"], r["concordant_resolved"], r["discordant_resolved"]) == (2, 2, 0)
    # just beyond the threshold: resolved, and then the swap counts
    r = resolved_rank_agreement(_rows([1.00, 1.03], [1.05, 1.00], [0.01] * 2))
    assert (r["resolved_pairs"], r["discordant_resolved"], r["rank_gamma_resolved"]) == (1, 1, -1.0)
    # NaN standard error: the pair cannot be called resolved
    r = resolved_rank_agreement(_rows([1.0, 3.0], [1.0, 3.0], [float("nan"), 0.01]))
    assert r["resolved_pairs"] == 0 and math.isnan(r["rank_gamma_resolved"])


def test_a_predicted_tie_is_neither_concordant_nor_discordant():
    # t1 and t2 share a timing model: predicted exactly equal, measured clearly apart
    r = resolved_rank_agreement(_rows([1.0, 2.0, 2.5], [1.0, 2.2, 2.2], [0.01] * 3))
    assert (r["resolved_pairs"], r["concordant_resolved"], r["discordant_resolved"], r["tied_resolved"]) == (3, 2, 0, 1)
    assert r["rank_gamma_resolved"] == 1.0
    # within the simulation's Monte-Carlo noise (1.96 * sqrt(2) * 0.02 = 0.055 > 0.05): a tie too
    r = resolved_rank_agreement(_rows([1.0, 2.0, 2.5], [1.0, 2.25, 2.2], [0.01] * 3, sim_se=[0.02] * 3))
    assert (r["concordant_resolved"], r["discordant_resolved"], r["tied_resolved"]) == (2, 0, 1)
    # without the MC noise the same 0.05 gap in the wrong order is discordant
    r = resolved_rank_agreement(_rows([1.0, 2.0, 2.5], [1.0, 2.25, 2.2], [0.01] * 3))
    assert (r["concordant_resolved"], r["discordant_resolved"], r["tied_resolved"]) == (2, 1, 0)
    # only ties among the resolved pairs: gamma undefined
    r = resolved_rank_agreement(_rows([1.0, 2.0], [1.5, 1.5], [0.01] * 2))
    assert (r["resolved_pairs"], r["tied_resolved"]) == (1, 1) and math.isnan(r["rank_gamma_resolved"])


def test_the_calibration_repeat_is_left_out():
    rows = _rows([1.0, 2.0, 3.0], [1.1, 2.2, 0.5], [0.01] * 3, targets=["uncoded-a", "gc-fr", "uncoded-b"])
    assert resolved_rank_agreement(rows, "uncoded")["resolved_pairs"] == 1
    assert resolved_rank_agreement(rows)["discordant_resolved"] == 2  # without calib every row counts


def test_summary_columns_and_the_rank_target():
    table = pd.concat([
        _rows([1.0, 2.0, 3.0], [1.1, 2.2, 3.3], [0.01] * 3, comparison="good"),
        _rows([1.0, 2.0, 3.0], [1.1, 3.3, 2.2], [0.01] * 3, comparison="swapped"),
        _rows([1.0, 1.01, 1.02], [1.0, 1.1, 1.2], [0.01] * 3, comparison="unresolved"),
    ], ignore_index=True)
    s = summarize_protocol(table, "uncoded", noisy=False).set_index("comparison")
    assert s.loc["good", ["resolved_pairs", "concordant_resolved", "discordant_resolved"]].tolist() == [3, 3, 0]
    assert s.loc["good", "meets_rank_target"] and s.loc["good", "meets_tau_target"]
    assert s.loc["swapped", "discordant_resolved"] == 1 and not s.loc["swapped", "meets_rank_target"]
    assert s.loc["unresolved", "resolved_pairs"] == 0 and np.isnan(s.loc["unresolved", "rank_gamma_resolved"])
    assert not s.loc["unresolved", "meets_rank_target"]  # nothing resolved: nothing shown
    assert s.loc["unresolved", "kendall_tau"] == 1.0  # tau is kept as it was
    assert _resolved_text(s.loc["swapped"]) == "2 of 3 as measured, 1 wrong, 0 tied (gamma +0.33)"
    assert _resolved_text(s.loc["unresolved"]) == "none resolved"
    assert s.loc["good", "meets_p95_target"] in (True, False)
    # with a neighbour the p95 is not a target: neither met nor missed
    noisy = summarize_protocol(table, "uncoded", noisy=True).set_index("comparison")
    assert noisy["meets_p95_target"].isna().all()


def test_observed_se_derived_from_the_mean_error_ci_of_older_tables():
    # O = 1, S = 1, 95 % CI of err = +-0.0196 -> se_O <= 1 * 1 * 0.0392 / 3.92 = 0.01; O = 2, S = 1: x 4
    t = pd.DataFrame({"model": "m", "target": ["a", "a", "a", "b"], "paired": [False, False, True, False],
                      "obs_mean_s": [1.0, 1.0, 1.0, 2.0], "sim_mean_s": [1.0, 1.0, 1.0, 1.0],
                      "err_mean_lo": [-0.0196, -0.0392, -0.001, -0.0196],
                      "err_mean_hi": [0.0196, 0.0392, 0.001, 0.0196]})
    se = observed_mean_se(t)
    # target a: the median of its unpaired rows' bounds (0.01, 0.02), the paired row gets it too
    assert se.tolist() == pytest.approx([0.015, 0.015, 0.015, 0.04])
    # a column where present wins; its gaps are filled from the CI
    t["obs_mean_se_s"] = [0.001, 0.001, 0.001, float("nan")]
    assert observed_mean_se(t).tolist() == pytest.approx([0.001, 0.001, 0.001, 0.04])


def test_mean_se():
    assert mean_se([1.0, 2.0, 3.0, 4.0]) == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    assert math.isnan(mean_se([1.0]))


def test_the_study_console_line_counts_the_resolved_pairs():
    from gcsim.cli.study_cmd import _resolved_short

    row = pd.Series({"resolved_pairs": 14, "concordant_resolved": 12, "discordant_resolved": 1, "tied_resolved": 1})
    assert _resolved_short(row) == "12/14 in order, 1 wrong"
    assert _resolved_short(pd.Series({"resolved_pairs": 0})) == "none"
    assert _resolved_short(pd.Series({"kendall_tau": 1.0})) == "none"  # a summary from before the column
