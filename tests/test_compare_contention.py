"""De-contention of measured compute times (processor sharing inverted on a trace) and the calibration
that uses it: hand-computed intervals, and exact recovery of the hidden CPU work from a contended
simulated run."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from factories import write_run_dir

from gcsim.compare.calibrate import calibrate, per_partition_compute, recorded_cores, run_cores
from gcsim.compare.contention import decontend
from gcsim.compare.rundir import read_run_dir
from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate


def _rows(starts, computes, sends=None, delays=None, slowdowns=None):
    k = len(starts)
    return pd.DataFrame({
        "iteration": np.zeros(k, int), "worker": np.arange(k), "n_partitions": np.ones(k, int),
        "compute_start_s": starts, "delay_s": delays if delays is not None else np.zeros(k),
        "compute_s": computes, "slowdown": slowdowns if slowdowns is not None else np.ones(k),
        "send_s": sends if sends is not None else np.full(k, np.nan),
    })


def test_decontend_by_hand():
    # 4 workers busy on [0, 0.2] with 2 cores: each got 0.1 CPU-s; then one alone on [0.2, 0.3]: +0.1
    w = _rows([0, 0, 0, 0, 0.05], [0.2, 0.2, 0.2, 0.2, 0.1], delays=[0, 0, 0, 0, 0.15])
    np.testing.assert_allclose(decontend(w, 2).partitions_s, [0.1] * 5, rtol=1e-12)
    # 1 core, A on [0, 0.3], B on [0.1, 0.3]: A = 0.1 alone + 0.2 / 2, B = 0.2 / 2
    w = _rows([0, 0.1], [0.3, 0.2])
    dec = decontend(w, 1)
    np.testing.assert_allclose(dec.partitions_s, [0.2, 0.1], rtol=1e-12)
    np.testing.assert_allclose(dec.mean_active, [5 / 3, 2], rtol=1e-12)
    # the per-call overhead runs from the end of the partitions to send_s, and contends too
    w = _rows([0, 0], [0.1, 0.1], sends=[0.14, 0.1])
    dec = decontend(w, 1)
    np.testing.assert_allclose(dec.partitions_s, [0.05, 0.05], rtol=1e-12)
    np.testing.assert_allclose(dec.overhead_s[0], 0.04, rtol=1e-12)
    # a slowed worker (f = 2) sleeps half its partition time: it counts half busy and half the CPU
    w = _rows([0, 0], [0.2, 0.2], slowdowns=[2.0, 1.0])
    np.testing.assert_allclose(decontend(w, 1).partitions_s, [0.2 / 1.5 / 2, 0.2 / 1.5], rtol=1e-12)
    with pytest.raises(ConfigError, match="^cores: expected"):
        decontend(w, 0)


def test_cancelled_rows_that_stopped_between_partitions_count_whole_partitions():
    # d = 3; finished rows: 0.03 s per partition; a cancelled row (real executor: it finishes the
    # partition in progress) computed 0.061 s -> 2 whole partitions of 0.0305 s, not censored
    wk = pd.DataFrame({
        "iteration": [0, 0, 0], "worker": [0, 1, 2], "n_partitions": [3, 3, 3], "compute_start_s": [0.0] * 3,
        "compute_s": [0.09, 0.093, 0.061], "delay_s": [0.0] * 3, "slowdown": [1.0] * 3,
        "send_s": [0.09, 0.093, np.nan], "status": ["arrived", "arrived", "cancelled"]})
    done, cens = per_partition_compute(wk, whole_partitions=True)[3]
    np.testing.assert_allclose(np.sort(done), [0.03, 0.0305, 0.031])
    assert cens.size == 0
    # without it, the same row is a right-censored lower bound of 0.061 / 3 per partition
    done, cens = per_partition_compute(wk)[3]
    np.testing.assert_allclose(cens, [0.061 / 3])


def _contended_run(tmp_path, granularity, cores=2):
    sc = validate_scenario({
        "name": "contended", "n_workers": 6, "iterations": 60, "seed": 4,
        "schemes": [{"name": "cce-fr", "s": 1, "m": 2}],
        "workload": {"gradient_bytes": 1e6, "model_bytes": 1e6, "compute": {"dist": "constant", "value": 0.03},
                     "cores": cores, "call_overhead": {"dist": "constant", "value": 0.002}},
        "network": {"latency_s": 0.001, "bandwidth_bytes_per_s": 1e9},
        "stragglers": {"delay": {"dist": "bimodal", "p": 0.2, "delay": 0.3}},
        "policy": "cancel", "cancel_latency_s": 0.001, "cancel_granularity": granularity,
        "master": {"decode_s": {"dist": "constant", "value": 0.003}},
    })
    res = simulate(sc)
    path = write_run_dir(tmp_path / f"run-{granularity}", {"cce-fr": (res.iterations, res.workers)}, n=6,
                         executor="sim", config=sc.resolved(), params={"cce-fr": (1, 2)})
    return read_run_dir(path), res


@pytest.mark.parametrize("granularity", ["immediate", "partition"])
def test_calibration_recovers_the_hidden_cpu_work_of_a_contended_run(tmp_path, granularity):
    run, res = _contended_run(tmp_path, granularity)
    w = res.workers
    raw = (w.compute_s / w.n_partitions)[w.send_s.notna()]
    assert raw.max() > 2.5 * raw.min()  # measured per-partition times spread 0.03 .. 0.09 s under contention
    assert run_cores(run) == 2.0
    cal = calibrate(run, warmup=5)
    assert cal.cores == 2.0 and cal.cancel_granularity == granularity
    np.testing.assert_allclose(cal.compute_values_s, 0.03, rtol=1e-9)  # d = 3: mean and spread both exact
    np.testing.assert_allclose(cal.overhead_values_s, 0.002, rtol=1e-9)
    # the old reading (contention ignored) sees a slower, wider compute distribution
    naive = calibrate(run, warmup=5, contention=False)
    assert naive.cores is None and naive.compute_values_s.mean() > 1.5 * 0.03


def test_recorded_cores():
    class _Run:
        n_workers = 6

        def __init__(self, meta, config):  # config: the config.yaml fields read (workload.cores)
            self.meta = meta
            self.scenario = SimpleNamespace(workload=SimpleNamespace(cores=config.get("workload", {}).get("cores")))

    assert recorded_cores(_Run({"usable_cpus": 2, "host_cpus": 8}, {})) == 2.0
    assert recorded_cores(_Run({"host_cpus": 4}, {"workload": {"cores": 1}})) == 4.0
    assert recorded_cores(_Run({}, {"workload": {"cores": 1.5}})) == 1.5
    assert recorded_cores(_Run({"host_cpus": True}, {})) is None
    assert run_cores(_Run({"host_cpus": 8}, {})) is None  # a core per worker: no contention
    assert run_cores(_Run({"host_cpus": 2}, {})) == 2.0
