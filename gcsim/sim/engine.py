"""The discrete-event model of synchronous training with stragglers (SimPy 4.1.2).

One :class:`simpy.Environment` per scheme; all schemes see the same draws (common random numbers,
:mod:`gcsim.stragglers`). One iteration ``t`` (times in seconds):

1. the master starts at ``start_s`` (the end of ``t-1``) and sends the model: every worker has it
   at ``dispatch_s = start_s + latency_s + model_bytes / bandwidth_bytes_per_s``;
2. worker ``w`` starts at ``compute_start_s = max(dispatch_s, the moment it is free)``, waits its
   additive straggler delay ``delay_s``, then computes its partitions ``scheme.assignment(t)[w]`` in
   order, the q-th costing ``compute[t, w, q] × slowdown[t, w]`` (``slowdown`` includes the per-worker
   scale and the persistent slow state);
3. each message ``scheme.messages(t)`` leaves after its worker has computed all its partitions and
   arrives ``latency_s + gradient_bytes × payload_fraction / bandwidth_bytes_per_s`` later (no link
   contention);
4. the master waits on a :class:`simpy.Condition` over the iteration's arrival events whose
   ``evaluate`` is "``scheme.decode(arrived in order, t)`` is not None" (``decodable_s``), then spends
   the master's ``decode_s`` draw: ``end_s``;
5. unfinished work: ``cancel`` – the master's cancel reaches stragglers ``cancel_latency_s`` after
   ``decodable_s`` and they drop the iteration (messages already on the wire still arrive, late);
   with ``cancel_granularity: partition`` a worker computing a partition notices the cancel only when
   that partition ends (as the real executor's workers do; one in its delay stops at once);
   ``carry-over`` – stragglers finish (and send) their stale work first, like a synchronous Ray
   actor running queued calls in order, so they start iteration ``t+1`` late.

CPU contention (``workload.cores`` set): the workers share that many cores through one
:class:`gcsim.sim.cpu.ProcessorSharing` resource. Each partition is a CPU job of
``compute[t, w, q]`` CPU-seconds that progresses at ``min(1, cores / A)`` while ``A`` jobs run; a
slowdown ``f > 1`` is idle time ``(f - 1) ×`` the partition's wall time after it (what the real
executor does: it sleeps, using no CPU), ``f < 1`` scales the CPU work; the optional per
worker-iteration ``workload.call_overhead`` is one more CPU job after the last partition, before the
last message(s) leave. Delays and transfers use no CPU. ``compute_s`` then records the wall seconds
the worker spent in its partitions (what the real executor measures; partial when cancelled).
``cpu_s`` records the CPU work the worker-iteration received (its partitions' CPU work plus the call
overhead; what was done before a cancel when cancelled) and ``compute_cpu_s`` the partitions' part;
without ``workload.cores`` both are the partitions' drawn work ``Σ compute × slowdown`` (no overhead job).

Without carry-over and with ``cancel_latency_s`` no longer than the master's decode + model
broadcast, iterations are i.i.d. and the iteration time is ``model transfer + (the first instant the
arrived set is decodable) + decode`` – the order-statistic structure of Tandon et al., ICML 2017, §5
and Lee et al., IEEE Trans. Inf. Theory 2018, §III.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import simpy
from simpy.events import Condition

from gcsim import streams
from gcsim.errors import ConfigError, SchemeError
from gcsim.latency import build_distribution
from gcsim.scenario import Scenario
from gcsim.schemes import Scheme
from gcsim.sim.cpu import ProcessorSharing
from gcsim.sim.runqueues import PerCoreQueues
from gcsim.sim.progress import iteration_ticker
from gcsim.stragglers import DrawBlock, StragglerProcess, master_rng
from gcsim.trace import ITERATION_COLUMNS, WORKER_COLUMNS, summarize, trace_frame

#: Most (iteration, worker, scheme) rows one run may produce: they are all held in memory (~0.5 KB
#: each at the peak, while workers.csv is written) and written to workers.csv (~90 bytes each).
MAX_WORKER_ROWS = 10_000_000
#: Longest simulated run (seconds): 2**33 s, where float64 instants still resolve 2**-19 s (< 2 µs).
MAX_RUN_S = float(2**33)

_ARRIVED, _LATE, _CANCELLED = 0, 1, 2
_STATUS = np.array(["arrived", "late", "cancelled"])


@dataclass
class SimResult:
    """Outcome of :func:`simulate`.

    Attributes:
        scenario: the scenario actually simulated (overrides applied).
        schemes: label -> built :class:`~gcsim.schemes.Scheme`.
        iterations: :data:`gcsim.trace.ITERATION_COLUMNS`, one row per (scheme, iteration).
        workers: :data:`gcsim.trace.WORKER_COLUMNS`, one row per (scheme, iteration, worker).
        summary: :data:`gcsim.trace.SUMMARY_COLUMNS`, one row per scheme.
        wall_s: wall-clock seconds the simulation took.
        loads: label -> :meth:`Scheme.describe` (n, k, s, m, seed, exact, computation_load in
            partitions, communication_load as a fraction of the gradient length, messages_per_worker).
    """

    scenario: Scenario
    schemes: dict[str, Scheme]
    iterations: pd.DataFrame
    workers: pd.DataFrame
    summary: pd.DataFrame
    wall_s: float = 0.0
    loads: dict[str, dict] = field(default_factory=dict)
    #: label -> the decodes refused at run time (:class:`gcsim.schemes.base.Refusal`, issue 16): one
    #: ``(iteration, Refusal)`` per arrived set an exact scheme refused (the master then waited for one
    #: more arrival); ``summary["refusals"]`` counts the iterations that had at least one.
    refusals: dict[str, list] = field(default_factory=dict)
    #: which engine computed it (``"simpy"`` here; ``"vector"`` for :mod:`gcsim.sim.vector`) and the trace
    #: level the run directory writes (``full``: iterations.csv + workers.csv; ``iterations``; ``none``).
    engine: str = "simpy"
    trace: str = "full"


def apply_overrides(scenario: Scenario, *, schemes: Sequence[str] | None = None, iterations: int | None = None,
                    seed: int | None = None) -> Scenario:
    """The scenario with CLI overrides applied (scheme labels/names to keep, iterations, seed).

    Raises:
        ConfigError: unknown scheme in ``schemes``, iterations < 1, seed outside [0, 2**32).
    """
    update: dict = {}
    if iterations is not None:
        if isinstance(iterations, bool) or int(iterations) != iterations or iterations < 1:
            raise ConfigError("iterations", "an integer >= 1", iterations)
        update["iterations"] = int(iterations)
    if seed is not None:
        if isinstance(seed, bool) or int(seed) != seed or not 0 <= seed < 2**32:
            raise ConfigError("seed", "an integer in [0, 2**32)", seed)
        update["seed"] = int(seed)
    if schemes is not None:
        wanted = [s.strip() for s in schemes if s.strip()]
        keys = [sp.key for sp in scenario.schemes]
        for w in wanted:
            if w not in keys and w not in [sp.name for sp in scenario.schemes]:
                raise ConfigError("schemes", f"names from the scenario ({', '.join(keys)})", w)
        if not wanted:
            raise ConfigError("schemes", f"at least one of {', '.join(keys)}", ",".join(schemes))
        update["schemes"] = [sp for sp in scenario.schemes if sp.key in wanted or sp.name in wanted]
    return scenario.model_copy(update=update) if update else scenario


def simulate(scenario: Scenario, *, schemes: Sequence[str] | None = None, iterations: int | None = None,
             seed: int | None = None, progress: bool | Callable[[int], None] = False) -> SimResult:
    """Simulate every scheme of ``scenario`` (see the module docstring for the model).

    Args:
        scenario: a validated :class:`~gcsim.scenario.Scenario`.
        schemes: labels (or names) of the scenario's schemes to run (default: all).
        iterations, seed: override the scenario's values.
        progress: True for a tqdm bar on stderr, or a callable receiving iteration counts to add.
    Returns:
        :class:`SimResult` (DataFrames in the :mod:`gcsim.trace` format; times in seconds).
    Raises:
        ConfigError: bad overrides; more than :data:`MAX_WORKER_ROWS` worker rows (field ``iterations``);
            a distribution drawing a non-finite value, or a run longer than :data:`MAX_RUN_S` seconds
            (field of the responsible distribution). SchemeError: a scheme cannot decode even with
            every message.
    """
    t0 = time.perf_counter()
    sc = apply_overrides(scenario, schemes=schemes, iterations=iterations, seed=seed)
    check_run_size(sc)
    built = sc.build_schemes()
    n, I = sc.n_workers, sc.iterations
    max_load = max(max(len(a) for a in sch.assignment(0)) for sch in built.values())
    for sch in built.values():
        max_load = max(max_load, sch.computation_load)
    overhead = sc.workload.call_overhead
    process = StragglerProcess(sc.stragglers, n, sc.seed, compute=build_distribution(sc.workload.compute),
                               call_overhead=build_distribution(overhead) if overhead is not None else None,
                               speed_variation=sc.workload.speed_variation)
    block = process.draw_block(range(I), max_load)
    decode_dist = build_distribution(sc.master.decode_s)
    decode_s = np.array([decode_dist.from_uniform(master_rng(sc.seed, t).random((1, decode_dist.n_uniforms)))[0]
                         for t in range(I)], dtype=np.float64)
    _check_finite_draws(sc, block, decode_s)

    it_frames, w_frames, refusals = [], [], {}
    with iteration_ticker(progress, I * len(built), "simulate") as tick:
        for label, sch in built.items():
            it_df, w_df = _simulate_scheme(label, sch, sc, block, decode_s, tick)
            refusals[label] = it_df.attrs.pop("refusals", [])
            it_frames.append(it_df)
            w_frames.append(w_df)
    iterations_df = pd.concat(it_frames, ignore_index=True)
    _check_run_length(sc, block, decode_s, float(iterations_df["end_s"].max()))
    workers_df = pd.concat(w_frames, ignore_index=True)
    loads = {label: sch.describe() for label, sch in built.items()}
    summary = summarize(iterations_df, loads, {k: len({it for it, _ in v}) for k, v in refusals.items()})
    return SimResult(scenario=sc, schemes=built, iterations=iterations_df, workers=workers_df, summary=summary,
                     wall_s=time.perf_counter() - t0, loads=loads, refusals=refusals)


def check_run_size(scenario: Scenario) -> None:
    """Refuse a run of more than :data:`MAX_WORKER_ROWS` (iteration, worker, scheme) rows before any
    work (every row is held in memory and written to ``workers.csv``).

    Raises:
        ConfigError: field ``iterations``, naming the largest allowed value for this scenario.
    """
    n, k = scenario.n_workers, len(scenario.schemes)
    rows = scenario.iterations * n * k
    if rows > MAX_WORKER_ROWS:
        most = MAX_WORKER_ROWS // (n * k)
        raise ConfigError("iterations", f"at most {most} for n_workers={n} and {k} schemes (iterations x n_workers "
                          f"x schemes <= {MAX_WORKER_ROWS} rows, all held in memory and written to workers.csv; "
                          f"simulate fewer schemes with --schemes)", scenario.iterations)


def _first_bad(values: np.ndarray) -> tuple[int, ...] | None:
    # a broadcast axis (stride 0: e.g. a constant compute time over (I, n, P)) is checked at index 0 only,
    # where the first bad index along it lies anyway (0.4 s for gc-cr at n = 256 x 10,000 otherwise)
    values = values[tuple(slice(0, 1) if st == 0 and ln > 1 else slice(None)
                          for st, ln in zip(values.strides, values.shape))]
    bad = np.argwhere(~np.isfinite(values))
    return tuple(int(x) for x in bad[0]) if len(bad) else None


def _check_finite_draws(sc: Scenario, block: DrawBlock, decode_s: np.ndarray) -> None:
    """Raise ConfigError naming the distribution whose draw overflowed (inf/NaN seconds)."""
    checks = [("stragglers.delay", block.delay_s), ("stragglers.slowdown", block.slowdown),
              ("workload.compute", block.compute_s), ("master.decode_s", decode_s[:, None])]
    if block.call_overhead_s is not None:
        checks.append(("workload.call_overhead", block.call_overhead_s))
    for field_name, values in checks:
        where = _first_bad(values)
        if where is not None:
            if field_name == "stragglers.slowdown" and sc.stragglers.slowdown is None:
                field_name = "stragglers.persistent.slowdown"
            detail = f"iteration {where[0]}" + (f", worker {where[1]}" if field_name != "master.decode_s" else "")
            raise ConfigError(field_name, "a distribution whose draws are finite seconds",
                              _Given(f"{values[where]} ({detail})"))


def _check_run_length(sc: Scenario, block: DrawBlock, decode_s: np.ndarray, run_s: float) -> None:
    """Raise ConfigError when the run outlasts :data:`MAX_RUN_S` (float64 instants would no longer resolve
    the iteration times), naming the distribution with the largest draw."""
    if not run_s > MAX_RUN_S:
        return
    work = block.compute_s * block.slowdown[:, :, None] if block.compute_s.size else np.zeros(1)
    net = sc.network
    transfer_s = (sc.workload.model_bytes + sc.workload.gradient_bytes) / net.bandwidth_bytes_per_s
    largest = {"stragglers.delay": float(block.delay_s.max(initial=0.0)),
               "workload.compute": float(work.max(initial=0.0)),
               "master.decode_s": float(decode_s.max(initial=0.0)),
               "network.latency_s": 2 * net.latency_s,
               "network.bandwidth_bytes_per_s": transfer_s}
    field_name = max(largest, key=largest.get)
    raise ConfigError(field_name, f"draws that keep the simulated run under {MAX_RUN_S:.3g} s (float64 instants "
                      f"then resolve microseconds)",
                      _Given(f"a run of {run_s:.3g} s (largest time per iteration from it {largest[field_name]:.3g} s)"))


class _Given(str):
    """A given value printed as is (no quotes) in error messages."""

    def __repr__(self) -> str:
        return str(self)


class _Plans:
    """Per-iteration worker plans: for worker w, segments ``(partitions computed so far, [message ids])``.
    Cached by the identity of the scheme's assignment/message lists (static schemes build once)."""

    def __init__(self, scheme: Scheme):
        self.scheme = scheme
        self._key = None
        self._val = None

    def at(self, it: int):
        assign = self.scheme.assignment(it)
        msgs = self.scheme.messages(it)
        key = (tuple(map(tuple, assign)), id(msgs))
        if key != self._key:
            segs = []
            for w in range(len(assign)):
                by_after: dict[int, list[int]] = {}
                for msg in msgs:
                    if msg.worker == w:
                        by_after.setdefault(len(assign[w]), []).append(msg.id)
                bounds = sorted(set(by_after) | {len(assign[w])})
                segs.append([(b, by_after.get(b, [])) for b in bounds])
            n_msgs_of = np.bincount([m.worker for m in msgs], minlength=len(assign))
            self._key, self._val = key, (assign, msgs, segs, n_msgs_of)
        return self._val


