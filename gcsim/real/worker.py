"""The Ray worker actor of the real executor: holds its partitions' data, computes partition
gradients, injects the straggler delay / slowdown the master sends, encodes with the scheme.

One call of :meth:`GradientWorker.run` is one worker-iteration (times in seconds, ``time.time()``
instants, comparable across processes of one machine):

1. ``compute_start`` – the call starts (the weights reference is already resolved; under
   ``carry-over`` this is after the previous, late call finished);
2. sleep the injected additive delay ``delay_s`` (in slices of ``cancel_poll_s``, checking
   ``ray.get_runtime_context().is_canceled()``, so ``ray.cancel`` interrupts it within a slice);
3. for each partition of ``scheme.assignment(t)[worker]``: the gradient of its slice of the global
   mini-batch (:func:`gcsim.real.model.slice_gradient`), measured, then an interruptible sleep of
   ``(slowdown - 1) × measured`` so the partition takes ``slowdown ×`` its real compute time
   (a factor < 1 cannot speed real compute up and is applied as 1). A finished partition's gradient
   is kept as the worker's latest even when the call is cancelled right after it (a cancel is
   noticed between partitions); one cut short in its slowdown sleep is not;
4. encode its message(s) with :meth:`Scheme.encode` in float64 from the latest gradient it holds of
   every partition (zeros for a held partition never computed – pipelined schemes), cast to the
   payload dtype; ``send`` is taken just before returning. The reply's ``computed_at`` says, per held
   partition, at which iteration the gradient it encoded was computed (the staleness actually used,
   :mod:`gcsim.real.staleness`).

CPU (``time.process_time()``: the whole worker process, all threads): ``compute_cpu_s`` is the CPU
inside the partitions' loop (sleeps use none); ``cpu_s`` adds everything else from the end of the
previous call (its send) to this call's send – loading the weights, encoding, and Ray's own work
between calls (result serialisation of the previous call, argument deserialisation of this one, task
bookkeeping), which no wall-clock window of the trace covers.

Several logical workers per process (``gcsim real --workers-per-process K``, K > 1; issue 10): one
Ray actor process, a :class:`WorkerHost`, holds K :class:`GradientWorker` objects (each with its own
model copy, its partitions' data and its own straggler delay) and imports torch once. Every logical
worker has its own Ray concurrency group of one thread (:func:`group_name`), so its calls run in
submission order in that thread, concurrently with the other logical workers' (torch releases the
GIL in its kernels; one intra-op thread per process), a carried-over call holds back only its own
worker's next call, and ``ray.cancel`` flags only the call it names (``is_canceled()`` is per call).
CPU is then that thread's clock (``time.thread_time()``): ``compute_cpu_s`` as above; ``cpu_s`` adds
the thread's CPU between calls (Ray deserialises a call's arguments and serialises its results in the
executing thread), but leaves out what K = 1 charged to the worker besides: Ray's own threads (core
worker I/O, gRPC, object-store client) and other process-wide work, shared by the K workers.

The call returns two objects (``num_returns=2``): a small metadata dict (timestamps, per-partition
losses) and the list of payloads, so the master can read the timing of late replies without fetching
their payloads. A cancelled call returns early; Ray then reports ``TaskCancelledError`` to the master
(also for a call that finished just as the cancel arrived). So that the master still learns when
such calls started and how long they computed, every reply repeats the ``history`` of the worker's
last :data:`HISTORY_LENGTH` calls.

The class is plain Python; :func:`remote_worker_class` wraps it with ``ray.remote`` (no restarts: a
dead worker stays dead – a permanent straggler); :func:`remote_host_class` wraps :class:`WorkerHost`
(K logical workers; when its process dies, all K are dead).
"""

from __future__ import annotations

import collections
import os
import socket
import threading
import time

import numpy as np

#: How many past calls (iteration, start, compute seconds) every reply repeats.
HISTORY_LENGTH = 16

