"""Time to accuracy (gcsim.study.accuracy) on synthetic metrics with exact answers (issue 14)."""

import math

import numpy as np
import pandas as pd
import pytest

from gcsim.errors import GcsimError
from gcsim.study.accuracy import accuracy_curve, plot_accuracy_time, time_to_accuracy, time_to_accuracy_of_run


def _its(durations, scheme="x"):
    return pd.DataFrame({"scheme": scheme, "iteration": np.arange(len(durations)), "duration_s": durations})


def _metrics(iters, accs):
    return pd.DataFrame({"iteration": iters, "loss": 1.0, "test_loss": 1.0, "test_accuracy": accs,
                         "elapsed_s": 0.0})


def test_curve_sums_durations_up_to_each_evaluation():
    its = _its([0.5, 0.25, 1.0, 0.25, 2.0, 0.5])  # cumulative 0.5 0.75 1.75 2.0 4.0 4.5
    mt = _metrics([1, 3, 5], [0.2, 0.45, 0.55])
    c = accuracy_curve(mt, its)
    assert c["iterations_done"].tolist() == [2, 4, 6]
    assert c["wall_s"].tolist() == pytest.approx([0.75, 2.0, 4.5])


def test_first_evaluation_at_or_above_target():
    its = _its([0.5, 0.25, 1.0, 0.25, 2.0, 0.5])
    mt = _metrics([1, 3, 5], [0.2, 0.40, 0.55])
    tta = time_to_accuracy(mt, its, targets=(0.4, 0.5, 0.6))
    assert tta["target"].tolist() == [0.4, 0.5, 0.6]
    assert tta["iterations"].iloc[0] == 4 and tta["wall_s"].iloc[0] == pytest.approx(2.0)  # exactly 40 % counts
    assert tta["iterations"].iloc[1] == 6 and tta["wall_s"].iloc[1] == pytest.approx(4.5)
    assert math.isnan(tta["iterations"].iloc[2]) and math.isnan(tta["wall_s"].iloc[2])  # never reached


def test_accuracy_that_drops_again_still_counts_the_first_crossing():
    its = _its([1.0] * 4)
    mt = _metrics([0, 1, 2, 3], [0.1, 0.51, 0.3, 0.52])
    tta = time_to_accuracy(mt, its, targets=(0.5,))
    assert tta["iterations"].iloc[0] == 2 and tta["wall_s"].iloc[0] == pytest.approx(2.0)


def test_bad_target_is_a_gcsim_error():
    with pytest.raises(GcsimError, match="accuracy target"):
        time_to_accuracy(_metrics([0], [0.5]), _its([1.0]), targets=(40,))


def test_run_directory(tmp_path):
    _its([0.5, 0.5, 0.5, 0.5], scheme="pgc-fr").to_csv(tmp_path / "iterations.csv", index=False)
    _metrics([1, 3], [0.45, 0.6]).to_csv(tmp_path / "metrics.csv", index=False)
    tta = time_to_accuracy_of_run(tmp_path)
    assert tta.columns.tolist() == ["scheme", "target", "iterations", "wall_s"]
    assert tta["scheme"].tolist() == ["pgc-fr", "pgc-fr"]
    assert tta["iterations"].tolist() == [2.0, 4.0]
    assert tta["wall_s"].tolist() == pytest.approx([1.0, 2.0])
    with pytest.raises(GcsimError, match="not in iterations.csv"):
        time_to_accuracy_of_run(tmp_path, scheme="uncoded")
    with pytest.raises(GcsimError, match="no metrics.csv"):
        time_to_accuracy_of_run(tmp_path / "nothing")


def test_plot_writes_png(tmp_path):
    its = _its([0.5, 0.25])
    c = accuracy_curve(_metrics([0, 1], [0.3, 0.5]), its)
    p = plot_accuracy_time({"uncoded": c, "pgc-fr": c}, {"uncoded": True, "pgc-fr": False}, tmp_path / "a.png")
    assert p.stat().st_size > 1000


def test_headline_columns():
    from gcsim.study.headline import HEADLINE_COLUMNS, build_headline, render_headline_md

    val = pd.DataFrame([{"scheme": s, "n": 6, "s": 1, "m": 1, "warmup": 0, "obs_mean_s": 1.0, "obs_p95_s": 1.0,
                         "sim_mean_s": 1.0, "sim_p95_s": 1.0, "err_mean": 0.0, "err_p95": 0.0, "verdict": "pass"}
                        for s in ("uncoded", "pgc-fr")])
    runs = {"uncoded": {"run_dir": "u", "iterations": 4, "metrics": _metrics([1, 3], [0.42, 0.55]),
                        "exact": True, "iteration_times": _its([1.0, 2.0, 1.0, 1.0])},
            "pgc-fr": {"run_dir": "p", "iterations": 4, "metrics": _metrics([1, 3], [0.3, 0.41]),
                       "exact": False, "iteration_times": _its([0.5] * 4)}}
    head = build_headline(val, runs).set_index("scheme")
    assert list(build_headline(val, runs).columns) == HEADLINE_COLUMNS
    assert head.loc["uncoded", ["iterations_to_40pct", "wall_s_to_40pct", "iterations_to_50pct", "wall_s_to_50pct"]
                    ].tolist() == [2, 3.0, 4, 5.0]
    assert head.loc["pgc-fr", ["iterations_to_40pct", "wall_s_to_40pct"]].tolist() == [4, 2.0]
    assert math.isnan(head.loc["pgc-fr", "iterations_to_50pct"]) and math.isnan(head.loc["pgc-fr", "wall_s_to_50pct"])
    md = render_headline_md(head.reset_index(), machine={}, command="c", settings={})
    assert "| 2 / 3.0 | 4 / 5.0 |" in md and "| 4 / 2.0 | - / - |" in md
