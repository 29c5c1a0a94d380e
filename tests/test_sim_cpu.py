"""CPU contention: the processor-sharing resource on hand-computed cases, and the engine with `cores`."""

import numpy as np
import pytest
import simpy
from factories import shared_cpu_scenario

from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.cpu import ProcessorSharing
from gcsim.sim.engine import simulate


def _run_jobs(cores, jobs, interrupts=()):
    """jobs: [(start_s, work_s)]; interrupts: [(job index, at_s)]. Returns (end instants, CPU received)."""
    env = simpy.Environment()
    cpu = ProcessorSharing(env, cores)
    ends = [np.nan] * len(jobs)
    got = [np.nan] * len(jobs)
    procs = []

    def job(i, start, work):
        yield env.timeout(start)
        ev = cpu.execute(work)
        try:
            yield ev
            ends[i], got[i] = env.now, work
        except simpy.Interrupt:
            got[i] = cpu.withdraw(ev)

    def interrupter(i, at):
        yield env.timeout(at)
        procs[i].interrupt()

    procs.extend(env.process(job(i, s, w)) for i, (s, w) in enumerate(jobs))
    for i, at in interrupts:
        env.process(interrupter(i, at))
    env.run()
    return np.array(ends), np.array(got)


def test_equal_jobs_share_the_cores():
    # 4 jobs of 1 CPU-s on 2 cores: rate 1/2 each, all end at 2 s; one job alone: 1 s
    ends, _ = _run_jobs(2, [(0, 1.0)] * 4)
    np.testing.assert_allclose(ends, 2.0, rtol=1e-12)
    ends, _ = _run_jobs(2, [(0, 1.0)])
    np.testing.assert_allclose(ends, 1.0, rtol=1e-12)
    # fewer jobs than cores: no slowdown
    ends, _ = _run_jobs(4, [(0, 1.0), (0, 0.5)])
    np.testing.assert_allclose(ends, [1.0, 0.5], rtol=1e-12)
    # a fractional (effective) capacity: 3 jobs on 1.5 cores run at 1/2
    ends, _ = _run_jobs(1.5, [(0, 1.0)] * 3)
    np.testing.assert_allclose(ends, 2.0, rtol=1e-12)


def test_staggered_starts_by_hand():
    # 1 core; A (1 CPU-s) alone on [0, 0.5): 0.5 done; then A and B at 1/2: A's remaining 0.5 takes
    # 1 s -> A ends at 1.5; B got 0.5 by then and its last 0.5 runs alone -> B ends at 2.0
    ends, _ = _run_jobs(1, [(0, 1.0), (0.5, 1.0)])
    np.testing.assert_allclose(ends, [1.5, 2.0], rtol=1e-12)
    # 2 cores, works 1, 2, 3 from 0: rate 2/3 until job 1 ends at 1.5 (each has 1 CPU-s);
    # then 2 jobs at rate 1: job 2 ends at 2.5, job 3 has 1 CPU-s left alone -> 3.5
    ends, _ = _run_jobs(2, [(0, 1.0), (0, 2.0), (0, 3.0)])
    np.testing.assert_allclose(ends, [1.5, 2.5, 3.5], rtol=1e-12)


def test_withdrawn_job_frees_its_share():
    # 1 core, two jobs of 1 CPU-s from 0; B withdrawn at 0.5 (got 0.25); A has 0.75 left alone -> 1.25
    ends, got = _run_jobs(1, [(0, 1.0), (0, 1.0)], interrupts=[(1, 0.5)])
    assert ends[0] == pytest.approx(1.25, rel=1e-12) and np.isnan(ends[1])
    assert got[1] == pytest.approx(0.25, rel=1e-12)


def test_zero_work_and_bad_capacity():
    ends, _ = _run_jobs(1, [(0.3, 0.0)])
    assert ends[0] == 0.3
    env = simpy.Environment()
    for bad in (0, -1, float("inf"), True, "2"):
        with pytest.raises(ConfigError, match=r"^workload\.cores: expected"):
            ProcessorSharing(env, bad)


def _scenario(**workload):
    return shared_cpu_scenario(6, **workload)


