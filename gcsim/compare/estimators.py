"""Estimators of the calibration: each turns measured trace rows (``workers.csv`` /
``iterations.csv`` columns, seconds) into one calibrated quantity – per-partition compute (with
right-censoring and the spread of ``d``-partition means), the workers' measured CPU, dispatch lags,
the transfer line, the workers' idle CPU, and what other processes took. :func:`gcsim.compare.calibrate.calibrate`
pools their samples over runs and schemes (its module docstring gives the model behind each)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

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


def between_calls_cpu(workers: pd.DataFrame) -> np.ndarray:
    """Per worker row: the CPU-seconds its process used between the previous call's ``send_s`` and this
    call's start (trace format 4 ``between_calls_cpu_s``: Ray serialising the previous reply and
    deserialising this call's arguments, the worker's ``cpu_before`` in :mod:`gcsim.real.worker`), part
    of its ``cpu_s - compute_cpu_s``.

    Args:
        workers: worker rows (``(k,)``).
    Returns:
        ``(k,)`` CPU-seconds, clipped at 0; NaN where not recorded (every row of a trace older than
        format 4, of a simulated run or of an all-reduce run).
    """
    if "between_calls_cpu_s" not in workers:
        return np.full(len(workers), np.nan)
    return np.maximum(pd.to_numeric(workers["between_calls_cpu_s"], errors="coerce").to_numpy(float), 0.0)


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


def worker_idle_s(workers: pd.DataFrame) -> np.ndarray:
    """Per worker row: seconds the worker process spent outside its partitions' loop since its
    previous call ended, i.e. the gap between calls plus this call's injected delay (``(k,)``, NaN
    for a worker's first row or where the stamps are missing; gaps clipped at 0).

    A call ends at its ``send_s`` (or, cancelled, at ``compute_start_s + delay_s + compute_s``); the
    next starts at its ``compute_start_s`` (every stamp in seconds since the run's start, as both
    executors write them). The real
    worker's ``cpu_s - compute_cpu_s`` covers exactly this span (:mod:`gcsim.real.worker`:
    ``cpu_before`` + the delay's sleep + loading the weights + encoding).
    """
    num = lambda col: pd.to_numeric(workers[col], errors="coerce").to_numpy(float) if col in workers else np.full(len(workers), np.nan)  # noqa: E731
    begin = num("compute_start_s")
    delay = np.nan_to_num(num("delay_s"), nan=0.0)
    send = num("send_s")
    end = np.where(np.isfinite(send), send, begin + delay + num("compute_s"))
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


__all__ = ["BANDWIDTH_THRESHOLD_BYTES", "KM_POINTS", "TransferFit", "background_cores", "between_calls_cpu",
           "compute_distribution",
           "dispatch_lags", "finished_partition_cpu_s", "fit_transfer", "match_partition_spread", "measured_cpu", "per_partition_compute",
           "speed_block_medians", "split_idle_cpu", "worker_idle_s"]


#: iterations per block of :func:`speed_drift_cv` (about 8-20 s of a real run at 0.4-1 s per iteration)
DRIFT_BLOCK_ITERATIONS = 20
#: fewest blocks :func:`speed_drift_cv` estimates a spread from
DRIFT_MIN_BLOCKS = 3


def speed_drift_cv(workers: pd.DataFrame, warmup: int = 0, block: int = DRIFT_BLOCK_ITERATIONS) -> float:
    """How much the machine's CPU speed wandered during one run, as a fraction: the coefficient of
    variation (sample standard deviation / mean) of the median CPU-seconds per partition that the
    workers' own clocks measured (``compute_cpu_s / n_partitions`` of the rows that sent, status
    ``arrived``/``late``), taken over consecutive blocks of ``block`` iterations after ``warmup``.

    Why: on a shared machine the work per partition is not a constant of the model but an input that
    drifts (docs/validation/README.md, findings 13 and 14: 5-8 % between runs minutes apart, the same
    order within one run, and no scheme effect beyond it); a prediction calibrated on one run carries
    that uncertainty to every other run. The within-run spread at a ~10 s scale is the part of it one
    run can measure.

    Args:
        workers: workers.csv rows of one run (seconds; columns ``iteration``, ``status``,
            ``n_partitions``, ``compute_cpu_s``).
        warmup: iterations dropped at the start.
        block: iterations per block, ``>= 1``.
    Returns:
        the CV (e.g. 0.05 for 5 %); NaN when the trace has no CPU clocks or fewer than
        :data:`DRIFT_MIN_BLOCKS` blocks hold a finished row.
    """
    medians = speed_block_medians(workers, warmup, block)
    if medians.size < DRIFT_MIN_BLOCKS or not np.mean(medians) > 0:
        return float("nan")
    return float(np.std(medians, ddof=1) / np.mean(medians))


def finished_partition_cpu_s(workers: pd.DataFrame) -> np.ndarray:
    """float ``(k,)``: each row's CPU-seconds per partition on its worker's own clock
    (``compute_cpu_s / n_partitions``) where the row sent (status ``arrived``/``late``) and the clock
    read a positive time; NaN elsewhere, and everywhere without the ``compute_cpu_s`` column."""
    if "compute_cpu_s" not in workers:
        return np.full(len(workers), np.nan)
    cpu = pd.to_numeric(workers["compute_cpu_s"], errors="coerce").to_numpy(float)
    parts = pd.to_numeric(workers["n_partitions"], errors="coerce").to_numpy(float)
    done = workers["status"].astype(str).isin(_COMPLETED).to_numpy()
    ok = done & np.isfinite(cpu) & (cpu > 0) & np.isfinite(parts) & (parts > 0)
    return np.where(ok, cpu / np.where(ok, parts, 1.0), np.nan)


def speed_block_medians(workers: pd.DataFrame, warmup: int = 0, block: int = DRIFT_BLOCK_ITERATIONS) -> np.ndarray:
    """float ``(B,)``: the median CPU-seconds per partition of each block of ``block`` iterations after
    ``warmup`` that holds a finished row (what :func:`speed_drift_cv` spreads; ``B - 1`` is the degrees
    of freedom of that spread); empty without CPU clocks. A last block of fewer than ``block / 2``
    iterations is left out: a 51-iteration run's 1-iteration block counted as a third block (review)."""
    it = pd.to_numeric(workers["iteration"], errors="coerce").to_numpy(float)
    per = finished_partition_cpu_s(workers)
    ok = np.isfinite(per) & (it >= warmup)
    if not ok.any():
        return np.zeros(0)
    size = max(int(block), 1)
    key = ((it[ok] - warmup) // size).astype(int)
    meds = pd.Series(per[ok]).groupby(key).median()
    last = int(key.max())
    if 2 * len(np.unique(it[ok][key == last])) < size:  # a partial last block (of the iterations it holds)
        meds = meds.drop(last)
    return meds.to_numpy(float)
