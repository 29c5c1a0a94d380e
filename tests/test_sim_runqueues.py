"""CPU contention with one run queue per core (`workload.scheduler: per-core`): the resource on
hand-computed cases, and the engine with it."""

import numpy as np
import pytest
import simpy

from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate
from gcsim.sim.runqueues import PerCoreQueues


def _run(cores, jobs, interrupts=(), set_cores=()):
    """jobs: [(start_s, work_s, owner)] run one after another per owner when an owner repeats with
    start None (it goes on at the instant its previous job ended); interrupts: [(job index, at_s)];
    set_cores: [(at_s, cores)]. Returns (end instants, CPU received, the resource)."""
    env = simpy.Environment()
    cpu = PerCoreQueues(env, cores)
    ends = [np.nan] * len(jobs)
    got = [np.nan] * len(jobs)
    procs = {}

    def chain(indices):
        for i in indices:
            start, work, owner = jobs[i]
            if start is not None:
                yield env.timeout(start - env.now)
            ev = cpu.execute(work, owner)
            try:
                yield ev
                ends[i], got[i] = env.now, work
            except simpy.Interrupt:
                got[i] = cpu.withdraw(ev)
                return

    by_owner: dict = {}
    for i, (_, _, owner) in enumerate(jobs):
        by_owner.setdefault(owner, []).append(i)
    for owner, idx in by_owner.items():
        procs[owner] = env.process(chain(idx))

    def interrupter(i, at):
        yield env.timeout(at)
        procs[jobs[i][2]].interrupt()

    def changer(at, c):
        yield env.timeout(at)
        cpu.set_cores(c)

    for i, at in interrupts:
        env.process(interrupter(i, at))
    for at, c in set_cores:
        env.process(changer(at, c))
    env.run()
    return np.array(ends), np.array(got), cpu


def test_three_jobs_on_two_cores_run_two_plus_one():
    # A -> core 0, B -> core 1 (idle), C -> no idle core, a new owner: the fewest jobs, core 0.
    # A and C at 1/2, B at 1: B ends at 1.0; core 1 runs empty and takes C (the newest of core 0);
    # A and C have 0.5 left at full speed: both end at 1.5 (processor sharing: all three at 1.5)
    ends, got, _ = _run(2, [(0, 1.0, "a"), (0, 1.0, "b"), (0, 1.0, "c")])
    np.testing.assert_allclose(ends, [1.5, 1.0, 1.5], rtol=1e-12)
    np.testing.assert_allclose(got, 1.0)


def test_a_worker_that_goes_on_keeps_its_core():
    # B's second job starts the instant its first ends (its next partition): it stays on core 1 and
    # core 0 keeps A and C (core 1 is empty only within that instant: no job is pulled over to it).
    # t=0.5: B's first ends (0.5 at rate 1), its second (1.0) runs alone on core 1 -> ends 1.5; A and C
    # at 1/2 have 0.75 done then; core 1 runs empty and takes C: both finish 0.25 at full speed -> 1.75.
    # (Balanced at once when B's first ended, C would have moved to core 1 and B shared it with C.)
    ends, _, _ = _run(2, [(0, 1.0, "a"), (0, 0.5, "b"), (0, 1.0, "c"), (None, 1.0, "b")])
    np.testing.assert_allclose(ends, [1.75, 0.5, 1.75, 1.5], rtol=1e-12)


def test_a_woken_worker_returns_to_its_core_when_none_is_idle():
    # A and B on cores 0 and 1 from t=0 (A: 3 s, B: 0.2 s); C arrives at 0.1 (no idle core, new owner:
    # fewest -> core 0, tie to the lowest index). B ends at 0.2: core 1 empty -> takes C (newest of
    # core 0). B wakes again at 0.5 with work 1.0: no idle core, its previous core 1 (with C) -> B and
    # C share core 1 while A has core 0 alone.
    jobs = [(0, 3.0, "a"), (0, 0.2, "b"), (0.1, 1.0, "c"), (0.5, 1.0, "b")]
    ends, _, cpu = _run(2, jobs)
    # C: 0.1-0.2 at 1/2 (0.05), 0.2-0.5 alone (0.3) -> 0.65 left at 0.5 -> ends 0.5 + 1.3 = 1.8;
    # B: 1.0 at 1/2 until 1.8 (0.65 done), then alone 0.35 -> ends 2.15
    # A: 0-0.1 alone 0.1, 0.1-0.2 at 1/2 0.05, then alone from 0.2: 2.85 left -> ends 3.05
    np.testing.assert_allclose(ends, [3.05, 0.2, 1.8, 2.15], rtol=1e-12)
    assert cpu.active == 0 and cpu.queue_lengths() == [0, 0]


def test_withdraw_returns_the_cpu_received_and_rebalances():
    # A, B, C on 2 cores as in the first test; C withdrawn at 0.4: it got 0.2 (at 1/2); A alone again
    ends, got, _ = _run(2, [(0, 1.0, "a"), (0, 1.0, "b"), (0, 1.0, "c")], interrupts=[(2, 0.4)])
    assert got[2] == pytest.approx(0.2, rel=1e-12)
    # A: 0.2 by 0.4, then 0.8 at rate 1 -> 1.2; B: alone on core 1 -> 1.0
    np.testing.assert_allclose(ends[:2], [1.2, 1.0], rtol=1e-12)


