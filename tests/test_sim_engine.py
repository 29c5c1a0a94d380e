"""Engine behaviour on hand-computable cases: policies, network costs, traces, persistence."""

import numpy as np
import pytest

from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate
from gcsim.stragglers import StragglerProcess


def _base(**over):
    d = {
        "name": "hand", "n_workers": 2, "iterations": 8, "seed": 0,
        "schemes": [{"name": "ignore-stragglers", "s": 1}],
        "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.1}},
    }
    d.update(over)
    return d


def _alternating_seed() -> int:
    """A seed whose persistent chain (p_enter = p_leave = 1: the state flips every iteration) starts
    with worker 0 slow and worker 1 normal."""
    spec = validate_scenario(_base(stragglers={"persistent": {"p_enter": 1, "p_leave": 1, "slowdown": 4}})).stragglers
    for seed in range(100):
        slow = StragglerProcess(spec, 2, seed).draw(0).slow
        if slow[0] and not slow[1]:
            return seed
    raise AssertionError("no seed found")


def _alternating(policy: str, cancel_latency_s: float = 0.0, scheme=None):
    d = _base(seed=_alternating_seed(), policy=policy, cancel_latency_s=cancel_latency_s,
              stragglers={"persistent": {"p_enter": 1, "p_leave": 1, "slowdown": 4}})
    if scheme is not None:
        d["schemes"] = [scheme]
    return simulate(validate_scenario(d))


def test_cancel_vs_carry_over_by_hand():
    # n=2, first arrival decodes; per iteration one worker takes 0.1 s and the other 0.4 s, alternating.
    # cancel: the slow one is dropped, every iteration takes 0.1 s.
    cancel = _alternating("cancel").iterations["duration_s"].to_numpy()
    np.testing.assert_allclose(cancel, 0.1, atol=1e-12)
    # carry-over: it0 ends at 0.1 but worker 0 works on until 0.4; in it1 worker 0 (now fast) starts
    # at 0.4 and ends at 0.5 while worker 1 (now slow) ends at 0.1 + 0.4 = 0.5 -> it1 takes 0.4 s;
    # the pattern repeats: 0.1, 0.4, 0.1, 0.4, ...
    carry = _alternating("carry-over")
    d = carry.iterations["duration_s"].to_numpy()
    np.testing.assert_allclose(d, [0.1, 0.4] * 4, atol=1e-9)
    assert d.mean() > cancel.mean()
    w = carry.workers
    row = w[(w.iteration == 1) & (w.worker == 0)].iloc[0]
    assert row.dispatch_s == pytest.approx(0.1) and row.compute_start_s == pytest.approx(0.4)
    assert (w[w.iteration == 0].status.tolist()) == ["late", "arrived"]


def test_cancel_latency_longer_than_remaining_work_equals_carry_over():
    # the cancel would reach the straggler 0.5 s after the decode, after it finished anyway
    late_cancel = _alternating("cancel", cancel_latency_s=0.5).iterations["duration_s"].to_numpy()
    np.testing.assert_allclose(late_cancel, [0.1, 0.4] * 4, atol=1e-9)


def test_cancelled_worker_is_reported_and_frees_at_cancel():
    r = _alternating("cancel", cancel_latency_s=0.2)
    w = r.workers
    it0 = w[w.iteration == 0].set_index("worker")
    assert it0.loc[0, "status"] == "cancelled" and np.isnan(it0.loc[0, "arrival_s"])
    assert it0.loc[1, "status"] == "arrived" and it0.loc[1, "used"]
    # worker 0 is freed by the cancel at 0.1 + 0.2 and starts iteration 1 (fast, 0.1 s) at 0.3
    it1 = w[w.iteration == 1].set_index("worker")
    assert it1.loc[0, "compute_start_s"] == pytest.approx(0.3)
    # by hand: it1 ends when worker 0 finishes (0.4), 0.3 s after it started; worker 1 (slow in it1,
    # 0.1 -> 0.5) finishes before its cancel arrives (0.6), starts it2 at 0.5 and ends at 0.6: 0.2 s;
    # from then on 0.3 s and 0.2 s alternate.
    np.testing.assert_allclose(r.iterations["duration_s"], [0.1, 0.3, 0.2, 0.3, 0.2, 0.3, 0.2, 0.3], atol=1e-9)


def test_uncoded_is_policy_independent():
    scheme = {"name": "uncoded"}
    a = _alternating("cancel", scheme=scheme).iterations["duration_s"].to_numpy()
    b = _alternating("carry-over", scheme=scheme).iterations["duration_s"].to_numpy()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(a, 0.4, atol=1e-12)


def test_network_costs_and_worker_trace():
    # model 1e6 B and gradients over 1e8 B/s + 5 ms latency; cce-fr (m=2) uploads half the bytes
    sc = validate_scenario({
        "name": "net", "n_workers": 6, "iterations": 3, "seed": 1,
        "schemes": [{"name": "uncoded"}, {"name": "cce-fr", "s": 1, "m": 2}],
        "workload": {"gradient_bytes": 2e6, "model_bytes": 1e6, "compute": {"dist": "constant", "value": 0.05}},
        "network": {"latency_s": 0.005, "bandwidth_bytes_per_s": 1e8},
        "master": {"decode_s": {"dist": "constant", "value": 0.001}},
    })
    r = simulate(sc)
    it = r.iterations.set_index("scheme")
    model = 0.005 + 0.01
    np.testing.assert_allclose(it.loc["uncoded", "duration_s"], model + 0.05 + (0.005 + 0.02) + 0.001)
    np.testing.assert_allclose(it.loc["cce-fr", "duration_s"], model + 3 * 0.05 + (0.005 + 0.01) + 0.001)
    w = r.workers
    arrived = w[w.status == "arrived"]
    up = np.where(arrived.scheme == "uncoded", 0.025, 0.015)
    np.testing.assert_allclose(arrived.arrival_s - arrived.send_s, up)
    np.testing.assert_allclose(arrived.send_s - arrived.compute_start_s, arrived.compute_s + arrived.delay_s)
    assert (w.n_partitions == np.where(w.scheme == "uncoded", 1, 3)).all()
    # iterations chain: each starts when the previous ends
    for _, g in r.iterations.groupby("scheme"):
        np.testing.assert_allclose(g.start_s.to_numpy()[1:], g.end_s.to_numpy()[:-1])


