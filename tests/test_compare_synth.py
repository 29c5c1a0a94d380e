"""The synthetic-trace builder itself (:func:`factories.make_trace`): the comparator's tests build
their run directories with it."""

from __future__ import annotations

import numpy as np
from factories import make_trace


def test_synthetic_trace_is_decodable_at_the_n_minus_s_th_arrival():
    its, wks = make_trace("gc-fr", n=6, s=1, iterations=5, seed=3)
    for it, grp in wks.groupby("iteration"):
        arrivals = np.sort((grp["send_s"] + 0.002).to_numpy())
        assert its.loc[it, "decodable_s"] == arrivals[4]
        assert grp["used"].sum() == 5
    np.testing.assert_allclose(its["duration_s"], its["end_s"] - its["start_s"])
    assert np.all(its["start_s"].to_numpy()[1:] == its["end_s"].to_numpy()[:-1])