def test_other_processes_take_an_idle_core_first():
    # 2 cores, one job alone, other processes take 0.5 cores: the idle core absorbs them, the job runs
    # at full speed (1 CPU-s in 1 s); taking 1.5 cores: the idle core absorbs 1, the busy one gives
    # up 0.5 -> 1 CPU-s in 2 s
    ends, _, _ = _run(2, [(0, 1.0, "a")], set_cores=[(0, 1.5)])
    np.testing.assert_allclose(ends, [1.0], rtol=1e-12)
    ends, _, _ = _run(2, [(0, 1.0, "a")], set_cores=[(0, 0.5)])
    np.testing.assert_allclose(ends, [2.0], rtol=1e-12)
    # two jobs, one per core, no idle core: the 0.5 cores come in equal parts from both -> 0.75 each
    ends, _, cpu = _run(2, [(0, 1.0, "a"), (0, 1.0, "b")], set_cores=[(0, 1.5)])
    np.testing.assert_allclose(ends, [1.0 / 0.75] * 2, rtol=1e-12)
    assert cpu.queue_capacities() == [0.5, 1.0]  # no job left: the others' 0.5 cores sit on the first idle core


def test_bad_cores_and_work_are_refused():
    env = simpy.Environment()
    with pytest.raises(ConfigError, match="workload.cores"):
        PerCoreQueues(env, 0)
    with pytest.raises(ValueError, match="work_s"):
        PerCoreQueues(env, 2).execute(-1.0)


def _scenario(scheduler):
    return validate_scenario({
        "name": "rq", "n_workers": 3, "iterations": 1, "seed": 1, "schemes": [{"name": "uncoded"}],
        "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 1.0}, "cores": 2,
                     "scheduler": scheduler},
        "stragglers": {"delay": None},
    })


def test_the_engine_runs_three_workers_two_plus_one():
    # 3 workers of 1 CPU-s on 2 cores: per-core, worker 1 alone on core 1 ends at 1.0, workers 0 and
    # 2 at 1.5 (the same iteration time as processor sharing, where all three end at 1.5)
    res = simulate(_scenario("per-core"), progress=False)
    np.testing.assert_allclose(res.workers["compute_s"].to_numpy(), [1.5, 1.0, 1.5], rtol=1e-12)
    np.testing.assert_allclose(res.workers["compute_cpu_s"].to_numpy(), 1.0, rtol=1e-12)
    ps = simulate(_scenario("processor-sharing"), progress=False)
    np.testing.assert_allclose(ps.workers["compute_s"].to_numpy(), 1.5, rtol=1e-12)
    np.testing.assert_allclose(res.iterations["duration_s"], ps.iterations["duration_s"], rtol=1e-12)


def test_a_bad_scheduler_names_the_field():
    with pytest.raises(ConfigError, match=r"workload\.scheduler.*per-core.*'fair'"):
        _scenario("fair")


def test_per_core_needs_cores():
    sc = {"name": "rq", "n_workers": 3, "iterations": 1, "schemes": [{"name": "uncoded"}],
          "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 1.0}, "scheduler": "per-core"}}
    with pytest.raises(ConfigError, match=r"workload\.scheduler: expected per-core only with workload\.cores"):
        validate_scenario(sc)
    sc["workload"]["scheduler"] = "processor-sharing"  # the default, harmless without cores
    assert validate_scenario(sc).workload.cores is None


def test_a_fractional_capacity_is_spread_over_the_whole_cores():
    # floor(cores) queues of cores/k each: 2.01 cores are two queues of 1.005, so a job alone runs at one
    # core (ceil would give three queues of 0.67 and a lone job 1.5 x slower)
    ends, _, cpu = _run(2.01, [(0, 0.1, "a")])
    assert cpu.n_queues == 2
    np.testing.assert_allclose(ends, [0.1], rtol=1e-12)
    # 2.5 cores: two queues of 1.25. A -> q0, B -> q1, C (new, no idle queue) -> q0 with A: 0.625 each
    # while B runs at 1 and ends at 1.0; q1 runs empty, C moves there: A and C each have 0.375 left at
    # one core -> 1.375 (processor sharing: 2.5/3 each, all at 1.2)
    ends, _, cpu = _run(2.5, [(0, 1.0, "a"), (0, 1.0, "b"), (0, 1.0, "c")])
    assert cpu.queue_capacities() == [1.25, 1.25]
    np.testing.assert_allclose(ends, [1.375, 1.0, 1.375], rtol=1e-12)
    # less than a core: one queue of 0.5 -> 1 CPU-s in 2 s
    ends, _, cpu = _run(0.5, [(0, 1.0, "a")])
    assert cpu.n_queues == 1
    np.testing.assert_allclose(ends, [2.0], rtol=1e-12)
