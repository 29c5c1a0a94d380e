"""Trace-driven replay (stragglers.replay): exact times in the simulator's worker rows, the rules for
short / narrow traces, and the keyed draws the real executor uses."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from gcsim.errors import ConfigError
from gcsim.scenario import load_scenario
from gcsim.sim.engine import simulate
from gcsim.stragglers import StragglerProcess


def _trace(tmp_path, T=30, W=4, seed=0):
    rng = np.random.default_rng(seed)
    x = np.round(0.1 + rng.exponential(0.05, size=(T, W)), 6)
    x[5:9, 2] += 1.0  # a persistent straggler spell
    rows = ["worker,iteration,duration_ms"] + [f"{w},{t},{x[t, w] * 1000:.3f}" for t in range(T) for w in range(W)]
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    return np.array([[float(f"{x[t, w] * 1000:.3f}") for w in range(W)] for t in range(T)]) * 0.001  # file x unit_s


def _scenario(tmp_path, n=4, iterations=30, rule="error", schemes=("uncoded", "gc-fr"), apply="delay", block=5):
    data = {"name": "replay", "n_workers": n, "iterations": iterations, "seed": 3,
            "schemes": [{"name": s, "s": 0 if s == "uncoded" else 1} for s in schemes],
            "workload": {"gradient_bytes": 0.0, "compute": {"dist": "constant", "value": 0.0}},
            "stragglers": {"replay": {"file": "trace.csv", "unit_s": 0.001, "duration_col": "duration_ms",
                                      "apply": apply, "rule": rule,
                                      "block": block}}}
    p = tmp_path / "sc.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_replay_reproduces_trace_in_worker_rows(tmp_path):
    x = _trace(tmp_path)
    res = simulate(load_scenario(_scenario(tmp_path)))
    for scheme in ("uncoded", "gc-fr"):
        w = res.workers[res.workers["scheme"] == scheme].sort_values(["iteration", "worker"])
        got = w["delay_s"].to_numpy().reshape(30, 4)
        np.testing.assert_array_equal(got, x)  # exactly the trace's seconds
        if scheme == "uncoded":  # every worker finishes: its time from dispatch to send is the trace's
            np.testing.assert_allclose((w["send_s"] - w["dispatch_s"]).to_numpy().reshape(30, 4), x, rtol=0,
                                       atol=1e-12)
    it = res.iterations[res.iterations["scheme"] == "uncoded"]["duration_s"].to_numpy()
    np.testing.assert_allclose(it, x.max(axis=1), atol=1e-12)  # uncoded waits for the slowest worker


def test_real_executor_draws_are_the_trace(tmp_path):
    x = _trace(tmp_path)
    sc = load_scenario(_scenario(tmp_path))
    proc = StragglerProcess(sc.stragglers, 4, sc.seed)  # what gcsim real's master builds
    for t in (0, 6, 29):
        np.testing.assert_array_equal(proc.draw(t).delay_s, x[t])


def test_rule_error_names_the_field(tmp_path):
    _trace(tmp_path)
    with pytest.raises(ConfigError, match=r"stragglers\.replay\.rule: expected a trace with at least .*iterations=31"
                                          r".*trace has 4 workers x 30 iterations, got 'error'"):
        load_scenario(_scenario(tmp_path, iterations=31))
    with pytest.raises(ConfigError, match=r"stragglers\.replay\.rule: .*n_workers=6"):
        load_scenario(_scenario(tmp_path, n=6, schemes=("uncoded",)))


def test_wrap_rule(tmp_path):
    x = _trace(tmp_path)
    sc = load_scenario(_scenario(tmp_path, n=6, iterations=70, rule="wrap", schemes=("uncoded",)))
    b = StragglerProcess(sc.stragglers, 6, sc.seed).draw_block(range(70))
    for t in (0, 31, 69):
        np.testing.assert_array_equal(b.delay_s[t], x[t % 30][np.arange(6) % 4])


def test_block_bootstrap_rule(tmp_path):
    x = _trace(tmp_path)
    sc = load_scenario(_scenario(tmp_path, n=5, iterations=100, rule="block-bootstrap", schemes=("uncoded",)))
    p1 = StragglerProcess(sc.stragglers, 5, sc.seed)
    rows = p1.replay.rows(np.arange(100))
    np.testing.assert_array_equal(rows[:30], np.arange(30))  # the trace itself first
    for j in range(14):  # then 14 blocks of 5 consecutive trace rows, each inside the trace
        blk = rows[30 + 5 * j: 35 + 5 * j]
        assert np.all(np.diff(blk) == 1) and 0 <= blk[0] <= 25
    assert len({int(rows[30 + 5 * j]) for j in range(14)}) > 3  # the starts are drawn, not constant
    col4 = p1.replay.cols[4]
    assert 0 <= col4 < 4
    b = p1.draw_block(range(100))
    np.testing.assert_array_equal(b.delay_s[:, :4], x[rows][:, :4])
    np.testing.assert_array_equal(b.delay_s[:, 4], x[rows, col4])
    # keyed: a fresh process (another scheme, the real executor) replays the same rows, in any order
    p2 = StragglerProcess(sc.stragglers, 5, sc.seed)
    np.testing.assert_array_equal(p2.draw(77).delay_s, b.delay_s[77])


def test_slowdown_apply(tmp_path):
    x = _trace(tmp_path)
    sc = load_scenario(_scenario(tmp_path, apply="slowdown", schemes=("uncoded",)))
    b = StragglerProcess(sc.stragglers, 4, sc.seed).draw_block(range(30))
    np.testing.assert_allclose(b.slowdown, x / x.min())
    assert np.all(b.delay_s == 0)


def test_slowdown_reference_is_the_smallest_positive_time(tmp_path):
    # a 0 in the trace (a held or rounded value) must not change the reference the others divide by
    x = _trace(tmp_path)
    x[7, 1] = 0.0
    rows = ["worker,iteration,duration_ms"] + [f"{w},{t},{x[t, w] * 1000:.3f}" for t in range(30) for w in range(4)]
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    sc = load_scenario(_scenario(tmp_path, apply="slowdown", schemes=("uncoded",)))
    b = StragglerProcess(sc.stragglers, 4, sc.seed).draw_block(range(30))
    np.testing.assert_allclose(b.slowdown, x / x[x > 0].min())
    assert b.slowdown[7, 1] == 0.0


def test_unreadable_trace_is_one_line(tmp_path):
    (tmp_path / "trace.csv").write_text("worker,iteration,duration_ms\n0,0,x\n")
    with pytest.raises(ConfigError, match=r"stragglers\.replay\.file: expected a readable trace, got .*trace\.csv:2: "
                                          r"column 'duration_ms'"):
        load_scenario(_scenario(tmp_path))
