"""The vectorised engine against the SimPy engine (common random numbers) and closed forms."""

import math

import numpy as np
import pytest

from gcsim.errors import ConfigError, GcsimError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate
from gcsim.sim.vector import NeedsSimPy, simulate_vector, unsupported_reason

ALL_SCHEMES = [
    {"name": "uncoded"}, {"name": "ignore-stragglers", "s": 2}, {"name": "gc-fr", "s": 2},
    {"name": "gc-cr", "s": 2}, {"name": "gc-mds", "s": 3}, {"name": "cce-fr", "s": 2, "m": 2},
    {"name": "cce-cr", "s": 2, "m": 2}, {"name": "pgc-fr", "s": 2}, {"name": "pgc-cr", "s": 2},
]


def _scenario(**over):
    d = {"name": "t", "n_workers": 12, "iterations": 120, "seed": 3, "schemes": ALL_SCHEMES,
         "workload": {"gradient_bytes": 4e6, "model_bytes": 4e6, "compute": {"dist": "expon", "scale": 0.02}},
         "network": {"latency_s": 0.0005, "bandwidth_bytes_per_s": 1.25e9},
         "stragglers": {"delay": {"dist": "pareto", "b": 1.8, "scale": 0.04}},
         "policy": "cancel", "cancel_latency_s": 0.0005,
         "master": {"decode_s": {"dist": "expon", "scale": 0.002}}}
    d.update(over)
    return validate_scenario(d)


