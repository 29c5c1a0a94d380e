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

The call returns two objects (``num_returns=2``): a small metadata dict (timestamps, per-partition
losses) and the list of payloads, so the master can read the timing of late replies without fetching
their payloads. A cancelled call returns early; Ray then reports ``TaskCancelledError`` to the master
(also for a call that finished just as the cancel arrived). So that the master still learns when
such calls started and how long they computed, every reply repeats the ``history`` of the worker's
last :data:`HISTORY_LENGTH` calls.

The class is plain Python; :func:`remote_worker_class` wraps it with ``ray.remote`` (no restarts: a
dead worker stays dead – a permanent straggler).
"""

from __future__ import annotations

import collections
import os
import socket
import time

import numpy as np

#: How many past calls (iteration, start, compute seconds) every reply repeats.
HISTORY_LENGTH = 16


class GradientWorker:
    """Worker ``worker`` of a real run (plain class; see :func:`remote_worker_class`).

    Args:
        worker: worker index ``0 <= worker < n``.
        torch_threads: torch intra-op threads for this process.
    """

    def __init__(self, worker: int, torch_threads: int = 1):
        import torch

        torch.set_num_threads(int(torch_threads))
        self.worker = int(worker)
        self.scheme = None
        self._history: collections.deque = collections.deque(maxlen=HISTORY_LENGTH)

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
            ``{"worker", "pid", "host", "held", "n_parameters", "node_id"}`` (``node_id``: the Ray node
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
        self._cpu_mark = time.process_time()  # CPU clock at the end of the previous call (here: setup)
        import ray

        return {"worker": self.worker, "pid": os.getpid(), "host": socket.gethostname(), "held": held,
                "n_parameters": self.n_params,
                # outside an actor (unit tests) there is no node, and get_runtime_context() would start Ray
                "node_id": ray.get_runtime_context().get_node_id() if ray.is_initialized() else None}

    def ping(self) -> int:
        """The actor's process id (liveness check)."""
        return os.getpid()

    def probe(self, reps: int) -> dict:
        """Measure this process's CPU speed on the run's own work: ``reps`` gradients of one
        partition-sized slice (the first ``B / k`` images of the first held shard, at the current
        weights), each timed by the process's CPU clock (``time.process_time``) and by wall time.

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
            c0, w0 = time.process_time(), time.perf_counter()
            slice_gradient(self.model, images[:b0], labels[:b0], self.batch_size)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        self.model.zero_grad(set_to_none=False)
        self._cpu_mark = time.process_time()  # the probe's CPU is not Ray's work before the next call
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
            "delay_done_s", "cpu_s", "compute_cpu_s" (CPU-seconds, module docstring), "send", "losses": {partition: mean loss}, "history": [past call states],
            "computed_at": {held partition: iteration its gradient in ``latest`` was computed, -1 never}}``;
            ``payloads`` = list of ``(message_id, array (ceil(l/m),))`` of ``payload_dtype``.
            A cancelled call returns ``(None, None)`` (Ray reports it as cancelled).
        """
        from gcsim.real.model import set_flat_weights, slice_gradient
        from gcsim.real.sampling import slice_positions

        cpu0 = time.process_time()
        compute_start = time.time()
        t0 = time.perf_counter()
        cpu_before = cpu0 - getattr(self, "_cpu_mark", cpu0)  # Ray's work since the previous call's send
        state = {"iteration": int(iteration), "compute_start": compute_start, "compute_s": 0.0, "delay_done_s": 0.0,
                 "cpu_s": float("nan"), "compute_cpu_s": 0.0}
        cancelled = self._sleep(delay_s)
        state["delay_done_s"] = time.perf_counter() - t0
        losses: dict[int, float] = {}
        if not cancelled:
            set_flat_weights(self.model, weights)
            factor = max(1.0, float(slowdown))
            cpu_c0 = time.process_time()
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
            state["compute_cpu_s"] = time.process_time() - cpu_c0
        self._history.append(state)
        if cancelled:
            self._cpu_mark = time.process_time()
            state["cpu_s"] = cpu_before + (self._cpu_mark - cpu0)
            return None, None
        payloads = []
        for msg in self.scheme.messages(iteration):
            if msg.worker == self.worker:
                pl = self.scheme.encode(msg.id, {j: self.latest[j].astype(np.float64) for j in msg.partitions},
                                        iteration)
                payloads.append((msg.id, pl.astype(self.payload_dtype)))
        self._cpu_mark = time.process_time()
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
