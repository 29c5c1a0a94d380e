"""The parameter server's side of one iteration: dispatch to the worker actors, collect with
``ray.wait`` until the scheme can decode, decode, and record the trace rows.

One iteration ``t`` (instants in seconds from the run's time origin, :data:`WORKER_COLUMNS` /
:data:`ITERATION_COLUMNS` of :mod:`gcsim.trace`):

1. ``start_s``; the flat weights are put into the object store ONCE (``ray.put``) and the reference
   is passed to every live worker with its straggler draw (``StragglerProcess.draw(t)``: additive
   ``delay_s`` and ``slowdown``), at ``dispatch_s``;
2. replies are collected with ``ray.wait``; ``ray.wait`` keeps the input order, so replies that are
   ready together are ordered by the workers' own ``send`` timestamps before they are fed, one by
   one, to ``scheme.decode(arrived, t)``; ``arrival_s`` is when the master saw the reply;
   ``decodable_s`` the first instant the arrived set decodes;
3. the used payloads are fetched and combined (:meth:`Scheme.combine`, float64); the caller applies
   the optimizer step and closes the iteration with :meth:`ParameterServer.end_iteration` (``end_s``);
4. unfinished work of ``t``: policy ``cancel`` – ``ray.cancel`` on the task (the worker's delay
   sleep notices within ``cancel_poll_s``; status ``cancelled``, or ``late`` if it had already
   replied); policy ``carry-over`` – left running (the actor starts ``t+1`` after it, so
   ``compute_start_s > dispatch_s``); its reply is still collected in later iterations (status
   ``late``, with its ``arrival_s``) but its payload reference is released at once.

Lost workers: one failure path for an actor that died, a node that went away (its actors die with
it) and a reply whose payload cannot be fetched (``ObjectLostError`` and its kinds –
``ObjectReconstructionFailedError``, ``OwnerDiedError`` – or no payload within ``fetch_timeout_s``).
The worker gets status ``dead`` (from that iteration on), is recorded in :attr:`ParameterServer.deaths`
with the iteration and the cause, and is not dispatched to again. With several workers per actor
process (``--workers-per-process K``) a process's death is the death of all its K workers: each is
recorded dead when its call in flight, or its next call, fails with the actor's death. A lost reply counts as never
arrived: its messages leave the arrived set, which is decoded again from what survives (waiting for
more replies if needed). With more than ``s`` lost workers the iteration raises
:class:`RunFailedError` naming them (the decoder cannot work around them; the run stops at its last
finished iteration).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from gcsim.errors import RunFailedError
from gcsim.real.staleness import STALENESS_COLUMNS, staleness_rows
from gcsim.trace import ITERATION_COLUMNS, WORKER_COLUMNS, trace_frame


class RunInterrupted(Exception):
    """Raised inside :meth:`ParameterServer.step` when the caller asked to stop (Ctrl-C)."""


def lost_worker_errors() -> tuple[type, ...]:
    """Ray exceptions that mean a worker (or what it produced) is gone for good: a dead or
    unavailable actor, a dead node or raylet, a crashed worker process, a lost object (including
    ``ObjectReconstructionFailedError`` and ``OwnerDiedError``)."""
    from ray import exceptions as rx

    return (rx.RayActorError, rx.ObjectLostError, rx.NodeDiedError, rx.WorkerCrashedError,
            rx.LocalRayletDiedError)


def _cause(e: BaseException) -> str:
    """``"<ExceptionType>: <first line>"`` of a Ray error (its messages run to many lines)."""
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first[:200]}" if first else type(e).__name__


@dataclass
class _Pending:
    iteration: int
    worker: int
    payload_ref: object | None


@dataclass
class StepResult:
    """What one collected iteration produced (before the optimizer step).

    Attributes:
        iteration: ``t``.
        gradient: float64 ``(l,)``: the decoded gradient (sum of partition gradients for an exact scheme).
        used_workers: workers whose messages entered the decoding.
        loss: mean training loss of the partition slices whose replies arrived (NaN if none).
        exact: whether the decoding is exact.
        cond: condition number of the decoding's linear solve.
    """

    iteration: int
    gradient: np.ndarray
    used_workers: tuple[int, ...]
    loss: float
    exact: bool
    cond: float


def fit_worker_cpus(node_cpus: list[float], n_workers: int, requested: float | None = None,
                    workers_per_process: int = 1) -> float:
    """Logical CPUs per worker so that ``n_workers`` workers fit the nodes' CPUs.

    Args:
        node_cpus: CPUs of each alive node (``ray.nodes()``'s ``Resources["CPU"]``).
        n_workers: logical workers to place.
        requested: ``--worker-cpus`` (None: the largest value <= 1 that fits, a node's CPUs split
            evenly among the workers it takes, rounded down to Ray's 1e-4 resolution).
        workers_per_process: ``K``: the workers run ``K`` to an actor process, one placement-group
            bundle of ``K`` × the result per process (``ceil(n / K)`` processes; a node fits whole
            processes only, counted as ``K`` workers each). 1: one actor and one bundle per worker.
    Returns:
        CPUs per worker (a process hosting ``j`` workers reserves ``j`` times it).
    Raises:
        RunFailedError: nothing fits, one line naming what is missing (e.g. ``4 worker actors need 1
            CPU each; the cluster has 3 nodes with 1 CPU``).
    """
    k = max(1, int(workers_per_process))
    procs = -(-int(n_workers) // k)

    def fits(c: float) -> bool:
        return sum(int(x / (k * c) + 1e-9) for x in node_cpus) >= procs

    what = (f"{n_workers} worker actors" if k == 1 else
            f"{n_workers} workers ({procs} processes of up to {k}, --workers-per-process)")
    cpus = [float(x) for x in node_cpus if x > 0]
    if requested is not None:
        if not fits(float(requested)):
            raise RunFailedError(f"--worker-cpus: {what} need {requested:g} CPU each; "
                                 f"the cluster has {_describe_nodes(node_cpus)}")
        return float(requested)
    candidates = sorted({min(1.0, int(x / (j * k) * 1e4) / 1e4) for x in cpus for j in range(1, procs + 1)},
                        reverse=True)
    for c in candidates:
        if c > 0 and fits(c):
            return c
    raise RunFailedError(f"{what} need CPUs; the cluster has {_describe_nodes(node_cpus)}")


#: ``--workers-per-process auto``: at most this many worker processes per node (measured: 353 MiB
#: PSS per process at K = 1, so 16 take ~5.6 GiB; README "Memory per worker").
AUTO_PROCESSES_PER_NODE = 16


def resolve_workers_per_process(value: int | str, n_workers: int, node_cpus: list[float]) -> int:
    """``K``, the logical workers per actor process, from ``--workers-per-process``.

    Args:
        value: an integer ``1 <= K <= n_workers`` (returned as it is) or ``"auto"``: 1 (one process
            per worker) while the workers are at most :data:`AUTO_PROCESSES_PER_NODE` per node with
            CPUs, else the smallest ``K`` that brings the processes down to that many per node,
            ``ceil(n / (16 × nodes))``.
        n_workers: ``n``.
        node_cpus: CPUs of each alive node (nodes without CPUs host no worker).
    Returns:
        ``K >= 1``.
    Raises:
        ValueError: ``value`` is neither ``"auto"`` nor an integer from 1 to ``n_workers``.
    """
    n = int(n_workers)
    if value == "auto":
        nodes = max(1, sum(1 for x in node_cpus if float(x) > 0))
        return max(1, -(-n // (AUTO_PROCESSES_PER_NODE * nodes)))
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= n:
        raise ValueError(f"workers_per_process: expected 'auto' or an integer from 1 to n={n}, got {value!r}")
    return int(value)


def _describe_nodes(node_cpus: list[float]) -> str:
    """``"3 nodes with 1 CPU"`` / ``"2 nodes with 1, 4 CPUs"`` / ``"no alive node"``."""
    if not node_cpus:
        return "no alive node"
    vals = sorted({float(x) for x in node_cpus})
    word = "node" if len(node_cpus) == 1 else "nodes"
    return f"{len(node_cpus)} {word} with {', '.join(f'{v:g}' for v in vals)} CPU" + ("s" if vals != [1.0] else "")


class WorkerPool:
    """The ``n`` workers of a run, one actor process each or ``K`` to a process.

    With ``workers_per_process`` ``K = 1`` every worker is one :class:`GradientWorker` actor (one
    process). With ``K > 1`` process ``p`` is a :class:`gcsim.real.worker.WorkerHost` actor hosting the
    workers ``p·K … min(n, (p+1)·K) − 1`` (``ceil(n / K)`` processes; when ``K`` does not divide ``n``
    the last one hosts the ``n mod K`` left), each in its own one-thread concurrency group; torch is
    imported once per process. Killing or losing a process loses every worker it hosts (their calls
    fail with the actor's death, and the master records each as dead).

    Args:
        n_workers: number of logical workers ``n``.
        torch_threads: torch threads per actor process.
        num_cpus: logical CPUs each worker reserves (a process hosting ``j`` workers reserves ``j`` ×).
        placement: None (actors scheduled freely) or ``"spread"`` / ``"pack"``: one placement-group
            bundle per actor process, with that strategy.
        placement_timeout_s: longest wait for the placement group.
        workers_per_process: ``K``, ``1 <= K`` (values above ``n`` act as ``n``).
    Attributes:
        processes: per actor process, the worker indices it hosts.
        info: per worker (index ``w``), what its setup returned plus ``"process"`` (its process index).
    Raises:
        RunFailedError: the placement group was not placed within ``placement_timeout_s``.
        ValueError: ``workers_per_process < 1``.
    """

    def __init__(self, n_workers: int, *, torch_threads: int = 1, num_cpus: float = 1,
                 placement: str | None = None, placement_timeout_s: float = 120.0, workers_per_process: int = 1):
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from gcsim.real.worker import group_name, remote_host_class, remote_worker_class

        self.n = int(n_workers)
        k = int(workers_per_process)
        if k < 1:
            raise ValueError(f"workers_per_process: expected >= 1, got {workers_per_process}")
        self.k = min(k, self.n)
        self.processes: list[list[int]] = [list(range(p, min(self.n, p + self.k))) for p in range(0, self.n, self.k)]
        #: worker -> (process index, position in the process)
        self._where = {w: (p, i) for p, ws in enumerate(self.processes) for i, w in enumerate(ws)}
        self._group = group_name
        self.pg = None
        self.info: list[dict] = []
        cpus = [round(len(ws) * float(num_cpus), 4) for ws in self.processes]

        def start(p: int, **opts):
            if self.k == 1:
                return remote_worker_class().options(num_cpus=cpus[p], **opts).remote(
                    self.processes[p][0], torch_threads, keep_memory=True)  # gcsim/real/allocator.py
            return remote_host_class(self.k).options(num_cpus=cpus[p], allow_out_of_order_execution=False,
                                                     **opts).remote(self.processes[p], torch_threads, keep_memory=True)

        if placement is None:
            self.hosts = [start(p) for p in range(len(self.processes))]
            return
        self.pg = placement_group([{"CPU": c} for c in cpus], strategy=placement.upper())
        if not self.pg.wait(timeout_seconds=placement_timeout_s):
            remove_placement_group(self.pg)
            nodes = [n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")]
            what = (f"{self.n} worker actors need {num_cpus:g} CPU each" if self.k == 1 else
                    f"{len(self.processes)} worker processes need {max(cpus):g} CPU each ({self.n} workers, "
                    f"{num_cpus:g} CPU each, up to {self.k} per process)")
            raise RunFailedError(f"placement: {what}, not placed within "
                                 f"{placement_timeout_s:g} s (--placement-timeout); the cluster has "
                                 f"{_describe_nodes(nodes)}, {ray.available_resources().get('CPU', 0.0):g} CPUs free")
        self.hosts = [start(p, scheduling_strategy=PlacementGroupSchedulingStrategy(
            self.pg, placement_group_bundle_index=p)) for p in range(len(self.processes))]

    @property
    def actors(self) -> list:
        """Per worker ``w``, the actor handle of the process hosting it (with ``K > 1`` the same
        handle for the ``K`` workers of a process; call them through :meth:`call`)."""
        return [self.hosts[self._where[w][0]] for w in range(self.n)]

    def process_of(self, worker: int) -> int:
        """Index of the actor process hosting ``worker``."""
        return self._where[int(worker)][0]

    def call(self, worker: int, method: str, *args, num_returns: int = 1, **kwargs):
        """Submit ``method(*args, **kwargs)`` of :class:`GradientWorker` for ``worker``: the actor's own
        method (``K = 1``) or the :class:`WorkerHost` method of the same name with ``worker`` first, in
        the worker's concurrency group. Returns the object reference(s) (a tuple when
        ``num_returns > 1``)."""
        p, i = self._where[int(worker)]
        m = getattr(self.hosts[p], method)
        if self.k == 1:
            return m.options(num_returns=num_returns).remote(*args, **kwargs)
        return m.options(num_returns=num_returns, concurrency_group=self._group(i)).remote(int(worker), *args,
                                                                                         **kwargs)

    def setup(self, setup_kwargs: dict, train_images: np.ndarray, train_labels: np.ndarray,
              shards: list[np.ndarray], *, timeout_s: float | None = None,
              should_stop: Callable[[], bool] = lambda: False, poll_s: float = 0.25) -> list[dict]:
        """(Re)configure every actor: scheme, model and the data of the partitions it holds.

        Args:
            setup_kwargs: keyword arguments of :meth:`GradientWorker.setup` except the data.
            train_images, train_labels: the training set; each partition's shard is put into the
                object store once and each actor receives only the shards of the partitions it holds
                (``scheme.held_partitions``; the whole set, 147 MB for CIFAR-10, went to every node).
            shards: partition -> training-set indices.
            timeout_s: longest wait for every actor (None: no bound).
            should_stop: polled every ``poll_s``; True raises :class:`RunInterrupted`.
        Returns:
            per worker the dict :meth:`GradientWorker.setup` returns, plus ``"process"`` (the index of
            its actor process; with ``K > 1`` the ``pid`` is shared by the process's workers).
        Raises:
            RunFailedError: an actor died or failed during setup, or not every actor was ready within
                ``timeout_s`` (names the workers that were not).
            RunInterrupted: ``should_stop()`` became true while waiting.
        """
        import ray

        from gcsim.schemes import make_scheme

        scheme = make_scheme(setup_kwargs["scheme"], setup_kwargs["n"], setup_kwargs["s"], setup_kwargs["m"],
                             setup_kwargs["scheme_seed"])
        shard_refs = {j: (ray.put(train_images[idx]), ray.put(train_labels[idx])) for j, idx in enumerate(shards)}
        try:
            refs = [self.call(w, "setup", {j: shard_refs[j] for j in scheme.held_partitions(w)}, **setup_kwargs)
                    for w in range(self.n)]
            deadline = None if timeout_s is None else time.monotonic() + float(timeout_s)
            while True:
                ready, rest = ray.wait(refs, num_returns=len(refs), timeout=poll_s)
                if not rest:
                    break
                if should_stop():
                    raise RunInterrupted("interrupted during worker setup")
                if deadline is not None and time.monotonic() > deadline:
                    missing = [w for w, r in enumerate(refs) if r in set(rest)]
                    raise RunFailedError(f"setup: workers {missing} not ready within {timeout_s:g} s "
                                         f"(--setup-timeout); {len(ready)} of {len(refs)} ready")
            self.info = [{**i, "process": self.process_of(w)} for w, i in enumerate(ray.get(refs))]
        except ray.exceptions.RayError as e:
            raise RunFailedError(f"worker setup failed: {type(e).__name__}: {str(e).splitlines()[0]}") from None
        finally:
            del shard_refs
        return self.info

    def probe(self, reps: int = 5, timeout_s: float = 60.0, sequential: bool = False) -> dict | None:
        """Every live worker's CPU speed at this moment (:meth:`GradientWorker.probe`), summarised for
        ``meta.json``'s ``cpu_probe``.

        Args:
            reps: timed partition gradients per worker.
            timeout_s: longest wait (per worker when ``sequential``); workers that do not answer in
                time (or are dead) are left out.
            sequential: probe one worker after the other (each alone on the machine's cores) instead
                of all at once (as they compute in an iteration).
        Returns:
            ``{"reps", "workers", "sequential", "median_cpu_s" (CPU-seconds per partition gradient,
            median over every worker and rep), "median_wall_s", "per_worker_median_cpu_s" (n, NaN for
            a worker left out), "utc"}``, or None when no worker answered.
        """
        import ray

        def answer(ref, timeout):
            try:
                return ray.get(ref, timeout=timeout)
            except Exception:  # a dead, failed or slow worker: its speed is unknown
                return None

        got = {}
        if sequential:
            for w in range(self.n):
                got[w] = answer(self.call(w, "probe", int(reps)), float(timeout_s))
        else:
            refs = {w: self.call(w, "probe", int(reps)) for w in range(self.n)}
            ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=float(timeout_s))
            got = {w: answer(r, 1.0) for w, r in refs.items() if r in ready}
        got = {w: v for w, v in got.items() if v is not None}
        if not got:
            return None
        cpu = np.concatenate([np.asarray(v["cpu_s"], float) for v in got.values()])
        wall = np.concatenate([np.asarray(v["wall_s"], float) for v in got.values()])
        per = [float(np.median(got[w]["cpu_s"])) if w in got else float("nan") for w in range(self.n)]
        return {"reps": int(reps), "workers": len(got), "sequential": bool(sequential), "median_cpu_s": float(np.median(cpu)),
                "median_wall_s": float(np.median(wall)), "per_worker_median_cpu_s": per,
                "utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}

    def kill(self, worker: int) -> None:
        """Kill the actor process of ``worker`` for good (fault injection): it becomes a dead worker,
        and so does every other worker that process hosts (``K > 1``)."""
        import ray

        ray.kill(self.hosts[self.process_of(worker)], no_restart=True)

    def shutdown(self) -> None:
        """Kill every actor (ignores ones already dead) and remove the placement group."""
        import ray

        for a in self.hosts:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # already gone
                pass
        if self.pg is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(self.pg)
            except Exception:  # the cluster is gone
                pass


class ParameterServer:
    """Dispatch/collect/decode loop state of a run (see the module docstring).

    Args:
        pool: the worker actors.
        scheme: the scheme (same construction as the workers').
        stragglers: a :class:`gcsim.stragglers.StragglerProcess` (``draw(t)``).
        policy: ``"cancel"`` or ``"carry-over"``.
        scheme_label: value of the ``scheme`` column.
        t0: time origin (``time.time()`` instant) of every ``*_s`` column.
        slice_sizes: ``(k,)`` images per partition slice (weights for the mean training loss).
        should_stop: polled while waiting; True raises :class:`RunInterrupted`.
        n_params: length ``l`` of the flat gradient.
        after_dispatch: optional hook ``(iteration, pool)`` called right after dispatch (fault injection).
        poll_s: longest single ``ray.wait`` (seconds) between checks of ``should_stop``.
        fetch_timeout_s: longest wait (seconds) for the used payloads once decodable; a payload not
            fetched by then counts as lost (its worker dead).
        on_death: optional hook ``(worker, iteration, cause)`` called once per lost worker (the
            runner prints it).
        cpu_meter: optional :class:`gcsim.real.hostcpu.HostCpuMeter` read at the start, the decodable
            instant and the end of every iteration: ``other_cpu_wait_s`` / ``other_cpu_finish_s``
            (NaN without it).
    """

    def __init__(self, pool: WorkerPool, scheme, stragglers, *, policy: str, scheme_label: str, t0: float,
                 slice_sizes: np.ndarray, n_params: int, should_stop: Callable[[], bool] = lambda: False,
                 after_dispatch: Callable | None = None, poll_s: float = 0.25, cpu_meter=None,
                 fetch_timeout_s: float = 60.0, on_death: Callable | None = None):
        self.pool, self.scheme, self.stragglers = pool, scheme, stragglers
        self.policy, self.label, self.t0 = policy, scheme_label, float(t0)
        self.slice_sizes = np.asarray(slice_sizes, dtype=float)
        self.n_params = int(n_params)
        self.should_stop, self.after_dispatch, self.poll_s = should_stop, after_dispatch, poll_s
        self.dead: set[int] = set()
        #: worker -> {"iteration": first iteration it was lost in, "cause": "<Ray error>: <first line>"}
        self.deaths: dict[int, dict] = {}
        self.fetch_timeout_s, self.on_death = float(fetch_timeout_s), on_death
        #: workers lost in earlier sessions of the run (a resume starts with fresh workers)
        self.prior_deaths = 0
        self.pending: dict = {}  # meta ObjectRef -> _Pending
        self.worker_rows: dict[tuple[int, int], dict] = {}
        self.iteration_rows: list[dict] = []
        #: committed ``staleness.csv`` rows (:mod:`gcsim.real.staleness`): per used message and partition
        self.staleness_rows: list[dict] = []
        self._open: dict | None = None
        self.cpu_meter = cpu_meter
        #: (iteration, Refusal) per arrived set the scheme refused (issue 16): solvable, but not exact
        #: within tolerance in the payload precision, so the master waited for another reply
        self.refusals: list = []

    def clock(self) -> float:
        """Seconds since the time origin."""
        return time.time() - self.t0

    def _read_cpu(self):
        return None if self.cpu_meter is None else self.cpu_meter.read()

    def _other_cpu(self, before, after) -> float:
        if before is None or after is None:
            return float("nan")
        return self.cpu_meter.other_cpu_s(before, after)

    # ------------------------------------------------------------------ collection helpers
    def _row(self, iteration: int, worker: int) -> dict | None:
        if self._open is not None and self._open["iteration"] == iteration:
            return self._open["rows"].get(worker)
        return self.worker_rows.get((iteration, worker))

    def _mark_dead(self, worker: int, iteration: int, cause: str) -> None:
        if worker not in self.dead:
            self.dead.add(worker)
            self.deaths[worker] = {"iteration": int(iteration), "cause": cause}
            if self.on_death is not None:
                self.on_death(worker, int(iteration), cause)
        row = self._row(iteration, worker)
        if row is not None:
            row["status"] = "dead"
            row["used"] = False

    def _fetch(self, workers: tuple[int, ...], refs: dict[int, object]) -> tuple[dict[int, list], dict[int, str]]:
        """Fetch the payloads ``refs[w]`` of ``workers``: ``({worker: payload list}, {worker: cause})``,
        the second for payloads that are lost (:func:`lost_worker_errors`) or not fetched within
        ``fetch_timeout_s``. Other Ray errors propagate."""
        import ray
        from ray.exceptions import GetTimeoutError

        lost_types = lost_worker_errors()
        try:
            return dict(zip(workers, ray.get([refs[w] for w in workers], timeout=self.fetch_timeout_s))), {}
        except (GetTimeoutError, *lost_types):
            pass
        got, lost = {}, {}  # one by one, to know whose payload is gone
        deadline = time.monotonic() + self.fetch_timeout_s
        for w in workers:
            try:
                got[w] = ray.get(refs[w], timeout=max(0.1, deadline - time.monotonic()))
            except GetTimeoutError:
                lost[w] = f"payload not fetched within {self.fetch_timeout_s:g} s"
            except lost_types as e:
                lost[w] = _cause(e)
        return got, lost

    def _fill_from_meta(self, row: dict, meta: dict) -> None:
        row["compute_start_s"] = meta["compute_start"] - self.t0
        row["compute_s"] = meta["compute_s"]
        row["send_s"] = meta["send"] - self.t0
        row["cpu_s"] = float(meta.get("cpu_s", np.nan))
        row["compute_cpu_s"] = float(meta.get("compute_cpu_s", np.nan))
        row["between_calls_cpu_s"] = float(meta.get("between_calls_cpu_s", np.nan))

    def _from_history(self, worker: int, meta: dict) -> None:
        """Fill start/compute of earlier calls whose replies never came (cancelled) from the history."""
        for prev in meta.get("history") or []:
            row = self._row(prev["iteration"], worker)
            if row is not None and row["status"] == "cancelled" and not np.isfinite(row["compute_start_s"]):
                row["compute_start_s"] = prev["compute_start"] - self.t0
                row["compute_s"] = prev["compute_s"]
                row["cpu_s"] = float(prev.get("cpu_s", np.nan))
                row["compute_cpu_s"] = float(prev.get("compute_cpu_s", np.nan))
                row["between_calls_cpu_s"] = float(prev.get("between_calls_cpu_s", np.nan))

    def _harvest(self, refs: list, t_obs: float, current: int) -> list[tuple[float, _Pending, dict]]:
        """Read ready replies; update rows of earlier iterations; return current ones (with send time)."""
        import ray
        from ray.exceptions import TaskCancelledError

        lost_types = lost_worker_errors()
        fresh = []
        for ref in refs:
            p = self.pending.pop(ref)
            try:
                meta = ray.get(ref)
            except TaskCancelledError:
                meta = None
            except lost_types as e:
                self._mark_dead(p.worker, p.iteration, _cause(e))
                continue
            if meta is None:  # cancelled (Ray's error, or the worker noticed the cancel itself)
                row = self._row(p.iteration, p.worker)
                if row is not None and row["status"] != "dead":
                    row["status"] = "cancelled"
                continue
            self._from_history(p.worker, meta)
            if p.iteration != current:
                row = self._row(p.iteration, p.worker)
                if row is not None:
                    self._fill_from_meta(row, meta)
                    row["arrival_s"] = t_obs
                    row["status"] = "late"
                continue
            fresh.append((meta["send"], p, meta))
        fresh.sort(key=lambda x: x[0])
        return fresh

    # ------------------------------------------------------------------ one iteration
    def step(self, iteration: int, weights: np.ndarray) -> StepResult:
        """Dispatch iteration ``iteration`` with ``weights`` ``(l,)`` and collect until decodable.

        Raises:
            RunFailedError: more than ``s`` workers dead, or every live reply in and still not decodable.
            RunInterrupted: ``should_stop()`` became true while waiting.
        """
        import ray

        it = int(iteration)
        scheme = self.scheme
        cpu_start = self._read_cpu()
        start = self.clock()
        weights_ref = ray.put(weights)
        draw = self.stragglers.draw(it)
        assignment = scheme.assignment(it)
        msg_ids: dict[int, list[int]] = {}
        for msg in scheme.messages(it):
            msg_ids.setdefault(msg.worker, []).append(msg.id)
        rows: dict[int, dict] = {}
        self._open = {"iteration": it, "rows": rows}
        for w in range(self.pool.n):
            row = {"scheme": self.label, "iteration": it, "worker": w, "n_partitions": len(assignment[w]),
                   "dispatch_s": np.nan, "compute_start_s": np.nan, "compute_s": np.nan,
                   "delay_s": float(draw.delay_s[w]), "slowdown": float(draw.slowdown[w]),
                   "send_s": np.nan, "arrival_s": np.nan, "used": False, "status": "dead",
                   "cpu_s": np.nan, "compute_cpu_s": np.nan, "between_calls_cpu_s": np.nan}
            rows[w] = row
            if w in self.dead:
                continue
            row["dispatch_s"] = self.clock()
            meta_ref, payload_ref = self.pool.call(w, "run", it, weights_ref, float(draw.delay_s[w]),
                                                   float(draw.slowdown[w]), num_returns=2)
            row["status"] = "pending"
            self.pending[meta_ref] = _Pending(it, w, payload_ref)
        if self.after_dispatch is not None:
            self.after_dispatch(it, self.pool)

        arrived: list[int] = []
        payload_refs: dict[int, object] = {}
        losses: dict[int, float] = {}
        computed_at: dict[int, dict] = {}  # worker -> {partition: iteration its gradient was computed}
        decoding, decodable_s, n_arrived = None, np.nan, 0
        cpu_decodable = None
        while True:  # until decodable from payloads that could all be fetched
            while decoding is None:
                if self.should_stop():
                    raise RunInterrupted(f"interrupted during iteration {it}")
                if len(self.dead) > scheme.s:
                    raise RunFailedError(
                        f"iteration {it}: {len(self.dead)} workers lost (workers {sorted(self.dead)}), more than "
                        f"the s={scheme.s} scheme {scheme.name} tolerates")
                if not any(p.iteration == it for p in self.pending.values()):
                    raise RunFailedError(f"iteration {it}: every live worker replied (arrived messages {arrived}) "
                                         f"but scheme {scheme.name} cannot decode them")
                ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=self.poll_s)
                if not ready:
                    continue
                ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending), timeout=0)
                t_obs = self.clock()
                for _, p, meta in self._harvest(ready, t_obs, it):
                    row = rows[p.worker]
                    self._fill_from_meta(row, meta)
                    row["arrival_s"] = t_obs
                    row["status"] = "arrived"
                    payload_refs[p.worker] = p.payload_ref
                    losses.update(meta["losses"])
                    computed_at[p.worker] = meta.get("computed_at") or {}
                    n_arrived += 1
                    # every arrival is kept, also after the decodable one: if a used payload is then
                    # lost, the retry below decodes from all that arrived, this batch included
                    arrived.extend(msg_ids.get(p.worker, []))
                    if decoding is None:
                        decoding = scheme.decode(arrived, it)
                        if decoding is not None:
                            decodable_s = self.clock()
                            cpu_decodable = self._read_cpu()
                        elif scheme.last_refusal is not None:
                            self.refusals.append((it, scheme.last_refusal))
            used_workers = tuple(sorted({int(w) for w in scheme.message_worker(it)[list(decoding.used)]}))
            fetched, lost = self._fetch(used_workers, payload_refs)
            if not lost:
                break
            # a lost payload is a reply that never arrived: decode again from what survives
            for w, cause in lost.items():
                self._mark_dead(w, it, cause)
                payload_refs.pop(w, None)
                gone = set(msg_ids.get(w, []))
                arrived = [mid for mid in arrived if mid not in gone]
            del fetched
            decoding = scheme.decode(arrived, it) if arrived and len(self.dead) <= scheme.s else None
            if decoding is not None:
                decodable_s = self.clock()
        payloads = {mid: arr for w in used_workers for mid, arr in fetched[w]}
        gradient = scheme.combine(decoding, payloads, self.n_params)
        for w in used_workers:
            rows[w]["used"] = True
        for ref, p in list(self.pending.items()):
            if p.iteration == it:
                rows[p.worker]["status"] = "cancelled" if self.policy == "cancel" else "late"
                p.payload_ref = None  # release: a late payload is never fetched
                if self.policy == "cancel":
                    ray.cancel(ref)
        del weights_ref, payload_refs, fetched
        self._open.update(start_s=start, decodable_s=decodable_s, n_arrived=n_arrived,
                          n_used=len(decoding.used), cpu_start=cpu_start, cpu_decodable=cpu_decodable,
                          staleness=staleness_rows(it, scheme, decoding, computed_at))
        parts = sorted(losses)
        loss = (float(np.average([losses[j] for j in parts], weights=self.slice_sizes[parts]))
                if parts else float("nan"))
        return StepResult(it, gradient, used_workers, loss, bool(decoding.exact), float(decoding.cond))

    def end_iteration(self, end_s: float | None = None) -> dict:
        """Close the open iteration at ``end_s`` (default: now) and commit its rows. Returns its row."""
        if self._open is None or "start_s" not in self._open:
            raise RuntimeError("end_iteration without a collected step")
        o = self._open
        cpu_end = self._read_cpu()
        end = self.clock() if end_s is None else float(end_s)
        row = {"scheme": self.label, "iteration": o["iteration"], "start_s": o["start_s"],
               "decodable_s": o["decodable_s"], "end_s": end, "duration_s": end - o["start_s"],
               "n_arrived": o["n_arrived"], "n_used": o["n_used"],
               "other_cpu_wait_s": self._other_cpu(o["cpu_start"], o["cpu_decodable"]),
               "other_cpu_finish_s": self._other_cpu(o["cpu_decodable"], cpu_end)}
        self.iteration_rows.append(row)
        for w, r in o["rows"].items():
            self.worker_rows[(o["iteration"], w)] = r
        self.staleness_rows.extend(o.get("staleness", []))
        self._open = None
        return row

    def abandon_iteration(self) -> None:
        """Drop the open (uncommitted) iteration: cancel its tasks and forget its rows."""
        import ray

        if self._open is None:
            return
        it = self._open["iteration"]
        for ref, p in list(self.pending.items()):
            if p.iteration == it:
                self.pending.pop(ref)
                try:
                    ray.cancel(ref)
                except Exception:
                    pass
        self._open = None

    def drain(self, timeout_s: float = 5.0) -> None:
        """Wait up to ``timeout_s`` for replies of earlier iterations still out (late / cancelled) so
        their rows are complete, then cancel and forget whatever is left."""
        import ray

        deadline = time.monotonic() + timeout_s
        while self.pending and time.monotonic() < deadline:
            ready, _ = ray.wait(list(self.pending), num_returns=len(self.pending),
                                timeout=max(0.0, deadline - time.monotonic()))
            if ready:
                self._harvest(ready, self.clock(), current=-1)
            else:
                break
        for ref in list(self.pending):
            try:
                ray.cancel(ref)
            except Exception:
                pass
        self.pending.clear()

    # ------------------------------------------------------------------ tables
    def iterations_frame(self) -> pd.DataFrame:
        """Committed iterations, :data:`ITERATION_COLUMNS`; ``attrs["refusals"]`` = ``{label: committed
        iterations with a refused decode}`` and ``attrs["dead_workers"]`` = ``{label: workers lost in
        this and earlier sessions}``, which :func:`gcsim.trace.summarize` writes to summary.csv."""
        df = trace_frame(self.iteration_rows, ITERATION_COLUMNS, "iterations.csv")
        df.attrs["refusals"] = {self.label: self.refusal_status()["refused_iterations"]}
        df.attrs["dead_workers"] = {self.label: self.prior_deaths + len(self.deaths)}
        return df

    def refusal_status(self) -> dict:
        """Refused decodes of committed iterations, for status.json: ``refused_iterations`` (count),
        ``refusals`` (count of refused arrived sets) and ``first_refusal`` (iteration, arrived message
        ids, reason) or None."""
        done = {r["iteration"] for r in self.iteration_rows}
        items = [(it, ref) for it, ref in self.refusals if it in done]
        first = None if not items else {"iteration": int(items[0][0]), "arrived": list(items[0][1].arrived),
                                        "reason": items[0][1].reason}
        return {"refused_iterations": len({it for it, _ in items}), "refusals": len(items), "first_refusal": first}

    def staleness_frame(self) -> pd.DataFrame:
        """Committed ``staleness.csv`` rows, :data:`gcsim.real.staleness.STALENESS_COLUMNS`."""
        return trace_frame(self.staleness_rows, STALENESS_COLUMNS, "staleness.csv")

    def workers_frame(self) -> pd.DataFrame:
        """Committed worker rows sorted by (iteration, worker), :data:`WORKER_COLUMNS`."""
        rows = [self.worker_rows[key] for key in sorted(self.worker_rows)]
        return trace_frame(rows, WORKER_COLUMNS, "workers.csv")
