"""The vectorised engine: the cancel-policy model of :mod:`gcsim.sim.engine` computed with numpy order
statistics over blocks of iterations, without a discrete-event loop.

What it models, exactly as the SimPy engine does (same keyed draws, :mod:`gcsim.stragglers`; on
common random numbers both give the same instants up to float rounding, ``tests/test_sim_vector.py``):
``policy: cancel`` without ``workload.cores`` (no CPU sharing); per-worker heterogeneity
(``worker_scale``, ``slowdown``), persistent (Markov) stragglers, additive delays; every message plan
(partitions computed before each message, payload fraction); network latency/bandwidth and
``network.dispatch``; the master's decode time; ``cancel_latency_s``; both cancel granularities.

One iteration ``t`` (module docstring of :mod:`gcsim.sim.engine`, times in seconds): every worker
starts at ``start_t + model`` (or ``start_t + dispatch[t, w]``), its message(s) arrive at
``start + model + delay + Σ_{q < d_w} compute[t, w, q]·slowdown[t, w] + latency + bytes/bandwidth``,
and the iteration is decodable at the first instant the arrived set meets the scheme's
:class:`~gcsim.schemes.base.Quorum` – the ``need``-th order statistic of the arrival times of every
group, the latest over groups (Tandon et al., ICML 2017, §5; Lee et al., IEEE Trans. Inf. Theory 2018,
§III) – then ``end = decodable + decode``, ``start_{t+1} = end``. For a quorum that is not
``guaranteed`` (exact schemes with a linear solve, which may refuse an ill-conditioned set) the engine
asks :meth:`Scheme.decode` for the quorum's arrivals and, on a refusal, for one more arrival at a
time, like the SimPy master (``decode_check="quorum"`` skips that: faster, but blind to refusals).

It is exact only when iterations do not overlap: every worker must be free (its last message sent, or
cancelled – at ``decodable + cancel_latency_s``, or at the end of the partition then in progress with
``cancel_granularity: partition``) by the time the next iteration reaches it. That is checked on the
draws; where it fails the run raises :class:`NeedsSimPy` (``gcsim simulate --engine auto`` then uses the
SimPy engine, the reference for carry-over, CPU sharing and overlapping cancels).

Memory: draws and per-worker arrays live for one block of iterations (:func:`block_iterations`:
:data:`BLOCK_WORKER_ITERATIONS` worker-iterations, and at most :data:`BLOCK_PARTITION_DRAWS` random
per-partition compute draws; a constant compute time is one broadcast value and the work a per-worker
table); only per-iteration rows (O(iterations) per scheme, for the exact quantiles of the summary) are
kept unless ``trace="full"`` asks for the worker rows (O(iterations × workers)).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from gcsim.errors import ConfigError, SchemeError
from gcsim.keyed_rng import keyed_uniforms, stream_keys
from gcsim.latency import build_distribution
from gcsim.scenario import Scenario
from gcsim.schemes import Scheme
from gcsim.sim.engine import (DISPATCH_STREAM, MAX_RUN_S, SimResult, _check_finite_draws, _check_run_length, _first_bad,
                              _Given, apply_overrides, check_run_size)
from gcsim.sim.progress import iteration_ticker
from gcsim.stragglers import DrawBlock, StragglerProcess, master_uniforms
from gcsim.trace import ITERATION_COLUMNS, WORKER_COLUMNS, summarize, trace_frame

#: worker-iterations per block (draws and per-worker arrays of one block are held at once).
BLOCK_WORKER_ITERATIONS = 1 << 18
#: with a random per-partition compute time, at most this many (iteration, worker, partition) draws per
#: block (a constant compute time is one broadcast value: no such array)
BLOCK_PARTITION_DRAWS = 1 << 21


def block_iterations(n: int, drawn_partitions: int = 0) -> int:
    """Iterations per block: :data:`BLOCK_WORKER_ITERATIONS` worker-iterations, and with
    ``drawn_partitions`` random compute draws per worker-iteration at most :data:`BLOCK_PARTITION_DRAWS`
    of them, so that no array grows with iterations × workers × partitions."""
    step = BLOCK_WORKER_ITERATIONS // max(1, n)
    if drawn_partitions > 0:
        step = min(step, BLOCK_PARTITION_DRAWS // (max(1, n) * drawn_partitions))
    return max(1, step)
#: values of ``trace``: ``full`` keeps the worker rows (workers.csv), ``iterations`` and ``none`` do not.
TRACE_LEVELS = ("none", "iterations", "full")
_ARRIVED, _LATE, _CANCELLED = 0, 1, 2
_STATUS = np.array(["arrived", "late", "cancelled"])


class NeedsSimPy(ConfigError):
    """The scenario (or its draws) needs what only the SimPy engine models. ``reason``: one phrase."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__("--engine", "simpy or auto for this scenario (the vector engine models the cancel "
                         "policy without CPU sharing, iterations that do not overlap)", _Given(f"vector ({reason})"))