#: key of the per worker-iteration dispatch stream (``network.dispatch``), apart from the straggler streams
DISPATCH_STREAM = streams.DISPATCH
#: key of the per-iteration background-CPU stream (``workload.background``)
BACKGROUND_STREAM = streams.BACKGROUND
#: Share of a core a niceness-15 worker keeps against a busy niceness-0 process under Linux CFS
#: (weights 36 and 1024, ``sched_prio_to_weight`` in kernel/sched/core.c).
NICE15_SHARE = 36.0 / (1024.0 + 36.0)


def background_draws(sc: Scenario) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(wait, finish, per_iteration)``, each ``(I,)``: the steady cores other processes take while the
    master waits / finishes, and the CPU-seconds of per-iteration work they run at priority
    (``workload.background``), or None when unset. Drawn from the keyed stream
    ``default_rng([seed, BACKGROUND_STREAM, iteration])`` (``wait``, ``finish``, ``per_iteration_cpu_s``
    in that order; an unset one uses no uniforms), so every other draw is the same with or without it.

    Raises:
        ConfigError: field ``workload.background.<name>`` when a draw is negative or not finite.
    """
    bg = sc.workload.background
    if bg is None:
        return None
    dists = [build_distribution(spec) if spec is not None else None
             for spec in (bg.wait, bg.finish, bg.per_iteration_cpu_s)]
    out = np.zeros((3, sc.iterations))
    for t in range(sc.iterations):
        rng = np.random.default_rng([int(sc.seed), BACKGROUND_STREAM, t])
        for k, d in enumerate(dists):
            if d is not None:
                out[k, t] = d.from_uniform(rng.random((1, d.n_uniforms)))[0]
    if dists[1] is None:
        out[1] = out[0]
    for k, name in enumerate(("wait", "finish", "per_iteration_cpu_s")):
        v = out[k]
        bad = np.flatnonzero(~(np.isfinite(v) & (v >= 0)))
        if bad.size:
            raise ConfigError(f"workload.background.{name}", "a distribution whose draws are finite numbers >= 0",
                              _Given(f"{v[bad[0]]} (iteration {int(bad[0])})"))
    return out[0], out[1], out[2]


def worker_cores(cores: float, background: float) -> float:
    """Cores left to the (niced) workers when other processes take ``background`` of ``cores``:
    ``max(cores - background, cores × NICE15_SHARE)``."""
    return max(cores - background, cores * NICE15_SHARE)


def _dispatch_draws(sc: Scenario) -> np.ndarray | None:
    """``(I, n)`` seconds of ``network.dispatch`` (None when unset). Drawn from its own keyed stream
    ``default_rng([seed, DISPATCH_STREAM, iteration])``, so the straggler, compute and master draws are
    the same with or without it (paired replays keep the run's delays).

    Raises:
        ConfigError: field ``network.dispatch`` when a draw is negative or not finite.
    """
    spec = sc.network.dispatch
    if spec is None:
        return None
    dist = build_distribution(spec)
    n = sc.n_workers
    out = np.stack([np.asarray(dist.from_uniform(
        np.random.default_rng([int(sc.seed), DISPATCH_STREAM, t]).random((n, dist.n_uniforms))), dtype=np.float64)
        for t in range(sc.iterations)]) if sc.iterations else np.zeros((0, n))
    where = _first_bad(np.where(out >= 0, out, np.nan))
    if where is not None:
        raise ConfigError("network.dispatch", "a distribution whose draws are finite seconds >= 0",
                          _Given(f"{out[where]} (iteration {where[0]}, worker {where[1]})"))
    return out


def _simulate_scheme(label: str, scheme: Scheme, sc: Scenario, block: DrawBlock, decode_s: np.ndarray,
                     tick: Callable[[int], None] | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run one scheme's environment over every iteration; returns (iterations rows, worker rows)."""
    return _SimulatedRun(label, scheme, sc, block, decode_s, tick).run()


@dataclass
class _Recorder:
    """What one scheme's run records, filled in by the master and the workers of :class:`_SimulatedRun`
    and turned into its trace rows by :meth:`frames` (times in seconds)."""

    # per (iteration, worker) records: (I, n)
    disp_s: np.ndarray
    cstart_s: np.ndarray
    comp_s: np.ndarray
    cpu_part_s: np.ndarray  # CPU-seconds of partitions received
    cpu_call_s: np.ndarray  # CPU-seconds of the call overhead received
    send_s: np.ndarray
    arr_s: np.ndarray
    cancelled: np.ndarray
    n_sent: np.ndarray
    n_arrived_w: np.ndarray  # messages of w arrived by decodable_s
    used_w: np.ndarray
    n_part: np.ndarray
    # per iteration: (I,)
    start: np.ndarray
    decodable: np.ndarray
    end: np.ndarray
    n_arrived: np.ndarray
    n_used: np.ndarray
    burst_in_wait: np.ndarray  # CPU-seconds of the per-iteration work done before decodable_s
    burst_cpu: np.ndarray  # CPU-seconds of per-iteration work: per_iteration_cpu_s + per-byte term
    refused: list = field(default_factory=list)  # (iteration, Refusal) per arrived set the scheme refused

    @classmethod
    def empty(cls, I: int, n: int) -> "_Recorder":
        """Nothing recorded yet for ``I`` iterations of ``n`` workers."""
        def nan_w():
            return np.full((I, n), np.nan)

        def zero_w(dtype=np.float64):
            return np.zeros((I, n), dtype=dtype)

        return cls(disp_s=nan_w(), cstart_s=nan_w(), comp_s=nan_w(), cpu_part_s=zero_w(), cpu_call_s=zero_w(),
                   send_s=nan_w(), arr_s=nan_w(), cancelled=zero_w(bool), n_sent=zero_w(np.int64),
                   n_arrived_w=zero_w(np.int64), used_w=zero_w(bool), n_part=zero_w(np.int64),
                   start=np.full(I, np.nan), decodable=np.full(I, np.nan), end=np.full(I, np.nan),
                   n_arrived=np.zeros(I, dtype=np.int64), n_used=np.zeros(I, dtype=np.int64),
                   burst_in_wait=np.zeros(I), burst_cpu=np.zeros(I))

    def frames(self, label: str, sc: Scenario, block: DrawBlock, background, n_msgs: np.ndarray
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(iterations rows, worker rows) in the :mod:`gcsim.trace` format; ``n_msgs`` ``(I, n)`` counts
        each worker-iteration's messages, ``background`` is :func:`background_draws` (or None)."""
        I, n = self.disp_s.shape
        # worker status: arrived (all its messages in by decodable_s), cancelled, late
        status = np.where(self.n_arrived_w >= n_msgs, _ARRIVED,
                          np.where(self.cancelled & (self.n_sent < n_msgs), _CANCELLED, _LATE))
        start, decodable, end = self.start, self.decodable, self.end
        it_df = trace_frame({
            "scheme": label, "iteration": np.arange(I), "start_s": start, "decodable_s": decodable, "end_s": end,
            "duration_s": end - start, "n_arrived": self.n_arrived, "n_used": self.n_used,
            "other_cpu_wait_s": (np.minimum(background[0], sc.workload.cores) * (decodable - start)
                                 + self.burst_in_wait if background is not None else np.nan),
            "other_cpu_finish_s": (np.minimum(background[1], sc.workload.cores) * (end - decodable)
                                   if background is not None else np.nan),
        }, ITERATION_COLUMNS, "iterations.csv")
        w_df = trace_frame({
            "scheme": label, "iteration": np.repeat(np.arange(I), n), "worker": np.tile(np.arange(n), I),
            "n_partitions": self.n_part.ravel(), "dispatch_s": self.disp_s.ravel(),
            "compute_start_s": self.cstart_s.ravel(), "compute_s": self.comp_s.ravel(),
            "delay_s": block.delay_s.ravel(), "slowdown": block.slowdown.ravel(),
            "send_s": self.send_s.ravel(), "arrival_s": self.arr_s.ravel(), "used": self.used_w.ravel(),
            "status": _STATUS[status.ravel()], "cpu_s": (self.cpu_part_s + self.cpu_call_s).ravel(),
            "compute_cpu_s": self.cpu_part_s.ravel(), "between_calls_cpu_s": np.nan,
        }, WORKER_COLUMNS, "workers.csv")
        it_df.attrs["refusals"] = self.refused
        return it_df, w_df


class _SimulatedRun:
    """One scheme's :class:`simpy.Environment` over every iteration (the model of the module docstring):
    the master and the workers are processes (:meth:`master`, :meth:`worker` or, under CPU contention,
    :meth:`worker_shared_cpu`) over the state held here, recording into one :class:`_Recorder`."""

    def __init__(self, label: str, scheme: Scheme, sc: Scenario, block: DrawBlock, decode_s: np.ndarray,
                 tick: Callable[[int], None] | None):
        self.label, self.scheme, self.sc, self.block = label, scheme, sc, block
        self.decode_s, self.tick = decode_s, tick  # (I,) seconds; progress callback or None
        self.n, self.I = n, I = sc.n_workers, sc.iterations
        self.net = net = sc.network
        self.bw = net.bandwidth_bytes_per_s
        self.model_s = net.latency_s + sc.workload.model_bytes / self.bw
        self.extra_dispatch = _dispatch_draws(sc)  # (I, n) seconds after the master's start, or None
        if self.extra_dispatch is not None:
            self.model_s = 0.0
        self.grad_bytes = sc.workload.gradient_bytes
        self.cancel = sc.policy == "cancel"
        self.cancel_latency_s = sc.cancel_latency_s
        # cumulative compute seconds after q partitions, per iteration on demand (:meth:`cum_at`): the whole
        # (I, n, P+1) table was 0.7 GB and 4.6 s to build for gc-cr at n = 256, s = 32, 10,000 iterations
        self.n_parts = block.compute_s.shape[2]
        self._cum: dict[int, np.ndarray] = {}
        self.delay = block.delay_s
        self.plans = _Plans(scheme)
        self.at_partition = sc.cancel_granularity == "partition"

        self.env = simpy.Environment()
        self.dispatch = [self.env.event() for _ in range(I)]
        self.rec = _Recorder.empty(I, n)
        self.current = np.full(n, -1, dtype=np.int64)  # iteration each worker is working on (-1: idle)
        self.arrival_events: list[list[simpy.Event]] = [None] * I  # type: ignore[list-item]
        self.iter_msgs: list = [None] * I
        self.plans_at: list = [None] * I
        self.procs: list[simpy.Process] = []

        sharing = PerCoreQueues if sc.workload.scheduler == "per-core" else ProcessorSharing
        self.cpu = sharing(self.env, sc.workload.cores) if sc.workload.cores is not None else None
        self.background = background_draws(sc) if self.cpu is not None else None
        self.cores = sc.workload.cores
        self.burst_cores = sc.workload.background.burst_cores if self.background is not None else 0.0
        # what other processes take now: steady cores, burst cores, and the iteration of the burst
        self.bg_steady, self.bg_burst, self.bg_it = 0.0, 0.0, -1
        self.per_byte = (float(sc.workload.background.per_payload_byte_cpu_s or 0.0) * sc.workload.gradient_bytes
                         if self.background is not None else 0.0)  # CPU-seconds per unit of payload_fraction
        self.overhead_s = block.call_overhead_s if block.call_overhead_s is not None else np.zeros((I, n))

    def run(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """Run the environment to its end; returns (iterations rows, worker rows).

        Raises:
            SchemeError: an iteration's messages never became decodable.
        """
        env, rec = self.env, self.rec
        master_proc = env.process(self.master())
        self.procs.extend(env.process(self.worker(w) if self.cpu is None else self.worker_shared_cpu(w))
                          for w in range(self.n))
        env.run()
        if not master_proc.ok or np.isnan(rec.end[-1]):
            bad = int(np.flatnonzero(np.isnan(rec.end))[0])
            raise SchemeError(f"scheme {self.label}: messages of iteration {bad} never became decodable "
                              f"(arrived {rec.n_arrived[bad]} of {len(self.iter_msgs[bad] or [])})")
        n_msgs = np.stack([self.plans_at[it][3] for it in range(self.I)])
        return rec.frames(self.label, self.sc, self.block, self.background, n_msgs)

    def arrive(self, it: int, mid: int, _ev) -> None:
        arr_s = self.rec.arr_s
        w = self.iter_msgs[it][mid].worker
        t = self.env.now
        arr_s[it, w] = t if np.isnan(arr_s[it, w]) else max(arr_s[it, w], t)
        self.arrival_events[it][mid].succeed()

    def send(self, it: int, mid: int, w: int) -> None:
        self.rec.send_s[it, w] = self.env.now
        self.rec.n_sent[it, w] += 1
        up = self.net.latency_s + self.grad_bytes * self.iter_msgs[it][mid].payload_fraction / self.bw
        self.env.timeout(up).callbacks.append(partial(self.arrive, it, mid))

    def start_iteration(self, w: int, it: int):
        """Common start of a worker-iteration (a generator: ``segs, d = yield from ...``): wait for the
        model broadcast (and the per-worker dispatch draw), record the start, return the message
        segments and the number of partitions ``d``."""
        env, rec = self.env, self.rec
        yield self.dispatch[it]
        if self.extra_dispatch is not None:
            yield env.timeout(self.extra_dispatch[it, w])
            rec.disp_s[it, w] = env.now
        self.current[w] = it
        rec.cstart_s[it, w] = env.now
        assign, _msgs, segs, _ = self.plans_at[it]
        d = len(assign[w])
        rec.n_part[it, w] = d
        return segs, d

    def cum_at(self, it: int) -> np.ndarray:
        """``(n, P+1)``: cumulative compute seconds of each worker after q partitions in iteration ``it``
        (the same products and cumulative sums as a whole-run table; kept for the 64 latest iterations
        asked, recomputed identically if a worker lagging further behind asks again)."""
        c = self._cum.get(it)
        if c is None:
            block = self.block
            work = block.compute_s[it] * block.slowdown[it, :, None]
            c = np.concatenate([np.zeros((self.n, 1)), np.cumsum(work, axis=1)], axis=1)
            if len(self._cum) >= 64:
                self._cum.pop(next(iter(self._cum)))
            self._cum[it] = c
        return c

    def worker(self, w: int):
        """The worker without CPU contention: its partitions take their drawn seconds."""
        env, rec, delay = self.env, self.rec, self.delay
        for it in range(self.I):
            segs, d = yield from self.start_iteration(w, it)
            cum = self.cum_at(it)[w]  # (P+1,)
            rec.comp_s[it, w] = cum[d]
            rec.cpu_part_s[it, w] = cum[d]
            done = 0
            lead = delay[it, w]
            seg_t0, seg_lead, bound = env.now, lead, 0
            try:
                for bound, mids in segs[w]:
                    dur = lead + cum[bound] - cum[done]
                    seg_t0, seg_lead = env.now, lead
                    lead = 0.0
                    if dur > 0:
                        yield env.timeout(dur)
                    done = bound
                    for mid in mids:
                        self.send(it, mid, w)
            except simpy.Interrupt:
                rec.cancelled[it, w] = True
                into = env.now - seg_t0 - seg_lead
                if self.at_partition and into > 0 and bound > done:
                    # the cancel is noticed when the partition in progress ends
                    ends = cum[done + 1:bound + 1] - cum[done]
                    rest = float(ends[min(np.searchsorted(ends, into), len(ends) - 1)] - into)
                    if rest > 0:
                        yield env.timeout(rest)
            self.current[w] = -1

    def apply_background(self) -> None:
        self.cpu.set_cores(worker_cores(self.cores, self.bg_steady + self.bg_burst))

    def end_burst(self, it: int, _ev=None) -> None:
        if self.bg_it == it and self.bg_burst > 0:
            if np.isnan(self.rec.decodable[it]):
                self.rec.burst_in_wait[it] = self.rec.burst_cpu[it]
            self.bg_burst = 0.0
            self.apply_background()

    def worker_shared_cpu(self, w: int):
        """The worker under CPU contention (module docstring): one CPU job per partition."""
        env, rec, cpu, block, overhead_s = self.env, self.rec, self.cpu, self.block, self.overhead_s
        for it in range(self.I):
            segs, d = yield from self.start_iteration(w, it)
            f = float(block.slowdown[it, w])
            cpu_factor, idle_factor = min(f, 1.0), max(f, 1.0) - 1.0
            spent, part_t0, job, job_is_part = 0.0, None, None, True
            try:
                if self.delay[it, w] > 0:
                    yield env.timeout(self.delay[it, w])
                done = 0
                for bound, mids in segs[w]:
                    while done < bound:
                        part_t0 = env.now
                        job, job_is_part = cpu.execute(block.compute_s[it, w, done] * cpu_factor, w), True
                        yield job
                        rec.cpu_part_s[it, w] += job.work_s
                        job = None
                        if idle_factor > 0:
                            yield env.timeout(idle_factor * (env.now - part_t0))
                        spent += env.now - part_t0
                        part_t0 = None
                        done += 1
                    if bound == d and overhead_s[it, w] > 0:
                        job, job_is_part = cpu.execute(overhead_s[it, w], w), False
                        yield job
                        rec.cpu_call_s[it, w] += job.work_s
                        job = None
                    for mid in mids:
                        self.send(it, mid, w)
            except simpy.Interrupt:
                rec.cancelled[it, w] = True
                if job is not None:
                    if self.at_partition:
                        yield job  # the cancel is noticed when the partition (or encoding) in progress ends
                        got = job.work_s
                    else:
                        got = cpu.withdraw(job)
                    if job_is_part:
                        rec.cpu_part_s[it, w] += got
                    else:
                        rec.cpu_call_s[it, w] += got
                if part_t0 is not None:
                    spent += env.now - part_t0
            rec.comp_s[it, w] = spent
            self.current[w] = -1

    def cancel_stragglers(self, it: int, _ev=None) -> None:
        for w in range(self.n):
            if self.current[w] == it and self.procs[w].is_alive:
                self.procs[w].interrupt("cancel")

    def decodable_set(self, it: int, order: list[int], result: dict, _events, _count) -> bool:
        """``evaluate`` of the iteration's :class:`simpy.Condition`: whether the messages arrived so far
        (``order``) decode; the decode goes to ``result["dec"]``, a refusal to the recorder."""
        dec = self.scheme.decode(order, it)
        if dec is None:
            if self.scheme.last_refusal is not None:  # solvable but not exact enough: wait for more
                self.rec.refused.append((it, self.scheme.last_refusal))
            return False
        result["dec"] = dec
        return True

    def master(self):
        """The master: per iteration, start the background work, send the model, wait until the arrived
        messages decode, cancel the stragglers (policy ``cancel``), spend the decode draw."""
        env, rec, n, background = self.env, self.rec, self.n, self.background
        cum_parts = self.n_parts
        for it in range(self.I):
            rec.start[it] = env.now
            assign, msgs, segs, n_msgs_of = self.plans.at(it)
            if background is not None:
                rec.burst_cpu[it] = background[2][it] + self.per_byte * sum(m.payload_fraction for m in msgs)
                self.bg_steady, self.bg_burst, self.bg_it = background[0][it], 0.0, it
                rate = min(self.burst_cores, max(self.cores - background[0][it], 0.0))
                if rec.burst_cpu[it] > 0 and rate > 0:
                    self.bg_burst = rate
                    env.timeout(rec.burst_cpu[it] / rate).callbacks.append(partial(self.end_burst, it))
                self.apply_background()
            if max(len(a) for a in assign) > cum_parts:
                raise SchemeError.param(self.scheme.name, f"assignment at iteration {it}",
                                        f"at most {cum_parts} partitions per worker", max(map(len, assign)))
            self.plans_at[it] = (assign, msgs, segs, n_msgs_of)
            self.iter_msgs[it] = msgs
            order: list[int] = []
            evs = [env.event() for _ in msgs]
            for mid, ev in enumerate(evs):
                ev.callbacks.append(lambda _e, mid=mid, order=order: order.append(mid))
            self.arrival_events[it] = evs
            result: dict = {}
            cond = Condition(env, partial(self.decodable_set, it, order, result), evs)
            env.timeout(self.model_s).callbacks.append(lambda _e, it=it: self.dispatch[it].succeed())
            rec.disp_s[it, :] = env.now + self.model_s
            yield cond
            rec.decodable[it] = env.now
            if background is not None:
                if self.bg_burst > 0:  # the per-iteration work goes on into the finish phase
                    rec.burst_in_wait[it] = self.bg_burst * (env.now - rec.start[it])
                self.bg_steady = background[1][it]
                self.apply_background()
            dec = result["dec"]
            rec.n_arrived[it] = len(order)
            rec.n_used[it] = len(dec.used)
            mw = np.fromiter((msgs[m].worker for m in order), dtype=np.int64, count=len(order))
            rec.n_arrived_w[it] = np.bincount(mw, minlength=n)
            rec.used_w[it, [msgs[m].worker for m in dec.used]] = True
            if self.cancel:
                if self.cancel_latency_s > 0:
                    env.timeout(self.cancel_latency_s).callbacks.append(partial(self.cancel_stragglers, it))
                else:
                    self.cancel_stragglers(it)
            yield env.timeout(self.decode_s[it])
            rec.end[it] = env.now
            if self.tick is not None:
                self.tick(1)
