"""Build the simulation that matches a measured run: copy what the run specified, calibrate the rest.

Copied from the run's ``config.yaml`` (never calibrated): ``n_workers``, the scheme with its ``s``,
``m`` and ``seed``, the straggler specification (``stragglers``), ``policy``, ``cancel_latency_s``,
``iterations``, ``seed`` and the message sizes (``workload.gradient_bytes``, ``workload.model_bytes``).

Calibrated from the measured trace (``workers.csv`` / ``iterations.csv``, after a warm-up):

* **CPU contention** (``workload.cores``): the cores the run's workers shared – a real run's
  ``meta.json`` ``host_cpus`` (the machine's CPU count), a simulated run's ``workload.cores``; None
  (no contention) when unknown or when every worker has a core of its own (``n <= cores``). With
  contention, every compute time below is first *de-contended* (:mod:`gcsim.compare.contention`):
  the CPU-seconds on an idle core that the worker needed, given how many workers were busy at each
  instant of its compute (processor sharing inverted, whichever scheduler is then simulated).
  Without it, a worker computing alone after its delay and one computing among six look like
  different distributions, and drawing them i.i.d. spreads the simulated workers far more than the
  observed, correlated ones.
  What else takes CPU while the workers compute is absorbed into the de-contended work: on the
  2-core machine of the acceptance runs, the master's blocking ``ray.wait`` (~0.13 core while it
  waits), Ray's daemons and any other normal-priority load (``meta.json`` ``host_cpu_load`` records
  it) preempt the workers, which Ray runs at niceness 15. On a quiet machine the de-contended work
  per partition matches a worker computing alone (~27-29 ms for the small CNN); under load it is
  larger, so a worker computing alone after its delay is then predicted somewhat slow.
  *Measured CPU* (trace format 2, :func:`measured_cpu`): where the workers recorded their own CPU
  time, the partitions' work is ``compute_cpu_s`` and the per-call overhead ``cpu_s - compute_cpu_s``
  instead of the de-contended wall-time estimates (rows without it keep the estimates).
* **per-call overhead** (``workload.call_overhead``, with contention only): empirical de-contended
  CPU-seconds from the end of the partitions to ``send_s`` (loading the weights, encoding), or the
  measured per-call CPU: ``cpu_s - compute_cpu_s``, less Ray's work between calls
  (``between_calls_cpu_s``, trace format 4), whose time the dispatch lag and the transfer time hold
  already (:data:`BETWEEN_CALLS`, finding 39).
* **per-partition compute time** (``workload.compute``): empirical distribution of
  ``compute_s / n_partitions / slowdown`` (the injected slowdown is divided out, since the scenario
  re-applies it); with contention the de-contended CPU-seconds of the partitions divided by
  ``n_partitions`` (and by a slowdown below 1, which the simulator applies to CPU work).
  Workers cancelled before they sent have a *right-censored* compute time (the true
  time is at least what was recorded); with any censored rows the distribution is the Kaplan–Meier
  estimate (Kaplan & Meier, JASA 1958; ``scipy.stats.ecdf`` on ``scipy.stats.CensoredData``),
  represented by its quantiles at ``(k + 0.5)/K``. For schemes with ``d > 1`` partitions per worker
  only the per-worker mean of ``d`` draws is observed; its deviations from the mean are scaled by
  ``sqrt(d)`` (:func:`match_partition_spread`) so the simulated sum of ``d`` draws keeps the observed
  mean and variance.
* **message transfer time** (``network``): the scenario's model is that every message costs
  ``latency_s + bytes / bandwidth_bytes_per_s`` (Hockney, Parallel Computing 20:389, 1994), both the
  gradient messages (``arrival_s - send_s`` for ``gradient_bytes × communication_load``) and the
  model broadcast (the start lag ``compute_start_s - start_s`` for ``model_bytes``: the real master
  stamps ``dispatch_s`` when it issues the call, the worker stamps ``compute_start_s`` once it has the
  weights; its per-iteration median over workers, one point per worker, ignores workers still busy
  with earlier work under carry-over). One least-squares line is fitted
  through both; with exactly two payload sizes it passes through both means, with one size it keeps
  their sum. With one size the split is not identifiable: payloads ≥ 1 MiB are attributed to
  bandwidth (``latency_s = 0``), smaller ones to latency (``bandwidth = inf``); a note says so.
  An all-reduce run (meta.json ``collective: allreduce``, :mod:`gcsim.real.allreduce`) has no
  messages to a master: its ranks' transfers are ``arrival_s`` minus the iteration's *last*
  ``send_s`` (a ring all-reduce cannot finish before its last rank joins; Patarasuk & Yuan, J.
  Parallel Distrib. Comput. 69(2), 2009), the earlier ranks' wait being the max the simulator takes.
* **master per-iteration overhead** (``master.decode_s``): empirical ``end_s - decodable_s``
  (decode, optimizer step, bookkeeping). Not de-contended: the real master (the Ray driver) runs at
  normal priority while Ray starts its workers at niceness 15 (``RAY_worker_niceness``), so the
  workers barely slow it down.
* **cancel granularity** (``cancel_granularity``): copied from the run (:func:`cancel_granularity`); a
  real run's workers notice a cancel only between partitions (:mod:`gcsim.real.worker`), so a real
  run is simulated with ``partition``, and its cancelled workers' compute covers whole partitions
  (not censored, see :func:`per_partition_compute`).

Injected delays are *not* calibrated: scenario mode draws them from the run's straggler spec with
fresh seeds; paired (trace-driven) mode keeps the run's seed, so the keyed straggler streams of
:mod:`gcsim.stragglers` reproduce the very delays the real executor injected, and only the
calibrated compute/master draws vary between replications.

The work is split by job: :mod:`gcsim.compare.run_facts` reads what the run specified,
:mod:`gcsim.compare.estimators` turns trace rows into each calibrated quantity, this module pools
their samples over runs and schemes into a :class:`Calibration`, and :mod:`gcsim.compare.scenario_build`
writes the scenario from both. Every public name of those modules is importable from here too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from gcsim.compare.contention import decontend
from gcsim.compare.estimators import (BANDWIDTH_THRESHOLD_BYTES, KM_POINTS, TransferFit, background_cores,
                                      between_calls_cpu, compute_distribution, dispatch_lags, fit_transfer,
                                      match_partition_spread,
                                      measured_cpu, per_partition_compute, split_idle_cpu, worker_idle_s)
from gcsim.compare.rundir import RunDir
from gcsim.compare.run_facts import (cancel_granularity, message_bytes, recorded_cores, require_same_executor,
                                     require_same_n, run_cores,
                                     run_scheduler, scheme_spec)
from gcsim.compare.scenario_build import build_scenario, scenario_data
from gcsim.compare.speed_variation import (SpeedVariationFit, fit_speed_variation, remove_iteration_factor,
                                           speed_moments)
from gcsim.errors import ConfigError, RunDirError

#: Models of Ray's CPU between calls (a real worker's ``between_calls_cpu_s``, trace format 4: serialising
#: the previous reply, deserialising this call's arguments), with the workers' CPU clocks:
#: ``"in-lags"`` – its time is already in the measured dispatch lag (``compute_start_s`` after the call was
#: issued) and transfer time (``arrival_s - send_s``), so only the call's own CPU
#: (``cpu_s - compute_cpu_s - between_calls_cpu_s``: loading the weights, encoding, the delay's sleep)
#: goes on the path after the partitions (docs/validation/README.md, findings 38-39: charging it again
#: over-predicted the coded schemes by 4-8 % beside a noisy neighbour). The same column also holds what
#: Ray's threads use while the worker idles between calls, which then leaves the steady background too
#: (:func:`split_idle_cpu` fits only what is left: ~0.05 → ~0.01 cores for 6 workers on the acceptance
#: machine); finding 38 found keeping it as steady CPU no better. ``"on-path"`` – the whole
#: ``cpu_s - compute_cpu_s`` after the partitions (the model before trace format 4). Rows without the
#: column (older traces) keep the whole per-call CPU either way. The default since finding 39: over the
#: seven format-4 model-passes, each target given its load and speed, the coded schemes' mean error
#: went from +4.5 … +7.9 % with a neighbour and −1.0 … +2.2 % quiet (``on-path``) to −0.0 … +2.1 % and
#: −2.1 … −1.0 %.
BETWEEN_CALLS = ("in-lags", "on-path")
DEFAULT_BETWEEN_CALLS = "in-lags"


def check_between_calls(value: str) -> None:
    """Raise ConfigError (field ``--between-calls-cpu``) unless ``value`` is one of :data:`BETWEEN_CALLS`."""
    if value not in BETWEEN_CALLS:
        raise ConfigError("--between-calls-cpu", f"one of {', '.join(BETWEEN_CALLS)}", value)


@dataclass(frozen=True)
class Calibration:
    """What was calibrated from measured run(s) (see the module docstring).

    Attributes:
        source: labels of the runs calibrated from.
        n_workers: their ``n`` (every target must have the same).
        compute_values_s: ``(K,)`` per-partition compute seconds before slowdown, resampled uniformly.
        n_compute_rows, n_censored: worker rows used / of which right-censored.
        transfer: :class:`TransferFit` (gradient messages and model broadcasts).
        master_values_s: ``(I,)`` per-iteration ``end_s - decodable_s`` seconds.
        start_lag_s: median over iterations of the per-iteration median start lag
            ``compute_start_s - start_s`` (seconds).
        notes: human-readable caveats (e.g. unidentified bandwidth).
        cores: cores the workers shared (None: no contention); compute/overhead values are then
            CPU-seconds on an idle core.
        overhead_values_s: per-call overhead CPU-seconds (empty: none modelled).
        cancel_granularity: ``"partition"`` for real runs (see module docstring), else ``"immediate"``.
        window_notes: what the steady calibration window left out (:mod:`gcsim.compare.steady`; also in
            ``notes``), set by :meth:`with_window_notes`.
        background_fit: the :class:`gcsim.compare.worker_share.BackgroundFit` behind
            ``background_wait_cores`` when it was fitted to one run's workers' CPU clocks, else None.
        speed_variation: the machine's speed common to every worker of an iteration
            (:class:`gcsim.compare.speed_variation.SpeedVariationFit`, from the workers' CPU clocks;
            ``compute_values_s`` then has each iteration's factor taken out, ``overhead_values_s`` is as
            measured), or None when not modelled.
        scheduler: the ``workload.scheduler`` to simulate with (:func:`run_scheduler` of the first run):
            ``per-core`` for a real run, a simulated run's own setting.
        idle_cores_per_worker: CPU (cores) each worker process uses while it waits between calls
            (:func:`split_idle_cpu`); already part of ``background_wait_cores`` /
            ``background_finish_cores`` (times ``n_workers``), kept to add it to a target's own
            measured other-process CPU (``gcsim compare --load-from target``).
        between_calls: the model of Ray's CPU between calls it was made with (:data:`BETWEEN_CALLS`),
            for anything calibrated again from the same runs (the pooled background's caps).
    """

    source: tuple[str, ...]
    n_workers: int
    compute_values_s: np.ndarray
    n_compute_rows: int
    n_censored: int
    transfer: TransferFit
    master_values_s: np.ndarray
    start_lag_s: float
    notes: tuple[str, ...] = field(default_factory=tuple)
    cores: float | None = None
    overhead_values_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cancel_granularity: str = "immediate"
    dispatch_values_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    background_wait_cores: float | None = None
    background_finish_cores: float | None = None
    background_per_iteration_cpu_s: float | None = None
    background_per_payload_byte_cpu_s: float | None = None
    window_notes: tuple[str, ...] = ()
    background_fit: object | None = None
    speed_variation: SpeedVariationFit | None = None
    idle_cores_per_worker: float = 0.0
    scheduler: str = "processor-sharing"
    between_calls: str = DEFAULT_BETWEEN_CALLS

    def at_speed(self, factor: float) -> "Calibration":
        """This calibration on a machine ``factor`` times slower: the CPU-seconds the workers' calls spend —
        the partition work (``compute_values_s``) and the per-call overhead (``overhead_values_s``) —
        multiplied by ``factor``; transfers, the master, the other processes' load and the workers'
        idle-time CPU (``idle_cores_per_worker``, a rate of Ray's threads, not work) unchanged. Used for a
        CPU-speed drift between runs (:func:`gcsim.compare.pipeline.drift_half_width`) and for
        ``--speed-from`` (docs/validation/README.md, finding 27: the speed a VM loses slows all of the
        workers' code alike; before, only the partition work was scaled).

        Raises:
            ValueError: ``factor`` is not a finite number > 0.
        """
        if not (np.isfinite(factor) and factor > 0):
            raise ValueError(f"speed factor must be a finite number > 0, got {factor!r}")
        return dataclasses.replace(self, compute_values_s=self.compute_values_s * factor,
                                   overhead_values_s=self.overhead_values_s * factor)

    def speed_spec(self) -> dict | None:
        """``workload.speed_variation`` of the scenario (``{sd, lag1}``), or None when not modelled."""
        return self.speed_variation.spec() if self.speed_variation is not None else None

    def with_window_notes(self, notes: Sequence[str]) -> "Calibration":
        """This calibration with the steady window's ``notes`` recorded (in ``notes`` and ``window_notes``)."""
        if not notes:
            return self
        return dataclasses.replace(self, notes=tuple(self.notes) + tuple(notes),
                                   window_notes=tuple(self.window_notes) + tuple(notes))

    def background_spec(self) -> dict | None:
        """``workload.background`` of the scenario: steady ``wait`` / ``finish`` cores and the
        ``per_iteration_cpu_s`` of other processes (see :func:`background_cores`), or None when not
        measured / no contention modelled."""
        if self.cores is None or self.background_wait_cores is None:
            return None
        fin = self.background_finish_cores if self.background_finish_cores is not None else self.background_wait_cores
        out = {"wait": {"dist": "constant", "value": float(self.background_wait_cores)},
               "finish": {"dist": "constant", "value": float(fin)}}
        if self.background_per_payload_byte_cpu_s:
            out["per_payload_byte_cpu_s"] = float(self.background_per_payload_byte_cpu_s)
        elif self.background_per_iteration_cpu_s:
            out["per_iteration_cpu_s"] = {"dist": "constant", "value": float(self.background_per_iteration_cpu_s)}
        return out

    def dispatch_spec(self, permutation_seed: int | None = None) -> dict | None:
        """``{dist: empirical, values: [...]}`` of the per worker-iteration dispatch seconds
        (:func:`dispatch_lags`), or None when none was measured."""
        if self.dispatch_values_s.size == 0:
            return None
        return {"dist": "empirical", "values": _shuffled(self.dispatch_values_s, permutation_seed)}

    def compute_spec(self, permutation_seed: int | None = None) -> dict:
        """``{dist: empirical, values: [...]}`` of the per-partition compute seconds. With
        ``permutation_seed`` the values are shuffled: the empirical sampler maps uniforms to values by
        index, so a shuffle gives fresh compute draws from the same uniforms (paired replications)."""
        return {"dist": "empirical", "values": _shuffled(self.compute_values_s, permutation_seed)}

    def master_spec(self, permutation_seed: int | None = None) -> dict:
        """``{dist: empirical, values: [...]}`` of the master's per-iteration overhead seconds."""
        return {"dist": "empirical", "values": _shuffled(self.master_values_s, permutation_seed)}

    def overhead_spec(self, permutation_seed: int | None = None) -> dict | None:
        """``{dist: empirical, values: [...]}`` of the per-call overhead CPU-seconds, or None."""
        if self.overhead_values_s.size == 0:
            return None
        return {"dist": "empirical", "values": _shuffled(self.overhead_values_s, permutation_seed)}

    def network_spec(self, permutation_seed: int | None = None) -> dict:
        """``{latency_s, bandwidth_bytes_per_s[, dispatch]}`` for the scenario's ``network``."""
        out = {"latency_s": self.transfer.latency_s, "bandwidth_bytes_per_s": self.transfer.bandwidth_bytes_per_s}
        disp = self.dispatch_spec(permutation_seed)
        if disp is not None:
            out["dispatch"] = disp
        return out

    def describe(self) -> dict:
        """Flat summary for the report / ``calibration.json`` (seconds, bytes)."""
        c, m = self.compute_values_s, self.master_values_s
        return {
            "source": list(self.source), "n_workers": self.n_workers,
            "compute_per_partition_mean_s": float(c.mean()), "compute_per_partition_p95_s": float(np.quantile(c, 0.95)),
            "compute_rows": self.n_compute_rows, "compute_censored_rows": self.n_censored,
            "latency_s": self.transfer.latency_s, "bandwidth_bytes_per_s": self.transfer.bandwidth_bytes_per_s,
            "transfer_messages": self.transfer.n_messages,
            "transfer_payload_sizes_bytes": list(self.transfer.payload_sizes_bytes),
            "transfer_mean_s": self.transfer.mean_transfer_s, "transfer_p95_s": self.transfer.p95_transfer_s,
            "master_overhead_mean_s": float(m.mean()), "master_overhead_p95_s": float(np.quantile(m, 0.95)),
            "start_lag_median_s": self.start_lag_s, "notes": list(self.notes),
            "cores": self.cores, "scheduler": self.scheduler, "between_calls_cpu": self.between_calls,
            "cancel_granularity": self.cancel_granularity,
            "call_overhead_mean_s": float(self.overhead_values_s.mean()) if self.overhead_values_s.size else 0.0,
            "dispatch_mean_s": float(self.dispatch_values_s.mean()) if self.dispatch_values_s.size else 0.0,
            "dispatch_p95_s": float(np.quantile(self.dispatch_values_s, 0.95)) if self.dispatch_values_s.size else 0.0,
            "background_wait_cores": self.background_wait_cores,
            "background_finish_cores": self.background_finish_cores,
            "background_per_iteration_cpu_s": self.background_per_iteration_cpu_s,
            "background_per_payload_byte_cpu_s": self.background_per_payload_byte_cpu_s,
            "speed_variation_sd": self.speed_variation.sd if self.speed_variation is not None else None,
            "speed_variation_lag1": self.speed_variation.lag1 if self.speed_variation is not None else None,
        }


def _shuffled(values: np.ndarray, seed: int | None) -> list[float]:
    v = np.asarray(values, dtype=np.float64)
    if seed is not None:
        v = np.random.default_rng(seed).permutation(v)
    return [float(x) for x in v]


def _warm(run: RunDir, scheme: str, warmup: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(iterations, workers)`` rows of ``scheme`` after its first ``warmup`` iterations (the last
    iteration when that drops them all)."""
    its = run.iterations_of(scheme)
    keep = its["iteration"].to_numpy()[warmup:] if warmup < len(its) else its["iteration"].to_numpy()[-1:]
    wk = run.workers_of(scheme)
    return its[its["iteration"].isin(keep)], wk[wk["iteration"].isin(keep)]


@dataclass
class _Samples:
    """What :func:`calibrate` collects from every (run, scheme) it pools: one array per scheme in each
    list (seconds unless said), added by :meth:`add_run` / :meth:`add_scheme`, pooled by the other
    methods into the :class:`Calibration`'s fields.

    Attributes:
        n_workers: ``n`` of every run. cores: the shared cores (None: no contention modelled).
        warmup: iterations dropped at the start of every scheme. use_measured: CPU from the workers'
            clocks (:func:`measured_cpu`) instead of de-contended wall time. speed_variation: with
            ``use_measured``, model the machine's per-iteration speed (:mod:`gcsim.compare.speed_variation`).
        between_calls: with ``use_measured``, where Ray's CPU between calls goes (:data:`BETWEEN_CALLS`).
    """

    n_workers: int
    cores: float | None
    warmup: int
    use_measured: bool
    between_calls: str = DEFAULT_BETWEEN_CALLS
    #: partitions per worker d -> (complete, censored) per-partition seconds (:func:`per_partition_compute`)
    compute: dict[int, tuple[list, list]] = field(default_factory=dict)
    payload_bytes: list = field(default_factory=list)  # per message the master waited for, bytes
    transfer_s: list = field(default_factory=list)  # its arrival_s - send_s
    master_s: list = field(default_factory=list)  # per iteration end_s - decodable_s
    start_lag_s: list = field(default_factory=list)  # per iteration median compute_start_s - start_s
    dispatch_s: list = field(default_factory=list)  # per worker row (:func:`dispatch_lags`)
    overhead_s: list = field(default_factory=list)  # per-call CPU-seconds (with contention)
    idle_s: list = field(default_factory=list)  # worker_idle_s of the rows with an overhead (measured CPU)
    background_its: list = field(default_factory=list)  # iterations.csv rows (other-process CPU)
    background_bytes: list = field(default_factory=list)  # per iteration, bytes of every worker's replies
    n_measured: int = 0  # worker rows with compute_cpu_s
    between_s: list = field(default_factory=list)  # per call whose between-call CPU was taken off, its CPU-seconds
    speed_variation: bool = False
    speed: list = field(default_factory=list)  # SpeedMoments per (run, scheme) (measured CPU)

    def add_run(self, run: RunDir, schemes: Sequence[str]) -> None:
        """Add the samples of ``schemes`` of ``run``."""
        g_bytes, _m_bytes = message_bytes(run)
        cancel_latency = float(run.scenario.cancel_latency_s)
        run_c = run_cores(run) if self.cores is not None else None
        for sch in schemes:
            self.add_scheme(run, sch, g_bytes, cancel_latency, run_c)

    def add_scheme(self, run: RunDir, sch: str, g_bytes: float, cancel_latency: float, run_c: float | None) -> None:
        """Add the samples of one scheme of ``run`` (its rows after the warm-up): compute, transfers,
        master overhead, start and dispatch lags, per-call CPU and other-process CPU."""
        its, wk = _warm(run, sch, self.warmup)
        cpu_s = self._cpu_seconds(run, sch, wk, run_c) if self.cores is not None else None
        whole = cancel_granularity(run) == "partition"
        for dv, (u, r) in per_partition_compute(wk, its, cancel_latency, cpu_s, whole).items():
            self.compute.setdefault(dv, ([], []))[0].append(u)
            self.compute[dv][1].append(r)
        frac = float(run.scheme_row(sch).get("communication_load", 1.0) or 1.0)
        send = pd.to_numeric(wk["send_s"], errors="coerce").to_numpy(float)
        arr = pd.to_numeric(wk["arrival_s"], errors="coerce").to_numpy(float)
        if run.meta.get("collective") == "allreduce":
            # an all-reduce (gcsim.real.allreduce) completes only once its last rank joined: each
            # rank's transfer counts from the iteration's last send_s (Patarasuk & Yuan 2009), the
            # time before that is waiting, which the simulator's max over workers already makes
            send = pd.Series(send).groupby(wk["iteration"].to_numpy()).transform("max").to_numpy(float)
        # messages the master waited for: a late message's arrival_s is stamped whenever the master
        # next looked (after decodable), not when it arrived
        ok = np.isfinite(send) & np.isfinite(arr) & (wk["status"].astype(str).to_numpy() == "arrived")
        if not ok.any():
            ok = np.isfinite(send) & np.isfinite(arr)
        self.transfer_s.append(arr[ok] - send[ok])
        self.payload_bytes.append(np.full(int(ok.sum()), g_bytes * frac))
        self.background_its.append(its)
        self.background_bytes.append(np.full(len(its), g_bytes * frac * len(run.workers_of(sch)["worker"].unique())))
        dec = pd.to_numeric(its["decodable_s"], errors="coerce").to_numpy(float)
        end = its["end_s"].to_numpy(float)
        good = np.isfinite(dec)
        self.master_s.append(np.maximum(end[good] - dec[good], 0.0))
        st = its.set_index("iteration")["start_s"]
        # start lag: the worker starts (it has the model) at compute_start_s; the per-iteration
        # median ignores workers still busy with earlier work (carry-over)
        lag = (pd.to_numeric(wk["compute_start_s"], errors="coerce").to_numpy(float)
               - st.reindex(wk["iteration"]).to_numpy(float))
        lag_it = pd.Series(lag).groupby(wk["iteration"].to_numpy()).median().dropna()
        self.start_lag_s.append(lag_it.to_numpy(float))
        self.dispatch_s.append(dispatch_lags(run.workers_of(sch), run.iterations_of(sch), wk.index))

    def _cpu_seconds(self, run: RunDir, sch: str, wk: pd.DataFrame, run_c: float | None) -> np.ndarray:
        """``(k,)`` CPU-seconds of the partitions of the warm rows ``wk`` (de-contended, or measured);
        adds their per-call overhead (and, measured, the idle spans before it)."""
        # every row of the scheme's run contends (warm-up and late rows included); no cores
        # recorded for this run: its compute is taken as measured
        all_rows = run.workers_of(sch)
        dec = decontend(all_rows, run_c if run_c is not None else np.inf, rows=all_rows.index.isin(wk.index))
        if self.use_measured:
            cpu_s, over_s = measured_cpu(wk, dec.partitions_s, dec.overhead_s)
            if self.between_calls == "in-lags":
                # Ray's work between calls is already in the dispatch and transfer lags (wall time,
                # findings 38-39): only the call's own CPU goes on the path after the partitions
                between = between_calls_cpu(wk)
                off = np.isfinite(over_s) & np.isfinite(between)
                over_s = np.where(off, np.maximum(over_s - np.nan_to_num(between), 0.0), over_s)
                self.between_s.append(between[off])
            idle_all = worker_idle_s(all_rows)
            self.idle_s.append(idle_all[all_rows.index.isin(wk.index)][np.isfinite(over_s)])
            self.n_measured += int(np.isfinite(pd.to_numeric(wk["compute_cpu_s"], errors="coerce")).sum())
            if self.speed_variation:  # the iteration's shared factor is drawn again by the simulator
                self.speed.append(speed_moments(wk))
                # the per-call CPU is kept as measured (the simulator does not scale it): a factor
                # estimated from the partitions would add their noise to it
                cpu_s = remove_iteration_factor(wk, cpu_s)
        else:
            cpu_s, over_s = dec.partitions_s, dec.overhead_s
        self.overhead_s.append(over_s[np.isfinite(over_s)])
        return cpu_s

    def compute_values(self, where: Path, notes: list[str]) -> tuple[np.ndarray, int, int]:
        """``(values_s, n_rows, n_censored)``: the pooled per-partition compute distribution (each
        partition count's, spread restored, weighted by its worker rows).

        Raises:
            RunDirError: no finished worker (names ``workers.csv`` under ``where``).
        """
        parts, n_rows, n_cens = {}, 0, 0
        for dv, (us, rs) in sorted(self.compute.items()):
            u, r = np.concatenate(us), np.concatenate(rs)
            if u.size == 0:
                continue
            parts[dv] = (match_partition_spread(compute_distribution(u, r), dv), int(u.size + r.size))
            n_rows, n_cens = n_rows + int(u.size + r.size), n_cens + int(r.size)
        if not parts:
            raise RunDirError(f"{where / 'workers.csv'}: compute_s: expected finished workers with compute_s > 0, "
                              f"got none")
        if len(parts) == 1:
            compute = next(iter(parts.values()))[0]
        else:  # pool partition counts, each weighted by its number of worker rows
            compute = np.concatenate([np.quantile(v, (np.arange(k) + 0.5) / k) for v, k in parts.values()])
        if any(dv > 1 for dv in parts):
            notes.append("workers computing d > 1 partitions: per-partition spread restored by sqrt(d) "
                         "(mean and variance matched)")
        return np.asarray(compute, float), n_rows, n_cens

    def transfer(self, where: Path, notes: list[str]) -> TransferFit:
        """The transfer line through every message the master waited for (:func:`fit_transfer`).

        Raises:
            RunDirError: no such message (names ``workers.csv`` under ``where``).
        """
        try:
            fit, fit_notes = fit_transfer(np.concatenate(self.payload_bytes), np.concatenate(self.transfer_s))
            notes += fit_notes
        except ValueError:
            raise RunDirError(f"{where / 'workers.csv'}: arrival_s: expected arrived messages with send_s and "
                              f"arrival_s, got none") from None
        if not np.concatenate(self.transfer_s).size:
            raise RunDirError(f"{where / 'workers.csv'}: arrival_s: expected arrived messages with send_s and "
                              f"arrival_s, got none")
        return fit

    def master_values(self, where: Path) -> np.ndarray:
        """``(I,)`` pooled ``end_s - decodable_s`` seconds.

        Raises:
            RunDirError: no finite ``decodable_s`` (names ``iterations.csv`` under ``where``).
        """
        m = np.concatenate(self.master_s)
        if m.size == 0:
            raise RunDirError(f"{where / 'iterations.csv'}: decodable_s: expected finite instants, got none")
        return m

    def per_call_cpu(self, notes: list[str]) -> tuple[np.ndarray, float]:
        """``(overhead_s, idle_rate)``: the per-call CPU-seconds, less the workers' idle-time CPU when
        measured (:func:`split_idle_cpu`; ``idle_rate`` in cores per worker process, else 0)."""
        n, cores = self.n_workers, self.cores
        over = np.concatenate(self.overhead_s) if self.overhead_s else np.zeros(0)
        idle_rate = 0.0
        if self.idle_s and sum(v.size for v in self.idle_s) == over.size:
            over_total = over
            over, idle_rate = split_idle_cpu(over, np.concatenate(self.idle_s))
            if idle_rate > 0:
                notes.append(f"per-call CPU {over_total.mean() * 1e3:.2f} ms = {over.mean() * 1e3:.2f} ms of work "
                             f"per call + {idle_rate:.4f} cores per worker process while it waits between calls "
                             f"({n} processes: {n * idle_rate:.3f} cores, modelled as steady background)")
        if cores is not None and self.n_measured:
            in_lags = self.between_calls == "in-lags"
            n_between = sum(v.size for v in self.between_s)
            notes.append(f"CPU measured by the workers (cpu_s, compute_cpu_s) on {self.n_measured} worker rows: "
                         f"partition work from compute_cpu_s, per-call overhead = cpu_s - compute_cpu_s"
                         + (" - between_calls_cpu_s" if in_lags and n_between else "") + ", mean "
                         f"{over.mean() * 1e3 if over.size else 0.0:.2f} ms CPU; {cores:g} shared cores")
            if in_lags and n_between:
                notes.append(f"Ray's CPU between calls (between_calls_cpu_s, mean "
                             f"{np.concatenate(self.between_s).mean() * 1e3:.2f} ms on {n_between} of "
                             f"{over.size} calls) left off the per-call CPU and the workers' idle-time CPU: its "
                             f"time is in the measured dispatch and transfer lags (--between-calls-cpu in-lags)")
            if in_lags and n_between < over.size:
                notes.append(f"Ray's CPU between calls: {over.size - n_between} of {over.size} calls have no "
                             f"between_calls_cpu_s (a trace before format 4, a simulated or an all-reduce run): their "
                             f"whole cpu_s - compute_cpu_s stays on the path")
            if not in_lags:
                notes.append("Ray's CPU between calls (between_calls_cpu_s) kept in the per-call CPU after the "
                             "partitions (--between-calls-cpu on-path)")
        elif cores is not None:
            notes.append(f"compute de-contended for {cores:g} shared cores (processor sharing inverted, whichever "
                         f"scheduler is simulated); "
                         f"per-call overhead mean {over.mean() * 1e3 if over.size else 0.0:.2f} ms CPU")
        return over, idle_rate

    def background(self, idle_rate: float, notes: list[str]
                   ) -> tuple[float | None, float | None, float | None, float | None]:
        """``(wait_cores, finish_cores, per_iteration_cpu_s, per_payload_byte_cpu_s)`` other processes
        took (:func:`background_cores`, plus the workers' idle-time CPU ``idle_rate`` per process), all
        None unless CPU is measured with contention."""
        n, cores = self.n_workers, self.cores
        bg_wait = bg_fin = bg_it = bg_byte = None
        if cores is not None and self.use_measured and self.background_its:
            bg_wait, bg_fin, bg_it = background_cores(pd.concat(self.background_its, ignore_index=True))
            if bg_wait is not None and idle_rate > 0:  # the workers' idle-time CPU, all the time (split_idle_cpu)
                bg_wait += n * idle_rate
                bg_fin = (bg_fin if bg_fin is not None else 0.0) + n * idle_rate
            for name, v in (("waited", bg_wait), ("decoded and stepped", bg_fin)):
                if v is not None and v > cores:  # clock ticks over phases of a few ms (a short run): noise
                    notes.append(f"other processes measured {v:.3f} cores while the master {name}, more than the "
                                 f"machine's {cores:g} (CPU clock ticks over phases of a few ms): taken as {cores:g}")
            bg_wait = None if bg_wait is None else min(bg_wait, float(cores))
            bg_fin = None if bg_fin is None else min(bg_fin, float(cores))
            payload = float(np.mean(np.concatenate(self.background_bytes))) if self.background_bytes else 0.0
            if bg_wait is not None and bg_it and payload > 0:
                # the per-iteration work is Ray moving the replies: per byte of payload, so that a scheme
                # sending other message sizes (CCE: 1/m) is charged its own (Background.per_payload_byte_cpu_s)
                bg_byte = bg_it / payload
            if bg_wait is not None:
                notes.append(f"other processes took {bg_it * 1e3:.1f} ms of CPU per iteration"
                             + (f" ({bg_byte * 1e9:.1f} ns per byte of the workers' replies, {payload / 1e6:.2f} MB "
                                f"per iteration here)" if bg_byte else "")
                             + f" plus a steady {bg_wait:.3f} "
                             f"of {cores:g} cores while the master waited, "
                             f"{(bg_fin if bg_fin is not None else bg_wait):.3f} "
                             f"cores while it decoded and stepped (measured: other_cpu_wait_s, other_cpu_finish_s); "
                             f"the workers share the rest")
            else:
                notes.append("no other-process CPU recorded (trace older than version 3): the workers are "
                             "given every core, which over-predicts their speed on a loaded machine")
        return bg_wait, bg_fin, bg_it, bg_byte

    def dispatch_values(self) -> np.ndarray:
        """Pooled per worker-iteration dispatch seconds (finite ones, clipped at 0)."""
        disp_all = np.concatenate(self.dispatch_s) if self.dispatch_s else np.zeros(0)
        return np.maximum(disp_all[np.isfinite(disp_all)], 0.0)


def calibrate(runs: RunDir | Sequence[RunDir], *, schemes: dict[str, Sequence[str]] | None = None,
              warmup: int = 0, contention: bool = True, use_measured_cpu: bool = False,
              speed_variation: bool = True, between_calls: str = DEFAULT_BETWEEN_CALLS) -> Calibration:
    """Calibrate compute, transfer and master overhead from measured run(s).

    Args:
        runs: one run or several with the same ``n`` (their samples are pooled).
        schemes: run label -> schemes to use (default: every scheme of each run).
        warmup: iterations dropped at the start of every scheme.
        contention: de-contend compute times with each run's :func:`run_cores` (False: take them
            as measured, no ``cores`` in the scenario).
        use_measured_cpu: take per-partition CPU work and per-call overhead from the workers' own CPU
            clocks (``compute_cpu_s``, ``cpu_s``; trace version 2) where present, instead of the
            de-contended wall time (needs ``contention``).
        speed_variation: with ``use_measured_cpu``, split the workers' CPU per partition into a part
            every worker of an iteration shares (the machine's speed, an AR(1) over iterations) and
            each worker's own (:mod:`gcsim.compare.speed_variation`); False: every partition drawn
            independently from the pooled values.
        between_calls: with ``use_measured_cpu``, the model of Ray's CPU between calls (trace format 4
            ``between_calls_cpu_s``), one of :data:`BETWEEN_CALLS`.
    Returns:
        :class:`Calibration`.
    Raises:
        ConfigError: ``between_calls`` not one of :data:`BETWEEN_CALLS` (field ``--between-calls-cpu``).
        RunDirError: no usable compute / arrival / iteration data (names the file), no gradient size.
        ConfigError: runs with different ``n`` (field ``n``) or of different executors (a simulated run
            pooled with a real one).
    """
    check_between_calls(between_calls)
    runs = [runs] if isinstance(runs, RunDir) else list(runs)
    n = runs[0].n_workers
    for r in runs[1:]:
        require_same_n(runs[0], r)
        require_same_executor(runs[0], r)
    cores = run_cores(runs[0]) if contention else None
    samples = _Samples(n_workers=n, cores=cores, warmup=warmup, use_measured=use_measured_cpu,
                       between_calls=between_calls,
                       speed_variation=bool(speed_variation and use_measured_cpu and cores is not None))
    for run in runs:
        samples.add_run(run, (schemes or {}).get(run.label, run.schemes))
    where = runs[0].path
    notes: list[str] = []
    compute, n_rows, n_cens = samples.compute_values(where, notes)
    transfer = samples.transfer(where, notes)
    m = samples.master_values(where)
    lag_all = np.concatenate(samples.start_lag_s)
    if n_cens:
        notes.append(f"{n_cens} of {n_rows} compute times right-censored (cancelled): Kaplan–Meier estimate")
    over, idle_rate = samples.per_call_cpu(notes)
    bg_wait, bg_fin, bg_it, bg_byte = samples.background(idle_rate, notes)
    speed = fit_speed_variation(samples.speed) if samples.speed_variation else None
    if speed is not None:
        notes.append(speed.describe())
    elif speed_variation and use_measured_cpu and cores is None:
        notes.append("machine speed per iteration: not modelled (no shared cores recorded for the run: the "
                     "workers' CPU clocks are not used)")
    return Calibration(speed_variation=speed, dispatch_values_s=samples.dispatch_values(), source=tuple(r.label for r in runs), n_workers=n,
                       compute_values_s=compute, n_compute_rows=n_rows, n_censored=n_cens, transfer=transfer,
                       master_values_s=m, start_lag_s=float(np.median(lag_all)) if lag_all.size else 0.0,
                       notes=tuple(notes), cores=cores, overhead_values_s=np.maximum(over, 0.0),
                       cancel_granularity=cancel_granularity(runs[0]),
                       background_wait_cores=bg_wait, background_finish_cores=bg_fin,
                       background_per_iteration_cpu_s=bg_it, background_per_payload_byte_cpu_s=bg_byte,
                       idle_cores_per_worker=float(idle_rate), between_calls=between_calls,
                       scheduler=run_scheduler(runs[0]) if cores is not None else "processor-sharing")


__all__ = ["BANDWIDTH_THRESHOLD_BYTES", "BETWEEN_CALLS", "Calibration", "DEFAULT_BETWEEN_CALLS", "check_between_calls", "KM_POINTS", "TransferFit",
           "background_cores", "between_calls_cpu", "build_scenario",
           "calibrate", "cancel_granularity", "compute_distribution", "dispatch_lags", "fit_transfer",
           "match_partition_spread", "measured_cpu", "message_bytes", "per_partition_compute", "recorded_cores",
           "require_same_n", "run_cores", "scenario_data", "scheme_spec", "split_idle_cpu", "worker_idle_s"]