def unsupported_reason(scenario: Scenario) -> str | None:
    """Why the vector engine cannot model ``scenario`` (one phrase), or None when it can (the draws may
    still make iterations overlap: :func:`simulate_vector` then raises :class:`NeedsSimPy`)."""
    if scenario.policy != "cancel":
        return f"policy {scenario.policy}"
    if scenario.workload.cores is not None:
        return f"workload.cores {scenario.workload.cores:g} (CPU sharing)"
    return None


@dataclass
class VectorResult(SimResult):
    """:class:`~gcsim.sim.engine.SimResult` of the vector engine. ``workers`` is empty (with the trace
    columns) unless ``trace == "full"``; ``refusals`` lists the decodes refused (``decode_check="exact"``
    only: with ``"quorum"`` none are asked)."""

    engine: str = "vector"
    trace: str = "full"


@dataclass
class _Plan:
    """Timing structure of one scheme in one iteration: ``d`` (n,) partitions per worker; ``bounds``
    (n, S) partitions computed at the end of each segment (padded with the last); ``m_worker``,
    ``m_seg`` (M,) sender and segment of each message; ``up`` (M,) transfer seconds; ``n_msgs`` (n,)."""

    d: np.ndarray
    bounds: np.ndarray
    n_seg: np.ndarray
    m_worker: np.ndarray
    m_seg: np.ndarray
    up: np.ndarray
    n_msgs: np.ndarray
    key: tuple

    @property
    def simple(self) -> bool:
        """One segment per worker and one message per worker, in worker order (every built-in scheme):
        the engine then works on ``(b, n)`` arrays without gathers."""
        n = len(self.d)
        return (self.bounds.shape[1] == 1 and len(self.m_worker) == n
                and bool(np.array_equal(self.m_worker, np.arange(n))))


def _plan(scheme: Scheme, it: int, sc: Scenario, memo: dict | None = None) -> _Plan:
    """The timing of ``scheme`` in iteration ``it``. ``memo``: per-messages-list arrays already read
    (a scheme returns the same list object for iterations of the same phase)."""
    assign, msgs = scheme.assignment(it), scheme.messages(it)
    n, M = len(assign), len(msgs)
    d = np.fromiter(map(len, assign), dtype=np.int64, count=n)
    bounds = d[:, None].copy()  # every message leaves after the worker's last partition: one segment
    net, grad = sc.network, sc.workload.gradient_bytes
    hit = memo.get(id(msgs)) if memo is not None else None
    if hit is not None and hit[0] is msgs:
        m_worker, frac = hit[1], hit[2]
    else:
        m_worker = np.fromiter((m.worker for m in msgs), dtype=np.int64, count=M)
        frac = np.fromiter((m.payload_fraction for m in msgs), dtype=np.float64, count=M)
        if memo is not None:
            memo[id(msgs)] = (msgs, m_worker, frac)  # the list is held: its id stays its own
    m_seg = np.zeros(M, dtype=np.int64)
    up = net.latency_s + grad * frac / net.bandwidth_bytes_per_s  # per message, the same float operations
    key = (d.tobytes(), m_worker.tobytes(), frac.tobytes())
    return _Plan(d, bounds, np.ones(n, dtype=np.int64), m_worker, m_seg, up, np.bincount(m_worker, minlength=n), key)


def _plans(scheme: Scheme, I: int, sc: Scenario) -> list[_Plan]:
    """One plan per phase ``t mod assignment_period``; checked to repeat over the first periods (and the
    warm-up of pipelined schemes). Raises NeedsSimPy for a scheme whose timing does not repeat."""
    p = scheme.assignment_period
    memo: dict = {}
    plans = [_plan(scheme, t, sc, memo) for t in range(min(I, p))]
    for t in range(p, min(I, 2 * p + scheme.s) if p > 1 else 0):  # static schemes: one plan
        if _plan(scheme, t, sc, memo).key != plans[t % p].key:
            raise NeedsSimPy(f"scheme {scheme.name}: message timing that does not repeat every "
                             f"{p} iterations")
    return plans