def _lag1(x):
    x = x - x.mean()
    return float(np.dot(x[:-1], x[1:]) / np.dot(x, x))


def test_persistent_stragglers_autocorrelate_iid_do_not():
    def run(persistent):
        st = {"delay": {"dist": "expon", "scale": 0.01}}
        if persistent:
            st["persistent"] = {"p_enter": 0.03, "p_leave": 0.15, "slowdown": 5}
        return simulate(validate_scenario({
            "name": "acf", "n_workers": 8, "iterations": 1500, "seed": 9, "schemes": [{"name": "uncoded"}],
            "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.05}},
            "stragglers": st}))
    pers = run(True).iterations["duration_s"].to_numpy()
    iid = run(False).iterations["duration_s"].to_numpy()
    bound = 4 / np.sqrt(len(iid))  # 4 standard errors of a lag-1 autocorrelation of white noise
    assert _lag1(pers) > 0.5
    assert abs(_lag1(iid)) < bound


def test_simulate_overrides_and_errors():
    sc = validate_scenario(_base(schemes=[{"name": "uncoded"}, {"name": "gc-fr", "s": 1}]))
    r = simulate(sc, iterations=3, seed=5, schemes=["gc-fr"])
    assert list(r.summary.scheme) == ["gc-fr"] and r.scenario.seed == 5 and len(r.iterations) == 3
    with pytest.raises(ConfigError, match="schemes: expected names from the scenario .*got 'gc-cr'"):
        simulate(sc, schemes=["gc-cr"])
    with pytest.raises(ConfigError, match="iterations: expected an integer >= 1, got 0"):
        simulate(sc, iterations=0)


def test_same_seed_same_frames_different_seed_differs():
    sc = validate_scenario(_base(n_workers=4, iterations=50, stragglers={"delay": {"dist": "expon", "scale": 0.1}},
                                 schemes=[{"name": "gc-cr", "s": 1}]))
    a, b, c = simulate(sc), simulate(sc), simulate(sc, seed=1)
    assert a.workers.equals(b.workers) and a.iterations.equals(b.iterations)
    assert not np.allclose(a.iterations.duration_s, c.iterations.duration_s)


def test_huge_but_valid_iterations_are_refused_before_any_work():
    # 10**12 iterations would need ~10**13 worker rows in memory: refuse at once, naming the bound
    sc = validate_scenario(_base(iterations=10**12, n_workers=4, schemes=[{"name": "uncoded"}, {"name": "gc-fr", "s": 1}]))
    with pytest.raises(ConfigError) as e:
        simulate(sc)
    msg = str(e.value)
    assert msg.startswith("iterations: expected at most 1250000 for n_workers=4 and 2 schemes (") and \
        msg.endswith("got 1000000000000") and "\n" not in msg
    with pytest.raises(ConfigError, match=r"^iterations: expected at most 1250000 "):
        simulate(validate_scenario(_base(n_workers=4, schemes=[{"name": "uncoded"}, {"name": "gc-fr", "s": 1}])),
                 iterations=1_250_001)


@pytest.mark.parametrize("field,over", [
    ("stragglers.delay", {"stragglers": {"delay": {"dist": "expon", "loc": 1e308, "scale": 1e308}}}),
    ("workload.compute", {"workload": {"gradient_bytes": 0, "compute": {"dist": "expon", "loc": 1e308, "scale": 1e308}}}),
    ("master.decode_s", {"master": {"decode_s": {"dist": "expon", "loc": 1e308, "scale": 1e308}}}),
])
def test_draws_overflowing_to_inf_are_an_error_not_nan_results(field, over):
    with np.errstate(all="ignore"):
        with pytest.raises(ConfigError) as e:
            simulate(validate_scenario(_base(**over)))
    assert str(e.value).startswith(f"{field}: expected a distribution whose draws are finite seconds, got inf (iteration ")


def test_run_too_long_for_float64_time_is_an_error():
    # a 1e12 s delay: later iterations' durations would be differences of ~1e12 s instants, whose float64
    # spacing (1.2e-4 s) swamps the 0.1 s compute
    over = {"stragglers": {"delay": {"dist": "bimodal", "p": 0.2, "delay": 1e12}}, "iterations": 20}
    with pytest.raises(ConfigError) as e:
        simulate(validate_scenario(_base(**over)))
    msg = str(e.value)
    assert msg.startswith("stragglers.delay: expected draws that keep the simulated run under 8.59e+09 s") and \
        "got a run of " in msg and "\n" not in msg


def test_run_too_long_because_of_the_network_names_the_network():
    with pytest.raises(ConfigError, match=r"^network.latency_s: expected draws that keep the simulated run under"):
        simulate(validate_scenario(_base(network={"latency_s": 1e9})))
    with pytest.raises(ConfigError, match=r"^network.bandwidth_bytes_per_s: expected draws that keep the simulated"):
        simulate(validate_scenario(_base(network={"bandwidth_bytes_per_s": 1e-3},
                                         workload={"gradient_bytes": 1e9, "compute": {"dist": "constant", "value": 0.1}})))