#: A worker's CPU clock by name (:class:`GradientWorker` ``cpu_clock``): the whole process, or the
#: calling thread (a logical worker of a :class:`WorkerHost`).
CPU_CLOCKS = {"process": time.process_time, "thread": time.thread_time}


class GradientWorker:
    """Worker ``worker`` of a real run (plain class; see :func:`remote_worker_class`).

    Args:
        worker: worker index ``0 <= worker < n``.
        torch_threads: torch intra-op threads for this process.
        cpu_clock: ``"process"`` (``time.process_time``: the process is this worker alone) or
            ``"thread"`` (``time.thread_time``: the worker is one of several in a :class:`WorkerHost`
            and runs in its own thread; module docstring).
        keep_memory: keep freed memory in this process (:func:`gcsim.real.allocator.keep_freed_memory`:
            no page faults per gradient); the master asks it of every actor, tests leave it off.
    Raises:
        ValueError: another ``cpu_clock``.
    """

    def __init__(self, worker: int, torch_threads: int = 1, cpu_clock: str = "process", keep_memory: bool = False):
        import torch

        from gcsim.real.allocator import keep_freed_memory

        if cpu_clock not in CPU_CLOCKS:
            raise ValueError(f"cpu_clock: expected one of {', '.join(CPU_CLOCKS)}, got {cpu_clock!r}")
        self.memory_kept = keep_freed_memory() if keep_memory else False
        torch.set_num_threads(int(torch_threads))
        self.worker = int(worker)
        self.scheme = None
        self.cpu_clock = cpu_clock
        self._clock = CPU_CLOCKS[cpu_clock]
        self._history: collections.deque = collections.deque(maxlen=HISTORY_LENGTH)
        self._cpu_mark: float | None = None  # CPU clock at the end of the previous call (None: no call yet)
        self._mark_thread: int | None = None

    def _mark_cpu(self) -> None:
        """Remember the CPU clock (and the thread) at the end of a call."""
        self._cpu_mark = self._clock()
        self._mark_thread = threading.get_ident()

    def _cpu_since_mark(self, now: float) -> float:
        """CPU-seconds since :meth:`_mark_cpu` (Ray's work between two calls); 0 before the first mark,
        or when the thread clock was marked in another thread (it does not count there; a worker's
        concurrency group has one thread, so in a run it does not happen)."""
        if self._cpu_mark is None or (self.cpu_clock == "thread" and self._mark_thread != threading.get_ident()):
            return 0.0
        return now - self._cpu_mark

    # ------------------------------------------------------------------ setup
    def setup(self, shard_data: dict, *, scheme: str, n: int,
              s: int, m: int, scheme_seed: int, model: str, model_seed: int, dtype: str, payload_dtype: str,
              batch_size: int, sampler_seed: int, cancel_poll_s: float) -> dict:
        """Build the scheme and the model and keep the held partitions' shards.

        Args:
            shard_data: held partition -> ``(images, labels)`` of its shard: uint8 ``(N_j, 32, 32, 3)``
                and int64 ``(N_j,)``, as arrays or as Ray object references (fetched here: a worker
                receives only its own partitions' data, not the training set; issue 10).
            batch_size: global mini-batch ``B``.
        Raises:
            ValueError: ``shard_data`` does not hold exactly the partitions this worker holds.
        Returns:
            ``{"worker", "pid", "host", "held", "memory_kept", "n_parameters", "node_id"}`` (``memory_kept``:
            :func:`gcsim.real.allocator.keep_freed_memory` took effect in its process; ``node_id``: the Ray node
            the actor runs on, hex).
        """
        from gcsim.real.model import build_model, num_parameters, slice_gradient
        from gcsim.real.sampling import slice_sizes
        from gcsim.schemes import make_scheme

        self.scheme = make_scheme(scheme, n, s, m, scheme_seed)
        held = self.scheme.held_partitions(self.worker)
        if sorted(shard_data) != sorted(held):
            raise ValueError(f"shard_data: expected the partitions worker {self.worker} holds, {sorted(held)}, "
                             f"got {sorted(shard_data)}")
        self.shards = {}
        for j in held:
            images, labels = (_resolve(x) for x in shard_data[j])
            self.shards[j] = (np.ascontiguousarray(images), np.ascontiguousarray(labels))
        self.model = build_model(model, seed=model_seed, dtype=dtype)
        self.model.train()
        self.n_params = num_parameters(self.model)
        self.payload_dtype = np.dtype(payload_dtype)
        self.batch_size = int(batch_size)
        self.sizes = slice_sizes(batch_size, self.scheme.k)
        self.sampler_seed = int(sampler_seed)
        self.cancel_poll_s = float(cancel_poll_s)
        wdtype = np.float64 if dtype == "float64" else np.float32
        self.latest = {j: np.zeros(self.n_params, dtype=wdtype) for j in held}
        #: partition -> iteration at which ``latest[j]`` was computed (-1: never, zeros)
        self.computed_at = {j: -1 for j in held}
        self._history.clear()
        # warm-up: one slice gradient, so the first timed iteration does not pay torch's lazy start-up
        j0 = held[0]
        b0 = int(self.sizes[j0])
        for _ in range(2):
            slice_gradient(self.model, self.shards[j0][0][:b0], self.shards[j0][1][:b0], self.batch_size)
        self.model.zero_grad(set_to_none=False)
        self._mark_cpu()  # CPU clock at the end of the previous call (here: setup)
        import ray

        return {"worker": self.worker, "pid": os.getpid(), "host": socket.gethostname(), "held": held,
                "memory_kept": bool(self.memory_kept),
                "n_parameters": self.n_params,
                # outside an actor (unit tests) there is no node, and get_runtime_context() would start Ray
                "node_id": ray.get_runtime_context().get_node_id() if ray.is_initialized() else None}

    def ping(self) -> int:
        """The actor's process id (liveness check)."""
        return os.getpid()

    def probe(self, reps: int) -> dict:
        """Measure this process's CPU speed on the run's own work: ``reps`` gradients of one
        partition-sized slice (the first ``B / k`` images of the first held shard, at the current
        weights), each timed by the worker's CPU clock (``time.process_time``, or ``time.thread_time``
        for a worker of a :class:`WorkerHost`) and by wall time.

        The master runs it on every worker at once before the first iteration and after the last
        (:meth:`gcsim.real.master.WorkerPool.probe`), so a run records the machine's speed without
        looking at any iteration: the comparator can scale a calibration's CPU work per partition by
        the ratio of two runs' probes (issue 9: the VM's speed drifts between runs).

        Args:
            reps: number of timed gradients, ``>= 1``.
        Returns:
            ``{"worker", "cpu_s": [reps CPU-seconds], "wall_s": [reps seconds]}``.
        Raises:
            ValueError: ``reps < 1``; RuntimeError: called before :meth:`setup`.
        """
        from gcsim.real.model import slice_gradient

        if int(reps) < 1:
            raise ValueError(f"reps: expected >= 1, got {reps}")
        if self.scheme is None:
            raise RuntimeError("probe: setup() has not run")
        j0 = self.scheme.held_partitions(self.worker)[0]
        b0 = int(self.sizes[j0])
        images, labels = self.shards[j0]
        cpu, wall = [], []
        for _ in range(int(reps)):
            c0, w0 = self._clock(), time.perf_counter()
            slice_gradient(self.model, images[:b0], labels[:b0], self.batch_size)
            cpu.append(self._clock() - c0)
            wall.append(time.perf_counter() - w0)
        self.model.zero_grad(set_to_none=False)
        self._mark_cpu()  # the probe's CPU is not Ray's work before the next call
        return {"worker": self.worker, "cpu_s": cpu, "wall_s": wall}

    # ------------------------------------------------------------------ one iteration
    def _sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` in slices; True if the call was cancelled meanwhile."""
        import ray

        ctx = ray.get_runtime_context()
        end = time.perf_counter() + max(0.0, float(seconds))
        while True:
            if ctx.is_canceled():
                return True
            left = end - time.perf_counter()
            if left <= 0:
                return False
            time.sleep(min(self.cancel_poll_s, left))

    def run(self, iteration: int, weights: np.ndarray, delay_s: float, slowdown: float):
        """Compute, delay, encode: one worker-iteration.

        Args:
            iteration: iteration index ``t``.
            weights: flat model weights ``(l,)`` (resolved from the master's single ``ray.put``).
            delay_s: injected additive delay (seconds) before computing.
            slowdown: factor on compute time (applied as ``max(1, slowdown)``).
        Returns:
            ``(meta, payloads)``: ``meta`` = ``{"worker", "iteration", "compute_start", "compute_s",
            "delay_done_s", "cpu_s", "compute_cpu_s", "between_calls_cpu_s" (CPU-seconds, module docstring: the
            part of ``cpu_s`` from the previous call's send to this call's start), "send", "losses": {partition: mean loss}, "history": [past call states],
            "computed_at": {held partition: iteration its gradient in ``latest`` was computed, -1 never}}``;
            ``payloads`` = list of ``(message_id, array (ceil(l/m),))`` of ``payload_dtype``.
            A cancelled call returns ``(None, None)`` (Ray reports it as cancelled).
        """
        from gcsim.real.model import set_flat_weights, slice_gradient
        from gcsim.real.sampling import slice_positions

        cpu0 = self._clock()
        compute_start = time.time()
        t0 = time.perf_counter()
        cpu_before = self._cpu_since_mark(cpu0)  # Ray's work since the previous call's send
        state = {"iteration": int(iteration), "compute_start": compute_start, "compute_s": 0.0, "delay_done_s": 0.0,
                 "cpu_s": float("nan"), "compute_cpu_s": 0.0, "between_calls_cpu_s": float(cpu_before)}
        cancelled = self._sleep(delay_s)
        state["delay_done_s"] = time.perf_counter() - t0
        losses: dict[int, float] = {}
        if not cancelled:
            set_flat_weights(self.model, weights)
            factor = max(1.0, float(slowdown))
            cpu_c0 = self._clock()
            for j in self.scheme.assignment(iteration)[self.worker]:
                c0 = time.perf_counter()
                images, labels = self.shards[j]
                pos = slice_positions(len(labels), int(self.sizes[j]), self.sampler_seed, iteration, j)
                grad, loss = slice_gradient(self.model, images[pos], labels[pos], self.batch_size)
                measured = time.perf_counter() - c0
                cut_short = factor > 1.0 and self._sleep((factor - 1.0) * measured)
                state["compute_s"] += time.perf_counter() - c0
                if cut_short:  # cancelled during its emulated slowdown: the partition is not finished
                    cancelled = True
                    break
                # finished: keep it even if the master cancels this call now, so the next messages of a
                # pipelined scheme carry it (issue 14: discarding it left an older gradient in its place)
                self.latest[j] = grad
                self.computed_at[j] = int(iteration)
                losses[j] = loss
                if self._sleep(0.0):  # a cancel is noticed between partitions
                    cancelled = True
                    break
            state["compute_cpu_s"] = self._clock() - cpu_c0
        self._history.append(state)
        if cancelled:
            self._mark_cpu()
            state["cpu_s"] = cpu_before + (self._cpu_mark - cpu0)
            return None, None
        payloads = []
        for msg in self.scheme.messages(iteration):
            if msg.worker == self.worker:
                pl = self.scheme.encode(msg.id, {j: self.latest[j].astype(np.float64) for j in msg.partitions},
                                        iteration)
                payloads.append((msg.id, pl.astype(self.payload_dtype)))
        self._mark_cpu()
        state["cpu_s"] = cpu_before + (self._cpu_mark - cpu0)
        meta = {"worker": self.worker, **state, "losses": losses, "history": list(self._history),
                "computed_at": dict(self.computed_at), "send": time.time()}
        return meta, payloads


def _resolve(x):
    """``x`` itself, or the object a Ray object reference names."""
    if type(x).__name__ == "ObjectRef":
        import ray

        return ray.get(x)
    return x


def remote_worker_class():
    """``ray.remote(GradientWorker)`` with no restarts (a dead worker stays dead)."""
    import ray

    return ray.remote(max_restarts=0, max_task_retries=0)(GradientWorker)


def group_name(local: int) -> str:
    """Name of the Ray concurrency group of a :class:`WorkerHost`'s ``local``-th logical worker."""
    return f"worker{int(local)}"


class WorkerHost:
    """One actor process hosting several logical workers (``gcsim real --workers-per-process K``).

    Holds one :class:`GradientWorker` per index in ``workers`` (own model copy, own partitions' data,
    own straggler delay; CPU measured by its thread's clock, module docstring); torch is imported once
    for all of them. Every method but :meth:`ping` names the logical worker it is for and must be
    called in that worker's concurrency group (``.options(concurrency_group=group_name(local))``,
    ``local`` = its position in ``workers``), which :class:`gcsim.real.master.WorkerPool` does.

    Args:
        workers: the global worker indices hosted here, ``1 <= len(workers)``.
        torch_threads: torch intra-op threads for the whole process.
        keep_memory: keep freed memory in this process (as :class:`GradientWorker`).
    Raises:
        ValueError: ``workers`` empty or repeated.
    """

    def __init__(self, workers: list[int], torch_threads: int = 1, keep_memory: bool = False):
        import torch

        from gcsim.real.allocator import keep_freed_memory

        kept = keep_freed_memory() if keep_memory else False
        ws = [int(w) for w in workers]
        if not ws or len(set(ws)) != len(ws):
            raise ValueError(f"workers: expected distinct worker indices, at least one, got {workers!r}")
        torch.set_num_threads(int(torch_threads))
        # numpy's BLAS to one thread for good: Ray sets OMP_NUM_THREADS to the process's CPUs (K x the
        # worker's), and K threads encoding at once must not each spawn that many BLAS threads
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
        # load what the workers' threads would otherwise load lazily, at once: the scheme registry's
        # first lookup is not thread-safe (a concurrent one saw it empty: "expected one of , got 'gc-fr'")
        import gcsim.real.model  # noqa: F401
        from gcsim.schemes import scheme_names

        scheme_names()
        self.workers = {w: GradientWorker(w, torch_threads, cpu_clock="thread") for w in ws}
        for gw in self.workers.values():
            gw.memory_kept = kept

    def setup(self, worker: int, shard_data: dict, **kwargs) -> dict:
        """:meth:`GradientWorker.setup` of logical worker ``worker`` (same arguments and result)."""
        return self.workers[int(worker)].setup(shard_data, **kwargs)

    def probe(self, worker: int, reps: int) -> dict:
        """:meth:`GradientWorker.probe` of logical worker ``worker``."""
        return self.workers[int(worker)].probe(reps)

    def run(self, worker: int, iteration: int, weights: np.ndarray, delay_s: float, slowdown: float):
        """:meth:`GradientWorker.run` of logical worker ``worker`` (call with ``num_returns=2``)."""
        return self.workers[int(worker)].run(iteration, weights, delay_s, slowdown)

    def ping(self) -> int:
        """The process id (liveness check)."""
        return os.getpid()


def remote_host_class(workers_per_process: int):
    """``ray.remote(WorkerHost)`` with one concurrency group of one thread per logical worker
    (:func:`group_name` of ``0 .. workers_per_process - 1``) and no restarts (a dead process stays
    dead, with every logical worker it hosted). Create actors with
    ``.options(allow_out_of_order_execution=False)`` so each worker's calls run in submission order.

    Raises:
        ValueError: ``workers_per_process < 1``.
    """
    import ray

    k = int(workers_per_process)
    if k < 1:
        raise ValueError(f"workers_per_process: expected >= 1, got {workers_per_process}")
    return ray.remote(max_restarts=0, max_task_retries=0,
                      concurrency_groups={group_name(i): 1 for i in range(k)})(WorkerHost)