def _decisive(arr: np.ndarray, q, ids: np.ndarray, want_used: bool = True):
    """For arrivals ``arr`` (B, M) and quorum ``q``: the index of the decisive message (B,) and the mask of
    the messages the decoding uses (B, M) for a guaranteed quorum (None unless ``want_used``: every group
    then uses exactly ``need`` messages, so only the worker rows need the mask)."""
    B, M = arr.shape
    order = np.argsort(q.group, kind="stable")
    sizes = np.bincount(q.group)
    if sizes.min() < q.need:
        return None, None
    G = len(sizes)
    if np.all(sizes == sizes[0]):
        S = int(sizes[0])
        sorted_groups = bool(np.array_equal(order, np.arange(M)))
        a = (arr if sorted_groups else arr[:, order]).reshape(B, G, S)
        k = q.need - 1
        if S == 1:
            part = np.zeros((B, G, 1), dtype=np.int64)
        elif k == 0:  # the first arrival of each group
            part = np.argmin(a, axis=2)[:, :, None]
        else:
            part = np.argpartition(a, k, axis=2)
        kth_pos = part[:, :, k]  # (B, G) position within group
        if G == 1:
            g_star = np.zeros(B, dtype=np.int64)
            local = kth_pos[:, 0]
            decisive = local if sorted_groups else order[local]
            T = a[np.arange(B), 0, local]
        else:
            kth_t = np.take_along_axis(a, kth_pos[:, :, None], axis=2)[:, :, 0]
            g_star = np.argmax(kth_t, axis=1)
            local = kth_pos[np.arange(B), g_star]
            decisive = order.reshape(G, S)[g_star, local]
            T = kth_t[np.arange(B), g_star]
        if not want_used:
            return decisive, None
        if q.pick == "first":
            used_l = np.zeros((B, G, S), dtype=bool)
            np.put_along_axis(used_l, part[:, :, :q.need], True, axis=2)
        else:  # lowest ids among the arrived by T
            arrived = a <= T[:, None, None]
            used_l = arrived & (np.cumsum(arrived, axis=2) <= q.need)
        used = np.zeros((B, M), dtype=bool)
        used[:, order] = used_l.reshape(B, M)
        return decisive, used
    # groups of different sizes: one pass per group
    kth_t = np.empty((B, G))
    kth_i = np.empty((B, G), dtype=np.int64)
    for g in range(G):
        mem = np.flatnonzero(q.group == g)
        sub = arr[:, mem]
        pos = np.argpartition(sub, q.need - 1, axis=1)[:, q.need - 1] if len(mem) > 1 else np.zeros(B, dtype=np.int64)
        kth_i[:, g] = mem[pos]
        kth_t[:, g] = sub[np.arange(B), pos]
    g_star = np.argmax(kth_t, axis=1)
    decisive = kth_i[np.arange(B), g_star]
    T = kth_t[np.arange(B), g_star]
    if not want_used:
        return decisive, None
    used = np.zeros((B, M), dtype=bool)
    for g in range(G):
        mem = np.flatnonzero(q.group == g)
        sub = arr[:, mem]
        if q.pick == "first":
            rank = np.argsort(np.argsort(sub, axis=1, kind="stable"), axis=1)
            used[:, mem] = rank < q.need
        else:
            arrived = sub <= T[:, None]
            used[:, mem] = arrived & (np.cumsum(arrived, axis=1) <= q.need)
    return decisive, used


def _dispatch_block(sc: Scenario, its: np.ndarray) -> np.ndarray | None:
    """``network.dispatch`` draws ``(B, n)`` of the SimPy engine's stream, for the block's iterations."""
    spec = sc.network.dispatch
    if spec is None:
        return None
    dist = build_distribution(spec)
    n = sc.n_workers
    u = keyed_uniforms(stream_keys(sc.seed, DISPATCH_STREAM, its), n * dist.n_uniforms)
    out = np.asarray(dist.from_uniform(u.reshape(len(its), n, dist.n_uniforms)), dtype=np.float64)
    where = _first_bad(np.where(out >= 0, out, np.nan))
    if where is not None:
        raise ConfigError("network.dispatch", "a distribution whose draws are finite seconds >= 0",
                          _Given(f"{out[where]} (iteration {int(its[where[0]])}, worker {where[1]})"))
    return out


