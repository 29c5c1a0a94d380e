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
  instant of its compute (processor sharing, the simulator's model). Without it, a worker computing
  alone after its delay and one computing among six look like different distributions, and drawing
  them i.i.d. spreads the simulated workers far more than the observed, correlated ones.
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
  measured per-call CPU (which also covers Ray's work between calls).
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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from gcsim.compare.contention import decontend
from gcsim.compare.rundir import RunDir
from gcsim.errors import ConfigError, RunDirError

#: quantile points used to represent a Kaplan–Meier (censored) compute distribution.
KM_POINTS = 2000
#: payload size above which a single-size transfer fit is attributed to bandwidth.
BANDWIDTH_THRESHOLD_BYTES = 1 << 20
_COMPLETED = {"arrived", "late"}


@dataclass(frozen=True)
class TransferFit:
    """``transfer_s = latency_s + payload_bytes / bandwidth_bytes_per_s`` (Hockney model).

    Attributes:
        latency_s: intercept, seconds (>= 0).
        bandwidth_bytes_per_s: 1/slope, bytes per second (``inf`` when the slope is 0 / not identified).
        n_messages: arrived messages used.
        payload_sizes_bytes: the distinct payload sizes seen.
        mean_transfer_s, p95_transfer_s: of the measured transfers (for the report).
        identified: True when >= 2 payload sizes allowed fitting both terms.
    """

    latency_s: float
    bandwidth_bytes_per_s: float
    n_messages: int
    payload_sizes_bytes: tuple[float, ...]
    mean_transfer_s: float
    p95_transfer_s: float
    identified: bool


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
            "cores": self.cores, "cancel_granularity": self.cancel_granularity,
            "call_overhead_mean_s": float(self.overhead_values_s.mean()) if self.overhead_values_s.size else 0.0,
            "dispatch_mean_s": float(self.dispatch_values_s.mean()) if self.dispatch_values_s.size else 0.0,
            "dispatch_p95_s": float(np.quantile(self.dispatch_values_s, 0.95)) if self.dispatch_values_s.size else 0.0,
            "background_wait_cores": self.background_wait_cores,
            "background_finish_cores": self.background_finish_cores,
            "background_per_iteration_cpu_s": self.background_per_iteration_cpu_s,
            "background_per_payload_byte_cpu_s": self.background_per_payload_byte_cpu_s,
        }


def _shuffled(values: np.ndarray, seed: int | None) -> list[float]:
    v = np.asarray(values, dtype=np.float64)
    if seed is not None:
        v = np.random.default_rng(seed).permutation(v)
    return [float(x) for x in v]


# ============================================================================ run facts
def message_bytes(run: RunDir) -> tuple[float, float]:
    """``(gradient_bytes, model_bytes)`` of a run: meta.json's keys of those names when the executor
    recorded the actual sizes, else ``config.yaml`` ``workload.*`` (else its top level); model_bytes
    defaults to gradient_bytes. Raises RunDirError naming config.yaml when gradient_bytes is absent."""
    wl = run.config.get("workload") if isinstance(run.config.get("workload"), dict) else {}

    def pick(key):
        for src in (run.meta, wl, run.config):
            v = src.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 0:
                return float(v)
        return None
    g = pick("gradient_bytes")
    if g is None:
        raise RunDirError(f"{run.path / 'config.yaml'}: workload.gradient_bytes: expected the gradient message size "
                          f"in bytes, got {wl.get('gradient_bytes', 'missing')!r}")
    mb = pick("model_bytes")
    return g, (g if mb is None else mb)


def scheme_spec(run: RunDir, scheme: str) -> dict:
    """``{name, s, m, seed}`` of ``scheme`` in a run: the matching ``config.yaml`` ``schemes`` entry
    (by label or name; a real run's single ``scheme`` entry also works), else summary.csv's s and m."""
    entries = run.config.get("schemes")
    if entries is None and run.config.get("scheme") is not None:
        entries = [run.config["scheme"]]
    for e in entries or []:
        if isinstance(e, str):
            e = {"name": e}
        if isinstance(e, dict) and scheme in (e.get("label"), e.get("name")):
            out = {"name": str(e.get("name", scheme)), "s": int(e.get("s", 0)), "m": int(e.get("m", 1)),
                   "seed": int(e.get("seed", 0))}
            if e.get("label") and e.get("label") != out["name"]:
                out["label"] = str(e["label"])
            return out
    row = run.scheme_row(scheme)
    return {"name": scheme, "s": int(row["s"]), "m": int(row["m"]), "seed": 0}


# ============================================================================ calibration pieces
def _warm(run: RunDir, scheme: str, warmup: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    its = run.iterations_of(scheme)
    keep = its["iteration"].to_numpy()[warmup:] if warmup < len(its) else its["iteration"].to_numpy()[-1:]
    wk = run.workers_of(scheme)
    return its[its["iteration"].isin(keep)], wk[wk["iteration"].isin(keep)]


def per_partition_compute(workers: pd.DataFrame, iterations: pd.DataFrame | None = None,
                          cancel_latency_s: float = 0.0,
                          cpu_s: np.ndarray | None = None,
                          whole_partitions: bool = False) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per-partition compute seconds before slowdown, with right-censoring of cancelled workers.

    A worker that sent its message(s) (``send_s`` finite, or status ``arrived``/``late``) finished its
    compute: ``compute_s / n_partitions / slowdown``. A worker that never sent was cancelled mid-way:
    it computed at least ``min(compute_s, decodable_s + cancel_latency_s - compute_start_s - delay_s)``
    seconds (the engine's order is delay, then compute), a right-censored observation; rows with no
    compute before the cancel carry no information and are dropped.

    With ``cpu_s`` (de-contended CPU-seconds of each row's partitions, :func:`gcsim.compare.contention.decontend`)
    the values are ``cpu_s / n_partitions / min(1, slowdown)`` (a slowdown above 1 is idle time, already
    outside ``cpu_s``); a cancelled row's ``cpu_s`` covers what it computed before it stopped and is
    its censoring value.

    With ``whole_partitions`` (the real executor: a worker notices a cancel only between partitions)
    a cancelled row's recorded compute covers ``j`` WHOLE partitions, ``1 <= j <= d``: it is not
    censored but a complete observation of ``j`` partitions, with ``j`` the whole number of partitions
    nearest to its compute over the median per-partition value of the rows that sent (clipped to
    ``[1, d]``). Treating these rows (the slowest of their iteration) as censored would let
    Kaplan–Meier push their mass above every finished row – the censoring is not independent of the
    compute time here.

    Args:
        workers: workers.csv rows (seconds).
        iterations: iterations.csv rows (for ``decodable_s`` of cancelled rows; without it cancelled
            rows are censored at their recorded ``compute_s``).
        cancel_latency_s: seconds from decodable to the cancel reaching a worker.
        cpu_s: optional ``(k,)`` de-contended CPU-seconds aligned with ``workers`` rows.
        whole_partitions: cancelled rows stopped at a partition boundary (see above).
    Returns:
        ``{d: (complete_s, censored_s)}``: per partition count ``d``, the per-partition mean seconds
        ``compute_s / d / slowdown`` of finished and of cancelled workers (see
        :func:`compute_distribution` and :func:`match_partition_spread`).
    """
    w = workers
    num = lambda col: pd.to_numeric(w[col], errors="coerce").to_numpy(float)
    c, d, send = num("compute_s"), num("n_partitions"), num("send_s")
    sl = pd.to_numeric(w["slowdown"], errors="coerce").fillna(1.0).to_numpy(float)
    sl = np.where(sl > 0, sl, 1.0)
    status = w["status"].astype(str).to_numpy()
    scale = np.where(d > 0, d, 1.0) * sl
    complete = np.isfinite(c) & (c > 0) & (d > 0) & (np.isin(status, list(_COMPLETED)) | np.isfinite(send))
    never_sent = (d > 0) & ~complete
    if cpu_s is not None:
        c = np.asarray(cpu_s, float)
        scale = np.where(d > 0, d, 1.0) * np.minimum(sl, 1.0)
        spent = c
    elif whole_partitions:
        spent = c
    elif iterations is not None and never_sent.any():
        dec = iterations.set_index("iteration")["decodable_s"].astype(float)
        cut = (dec.reindex(w["iteration"]).to_numpy(float) + cancel_latency_s - num("compute_start_s")
               - np.nan_to_num(num("delay_s")))
        spent = np.where(np.isfinite(c), np.minimum(c, cut), cut)
    else:
        spent = c
    cens = never_sent & np.isfinite(spent) & (spent > 0)
    r = spent / scale
    out = {}
    for dv in np.unique(d[complete | cens]).astype(int):
        u, rc = c[complete & (d == dv)] / scale[complete & (d == dv)], r[cens & (d == dv)]
        if whole_partitions and u.size and rc.size:
            total = rc * dv  # the row's compute (slowdown divided out)
            j = np.clip(np.round(total / np.median(u)), 1, dv)
            u, rc = np.concatenate([u, total / j]), rc[:0]
        out[int(dv)] = (u, rc)
    return out


def measured_cpu(workers: pd.DataFrame, partitions_s: np.ndarray, overhead_s: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per-row CPU-seconds of the partitions and of the per-call overhead, measured where the trace has
    them (trace format 2: ``compute_cpu_s`` and ``cpu_s``), else the de-contended estimates given.

    The workers' own CPU clock needs no contention model: ``compute_cpu_s`` is the partitions' CPU and
    ``cpu_s - compute_cpu_s`` (clipped at 0) the per-call CPU – loading weights, encoding, and Ray's work
    between calls (:mod:`gcsim.real.worker`). This replaces the inference from wall time
    (:func:`gcsim.compare.contention.decontend`), which absorbs other load and the per-call CPU outside
    the timed windows into the partitions.

    Args:
        workers: worker rows (``(k,)``), with ``cpu_s``/``compute_cpu_s`` possibly NaN.
        partitions_s, overhead_s: ``(k,)`` de-contended estimates aligned with the rows (the fallback).
    Returns:
        ``(partitions_s, overhead_s)``, ``(k,)`` each; the overhead only for rows that sent (else NaN).
    """
    num = lambda col: pd.to_numeric(workers[col], errors="coerce").to_numpy(float)  # noqa: E731
    total, part, send = num("cpu_s"), num("compute_cpu_s"), num("send_s")
    has_part = np.isfinite(part)
    has_call = has_part & np.isfinite(total) & np.isfinite(send)
    parts = np.where(has_part, part, np.asarray(partitions_s, float))
    over = np.where(has_call, np.maximum(total - part, 0.0), np.asarray(overhead_s, float))
    return parts, over


def dispatch_lags(workers: pd.DataFrame, iterations: pd.DataFrame, rows=None) -> np.ndarray:
    """Per worker-iteration dispatch seconds: ``compute_start_s - max(start_s, free_s)``, with
    ``start_s`` the iteration's start and ``free_s`` the end of the same worker's previous call
    (its ``send_s``, else ``compute_start_s + delay_s + compute_s``; a cancelled worker finishes
    the partition in progress first; a previous call ending after this one started is ignored). This is what ``network.dispatch`` draws (:mod:`gcsim.sim.engine`):
    the broadcast as the run saw it, measured from when the worker could take the call.

    Args:
        workers: every workers.csv row of one scheme (seconds); iterations: its iterations.csv rows.
        rows: index labels of ``workers`` to return (default all).
    Returns:
        ``(k,)`` seconds (NaN where not recorded), aligned with the selected rows.
    """
    w = workers.sort_values(["worker", "iteration"])
    num = lambda col: pd.to_numeric(w[col], errors="coerce").to_numpy(float)  # noqa: E731
    start = iterations.set_index("iteration")["start_s"].astype(float).reindex(w["iteration"]).to_numpy(float)
    cstart = num("compute_start_s")
    end = np.where(np.isfinite(num("send_s")), num("send_s"),
                   cstart + np.nan_to_num(num("delay_s")) + np.nan_to_num(num("compute_s")))
    prev_end = np.concatenate([[np.nan], end[:-1]])
    same = np.concatenate([[False], w["worker"].to_numpy()[1:] == w["worker"].to_numpy()[:-1]])
    # a previous call recorded as ending after this one started was dropped (not waited for): use start
    busy = same & np.isfinite(prev_end) & (prev_end <= cstart)
    free = np.where(busy, np.maximum(start, prev_end), start)
    lag = pd.Series(cstart - free, index=w.index)
    return lag.reindex(workers.index if rows is None else rows).to_numpy(float)


def match_partition_spread(values_s: np.ndarray, d: int) -> np.ndarray:
    """Per-partition draws from per-worker means of ``d`` partitions, with the spread restored.

    A worker computing ``d`` partitions reveals only the mean ``S/d`` of its ``d`` draws, whose
    variance is ``σ²/d`` (Bienaymé); resampling those means as single-partition draws would shrink
    the simulated spread (and the tail) by ``sqrt(d)``. Returns ``μ + sqrt(d)·(v − μ)`` (``μ`` the mean
    of ``values_s``), clipped at 0: same mean, per-partition variance ``σ²``, so the simulated sum of
    ``d`` draws has the observed mean and variance (its skewness is ``1/sqrt(d)`` of the observed).

    Args:
        values_s: ``(k,)`` per-partition means, seconds. d: partitions per worker, ``>= 1``.
    """
    v = np.asarray(values_s, float)
    if d <= 1 or v.size == 0:
        return v
    mu = float(v.mean())
    return np.maximum(mu + np.sqrt(d) * (v - mu), 0.0)


def compute_distribution(complete_s: np.ndarray, censored_s: np.ndarray) -> np.ndarray:
    """Equal-weight values representing the compute distribution.

    Args:
        complete_s: ``(a,)`` observed per-partition seconds; censored_s: ``(b,)`` right-censored ones.
    Returns:
        ``complete_s`` itself when ``b == 0``, else the Kaplan–Meier quantiles at ``(k + 0.5)/KM_POINTS``
        (mass beyond the last event is put at the largest recorded time, a lower bound).
    Raises:
        ValueError: ``a == 0`` (no worker finished its compute).
    Source: Kaplan & Meier, JASA 53:457, 1958, via ``scipy.stats.ecdf(scipy.stats.CensoredData(...))``.
    """
    u, r = np.asarray(complete_s, float), np.asarray(censored_s, float)
    if u.size == 0:
        raise ValueError("no worker finished its compute")
    if r.size == 0:
        return u
    res = stats.ecdf(stats.CensoredData(uncensored=u, right=r))
    q, p = res.cdf.quantiles, res.cdf.probabilities
    levels = (np.arange(KM_POINTS) + 0.5) / KM_POINTS
    idx = np.searchsorted(p, levels - 1e-12, side="left")
    top = float(max(u.max(), r.max()))
    return np.where(idx < q.size, q[np.minimum(idx, q.size - 1)], top)


def fit_transfer(payload_bytes: np.ndarray, transfer_s: np.ndarray) -> tuple[TransferFit, list[str]]:
    """Fit ``transfer_s = latency_s + payload_bytes / bandwidth`` by least squares (see module docstring).

    Args:
        payload_bytes, transfer_s: ``(k,)`` per arrived message.
    Returns:
        ``(fit, notes)``.
    Raises:
        ValueError: no message.
    """
    b = np.asarray(payload_bytes, float)
    t = np.maximum(np.asarray(transfer_s, float), 0.0)
    if t.size == 0:
        raise ValueError("no arrived message")
    sizes = tuple(sorted(float(s) for s in np.unique(b)))
    notes = []
    if len(sizes) >= 2:
        res = stats.linregress(b, t)
        slope, icpt = float(res.slope), float(res.intercept)
        if slope <= 0:
            latency, bw = float(t.mean()), float("inf")
            notes.append("transfer time does not grow with payload: modelled as latency only")
        elif icpt < 0:
            slope = float((b @ t) / (b @ b))  # through the origin
            latency, bw = 0.0, 1.0 / slope
        else:
            latency, bw = icpt, 1.0 / slope
        identified = True
    else:
        size = sizes[0]
        if size >= BANDWIDTH_THRESHOLD_BYTES and t.mean() > 0:
            latency, bw = 0.0, size / float(t.mean())
            notes.append(f"one payload size ({size:.0f} B): transfer attributed to bandwidth (latency_s = 0)")
        else:
            latency, bw = float(t.mean()), float("inf")
            notes.append(f"one payload size ({size:.0f} B): transfer attributed to latency (bandwidth = inf)")
        identified = False
    fit = TransferFit(latency_s=latency, bandwidth_bytes_per_s=bw, n_messages=int(t.size), payload_sizes_bytes=sizes,
                      mean_transfer_s=float(t.mean()), p95_transfer_s=float(np.quantile(t, 0.95)), identified=identified)
    return fit, notes


def worker_idle_s(workers: pd.DataFrame, iterations: pd.DataFrame) -> np.ndarray:
    """Per worker row: seconds the worker process spent outside its partitions' loop since its
    previous call ended, i.e. the gap between calls plus this call's injected delay (``(k,)``, NaN
    for a worker's first row or where the stamps are missing; gaps clipped at 0).

    A call ends at its ``send_s`` (or, cancelled, at ``compute_start_s + delay_s + compute_s``); the
    next starts at its ``compute_start_s`` (both relative to their iteration's ``start_s``). The real
    worker's ``cpu_s - compute_cpu_s`` covers exactly this span (:mod:`gcsim.real.worker`:
    ``cpu_before`` + the delay's sleep + loading the weights + encoding).
    """
    num = lambda col: pd.to_numeric(workers[col], errors="coerce").to_numpy(float) if col in workers else np.full(len(workers), np.nan)  # noqa: E731
    st = iterations.set_index("iteration")["start_s"]
    t0 = st.reindex(workers["iteration"]).to_numpy(float)
    begin = t0 + num("compute_start_s")
    delay = np.nan_to_num(num("delay_s"), nan=0.0)
    send = num("send_s")
    end = t0 + np.where(np.isfinite(send), send, num("compute_start_s") + delay + num("compute_s"))
    order = np.lexsort((workers["iteration"].to_numpy(), workers["worker"].to_numpy()))
    idle = np.full(len(workers), np.nan)
    wk_sorted = workers["worker"].to_numpy()[order]
    prev_end = np.r_[np.nan, end[order][:-1]]
    prev_end[np.r_[True, wk_sorted[1:] != wk_sorted[:-1]]] = np.nan
    idle[order] = np.maximum(begin[order] - prev_end, 0.0) + delay[order]
    return idle


def split_idle_cpu(overhead_s: np.ndarray, idle_s: np.ndarray) -> tuple[np.ndarray, float]:
    """Split the measured per-call CPU into work done per call and a steady rate while idle.

    A worker process keeps using CPU while it waits for its next call (Ray's core-worker threads:
    about 0.004-0.006 cores each on the acceptance machine, the same in every scheme), and its clock
    charges that to the next call's ``cpu_s - compute_cpu_s``. Charged per call, it would make a
    scheme whose workers idle less (or a machine with shorter delays) look as if each call cost
    what it cost in the calibration run: ``overhead = c0 + r × idle`` is fitted by non-negative least
    squares (``scipy.optimize.nnls``; rows where both are finite) and the per-call work returned is
    ``overhead − r × idle`` (clipped at 0; rows without an idle span keep their value minus nothing).

    Args:
        overhead_s: ``(k,)`` per-call CPU-seconds (NaN where not measured).
        idle_s: ``(k,)`` idle seconds before/within each call (:func:`worker_idle_s`).
    Returns:
        ``(per_call_s (k,), rate_cores)``: the per-call CPU-seconds and the idle rate ``r`` (cores per
        worker process; 0 with fewer than 3 usable rows or no spread in ``idle_s``).
    """
    from scipy.optimize import nnls

    over = np.asarray(overhead_s, float)
    idle = np.asarray(idle_s, float)
    ok = np.isfinite(over) & np.isfinite(idle)
    rate = 0.0
    if ok.sum() >= 3 and np.ptp(idle[ok]) > 0:
        (_, rate), _ = nnls(np.column_stack([np.ones(int(ok.sum())), idle[ok]]), over[ok])
    per_call = np.where(np.isfinite(idle), np.maximum(over - rate * np.nan_to_num(idle), 0.0), over)
    return per_call, float(rate)


def background_cores(iterations: pd.DataFrame) -> tuple[float | None, float | None, float | None]:
    """What other processes took from the workers: ``(wait_cores, finish_cores, per_iteration_cpu_s)``.

    The wait phase's other-process CPU of iteration ``t`` is modelled as ``a + b × (decodable_s -
    start_s)``: ``a`` CPU-seconds of work every iteration brings (dispatching, Ray moving weights and
    replies, the master's bookkeeping: the same whatever the scheme, so a fast scheme sees more of it
    per second) plus a steady ``b`` cores (another program, the master's polling). ``a, b >= 0`` by
    non-negative least squares (Lawson & Hanson 1974, ``scipy.optimize.nnls``) over the iterations
    where the column is finite; the phase lengths of a run with stragglers spread enough to separate
    them (with fewer than 3 iterations or one length: ``a = 0``, ``b`` the ratio of sums). The finish
    phase (a few ms, a clock tick or two per reading) is a ratio of sums ``Σ other_cpu_finish_s /
    Σ (end_s - decodable_s)``. ``(None, None, None)`` when the trace did not measure them (versions 1–2).
    """
    from scipy.optimize import nnls

    def col(name):
        return pd.to_numeric(iterations[name], errors="coerce").to_numpy(float) if name in iterations else None

    wait_cpu, fin_cpu = col("other_cpu_wait_s"), col("other_cpu_finish_s")
    if wait_cpu is None or fin_cpu is None:
        return None, None, None
    start, dec, end = col("start_s"), col("decodable_s"), col("end_s")
    dw, df = dec - start, end - dec
    ok = np.isfinite(wait_cpu) & np.isfinite(dw) & (dw > 0)
    if not ok.any():
        return None, None, None
    x, y = dw[ok], wait_cpu[ok]
    if ok.sum() >= 3 and np.ptp(x) > 0:
        (a, b), _ = nnls(np.column_stack([np.ones_like(x), x]), y)
    else:
        a, b = 0.0, float(y.sum() / x.sum())
    okf = np.isfinite(fin_cpu) & np.isfinite(df) & (df > 0)
    fin = float(fin_cpu[okf].sum() / df[okf].sum()) if okf.any() else None
    return float(b), fin, float(a)


def recorded_cores(run: RunDir) -> float | None:
    """Cores the run's workers shared as recorded: a real run's ``meta.json`` ``usable_cpus`` (CPU
    affinity) or ``host_cpus`` (the machine's CPU count), else ``config.yaml`` ``workload.cores``;
    None when none is a number > 0."""
    wl = run.config.get("workload") if isinstance(run.config.get("workload"), dict) else {}
    for v in (run.meta.get("usable_cpus"), run.meta.get("host_cpus"), wl.get("cores")):
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < np.inf:
            return float(v)
    return None


def run_cores(run: RunDir) -> float | None:
    """:func:`recorded_cores`, or None when unknown or when ``n_workers <= cores`` (no contention)."""
    v = recorded_cores(run)
    return None if v is None or run.n_workers <= v else v


def cancel_granularity(run: RunDir) -> str:
    """When the run's cancelled workers stopped: ``config.yaml`` ``cancel_granularity``, else (runs
    recorded before the field existed) ``partition`` for a real run (its workers check for a cancel
    between partitions) and ``immediate`` for a simulated one."""
    v = run.config.get("cancel_granularity")
    if v in ("immediate", "partition"):
        return v
    return "partition" if run.executor == "real" else "immediate"


def calibrate(runs: RunDir | Sequence[RunDir], *, schemes: dict[str, Sequence[str]] | None = None,
              warmup: int = 0, contention: bool = True, use_measured_cpu: bool = False) -> Calibration:
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
    Returns:
        :class:`Calibration`.
    Raises:
        RunDirError: no usable compute / arrival / iteration data (names the file), no gradient size.
        ConfigError: runs with different ``n`` (field ``n``).
    """
    runs = [runs] if isinstance(runs, RunDir) else list(runs)
    n = runs[0].n_workers
    for r in runs[1:]:
        require_same_n(runs[0], r)
    groups: dict[int, tuple[list, list]] = {}
    pay, tr, master, lags, dispatch, overheads, bg_its, bg_bytes, idles = [], [], [], [], [], [], [], [], []
    n_measured = 0
    cores = run_cores(runs[0]) if contention else None
    use_measured = use_measured_cpu
    for run in runs:
        g_bytes, m_bytes = message_bytes(run)
        cancel_latency = float(run.config.get("cancel_latency_s") or 0.0)
        run_c = run_cores(run) if cores is not None else None
        for sch in (schemes or {}).get(run.label, run.schemes):
            its, wk = _warm(run, sch, warmup)
            cpu_s = None
            if cores is not None:
                # every row of the scheme's run contends (warm-up and late rows included); no cores
                # recorded for this run: its compute is taken as measured
                all_rows = run.workers_of(sch)
                dec = decontend(all_rows, run_c if run_c is not None else np.inf,
                                rows=all_rows.index.isin(wk.index))
                if use_measured:
                    cpu_s, over_s = measured_cpu(wk, dec.partitions_s, dec.overhead_s)
                    idle_all = worker_idle_s(all_rows, run.iterations_of(sch))
                    idles.append(idle_all[all_rows.index.isin(wk.index)][np.isfinite(over_s)])
                    n_measured += int(np.isfinite(pd.to_numeric(wk["compute_cpu_s"], errors="coerce")).sum())
                else:
                    cpu_s, over_s = dec.partitions_s, dec.overhead_s
                overheads.append(over_s[np.isfinite(over_s)])
            whole = cancel_granularity(run) == "partition"
            for dv, (u, r) in per_partition_compute(wk, its, cancel_latency, cpu_s, whole).items():
                groups.setdefault(dv, ([], []))[0].append(u)
                groups[dv][1].append(r)
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
            tr.append(arr[ok] - send[ok])
            pay.append(np.full(int(ok.sum()), g_bytes * frac))
            bg_its.append(its)
            bg_bytes.append(np.full(len(its), g_bytes * frac * len(run.workers_of(sch)["worker"].unique())))
            dec = pd.to_numeric(its["decodable_s"], errors="coerce").to_numpy(float)
            end = its["end_s"].to_numpy(float)
            good = np.isfinite(dec)
            master.append(np.maximum(end[good] - dec[good], 0.0))
            st = its.set_index("iteration")["start_s"]
            # start lag: the worker starts (it has the model) at compute_start_s; the per-iteration
            # median ignores workers still busy with earlier work (carry-over)
            lag = (pd.to_numeric(wk["compute_start_s"], errors="coerce").to_numpy(float)
                   - st.reindex(wk["iteration"]).to_numpy(float))
            lag_it = pd.Series(lag).groupby(wk["iteration"].to_numpy()).median().dropna()
            lags.append(lag_it.to_numpy(float))
            dispatch.append(dispatch_lags(run.workers_of(sch), run.iterations_of(sch), wk.index))
    where = runs[0].path
    notes: list[str] = []
    parts, n_rows, n_cens = {}, 0, 0
    for dv, (us, rs) in sorted(groups.items()):
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
    try:
        transfer, fit_notes = fit_transfer(np.concatenate(pay), np.concatenate(tr))
        notes += fit_notes
    except ValueError:
        raise RunDirError(f"{where / 'workers.csv'}: arrival_s: expected arrived messages with send_s and arrival_s, "
                          f"got none") from None
    if not np.concatenate(tr).size:
        raise RunDirError(f"{where / 'workers.csv'}: arrival_s: expected arrived messages with send_s and arrival_s, "
                          f"got none")
    m = np.concatenate(master)
    if m.size == 0:
        raise RunDirError(f"{where / 'iterations.csv'}: decodable_s: expected finite instants, got none")
    lag_all = np.concatenate(lags)
    if n_cens:
        notes.append(f"{n_cens} of {n_rows} compute times right-censored (cancelled): Kaplan–Meier estimate")
    over = np.concatenate(overheads) if overheads else np.zeros(0)
    idle_rate = 0.0
    if idles and sum(v.size for v in idles) == over.size:
        over_total = over
        over, idle_rate = split_idle_cpu(over, np.concatenate(idles))
        if idle_rate > 0:
            notes.append(f"per-call CPU {over_total.mean() * 1e3:.2f} ms = {over.mean() * 1e3:.2f} ms of work per call "
                         f"+ {idle_rate:.4f} cores per worker process while it waits between calls "
                         f"({n} processes: {n * idle_rate:.3f} cores, modelled as steady background)")
    if cores is not None and n_measured:
        notes.append(f"CPU measured by the workers (cpu_s, compute_cpu_s) on {n_measured} worker rows: partition "
                     f"work from compute_cpu_s, per-call overhead = cpu_s - compute_cpu_s, mean "
                     f"{over.mean() * 1e3 if over.size else 0.0:.2f} ms CPU; {cores:g} shared cores")
    elif cores is not None:
        notes.append(f"compute de-contended for {cores:g} shared cores (processor sharing); "
                     f"per-call overhead mean {over.mean() * 1e3 if over.size else 0.0:.2f} ms CPU")
    bg_wait = bg_fin = bg_it = bg_byte = None
    if cores is not None and use_measured and bg_its:
        bg_wait, bg_fin, bg_it = background_cores(pd.concat(bg_its, ignore_index=True))
        if bg_wait is not None and idle_rate > 0:  # the workers' idle-time CPU, all the time (split_idle_cpu)
            bg_wait += n * idle_rate
            bg_fin = (bg_fin if bg_fin is not None else 0.0) + n * idle_rate
        payload = float(np.mean(np.concatenate(bg_bytes))) if bg_bytes else 0.0
        if bg_wait is not None and bg_it and payload > 0:
            # the per-iteration work is Ray moving the replies: per byte of payload, so that a scheme
            # sending other message sizes (CCE: 1/m) is charged its own (Background.per_payload_byte_cpu_s)
            bg_byte = bg_it / payload
        if bg_wait is not None:
            notes.append(f"other processes took {bg_it * 1e3:.1f} ms of CPU per iteration"
                         + (f" ({bg_byte * 1e9:.1f} ns per byte of the workers' replies, {payload / 1e6:.2f} MB per "
                            f"iteration here)" if bg_byte else "")
                         + f" plus a steady {bg_wait:.3f} "
                         f"of {cores:g} cores while the master waited, {(bg_fin if bg_fin is not None else bg_wait):.3f} "
                         f"cores while it decoded and stepped (measured: other_cpu_wait_s, other_cpu_finish_s); "
                         f"the workers share the rest")
        else:
            notes.append("no other-process CPU recorded (trace older than version 3): the workers are "
                         "given every core, which over-predicts their speed on a loaded machine")
    granularity = cancel_granularity(runs[0])
    disp_all = np.concatenate(dispatch) if dispatch else np.zeros(0)
    disp_all = np.maximum(disp_all[np.isfinite(disp_all)], 0.0)
    return Calibration(dispatch_values_s=disp_all, source=tuple(r.label for r in runs), n_workers=n, compute_values_s=np.asarray(compute, float),
                       n_compute_rows=n_rows, n_censored=n_cens, transfer=transfer, master_values_s=m,
                       start_lag_s=float(np.median(lag_all)) if lag_all.size else 0.0, notes=tuple(notes),
                       cores=cores, overhead_values_s=np.maximum(over, 0.0), cancel_granularity=granularity,
                       background_wait_cores=bg_wait, background_finish_cores=bg_fin,
                       background_per_iteration_cpu_s=bg_it, background_per_payload_byte_cpu_s=bg_byte)


def require_same_n(source: RunDir, target: RunDir) -> None:
    """Refuse to predict ``target`` from a calibration on ``source`` with another worker count.

    Raises:
        ConfigError: field ``n``, e.g. ``n: expected 8 (as in calibration run uncoded-…), got 4 (run gc-fr-…)``.
    """
    if source.n_workers != target.n_workers:
        raise ConfigError("n", f"{source.n_workers} (as in calibration run {source.label})",
                          message=f"n: expected {source.n_workers} (as in calibration run {source.label}), "
                                  f"got {target.n_workers} (run {target.label})")


# ============================================================================ scenario
_COPIED = ("n_workers", "iterations", "seed", "stragglers", "policy", "cancel_latency_s")


def scenario_data(run: RunDir, scheme: str, calibration: Calibration, *, seed: int | None = None,
                  permutation_seed: int | None = None) -> dict:
    """Raw scenario mapping for simulating ``scheme`` as it ran in ``run`` (see module docstring).

    Args:
        run: the measured run (its config supplies the copied fields).
        scheme: scheme label in the run.
        calibration: from :func:`calibrate` (this run or another with the same n).
        seed: scenario seed (default: the run's own, which reproduces its straggler draws).
        permutation_seed: shuffle the empirical compute/master values (paired replications).
    Returns:
        dict for :func:`gcsim.scenario.validate_scenario`.
    """
    cfg = run.config
    data = {k: cfg[k] for k in _COPIED if k in cfg and cfg[k] is not None}
    data.setdefault("n_workers", run.n_workers)
    data.setdefault("iterations", int(run.iterations_of(scheme)["iteration"].nunique()))
    if seed is not None:
        data["seed"] = int(seed)
    g_bytes, m_bytes = message_bytes(run)
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{run.label}-{scheme}").lstrip("-_.") or "compare"
    workload = {"gradient_bytes": g_bytes, "model_bytes": m_bytes, "compute": calibration.compute_spec(permutation_seed)}
    if calibration.cores is not None:
        workload["cores"] = calibration.cores
        workload["call_overhead"] = calibration.overhead_spec(permutation_seed)
        if calibration.background_spec() is not None:
            workload["background"] = calibration.background_spec()
    data.update(
        name=name,
        schemes=[scheme_spec(run, scheme)],
        workload=workload,
        network=calibration.network_spec(permutation_seed),
        master={"decode_s": calibration.master_spec(permutation_seed)},
        cancel_granularity=calibration.cancel_granularity,
    )
    return data


def build_scenario(run: RunDir, scheme: str, calibration: Calibration, **kw):
    """:func:`scenario_data` validated into a :class:`gcsim.scenario.Scenario`.

    Raises:
        RunDirError: the run's config.yaml holds a value the scenario refuses (names the file and field).
    """
    from gcsim.scenario import validate_scenario

    data = scenario_data(run, scheme, calibration, **kw)
    try:
        return validate_scenario(data)
    except ConfigError as e:
        raise RunDirError(f"{run.path / 'config.yaml'}: {e}") from None


__all__ = ["Calibration", "background_cores", "measured_cpu", "TransferFit", "build_scenario", "calibrate", "compute_distribution", "fit_transfer",
           "message_bytes", "cancel_granularity", "recorded_cores", "run_cores",
           "dispatch_lags", "match_partition_spread", "per_partition_compute", "require_same_n", "scenario_data", "scheme_spec"]