VARIANTS = {
    "heavy_tail": {},
    "persistent_heterogeneous": {"stragglers": {
        "delay": {"dist": "bimodal", "p": 0.1, "delay": 0.5, "base": {"dist": "expon", "scale": 0.01}},
        "slowdown": {"dist": "lognorm", "s": 0.3, "scale": 1.0},
        "persistent": {"p_enter": 0.05, "p_leave": 0.2, "slowdown": 4.0},
        "worker_scale": [1.0 + 0.1 * w for w in range(12)]}},
    "dispatch_draws_partition_cancel": {"network": {"latency_s": 0.001, "bandwidth_bytes_per_s": 1e9,
                                                    "dispatch": {"dist": "expon", "scale": 0.003}},
                                        "cancel_granularity": "partition", "cancel_latency_s": 0.0,
                                        "master": {"decode_s": {"dist": "constant", "value": 0.2}}},
    "no_network_instant_cancel": {"network": {}, "cancel_latency_s": 0.0,
                                  "master": {"decode_s": {"dist": "constant", "value": 0.01}}},
    # constant compute: the draws are one broadcast value, the work a per-worker table (issue 13)
    "constant_compute_worker_scale": {
        "workload": {"gradient_bytes": 4e6, "model_bytes": 4e6, "compute": {"dist": "constant", "value": 0.0137}},
        "stragglers": {"delay": {"dist": "pareto", "b": 1.8, "scale": 0.04},
                       "worker_scale": [1.0 + 0.07 * w for w in range(12)]}},
    "constant_compute_random_slowdown": {
        "workload": {"gradient_bytes": 4e6, "model_bytes": 4e6, "compute": {"dist": "constant", "value": 0.0137}},
        "stragglers": {"delay": {"dist": "expon", "scale": 0.01}, "slowdown": {"dist": "lognorm", "s": 0.3}}},
}
ITER_COLS = ["start_s", "decodable_s", "end_s", "duration_s", "n_arrived", "n_used"]
WORKER_COLS = ["n_partitions", "dispatch_s", "compute_start_s", "compute_s", "delay_s", "slowdown", "send_s",
               "arrival_s", "cpu_s", "compute_cpu_s"]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_same_instants_as_simpy_for_every_scheme(variant):
    sc = _scenario(**VARIANTS[variant])
    ref, vec = simulate(sc), simulate_vector(sc)
    assert vec.engine == "vector" and list(vec.schemes) == [s.get("label", s["name"]) for s in ALL_SCHEMES]
    for label in vec.schemes:
        a = ref.iterations[ref.iterations.scheme == label]
        b = vec.iterations[vec.iterations.scheme == label]
        for c in ITER_COLS:  # same float operations in the same order: equal, not merely close
            np.testing.assert_array_equal(a[c].to_numpy(float), b[c].to_numpy(float), err_msg=f"{label} {c}")
        wa = ref.workers[ref.workers.scheme == label]
        wb = vec.workers[vec.workers.scheme == label]
        for c in WORKER_COLS:
            np.testing.assert_array_equal(wa[c].to_numpy(float), wb[c].to_numpy(float), err_msg=f"{label} {c}")
        assert list(wa.status) == list(wb.status), label
        if label != "gc-fr":
            assert list(wa.used) == list(wb.used), label
        else:
            # SimPy's gc-fr 'used' is whichever group member the decode cache saw first for that arrived
            # set; the vector engine uses the first arrival of each group. Both: one arrived per group.
            used = wb[wb.used]
            assert (used.groupby("iteration").worker.apply(lambda w: sorted(set(w // 3))) == [[0, 1, 2, 3]] * 120).all()
            assert (used.status == "arrived").all()
    np.testing.assert_array_equal(ref.summary.mean_s, vec.summary.mean_s)


def test_order_statistics_by_hand():
    """Constant work, worker w finishes at 0.01·(w+1)·... : every scheme's decodable instant is an order
    statistic known in closed form (Tandon et al. 2017: cyclic codes wait for the (n-s)-th arrival; FR for
    the latest group's first arrival; block CCE for the latest group's m-th)."""
    n = 12
    scale = [float(w + 1) for w in range(n)]
    sc = _scenario(iterations=3, network={}, cancel_latency_s=0.0, stragglers={"worker_scale": scale},
                   workload={"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.01}},
                   master={"decode_s": {"dist": "constant", "value": 0.0}})
    r = simulate_vector(sc)
    d = r.iterations.groupby("scheme", sort=False).duration_s.first()
    # load L partitions per worker: worker w arrives at 0.01 (w+1) L
    expect = {"uncoded": 0.01 * 12, "ignore-stragglers": 0.01 * 10, "gc-cr": 0.01 * 10 * 3, "gc-mds": 0.01 * 9 * 4,
              "cce-cr": 0.01 * 10 * 4, "pgc-fr": 0.01 * 10, "pgc-cr": 0.01 * 10,
              "gc-fr": 0.01 * 10 * 3,  # groups {0,1,2},...,{9,10,11}: the last group's first is worker 9
              "cce-fr": 0.01 * 10 * 4}  # groups of 4, need 2: the last group {8..11} needs worker 9
    for label, v in expect.items():
        assert d[label] == pytest.approx(v, rel=1e-12), label
    assert list(r.iterations.n_used[r.iterations.scheme == "cce-fr"])[:1] == [6]


def test_uncoded_mean_is_the_expected_maximum_of_exponentials():
    """E[max of n i.i.d. Exp(scale)] = scale · H_n (Rényi's representation of exponential order statistics)."""
    n, scale, I = 8, 0.1, 4000
    sc = _scenario(n_workers=n, iterations=I, schemes=[{"name": "uncoded"}, {"name": "ignore-stragglers", "s": 1}],
                   network={}, cancel_latency_s=0.0, stragglers={"delay": {"dist": "expon", "scale": scale}},
                   workload={"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.0}},
                   master={"decode_s": {"dist": "constant", "value": 0.0}})
    r = simulate_vector(sc, trace="none")
    d = r.iterations.groupby("scheme", sort=False).duration_s
    h_n = sum(1 / k for k in range(1, n + 1))
    se = scale * math.sqrt(sum(1 / k**2 for k in range(1, n + 1)) / I)
    assert abs(d.mean()["uncoded"] - scale * h_n) < 4 * se
    # (n-1)-th of n: scale · (H_n - 1/1)
    assert abs(d.mean()["ignore-stragglers"] - scale * (h_n - 1)) < 4 * se
    assert len(r.workers) == 0


def test_seeded_determinism_and_blocks_do_not_matter(monkeypatch):
    sc = _scenario(iterations=60, stragglers=VARIANTS["persistent_heterogeneous"]["stragglers"])
    a = simulate_vector(sc, trace="iterations")
    import gcsim.sim.vector as v
    monkeypatch.setattr(v, "BLOCK_WORKER_ITERATIONS", 12 * 7)  # blocks of 7 iterations
    b = simulate_vector(sc, trace="iterations")
    np.testing.assert_array_equal(a.iterations.end_s, b.iterations.end_s)
    c = simulate_vector(sc, trace="iterations", seed=4)
    assert not np.array_equal(a.iterations.end_s, c.iterations.end_s)


def test_block_size_bounds_partition_draws(monkeypatch):
    """Random per-partition compute: blocks hold at most BLOCK_PARTITION_DRAWS (iteration, worker, partition)
    draws (no array grows with iterations × workers × partitions); the result does not depend on it."""
    import gcsim.sim.vector as v
    assert v.block_iterations(1024) == 256 and v.block_iterations(1024, 129) == 15
    assert v.block_iterations(10**7, 500) == 1
    sc = _scenario(iterations=40)  # expon compute, loads up to s + m = 4
    a = simulate_vector(sc, trace="none")
    seen = []
    real = v.block_iterations
    monkeypatch.setattr(v, "BLOCK_PARTITION_DRAWS", 12 * 4 * 3)  # 3 iterations per block
    monkeypatch.setattr(v, "block_iterations", lambda n, p=0: seen.append(real(n, p)) or seen[-1])
    b = simulate_vector(sc, trace="none")
    assert seen == [3]
    np.testing.assert_array_equal(a.iterations.end_s, b.iterations.end_s)


def test_quorum_trust_mode_agrees_where_nothing_is_refused():
    sc = _scenario(iterations=50)
    a, b = simulate_vector(sc, trace="none"), simulate_vector(sc, trace="none", decode_check="quorum")
    np.testing.assert_array_equal(a.iterations.end_s, b.iterations.end_s)
    assert a.refusals == {label: [] for label in a.schemes}


def test_what_needs_simpy_is_refused_in_one_line():
    assert unsupported_reason(_scenario()) is None
    with pytest.raises(NeedsSimPy, match=r"^--engine: expected simpy or auto .* got vector \(policy carry-over\)$"):
        simulate_vector(_scenario(policy="carry-over"))
    cores = _scenario(workload={"gradient_bytes": 1, "compute": {"dist": "constant", "value": 0.01}, "cores": 2})
    with pytest.raises(NeedsSimPy, match="workload.cores 2"):
        simulate_vector(cores)
    # a cancel that reaches stragglers after the next iteration started: iterations overlap
    with pytest.raises(NeedsSimPy, match="still busy when the next iteration reaches it"):
        simulate_vector(_scenario(cancel_latency_s=0.5))
    with pytest.raises(ConfigError, match="trace: expected one of none, iterations, full, got 'all'"):
        simulate_vector(_scenario(), trace="all")
    assert issubclass(NeedsSimPy, GcsimError)


def test_cli_engine_choice_trace_levels_and_meta(tmp_path, capsys):
    import json

    import yaml

    from gcsim.cli import main

    sc = _scenario(iterations=20, schemes=[{"name": "uncoded"}, {"name": "gc-fr", "s": 2}])
    p = tmp_path / "s.yaml"
    p.write_text(sc.to_yaml())
    out = tmp_path / "auto"
    assert main(["simulate", str(p), "--out", str(out), "--no-progress", "--trace", "iterations"]) == 0
    assert "engine vector)" in capsys.readouterr().out
    meta = json.loads((out / "meta.json").read_text())
    assert (meta["engine"], meta["trace"]) == ("vector", "iterations")
    assert (out / "iterations.csv").is_file() and not (out / "workers.csv").exists()

    assert main(["simulate", str(p), "--out", str(tmp_path / "sp"), "--no-progress", "--engine", "simpy",
                 "--trace", "none"]) == 0
    assert "engine simpy)" in capsys.readouterr().out
    assert not (tmp_path / "sp" / "iterations.csv").exists()
    assert json.loads((tmp_path / "sp" / "meta.json").read_text())["engine"] == "simpy"

    carry = yaml.safe_load(p.read_text())
    carry["policy"] = "carry-over"
    q = tmp_path / "c.yaml"
    q.write_text(yaml.safe_dump(carry))
    assert main(["simulate", str(q), "--out", str(tmp_path / "v"), "--no-progress", "--engine", "vector"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "got vector (policy carry-over)" in err[0] and not (tmp_path / "v").exists()
    assert main(["simulate", str(q), "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    assert "engine simpy because of policy carry-over" in capsys.readouterr().out