def cumulative_work(block: DrawBlock) -> np.ndarray:
    """``(B, n, P + 1)`` compute seconds (``slowdown`` applied) a worker has done after its first ``q``
    partitions, ``q = 0..P``: the same for every scheme of a block (computed once per block). Stored
    level-major (a transposed view of ``(P + 1, B, n)``), so that gathering one level for every worker
    reads contiguous memory; the values are those of ``cumsum(compute_s * slowdown, axis=2)``."""
    B, n = block.delay_s.shape
    P = block.compute_s.shape[2]
    f = block.slowdown
    if B and P and block.compute_s.strides[:2] == (0, 0) and np.array_equal(f, np.broadcast_to(f[:1], f.shape)):
        # compute draws shared by every (iteration, worker) (a constant distribution: a broadcast view, see
        # DrawBlock) and a slowdown that does not change within the block (worker_scale only): one
        # (n, P + 1) table, broadcast over the block's iterations (no (B, n, P) array), same sums
        table = np.empty((P + 1, n))
        table[0] = 0.0
        np.multiply(block.compute_s[0, 0, :, None], f[0][None, :], out=table[1:])
        np.cumsum(table[1:], axis=0, out=table[1:])
        return np.broadcast_to(table.T[None], (B, n, P + 1))
    levels = np.empty((P + 1, B, n))
    levels[0] = 0.0
    np.multiply(np.moveaxis(block.compute_s, 2, 0), block.slowdown[None, :, :], out=levels[1:])
    np.cumsum(levels[1:], axis=0, out=levels[1:])  # sequential sums, as cumsum along the partitions
    return levels.transpose(1, 2, 0)


