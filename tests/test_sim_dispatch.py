"""network.dispatch (per worker-iteration broadcast draws) and its calibration from a trace."""

import numpy as np
import pandas as pd
import pytest

from gcsim.compare.calibrate import dispatch_lags
from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate


def _scenario(**network):
    return validate_scenario({
        "name": "dispatch", "n_workers": 4, "iterations": 30, "seed": 5,
        "schemes": [{"name": "uncoded"}],
        "workload": {"gradient_bytes": 1000, "model_bytes": 1000, "compute": {"dist": "constant", "value": 0.02}},
        "network": {"latency_s": 0.001, **network},
        "stragglers": {"delay": {"dist": "bimodal", "p": 0.2, "delay": 0.5}},
        "policy": "cancel", "master": {"decode_s": {"dist": "constant", "value": 0.003}},
    })


def test_dispatch_draw_delays_each_worker_and_keeps_straggler_draws():
    base = simulate(_scenario())
    res = simulate(_scenario(dispatch={"dist": "empirical", "values": [0.004, 0.012]}))
    w, it = res.workers, res.iterations.set_index("iteration")
    lag = w["compute_start_s"].to_numpy() - it["start_s"].reindex(w["iteration"]).to_numpy()
    # every worker is idle at the start (cancel, one partition): its lag is exactly one of the values
    assert np.all(np.isclose(lag, 0.004) | np.isclose(lag, 0.012))
    assert np.isclose(lag, 0.004).any() and np.isclose(lag, 0.012).any()
    np.testing.assert_allclose(w["dispatch_s"], w["compute_start_s"])
    np.testing.assert_array_equal(w["delay_s"], base.workers["delay_s"])  # own stream: same straggler draws
    # duration = max over workers of lag + delay + compute, + gradient latency + decode
    d = (lag + w["delay_s"].to_numpy() + 0.02).reshape(30, 4).max(axis=1) + 0.001 + 0.003
    np.testing.assert_allclose(res.iterations["duration_s"], d, rtol=0, atol=1e-12)


def test_negative_dispatch_draw_names_the_field():
    with pytest.raises(ConfigError, match="network.dispatch"):
        simulate(_scenario(dispatch={"dist": "empirical", "values": [-0.01]}))


def test_dispatch_lags_measure_from_when_the_worker_was_free():
    its = pd.DataFrame({"iteration": [0, 1], "start_s": [0.0, 1.0]})
    wk = pd.DataFrame({
        "iteration": [0, 0, 1, 1], "worker": [0, 1, 0, 1],
        "compute_start_s": [0.010, 0.020, 1.015, 1.300],
        "delay_s": [0.0, 0.0, 0.0, 0.0], "compute_s": [0.1, 1.2, 0.1, 0.1],
        # worker 1 was cancelled in iteration 0 (no send): it finished its partition at 1.22
        "send_s": [0.112, np.nan, 1.117, 1.402],
    })
    got = dispatch_lags(wk, its)
    np.testing.assert_allclose(got, [0.010, 0.020, 0.015, 1.300 - 1.22], atol=1e-12)
