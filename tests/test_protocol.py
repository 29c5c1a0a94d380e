"""The cross-scheme validation protocol (issue 9): run order, the noisy neighbour, and the out-of-sample
comparisons on stand-in runs written by the simulator (known model, known other-process load)."""

import os

import numpy as np
import pandas as pd
import pytest

from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate
from gcsim.study.protocol import (NoisyNeighbour, neighbour_needed, ProtocolOptions, compare_protocol, discordant_pairs,
                                  iterations_for_half_width, plan_sequence, summarize_protocol,
                                  comparison_rank)

SCHEMES = [("uncoded", True), ("ignore-stragglers", False), ("gc-fr", True), ("gc-cr", True), ("pgc-fr", False)]


def test_sequence_brackets_with_the_calibration_scheme_and_shuffles_the_rest():
    opts = ProtocolOptions()
    first = plan_sequence(SCHEMES, opts, 0)
    assert first[0] == ("uncoded-a", "uncoded") and first[-1] == ("uncoded-b", "uncoded")
    middle = [x for x, _ in first[1:-1]]
    assert sorted(middle) == ["gc-cr", "gc-fr", "ignore-stragglers"]  # pipelined (approximate) left out
    assert plan_sequence(SCHEMES, opts, 0) == first  # seeded: a rerun resumes the same plan
    orders = {tuple(x for x, _ in plan_sequence(SCHEMES, ProtocolOptions(seed=seed), k)[1:-1])
              for seed in range(4) for k in range(3)}
    assert len(orders) >= 4  # the order changes with the model and the seed
    only = plan_sequence(SCHEMES, ProtocolOptions(schemes=["gc-cr"]), 0)
    assert sorted(x for x, _ in only[1:-1]) == ["gc-cr", "gc-fr"]  # the coded source is added
    # whatever the run order, the runs are compared in the scenario's order (the comparisons' seeds follow it)
    names = [n for n, _ in SCHEMES]
    for k in range(3):
        seq = plan_sequence(SCHEMES, ProtocolOptions(seed=k), k)
        assert [x for x, _ in sorted(seq, key=lambda it: comparison_rank(it, opts, names))] == [
            "uncoded-a", "ignore-stragglers", "gc-fr", "gc-cr", "uncoded-b"]
    with pytest.raises(ConfigError, match=r"^--schemes: expected names from the scenario"):
        plan_sequence(SCHEMES, ProtocolOptions(schemes=["cce-cr"]), 0)
    with pytest.raises(ConfigError, match=r"^--coded-scheme"):
        plan_sequence(SCHEMES, ProtocolOptions(coded_scheme="cce-fr"), 0)


def test_noisy_neighbour_is_ended_by_pid():
    with NoisyNeighbour(True) as nn:
        pid = nn.proc.pid
        assert nn.proc.poll() is None
        with open(f"/proc/{pid}/stat") as f:
            assert f.read().split(") ")[1].split()[16] == "0"  # normal priority (niceness 0)
    assert nn.proc.poll() is not None
    with NoisyNeighbour(False) as nn:
        assert nn.proc is None

    with NoisyNeighbour(True, "same") as nn:
        assert os.getsid(nn.proc.pid) == os.getsid(0)
    with NoisyNeighbour(True, "other") as nn:  # like another terminal's job: a session of its own
        pid = nn.proc.pid
        assert os.getsid(pid) == pid != os.getsid(0)
    assert nn.proc.poll() is not None
    with pytest.raises(ConfigError, match=r"^--neighbour-session: expected one of same, other, got 'elsewhere'"):
        NoisyNeighbour(True, "elsewhere")


def _run(tmp_path, label, scheme, background, seed):
    from gcsim.sim.output import write_sim_run

    spec = {"name": scheme} if scheme == "uncoded" else {"name": scheme, "s": 1}
    sc = validate_scenario({
        "name": "p", "n_workers": 6, "iterations": 60, "seed": seed, "schemes": [spec],
        "workload": {"gradient_bytes": 0, "cores": 2, "compute": {"dist": "lognorm", "s": 0.2, "scale": 0.03},
                     "background": {"wait": {"dist": "constant", "value": background}}},
        "stragglers": {"delay": {"dist": "bimodal", "p": 0.1, "delay": 0.3}},
        "policy": "cancel", "master": {"decode_s": {"dist": "constant", "value": 0.005}},
    })
    return write_sim_run(simulate(sc), sc, tmp_path / label)


def test_noisy_neighbour_runs_only_while_runs_are_made():
    noisy = ProtocolOptions(noisy_neighbour=True)
    assert neighbour_needed(noisy, ["skip", "resume", "skip"])
    assert not neighbour_needed(noisy, ["skip", "skip"])  # recomputed from finished traces: no busy loop
    assert not neighbour_needed(ProtocolOptions(), ["start"])