class _SchemeRun:
    """Per-scheme state carried from block to block: the master's clock and the rows kept."""

    def __init__(self, label: str, scheme: Scheme, sc: Scenario, I: int, trace: str, decode_check: str):
        self.label, self.scheme, self.sc, self.trace = label, scheme, sc, trace
        self.plans = _plans(scheme, I, sc)
        self.quorums = [scheme.quorum(t) for t in range(len(self.plans))]
        # phases with the same timing and quorum are simulated together (a pipelined scheme's s + 1
        # phases differ only in which partition each worker computes: one class)
        classes: dict = {}
        self.phase_class = np.array([classes.setdefault(
            (pl.key, q.group.tobytes(), q.need, q.pick, q.guaranteed), len(classes))
            for pl, q in zip(self.plans, self.quorums)], dtype=np.int64)
        self.class_phase = [int(np.flatnonzero(self.phase_class == c)[0]) for c in range(len(classes))]
        self.check = decode_check == "exact"
        self.clock = 0.0
        self.refusals: list = []  # (iteration, Refusal) per refused arrived set, as SimResult.refusals
        self.iter_cols: dict[str, list] = {c: [] for c in ("start_s", "decodable_s", "end_s", "n_arrived", "n_used")}
        self.worker_frames: list[pd.DataFrame] = []

    def run_block(self, its: np.ndarray, block: DrawBlock, decode_s: np.ndarray, extra: np.ndarray | None,
                  next_ready: Callable, cum: np.ndarray | None = None) -> None:
        """Simulate the block's iterations (consecutive, from ``its[0]``). ``cum``: the block's
        :func:`cumulative_work`, when the caller shares it between schemes (else computed here)."""
        sc, scheme = self.sc, self.scheme
        B, n = block.delay_s.shape
        net = sc.network
        model_s = 0.0 if extra is not None else net.latency_s + sc.workload.model_bytes / net.bandwidth_bytes_per_s
        if cum is None:
            cum = cumulative_work(block)
        full = self.trace == "full"
        if len(self.class_phase) == 1:
            groups = [np.arange(B)]
        else:
            cls = self.phase_class[its % len(self.plans)]
            groups = [np.flatnonzero(cls == c) for c in range(len(self.class_phase))]
        n_used = np.empty(B, dtype=np.int64)
        per_phase = []
        for c, rows in enumerate(groups):
            if len(rows) == 0:
                continue
            sel = slice(None) if len(rows) == B else rows  # a view of the block's arrays when it is all of it
            plan, q = self.plans[self.class_phase[c]], self.quorums[self.class_phase[c]]
            b = len(rows)
            if plan.d.max() > cum.shape[2] - 1:
                raise SchemeError.param(scheme.name, f"assignment at iteration {int(its[rows[0]])}",
                                        f"at most {cum.shape[2] - 1} partitions per worker", int(plan.d.max()))
            off = extra[sel] if extra is not None else model_s  # (b, n), or one number for every worker
            if plan.simple:
                # dur = (delay + cum[d]) - cum[0] (minus 0.0 is exact); ends = cumsum([off, dur]) = off + dur
                if np.all(plan.d == plan.d[0]):
                    level = cum[:, :, int(plan.d[0])][sel]
                else:
                    level = cum[rows[:, None], np.arange(n)[None, :], plan.d[None, :]]
                dur2 = block.delay_s[sel] + level
                np.maximum(dur2, 0.0, out=dur2)
                arr_rel = off + dur2
                arr_rel += plan.up
                dur = dur2[:, :, None]
            else:
                # (b, n, S) cumulative compute at each segment end
                cb = cum[rows[:, None, None], np.arange(n)[None, :, None], plan.bounds[None, :, :]]
                prev = np.concatenate([np.zeros((b, n, 1)), cb[:, :, :-1]], axis=2)
                dur = np.empty_like(cb)
                dur[:, :, 0] = (block.delay_s[sel] + cb[:, :, 0]) - prev[:, :, 0]
                dur[:, :, 1:] = cb[:, :, 1:] - prev[:, :, 1:]
                dur[:, :, 1:] *= (np.arange(1, cb.shape[2]) < plan.n_seg[:, None])[None]  # padded segments: 0
                dur = np.maximum(dur, 0.0)
                off_a = np.broadcast_to(off, (b, n))
                ends_rel = np.cumsum(np.concatenate([off_a[:, :, None], dur], axis=2), axis=2)[:, :, 1:]
                arr_rel = ends_rel[:, plan.m_worker, plan.m_seg] + plan.up[None, :]
            decisive, used = _decisive(arr_rel, q, np.arange(len(plan.up)), want_used=full)
            if decisive is None:
                raise SchemeError(f"scheme {self.label}: messages of iteration {int(its[rows[0]])} never became "
                                  f"decodable (a quorum group has fewer than {q.need} messages)")
            if not q.guaranteed and self.check:
                decisive, used = self._checked(its[rows], arr_rel, decisive)
            n_used[rows] = used.sum(axis=1) if used is not None else q.need * (int(q.group.max()) + 1)
            per_phase.append((rows, sel, plan, dur, off, decisive, used))
        # the master's clock, iteration by iteration, with the SimPy engine's float operations:
        # start, + off, + each segment's duration up to the decisive message's (0 adds nothing), + its
        # transfer = decodable, + decode = the next start: one sequential cumsum (add.accumulate)
        S_max = max(p[3].shape[2] for p in per_phase)
        steps = np.zeros((B, S_max + 3))
        for rows, sel, plan, dur, off, decisive, used in per_phase:
            w = plan.m_worker[decisive]
            ar = np.arange(len(rows))
            seg = dur[ar, w]  # (b, S) the decisive worker's segments
            S = seg.shape[1]
            if S > 1:  # segments after the decisive message's are not waited for
                seg = np.where(np.arange(S)[None, :] <= plan.m_seg[decisive][:, None], seg, 0.0)
            steps[rows, 0] = off[ar, w] if extra is not None else off
            steps[rows, 1:1 + S] = seg
            steps[rows, S_max + 1] = plan.up[decisive]
        steps[:, S_max + 2] = decode_s
        acc = np.cumsum(np.concatenate([[self.clock], steps.ravel()]))[1:].reshape(B, S_max + 3)
        decodable = acc[:, S_max + 1].copy()
        ends = acc[:, S_max + 2].copy()
        starts = np.empty(B)
        starts[0] = self.clock
        starts[1:] = ends[:-1]
        self.clock = float(ends[-1])
        # absolute instants, overlap check, rows
        n_arrived = np.empty(B, dtype=np.int64)
        lat = sc.cancel_latency_s
        for rows, sel, plan, dur, off, decisive, used in per_phase:
            b = len(rows)
            cstart = starts[sel][:, None] + off  # (b, n), or (b, 1) when off is one number
            if plan.simple:
                last_end = cstart + dur[:, :, 0]  # (+ 0.0 when the duration is 0: exact)
                ends_abs = last_end[:, :, None]
                arr_abs = last_end + plan.up
            else:
                cstart = np.broadcast_to(cstart, (b, n))
                ends_abs = np.empty_like(dur)
                x = cstart
                for j in range(dur.shape[2]):
                    x = np.where(dur[:, :, j] > 0, x + dur[:, :, j], x)
                    ends_abs[:, :, j] = x
                arr_abs = ends_abs[:, plan.m_worker, plan.m_seg] + plan.up[None, :]
                last_end = np.take_along_axis(ends_abs, (plan.n_seg - 1)[None, :, None].repeat(b, 0), axis=2)[:, :, 0]
            T = decodable[sel]
            in_time = arr_abs <= T[:, None]
            n_arrived[rows] = np.count_nonzero(in_time, axis=1)
            cancel_at = T + lat if lat > 0 else T
            ready = next_ready(its[sel], ends[sel])  # (b,) instant the next iteration reaches the workers
            exact_check = full or sc.cancel_granularity == "partition" or bool(np.any(cancel_at > ready))
            if not exact_check:
                # with cancel_at <= ready a cancelled worker is free in time: only one still computing past
                # the next dispatch can be late, so the exact test runs only when some last_end > ready
                exact_check = bool(np.any(last_end > ready[:, None]))
            if exact_check:
                cancelled = (cstart <= cancel_at[:, None]) & (last_end > cancel_at[:, None])
                free = np.where(cancelled, cancel_at[:, None], last_end)
                if sc.cancel_granularity == "partition":
                    free = np.where(cancelled, self._partition_end(np.broadcast_to(cstart, (b, n)), block.delay_s[sel],
                                                                   cum[rows], plan, cancel_at), free)
                late = free > ready[:, None]
                if np.any(late):
                    bb, w = np.argwhere(late)[0]
                    raise NeedsSimPy(f"worker {int(w)} of iteration {int(its[rows][bb])} still busy when the next "
                                     f"iteration reaches it, by {float(free[bb, w] - ready[bb]):.3g} s")
                if full:
                    self._worker_rows(its[rows], rows, block, cum[rows], plan, np.broadcast_to(cstart, (b, n)),
                                      ends_abs, arr_abs, in_time, used, cancelled, cancel_at, extra)
        if full and len(per_phase) > 1:  # phases interleave: back to iteration order
            k = len(per_phase)
            block_df = pd.concat(self.worker_frames[-k:], ignore_index=True)
            del self.worker_frames[-k:]
            self.worker_frames.append(block_df.sort_values(["iteration", "worker"], kind="stable", ignore_index=True))
        for name, v in (("start_s", starts), ("decodable_s", decodable), ("end_s", ends), ("n_arrived", n_arrived),
                        ("n_used", n_used)):
            self.iter_cols[name].append(v)

    def _checked(self, its: np.ndarray, arr: np.ndarray, decisive: np.ndarray):
        """Ask the scheme's decoder from the quorum's arrivals on, one more arrival at a time while it
        refuses (as the SimPy master does); returns the decisive messages and the used masks."""
        scheme = self.scheme
        order = np.argsort(arr, axis=1, kind="stable")
        rank = np.argsort(order, axis=1)
        B, M = arr.shape
        used = np.zeros((B, M), dtype=bool)
        out = decisive.copy()
        for b in range(B):
            qlen = int(rank[b, decisive[b]]) + 1
            it = int(its[b])
            while True:
                dec = scheme.decode(order[b, :qlen], it)
                if dec is not None:
                    break
                if getattr(scheme, "last_refusal", None) is not None:
                    self.refusals.append((it, scheme.last_refusal))
                qlen += 1
                if qlen > M:
                    raise SchemeError(f"scheme {self.label}: messages of iteration {it} never became decodable "
                                      f"(arrived {M} of {M})")
            out[b] = order[b, qlen - 1]
            used[b, list(dec.used)] = True
        return out, used

    @staticmethod
    def _partition_end(cstart, delay, cum, plan: _Plan, cancel_at) -> np.ndarray:
        """When a cancelled worker stops with ``cancel_granularity: partition``: at the cancel while in its
        delay, else at the end of the partition in progress."""
        t0 = cstart + delay  # compute starts
        d = plan.d
        P = cum.shape[2] - 1
        part_ends = t0[:, :, None] + cum[:, :, 1:]  # (b, n, P)
        valid = np.arange(1, P + 1)[None, None, :] <= d[None, :, None]
        after = (part_ends >= cancel_at[:, None, None]) & valid
        first = np.argmax(after, axis=2)
        end = np.take_along_axis(part_ends, first[:, :, None], axis=2)[:, :, 0]
        return np.where(cancel_at[:, None] <= t0, cancel_at[:, None], end)

    def _worker_rows(self, its, rows, block: DrawBlock, cum, plan: _Plan, cstart, ends_abs, arr_abs, in_time, used,
                     cancelled, cancel_at, extra) -> None:
        b, n = cstart.shape
        M = len(plan.up)
        sent = (~cancelled[:, plan.m_worker]) | (ends_abs[:, plan.m_worker, plan.m_seg] <= cancel_at[:, None])
        send_m = np.where(sent, ends_abs[:, plan.m_worker, plan.m_seg], np.nan)
        arr_m = np.where(sent, arr_abs, np.nan)
        send_w = np.full((b, n), np.nan)
        arr_w = np.full((b, n), np.nan)
        n_sent = np.zeros((b, n), dtype=np.int64)
        n_in = np.zeros((b, n), dtype=np.int64)
        used_w = np.zeros((b, n), dtype=bool)
        for m in range(M):  # messages per worker: one in every built-in scheme
            w = plan.m_worker[m]
            send_w[:, w] = np.fmax(send_w[:, w], send_m[:, m])
            arr_w[:, w] = np.fmax(arr_w[:, w], arr_m[:, m])
            n_sent[:, w] += sent[:, m]
            n_in[:, w] += in_time[:, m]
            used_w[:, w] |= used[:, m]
        status = np.where(n_in >= plan.n_msgs[None, :], _ARRIVED,
                          np.where(cancelled & (n_sent < plan.n_msgs[None, :]), _CANCELLED, _LATE))
        comp = np.take_along_axis(cum, np.broadcast_to(plan.d[None, :, None], (b, n, 1)), axis=2)[:, :, 0]
        disp = cstart if extra is not None else cstart
        self.worker_frames.append(trace_frame({
            "scheme": self.label, "iteration": np.repeat(its, n), "worker": np.tile(np.arange(n), b),
            "n_partitions": np.tile(plan.d, b), "dispatch_s": disp.ravel(), "compute_start_s": cstart.ravel(),
            "compute_s": comp.ravel(), "delay_s": block.delay_s[rows].ravel(), "slowdown": block.slowdown[rows].ravel(),
            "send_s": send_w.ravel(), "arrival_s": arr_w.ravel(), "used": used_w.ravel(),
            "status": _STATUS[status.ravel()], "cpu_s": comp.ravel(), "compute_cpu_s": comp.ravel(),
            "between_calls_cpu_s": np.nan,
        }, WORKER_COLUMNS, "workers.csv"))

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        cols = {k: np.concatenate(v) for k, v in self.iter_cols.items()}
        I = len(cols["start_s"])
        it_df = trace_frame({"scheme": self.label, "iteration": np.arange(I), **cols,
                             "duration_s": cols["end_s"] - cols["start_s"],
                             "other_cpu_wait_s": np.nan, "other_cpu_finish_s": np.nan},
                            ITERATION_COLUMNS, "iterations.csv")
        w_df = (pd.concat(self.worker_frames, ignore_index=True) if self.worker_frames
                else pd.DataFrame(columns=WORKER_COLUMNS))
        return it_df, w_df


