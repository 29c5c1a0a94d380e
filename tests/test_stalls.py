"""Measured iterations the prediction cannot produce (gcsim/compare/stalls.py): named, with the mean
error without them; none named when every iteration is within the factor."""

import pandas as pd
import pytest

from gcsim.compare.stalls import STALL_FACTOR, stall_note


def _obs(durations):
    return pd.DataFrame({"iteration": range(10, 10 + len(durations)), "duration_s": durations})


def test_one_stall_is_named_with_the_error_without_it():
    # 9 iterations of 0.4 s and one of 12.4 s: mean 1.6 s; the prediction's mean 0.4 s, p99 1.0 s
    note = stall_note("uncoded", _obs([0.4] * 9 + [12.4]), simulated_mean_s=0.4, simulated_p99_s=1.0)
    assert note is not None
    assert "iteration 19 took 12.40 s, 12.4 x the predicted p99 (1.00 s)" in note
    assert "Mean error -75.0 % with it, +0.0 % without" in note  # 0.4/1.6 - 1, 0.4/0.4 - 1


def test_several_stalls_are_counted():
    note = stall_note("gc-fr (run-a)", _obs([0.5, 3.5, 0.5, 4.0]), simulated_mean_s=0.5, simulated_p99_s=1.0)
    assert note.startswith("gc-fr (run-a): 2 iterations (11, 13) took up to 4.00 s, 4.0 x")
    assert "with them, +0.0 % without" in note


def test_no_note_within_the_factor_or_without_a_p99():
    obs = _obs([0.4, 0.9, STALL_FACTOR * 1.0 - 1e-9])
    assert stall_note("x", obs, simulated_mean_s=0.5, simulated_p99_s=1.0) is None
    assert stall_note("x", _obs([50.0]), simulated_mean_s=0.5, simulated_p99_s=float("nan")) is None


@pytest.mark.parametrize("factor", [2.0, 10.0])
def test_the_factor_decides(factor):
    obs = _obs([0.4, 5.0])
    note = stall_note("x", obs, simulated_mean_s=0.4, simulated_p99_s=1.0, factor=factor)
    assert (note is not None) == (5.0 > factor)