def test_engine_shares_cores_and_slowdown_is_idle_time():
    # 4 workers, one partition of 0.1 CPU-s each, 2 cores: every partition ends at 0.2 s (rate 1/2);
    # worker 3 (scale 3) then idles 2 x 0.2 s (slowdown is a sleep, as in the real executor) -> 0.6 s
    res = simulate(validate_scenario(_scenario(cores=2)))
    d = res.iterations.set_index(["scheme", "iteration"])["duration_s"]
    np.testing.assert_allclose(d["uncoded"], 0.6, rtol=1e-12)
    np.testing.assert_allclose(d["ignore-stragglers"], 0.2, rtol=1e-12)
    w = res.workers[res.workers.scheme == "uncoded"]
    np.testing.assert_allclose(w.compute_s, np.tile([0.2, 0.2, 0.2, 0.6], 6), rtol=1e-12)
    # ignore-stragglers cancels worker 3 at 0.2 s, during its idle time: it computed 0.2 s wall
    wi = res.workers[res.workers.scheme == "ignore-stragglers"]
    assert set(wi[wi.worker == 3].status) == {"cancelled"}
    # without contention (cores=None) the same scenario takes max(0.1, 0.3) and 0.1
    free = simulate(validate_scenario(_scenario())).iterations.set_index(["scheme", "iteration"])["duration_s"]
    np.testing.assert_allclose(free["uncoded"], 0.3, rtol=1e-12)
    np.testing.assert_allclose(free["ignore-stragglers"], 0.1, rtol=1e-12)


def test_call_overhead_is_cpu_work_before_sending():
    # 4 workers x (0.1 + 0.02 overhead) CPU-s on 1 core, no slowdown: all done at 4 x 0.12 = 0.48 s
    sc = _scenario(cores=1, call_overhead={"dist": "constant", "value": 0.02})
    sc["stragglers"] = {}
    res = simulate(validate_scenario(sc))
    np.testing.assert_allclose(res.iterations.query("scheme == 'uncoded'").duration_s, 0.48, rtol=1e-12)
    # compute_s records only the partitions' wall time: 4 x 0.1 at rate 1/4 = 0.4 s
    np.testing.assert_allclose(res.workers.query("scheme == 'uncoded'").compute_s, 0.4, rtol=1e-12)


def test_enough_cores_reproduce_the_uncontended_model():
    # cores >= n: the rate is always 1, so iteration times equal the cores=None model exactly
    base = {"name": "heavy", "n_workers": 6, "iterations": 40, "seed": 7,
            "schemes": [{"name": "uncoded"}, {"name": "gc-fr", "s": 1}, {"name": "cce-fr", "s": 1, "m": 2}],
            "workload": {"gradient_bytes": 1e6, "model_bytes": 1e6,
                         "compute": {"dist": "expon", "scale": 0.05}},
            "network": {"latency_s": 0.001, "bandwidth_bytes_per_s": 1e9},
            "stragglers": {"delay": {"dist": "bimodal", "p": 0.2, "delay": 0.5}}, "policy": "carry-over"}
    free = simulate(validate_scenario(base)).iterations
    base["workload"]["cores"] = 6
    shared = simulate(validate_scenario(base)).iterations
    np.testing.assert_allclose(shared.duration_s, free.duration_s, rtol=1e-9, atol=1e-12)
    # and fewer cores make every scheme slower on average
    base["workload"]["cores"] = 2
    slow = simulate(validate_scenario(base)).iterations.groupby("scheme").duration_s.mean()
    assert (slow > free.groupby("scheme").duration_s.mean()).all()


def test_cores_field_is_validated():
    for bad in (0, -2, "two"):
        with pytest.raises(ConfigError, match=r"^workload\.cores: "):
            validate_scenario(_scenario(cores=bad))


@pytest.mark.parametrize("granularity, starts", [("immediate", [0.0, 0.2, 0.4, 0.6]),
                                                 ("partition", [0.0, 0.25, 0.5, 0.75])])
def test_cancel_granularity_by_hand(granularity, starts):
    # gc-fr, n=2, s=1: each worker computes 2 partitions, the first arrival decodes. Worker 0 takes
    # 0.1 s per partition, worker 1 (scale 2.5) 0.25 s. Every iteration ends at worker 0's 0.2 s; the
    # cancel finds worker 1 inside its first partition: 'immediate' frees it at once, 'partition' when
    # that partition ends, 0.25 s after it started, so worker 1 starts iteration t at 0.25 t.
    d = {"name": "gran", "n_workers": 2, "iterations": 4, "seed": 0, "schemes": [{"name": "gc-fr", "s": 1}],
         "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.1}},
         "stragglers": {"worker_scale": [1, 2.5]}, "cancel_granularity": granularity}
    res = simulate(validate_scenario(d))
    np.testing.assert_allclose(res.iterations.duration_s, 0.2, rtol=1e-12)
    w1 = res.workers[res.workers.worker == 1]
    np.testing.assert_allclose(w1.compute_start_s, starts, rtol=1e-12, atol=1e-12)
    assert set(w1.status) == {"cancelled"}