def simulate_vector(scenario: Scenario, *, schemes: Sequence[str] | None = None, iterations: int | None = None,
                    seed: int | None = None, trace: str = "full", decode_check: str = "exact",
                    progress: bool | Callable[[int], None] = False) -> VectorResult:
    """Simulate every scheme of ``scenario`` with the vectorised engine (module docstring).

    Args:
        scenario, schemes, iterations, seed, progress: as :func:`gcsim.sim.engine.simulate`.
        trace: ``"full"`` (worker rows kept: memory ∝ iterations × workers), ``"iterations"`` or ``"none"``
            (per-iteration rows only; the two differ in what the run directory writes).
        decode_check: ``"exact"`` (ask the decoder of an exact scheme with a non-guaranteed quorum for the
            quorum's arrivals, one more arrival at a time while it refuses: the SimPy engine's result) or
            ``"quorum"`` (trust the quorum: no decode calls; refusals are not seen).
    Returns:
        :class:`VectorResult` (times in seconds, :mod:`gcsim.trace` columns).
    Raises:
        ConfigError: bad overrides, ``trace`` or ``decode_check``; non-finite draws; a run longer than
            :data:`~gcsim.sim.engine.MAX_RUN_S`; more worker rows than the SimPy engine's limit with
            ``trace="full"``. NeedsSimPy (a ConfigError): the scenario or its draws need the SimPy engine.
        SchemeError: a scheme that never decodes.
    """
    t0 = time.perf_counter()
    if trace not in TRACE_LEVELS:
        raise ConfigError("trace", f"one of {', '.join(TRACE_LEVELS)}", trace)
    if decode_check not in ("exact", "quorum"):
        raise ConfigError("decode_check", "exact or quorum", decode_check)
    sc = apply_overrides(scenario, schemes=schemes, iterations=iterations, seed=seed)
    reason = unsupported_reason(sc)
    if reason is not None:
        raise NeedsSimPy(reason)
    if trace == "full":
        check_run_size(sc)
    built = sc.build_schemes()
    n, I = sc.n_workers, sc.iterations
    max_load = max(max(max(len(a) for a in sch.assignment(t)) for t in range(sch.assignment_period))
                   for sch in built.values())
    max_load = max([max_load] + [sch.computation_load for sch in built.values()])
    overhead = sc.workload.call_overhead
    process = StragglerProcess(sc.stragglers, n, sc.seed, compute=build_distribution(sc.workload.compute),
                               call_overhead=build_distribution(overhead) if overhead is not None else None,
                               speed_variation=sc.workload.speed_variation)
    decode_dist = build_distribution(sc.master.decode_s)
    decode_all = np.asarray(decode_dist.from_uniform(master_uniforms(sc.seed, np.arange(I), decode_dist.n_uniforms)),
                            dtype=np.float64).reshape(I)
    runs = [_SchemeRun(label, sch, sc, I, trace, decode_check) for label, sch in built.items()]

    net = sc.network
    model_s = net.latency_s + sc.workload.model_bytes / net.bandwidth_bytes_per_s
    drawn = process.compute is not None and (process.compute.n_uniforms or process.speed_variation is not None)
    step = block_iterations(n, max_load if drawn else 0)  # a speed factor makes even a constant compute an array
    with iteration_ticker(progress, I * len(built), "simulate (vector)") as tick:
        for a in range(0, I, step):
            its = np.arange(a, min(I, a + step))
            block = process.draw_block(its, max_load)
            decode_s = decode_all[its]
            _check_block(sc, block, decode_s, its)
            extra = _dispatch_block(sc, its)
            cum = cumulative_work(block)

            for r in runs:
                def next_ready(rows_its, rows_ends, extra=extra):
                    # the next iteration starts at this one's end and reaches the workers model_s later
                    # (with network.dispatch: at its start, then each worker waits its own draw)
                    return rows_ends + (0.0 if extra is not None else model_s)
                r.run_block(its, block, decode_s, extra, next_ready, cum=cum)
                if tick is not None:
                    tick(len(its))
    it_frames, w_frames = zip(*(r.frames() for r in runs))
    iterations_df = pd.concat(it_frames, ignore_index=True)
    run_s = float(iterations_df["end_s"].max())
    if run_s > MAX_RUN_S:
        full = process.draw_block(range(min(I, 1)), max_load)
        _check_run_length(sc, full, decode_all[:1], run_s)
    workers_df = pd.concat(w_frames, ignore_index=True)
    loads = {label: sch.describe() for label, sch in built.items()}
    refusals = {r.label: r.refusals for r in runs}
    summary = summarize(iterations_df, loads, {k: len({it for it, _ in v}) for k, v in refusals.items()})
    return VectorResult(scenario=sc, schemes=built, iterations=iterations_df, workers=workers_df, summary=summary,
                        wall_s=time.perf_counter() - t0, loads=loads, engine="vector", trace=trace,
                        refusals=refusals)