def test_out_of_sample_predictions_of_stand_in_runs(tmp_path):
    # the machine's other load is the same (0.4 cores) in every run except gc-cr's (1.0 core)
    runs = {"uncoded-a": _run(tmp_path, "uncoded-a", "uncoded", 0.4, 1),
            "gc-fr": _run(tmp_path, "gc-fr", "gc-fr", 0.4, 2),
            "gc-cr": _run(tmp_path, "gc-cr", "gc-cr", 1.0, 3),
            "uncoded-b": _run(tmp_path, "uncoded-b", "uncoded", 0.4, 4)}
    exact = {"uncoded": True, "gc-fr": True, "gc-cr": True}
    table = compare_protocol({"bimodal": runs}, ProtocolOptions(replications=3, warmup=5), exact)
    assert set(table["comparison"]) == {"from-uncoded", "from-uncoded-all-iterations", "from-uncoded-ab", "from-uncoded-given-load", "from-gc-fr",
                                        "from-uncoded-wall",
                                        "check-uncoded-paired", "calibrate-file-uncoded", "given-uncoded-load-and-speed"}
    assert set(table.loc[table.comparison == "check-uncoded-paired", "basis"]) == {"model check"}
    assert set(table.loc[table.comparison == "given-uncoded-load-and-speed", "basis"]) == {"given machine state"}
    # the target's own load is information from the run being scored: a diagnostic too
    assert set(table.loc[table.comparison == "from-uncoded-given-load", "basis"]) == {"given machine state"}
    diagnostics = ["check-uncoded-paired", "given-uncoded-load-and-speed", "from-uncoded-given-load"]
    assert (table.loc[~table.comparison.isin(diagnostics), "basis"] == "out of sample").all()
    g = table.set_index(["comparison", "target"])
    # gcsim calibrate + gcsim simulate of the file: the same prediction as the comparator's (same load)
    assert abs(g.loc[("calibrate-file-uncoded", "gc-fr"), "err_mean"]) < 0.08
    assert g.loc[("calibrate-file-uncoded", "gc-cr"), "err_mean"] < -0.10  # it cannot know gc-cr's load
    assert set(g.loc["calibrate-file-uncoded"].index) == {"gc-fr", "gc-cr", "uncoded-b"}
    assert (table["iterations_for_3pct"] > 0).all()
    # standard errors of the observed and simulated means (rank agreement over resolved pairs)
    assert (table["obs_mean_se_s"] > 0).all() and (table["sim_mean_se_s"] >= 0).all()
    # same load: gc-fr predicted from uncoded within sampling error; gc-cr only once its own load is given
    assert abs(g.loc[("from-uncoded", "gc-fr"), "err_mean"]) < 0.08
    assert g.loc[("from-uncoded", "gc-cr"), "err_mean"] < -0.10
    assert abs(g.loc[("from-uncoded-given-load", "gc-cr"), "err_mean"]) < 0.08
    summary = summarize_protocol(table, "uncoded", noisy=False).set_index("comparison")
    assert summary.loc["from-uncoded", "exact_targets"] == 2  # gc-fr, gc-cr (uncoded-b is the noise floor)
    assert np.isfinite(summary.loc["from-uncoded", "noise_floor_mean_err"])
    assert summary.loc["from-uncoded", "resolved_pairs"] <= 1  # gc-fr/gc-cr: the only pair of distinct targets
    assert summary.loc["from-uncoded-given-load", "worst_abs_mean_err"] < summary.loc["from-uncoded", "worst_abs_mean_err"]
    # pooled from uncoded-a and uncoded-b: both calibrate, neither is scored
    assert set(g.loc["from-uncoded-ab"].index) == {"gc-fr", "gc-cr"}
    assert abs(g.loc[("from-uncoded-ab", "gc-fr"), "err_mean"]) < 0.08
    assert set(table.loc[table.comparison == "from-uncoded-ab", "calibrated_from"]) == {"uncoded-a+uncoded-b"}
    # the mean error in expectation: every fresh-draw prediction has it (the stand-in runs are gcsim's keyed
    # draws), the model check (own draws) has none; its CI is narrower than the raw one's
    paired = table.comparison == "check-uncoded-paired"
    assert table.loc[~paired, "err_mean_cv"].notna().all() and table.loc[paired, "err_mean_cv"].isna().all()
    row = g.loc[("from-uncoded", "gc-fr")]
    assert row["err_mean_cv_lo"] <= row["err_mean_cv"] <= row["err_mean_cv_hi"]
    assert row["err_mean_cv_hi"] - row["err_mean_cv_lo"] < row["err_mean_hi"] - row["err_mean_lo"]
    assert summary.loc["from-uncoded", "worst_abs_mean_err_expectation"] == pytest.approx(
        g.loc["from-uncoded"].loc[["gc-fr", "gc-cr"], "err_mean_cv"].abs().max())
    assert summary.loc["from-uncoded", "meets_mean_target_expectation"] in (True, False)
    assert np.isnan(summary.loc["check-uncoded-paired", "worst_abs_mean_err_expectation"])
    assert summary.loc["check-uncoded-paired", "meets_mean_target_expectation"] is None
    assert (summary.loc["from-uncoded", "iterations_for_3pct_expectation"]
            < summary.loc["from-uncoded", "iterations_for_3pct"])
    # and the p95 in expectation, the same way
    assert table.loc[~paired, "err_p95_cv"].notna().all() and table.loc[paired, "err_p95_cv"].isna().all()
    assert row["err_p95_cv_lo"] <= row["err_p95_cv"] <= row["err_p95_cv_hi"]
    assert summary.loc["from-uncoded", "worst_abs_p95_err_expectation"] == pytest.approx(
        g.loc["from-uncoded"].loc[["gc-fr", "gc-cr"], "err_p95_cv"].abs().max())
    assert summary.loc["check-uncoded-paired", "meets_p95_target_expectation"] is None


def test_iterations_for_a_3_percent_ci_and_the_pairs_in_the_wrong_order():
    # a CI of +-6 % at 200 iterations: 4 x as many for +-3 %
    assert iterations_for_half_width(200, -0.07, 0.05) == 800
    assert np.isnan(iterations_for_half_width(200, float("nan"), 0.05))
    rows = pd.DataFrame({"target": ["a", "b", "c", "d"], "obs_mean_s": [1.0, 2.0, 3.0, 3.1],
                         "sim_mean_s": [1.1, 2.1, 3.0, 3.0]})  # c and d predicted equal
    assert discordant_pairs(rows) == "c/d (pred 0.0% apart, obs 3.3%)"
    assert discordant_pairs(rows.iloc[:3]) == ""