def _check_block(sc: Scenario, block: DrawBlock, decode_s: np.ndarray, its: np.ndarray) -> None:
    """The SimPy engine's finite-draw check on one block, naming absolute iterations."""
    if block.compute_s.size and block.compute_s.strides[:2] == (0, 0):  # one broadcast compute draw: check it once
        block = replace(block, compute_s=block.compute_s[:1, :1])
    arrays = (block.delay_s, block.slowdown, block.compute_s, decode_s, block.call_overhead_s)
    if all(a is None or bool(np.isfinite(a).all()) for a in arrays):  # the usual case: no search for the culprit
        return
    try:
        _check_finite_draws(sc, block, decode_s)
    except ConfigError as e:
        if its[0] == 0:
            raise
        raise ConfigError(e.field, e.allowed, _Given(f"{e.given} (block from iteration {int(its[0])})")) from None


#: values of ``gcsim simulate --engine``.
ENGINES = ("auto", "simpy", "vector")


def simulate_with(scenario: Scenario, engine: str = "auto", *, trace: str = "full",
                  progress: bool | Callable[[int], None] = False) -> SimResult:
    """Simulate with the chosen engine: ``"vector"`` (raises :class:`NeedsSimPy` where it cannot model the
    scenario), ``"simpy"``, or ``"auto"`` – the vector engine whenever it models the scenario (it is
    10–100× faster), else SimPy. The result's ``engine`` says which ran and ``engine_note`` (an attribute
    set here) why SimPy was chosen, or ``""``.

    Raises:
        ConfigError: ``engine`` or ``trace`` not among the allowed values; NeedsSimPy for a forced vector
            engine; every error of the engine that runs.
    """
    from gcsim.sim.engine import simulate

    if engine not in ENGINES:
        raise ConfigError("--engine", f"one of {', '.join(ENGINES)}", engine)
    if trace not in TRACE_LEVELS:
        raise ConfigError("--trace", f"one of {', '.join(TRACE_LEVELS)}", trace)
    note = ""
    if engine != "simpy":
        reason = unsupported_reason(scenario)
        if reason is None or engine == "vector":
            try:
                result = simulate_vector(scenario, trace=trace, progress=progress)
                result.engine_note = ""
                return result
            except NeedsSimPy as e:
                if engine == "vector":
                    raise
                note = e.reason
        else:
            note = reason
    result = simulate(scenario, progress=progress)
    result.trace = trace
    result.engine_note = note
    return result
