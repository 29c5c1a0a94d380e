"""The baseline teams use today: synchronous data parallelism with an all-reduce of the gradients,
run by Ray Train (``TorchTrainer``, gloo backend on CPU), measured in the same trace format as the
parameter-server schemes (``gcsim real --scheme allreduce``).

Why a module of its own (not a branch of :mod:`gcsim.real.runner`): the parameter-server loop
(worker actors, ``ray.wait``, decode, cancel) shares nothing with a collective run except the data,
the model, the sampler and the run directory, which are imported from their modules here. Same CLI,
same data, same model, same global mini-batch, same keyed straggler draws:

* ``n`` Ray Train workers (ranks), one per partition of ``uncoded`` with ``n`` partitions: rank ``r``
  holds shard ``r`` only (:func:`gcsim.real.sampling.shard_indices`) and in iteration ``t`` computes
  the gradient of ``sum(loss over its slice) / B`` on the images
  :func:`gcsim.real.sampling.slice_positions` (seed, ``t``, ``r``) picks: the PS run's partition
  ``r`` slice of the same global mini-batch of ``B`` images;
* before computing, rank ``r`` sleeps its keyed straggler delay ``delay_s[t, r]`` and stretches its
  compute by ``slowdown[t, r]`` (an idle sleep of ``(slowdown - 1) ×`` the measured compute, as
  :mod:`gcsim.real.worker` does), both drawn by :class:`gcsim.stragglers.StragglerProcess` keyed by
  (seed, worker = rank, iteration): the draws the PS run and the simulator use;
* ``torch.distributed.all_reduce`` (SUM) of the flat gradient, then a ``torch.optim.SGD`` step with the
  run's lr / momentum / weight decay on every rank (identical replicas: same initial weights, same
  summed gradient). The summed slice gradients are exactly the mini-batch gradient of the mean loss
  (:func:`gcsim.real.model.slice_gradient`), the gradient an exact scheme decodes.

Trace (seconds from the time origin, the earliest rank's start of iteration 0; ``time.time()``
instants of one machine). Per (worker = rank, iteration) a workers.csv row
(:data:`gcsim.trace.WORKER_COLUMNS`): ``dispatch_s`` = ``compute_start_s`` = the rank starts the
iteration (it already holds the model: there is no broadcast); ``delay_s`` / ``slowdown`` the keyed
draws it slept; ``compute_s`` its gradient computation (after slowdown); ``send_s`` it enters the
all-reduce; ``arrival_s`` its all-reduce returned; ``used`` True, ``status`` ``arrived`` (an
all-reduce waits for every rank); ``cpu_s`` the rank process's CPU (``time.process_time``, all
threads) from the end of its previous iteration to the end of this one (delay, compute, all-reduce,
SGD step); ``compute_cpu_s`` the part inside the gradient computation. Per iteration an
iterations.csv row: ``start_s`` = the earliest rank's start, ``decodable_s`` = the latest
``arrival_s`` (the summed gradient is on every rank), ``end_s`` = the latest rank's end of its SGD
step, ``n_arrived = n_used = n``; ``other_cpu_wait_s`` / ``other_cpu_finish_s`` the CPU every process
but the ranks took on the host over rank 0's ``[start, all-reduce return]`` and ``[return, end]``
(:class:`gcsim.real.hostcpu.HostCpuMeter`). ``host.csv`` (:data:`gcsim.real.hostcpu.HOST_COLUMNS`,
as the PS run's: :class:`gcsim.real.hostcpu.HostStealLog`) per iteration the CPU-seconds the hypervisor
stole from the host since rank 0's previous reading (after its SGD step) and the wall seconds of that
reading; ``end_s`` is the iteration's. ``rank_steps.csv`` (:data:`RANK_STEP_COLUMNS`) keeps the
iteration as every rank saw it; ``ranks.json`` what rank 0 hands the driver for meta.json (ranks'
pids and hosts, the largest weight difference between replicas after the last step, the host CPU
load while iterating, ``steal_cores`` among it); ``checkpoint.pt`` the final model and optimizer
(written once, at the end). Evaluation (rank 0, every ``eval_every`` iterations, metrics.csv with
:data:`gcsim.real.rundir.METRICS_COLUMNS`) happens between iterations behind a barrier, so it is in
no iteration's duration, as in the PS run.

Simulator side: an all-reduce waits for every worker, which is what ``uncoded`` models (its decoding
needs all ``n`` partitions), so no new scheme is registered: the run's ``config.yaml`` lists
``{name: uncoded, label: allreduce}`` and the simulator (``gcsim simulate`` / ``compare``) predicts
``max_w(ready_w + transfer) + master``, i.e. the last rank's gradient ready, plus the all-reduce,
plus the SGD step. The communication term is the ring all-reduce cost (Patarasuk & Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations", J. Parallel Distrib. Comput. 69(2),
2009): ``2(n-1)`` steps, each moving ``bytes/n``, so ``T = 2(n-1)·α + 2(n-1)/n · bytes / β``
(:func:`ring_allreduce_s`). It enters the uncoded model through ``workload.gradient_bytes`` = the
bytes each rank sends in the ring (:func:`ring_allreduce_bytes`) and ``network.latency_s`` (the
``2(n-1)·α``); ``workload.model_bytes`` = 0 (no model broadcast: every rank steps its own replica);
``master.decode_s`` is the SGD step. gloo picks its own all-reduce algorithm; the ring formula is the
model, the calibration (``gcsim compare``) measures what gloo took. A collective's ``arrival_s`` is
not its rank's ``send_s`` plus a transfer (early ranks wait for the last), so the comparator
measures an all-reduce's transfer from the iteration's last ``send_s`` (meta.json ``collective``).

Not supported: ``--resume`` (the run writes its checkpoint only at the end), ``--address`` (rank 0
writes the run directory itself, so it must run on this machine), ``s > 0``, ``m > 1``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from gcsim.errors import ConfigError, GcsimError, RunFailedError, RunStoppedError
from gcsim.signals import record as record_signal

#: the ``--scheme`` name of the all-reduce baseline and its label in the traces
ALLREDUCE = "allreduce"

#: ``rank_steps.csv``: the iteration as each rank saw it (seconds from the time origin):
#: ``begin_s`` it started, ``allreduce_s`` seconds inside ``all_reduce`` (waiting for the last rank
#: included), ``end_s`` its SGD step ended, ``duration_s = end_s - begin_s``.
RANK_STEP_COLUMNS = ["iteration", "worker", "begin_s", "allreduce_s", "end_s", "duration_s"]
RANK_STEPS_FILE = "rank_steps.csv"


def ring_allreduce_bytes(n: int, nbytes: float) -> float:
    """Bytes each rank sends (and receives) in a ring all-reduce of ``nbytes``: ``2(n-1)/n · nbytes``
    (reduce-scatter then all-gather, ``n-1`` steps each, ``nbytes/n`` per step; Patarasuk & Yuan,
    J. Parallel Distrib. Comput. 69(2), 2009). 0 for ``n = 1``.

    Raises:
        ValueError: ``n < 1`` or ``nbytes`` negative or not finite.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n: expected an integer >= 1, got {n!r}")
    if not np.isfinite(nbytes) or nbytes < 0:
        raise ValueError(f"nbytes: expected finite bytes >= 0, got {nbytes!r}")
    return 2.0 * (n - 1) / n * float(nbytes)


def ring_allreduce_s(n: int, nbytes: float, bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """Seconds of a ring all-reduce of ``nbytes`` over ``n`` ranks once every rank has joined:
    ``2(n-1)·latency_s + 2(n-1)/n · nbytes / bandwidth_bytes_per_s`` (Patarasuk & Yuan 2009; the
    bandwidth term is optimal for any all-reduce). ``bandwidth_bytes_per_s`` may be ``inf``.

    Raises:
        ValueError: ``n < 1``, negative bytes or latency, bandwidth ``<= 0``.
    """
    if not bandwidth_bytes_per_s > 0:
        raise ValueError(f"bandwidth_bytes_per_s: expected > 0, got {bandwidth_bytes_per_s!r}")
    if not np.isfinite(latency_s) or latency_s < 0:
        raise ValueError(f"latency_s: expected finite seconds >= 0, got {latency_s!r}")
    return 2.0 * (n - 1) * float(latency_s) + ring_allreduce_bytes(n, nbytes) / float(bandwidth_bytes_per_s)


def scheme_entry() -> dict:
    """The ``schemes`` entry of an all-reduce run's ``config.yaml``: uncoded's timing, labelled."""
    return {"name": "uncoded", "s": 0, "m": 1, "seed": 0, "label": ALLREDUCE}


def resolve_allreduce_config(scenario_path: str | Path | None = None, **overrides):
    """:func:`gcsim.real.config.resolve_config` for the all-reduce baseline.

    Args:
        scenario_path: scenario YAML (default ``scenarios/real_default.yaml``): workers, iterations,
            seed and stragglers come from it (its ``uncoded`` entry, if any, for the rest).
        **overrides: run facts and :class:`gcsim.real.config.RealConfig` fields (None: not given).
    Returns:
        :class:`gcsim.real.config.RealRunSpec` whose scenario lists :func:`scheme_entry` (so its
        ``scheme`` is ``allreduce``) and has ``model_bytes`` 0 (set from the model in :func:`run_allreduce`).
    Raises:
        ConfigError: ``s`` other than 0 (``--s``), ``m`` other than 1 (``--m``), ``address``
            (``--address``), or anything :func:`resolve_config` refuses.
    """
    from gcsim.real.config import resolve_config
    from gcsim.scenario import validate_scenario

    s, m = overrides.get("s"), overrides.get("m")
    if s is not None and s != 0:
        raise ConfigError("--s", "0 (an all-reduce waits for every worker)", s)
    if m is not None and m != 1:
        raise ConfigError("--m", "1 (an all-reduce sends whole gradients)", m)
    if overrides.get("address") is not None:
        raise ConfigError("--address", "none for --scheme allreduce (rank 0 writes the run directory, so the "
                          "run uses a private Ray on this machine)", overrides["address"])
    spec = resolve_config("uncoded", scenario_path, **overrides)
    data = spec.scenario.resolved()
    data["schemes"] = [scheme_entry()]
    return spec.with_scenario(validate_scenario(data, base_dir=Path(spec.options.scenario).parent))


# ====================================================================== rows
def trace_tables(records: list[dict], t0: float, label: str = ALLREDUCE,
                 other_cpu: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The iterations.csv, workers.csv and rank_steps.csv tables from the ranks' records.

    Args:
        records: one dict per (rank, iteration) as :func:`_train_loop` records them: ``iteration``,
            ``worker``, ``begin``, ``send``, ``arrival``, ``end`` (``time.time()`` instants, seconds),
            ``delay_s``, ``slowdown``, ``compute_s``, ``cpu_s``, ``compute_cpu_s``; every iteration
            must have the same ranks.
        t0: time origin (a ``time.time()`` instant).
        label: the ``scheme`` column.
        other_cpu: iteration -> ``(other_cpu_wait_s, other_cpu_finish_s)`` CPU-seconds (NaN if absent).
    Returns:
        ``(iterations, workers, rank_steps)`` with :data:`gcsim.trace.ITERATION_COLUMNS`,
        :data:`gcsim.trace.WORKER_COLUMNS` and :data:`RANK_STEP_COLUMNS`, sorted by iteration (and rank).
    Raises:
        ValueError: iterations with different sets of ranks.
    """
    from gcsim.trace import ITERATION_COLUMNS, WORKER_COLUMNS, trace_frame

    other_cpu = other_cpu or {}
    by_it: dict[int, list[dict]] = {}
    for r in records:
        by_it.setdefault(int(r["iteration"]), []).append(r)
    ranks = None
    it_rows, wk_rows, st_rows = [], [], []
    for it in sorted(by_it):
        rs = sorted(by_it[it], key=lambda r: int(r["worker"]))
        got = [int(r["worker"]) for r in rs]
        if ranks is None:
            ranks = got
        elif got != ranks:
            raise ValueError(f"records: iteration {it} has ranks {got}, expected {ranks}")
        wait, finish = other_cpu.get(it, (np.nan, np.nan))
        it_rows.append({"scheme": label, "iteration": it, "start_s": min(r["begin"] for r in rs) - t0,
                        "decodable_s": max(r["arrival"] for r in rs) - t0, "end_s": max(r["end"] for r in rs) - t0,
                        "duration_s": max(r["end"] for r in rs) - min(r["begin"] for r in rs),
                        "n_arrived": len(rs), "n_used": len(rs), "other_cpu_wait_s": float(wait),
                        "other_cpu_finish_s": float(finish)})
        for r in rs:
            wk_rows.append({"scheme": label, "iteration": it, "worker": int(r["worker"]), "n_partitions": 1,
                            "dispatch_s": r["begin"] - t0, "compute_start_s": r["begin"] - t0,
                            "compute_s": float(r["compute_s"]), "delay_s": float(r["delay_s"]),
                            "slowdown": float(r["slowdown"]), "send_s": r["send"] - t0, "arrival_s": r["arrival"] - t0,
                            "used": True, "status": "arrived", "cpu_s": float(r["cpu_s"]),
                            "compute_cpu_s": float(r["compute_cpu_s"]), "between_calls_cpu_s": np.nan})
            st_rows.append({"iteration": it, "worker": int(r["worker"]), "begin_s": r["begin"] - t0,
                            "allreduce_s": r["arrival"] - r["send"], "end_s": r["end"] - t0,
                            "duration_s": r["end"] - r["begin"]})
    return (trace_frame(it_rows, ITERATION_COLUMNS, "iterations.csv"),
            trace_frame(wk_rows, WORKER_COLUMNS, "workers.csv"),
            trace_frame(st_rows, RANK_STEP_COLUMNS, RANK_STEPS_FILE))


# ====================================================================== the ranks
def _train_loop(config: dict) -> None:
    """One Ray Train worker (rank) of an all-reduce run; rank 0 also writes the run directory.

    ``config`` (built by :func:`run_allreduce`): ``cfg`` (:meth:`gcsim.real.config.RealRunSpec.flat`:
    the run facts and options), ``run_dir``, ``shards``
    (per partition ``(images_ref, labels_ref)``), ``test`` (``(images_ref, labels_ref)``), ``delay_s``
    and ``slowdown`` (``(iterations, n)`` keyed draws), ``sizes`` (``(n,)`` slice sizes), ``sid``
    (the driver's session id). Raises whatever fails (Ray Train reports it to the driver).
    """
    import torch
    import torch.distributed as dist
    import ray
    import ray.train

    from gcsim.real.hostcpu import (HostCpuMeter, HostStealLog, cpu_load_between, host_cpu_times, process_niceness,
                                    session_cpu_s)
    from gcsim.real.model import build_model, evaluate, get_flat_weights, set_flat_grad, slice_gradient
    from gcsim.real.rundir import METRICS_COLUMNS, RealRunDir
    from gcsim.real.sampling import slice_positions
    from gcsim.trace import summarize

    cfg = config["cfg"]
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    if world != cfg["n_workers"]:
        raise RuntimeError(f"world size {world}, expected n_workers={cfg['n_workers']}")
    from gcsim.real.allocator import keep_freed_memory

    memory_kept = keep_freed_memory()  # as the parameter server's workers (gcsim/real/allocator.py)
    torch.set_num_threads(int(cfg["torch_threads"]))
    images, labels = (np.ascontiguousarray(ray.get(x)) for x in config["shards"][rank])
    model = build_model(cfg["model"], seed=cfg["seed"], dtype=cfg["dtype"])
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"],
                                weight_decay=cfg["weight_decay"])
    batch, size, seed = int(cfg["batch_size"]), int(config["sizes"][rank]), int(cfg["seed"])
    delays, slowdowns = np.asarray(config["delay_s"], float), np.asarray(config["slowdown"], float)
    # warm-up, as the PS workers do: the first timed iteration does not pay torch's lazy start-up
    for _ in range(2):
        slice_gradient(model, images[:size], labels[:size], batch)
    model.zero_grad(set_to_none=False)
    info = {"rank": rank, "pid": os.getpid(), "host": socket.gethostname(), "memory_kept": memory_kept}
    infos = [None] * world
    dist.all_gather_object(infos, info)
    run = RealRunDir(config["run_dir"]) if rank == 0 else None
    if rank == 0:
        test_x, test_y = (np.ascontiguousarray(ray.get(x)) for x in config["test"])
        local = [int(i["pid"]) for i in infos if i["host"] == info["host"]]
        meter = HostCpuMeter(local)
        other_cpu: dict[int, tuple[float, float]] = {}
        records_all: list[dict] = []
        metrics: list[dict] = []
        loss_window: list[float] = []
        eval_cpu_s = 0.0
        host_log = HostStealLog()  # host.csv: the hypervisor's steal per iteration
    dist.barrier()
    if rank == 0:
        host_log.mark()  # the first row counts from the start of iteration 0
    records: list[dict] = []
    cpu_mark = time.process_time()
    load_before = None
    t0 = None
    n_it = int(cfg["iterations"])
    for it in range(n_it):
        begin = time.time()
        if rank == 0:
            c_begin = meter.read()
            if it == 0:
                load_before = (host_cpu_times(), 0.0, session_cpu_s(config["sid"]))
        delay, slow = float(delays[it, rank]), float(slowdowns[it, rank])
        if delay > 0:
            time.sleep(delay)
        cpu_c0, c0 = time.process_time(), time.perf_counter()
        pos = slice_positions(len(labels), size, seed, it, rank)
        grad, loss = slice_gradient(model, images[pos], labels[pos], batch)
        measured = time.perf_counter() - c0
        compute_cpu = time.process_time() - cpu_c0
        if slow > 1.0:
            time.sleep((slow - 1.0) * measured)
        compute_s = time.perf_counter() - c0
        flat = torch.from_numpy(grad)
        send = time.time()
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        arrival = time.time()
        if rank == 0:
            c_arr = meter.read()
        set_flat_grad(model, flat.numpy())
        optimizer.step()
        end = time.time()
        cpu_now = time.process_time()
        records.append({"iteration": it, "worker": rank, "begin": begin, "send": send, "arrival": arrival, "end": end,
                        "delay_s": delay, "slowdown": slow, "compute_s": compute_s, "cpu_s": cpu_now - cpu_mark,
                        "compute_cpu_s": compute_cpu, "loss": loss, "size": size})
        cpu_mark = cpu_now
        if rank == 0:
            c_end = meter.read()
            other_cpu[it] = (HostCpuMeter.other_cpu_s(c_begin, c_arr), HostCpuMeter.other_cpu_s(c_arr, c_end))
            host_log.record(ALLREDUCE, it)  # end_s: the latest rank's, filled in when written
        last = it == n_it - 1
        if (it + 1) % int(cfg["eval_every"]) == 0 or last:
            # between iterations: gather the records, evaluate, write; the barrier keeps it out of
            # every iteration's duration (as the PS run's evaluation between iterations)
            if rank == 0 and last:
                load_after = (host_cpu_times(), 0.0, session_cpu_s(config["sid"]))
            gathered = [None] * world if rank == 0 else None
            dist.gather_object(records, gathered, dst=0)
            records = []
            if rank == 0:
                for part in gathered:
                    records_all.extend(part)
                if t0 is None:
                    t0 = min(r["begin"] for r in records_all if r["iteration"] == 0)
                new_its = sorted({r["iteration"] for p in gathered for r in p})
                for i in new_its:
                    rs = [r for p in gathered for r in p if r["iteration"] == i]
                    loss_window.append(float(np.average([r["loss"] for r in rs], weights=[r["size"] for r in rs])))
                e0 = time.process_time()
                test_loss, test_acc = evaluate(model, test_x, test_y, threads=int(cfg["torch_threads"]))
                eval_cpu_s += time.process_time() - e0
                metrics.append({"iteration": it, "loss": float(np.mean(loss_window)), "test_loss": test_loss,
                                "test_accuracy": test_acc, "elapsed_s": time.time() - t0})
                loss_window = []
                it_df, wk_df, st_df = trace_tables(records_all, t0, other_cpu=other_cpu)
                loads = {ALLREDUCE: {"n": world, "s": 0, "m": 1, "computation_load": 1.0,
                                     "communication_load": 1.0}}
                it_df.attrs.update(refusals={ALLREDUCE: 0}, dead_workers={ALLREDUCE: 0})  # none in a collective
                summary = summarize(it_df, loads) if last else None
                run.write_traces(it_df, wk_df, summary, pd.DataFrame(metrics, columns=METRICS_COLUMNS))
                from gcsim.rundir import atomic_write_text

                atomic_write_text(run.path / RANK_STEPS_FILE, st_df.to_csv(index=False, float_format="%.9g"))
                ends = {int(i): float(e) for i, e in zip(it_df["iteration"], it_df["end_s"])}
                host_log.write(run.path / "host.csv", end_s=ends)
            dist.barrier()
            cpu_mark = time.process_time()  # the evaluation and the gather are no iteration's CPU
    # the replicas must agree: every rank applied the same summed gradient to the same weights
    w = torch.from_numpy(get_flat_weights(model)).to(torch.float64)
    lo, hi = w.clone(), w.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    if rank == 0:
        import io

        from gcsim.rundir import atomic_write_bytes

        buf = io.BytesIO()
        torch.save({"next_iteration": n_it, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheme": ALLREDUCE}, buf)
        atomic_write_bytes(run.checkpoint_path, buf.getvalue(), fsync=True)
        cpu_load = cpu_load_between(load_before, load_after, eval_cpu_s)
        import json

        from gcsim.rundir import atomic_write_text

        atomic_write_text(run.path / "ranks.json", json.dumps({
            "ranks": infos, "replica_max_abs_diff": float((hi - lo).abs().max()), "host_cpu_load": cpu_load,
            "test_accuracy": float(metrics[-1]["test_accuracy"]) if metrics else float("nan"),
            "worker_niceness": process_niceness(os.getpid()),
            "worker_memory_kept": all(bool(i.get("memory_kept")) for i in infos)}, indent=2, default=str))


# ====================================================================== the driver
def run_allreduce(spec, out_dir: str | Path | None = None, *, progress: bool = True):
    """Run the all-reduce baseline ``spec`` (from :func:`resolve_allreduce_config`).

    Args:
        spec: :class:`gcsim.real.config.RealRunSpec` with ``scheme == "allreduce"``; its narrowed
            scenario (stragglers) is written as ``config.yaml`` with ``gradient_bytes`` =
            :func:`ring_allreduce_bytes` of the gradient and ``model_bytes`` = 0.
        out_dir: run directory (default ``runs/real/allreduce-<UTC timestamp>``); new or empty.
        progress: print one line when training starts (Ray Train's own output is not shown).
    Returns:
        :class:`gcsim.real.runner.RealRunResult` (status ``finished``).
    Raises:
        DataError: CIFAR-10 not prepared in ``spec.options.data_dir``.
        ConfigError: bad ``--out``, a batch slice larger than its shard (``--batch-size``),
            ``spec.scheme`` not ``allreduce``.
        RunFailedError: Ray or a rank failed (status ``failed``; the directory is kept when traces were
            written, else removed), or the run was interrupted (status ``interrupted``).
    """
    from gcsim.real.data import require_prepared
    from gcsim.real.model import build_model, num_parameters
    from gcsim.real.rundir import RealRunDir
    from gcsim.real.runner import DEFAULT_RUNS_ROOT
    from gcsim.rundir import new_run_dir

    if spec.scheme != ALLREDUCE:
        raise ConfigError("--scheme", ALLREDUCE, spec.scheme)
    cfg = spec.options
    require_prepared(cfg.data_dir)
    new = new_run_dir(out_dir, root=DEFAULT_RUNS_ROOT, prefix=ALLREDUCE, prefix_field="--scheme")
    run = RealRunDir(new.path)
    try:
        n_params = num_parameters(build_model(cfg.model, seed=spec.seed, dtype=cfg.dtype))
        item = {"float32": 4, "float64": 8}[cfg.dtype]  # all-reduced in the model's dtype
        workload = spec.scenario.workload.model_copy(update={
            "gradient_bytes": ring_allreduce_bytes(spec.n_workers, n_params * item), "model_bytes": 0.0})
        spec = spec.with_scenario(spec.scenario.model_copy(update={"workload": workload}))
        run.write_config(spec)
        result = _execute(run, spec, n_params * item, progress)
    except BaseException:
        if not (run.path / "iterations.csv").is_file():
            new.discard()
        raise
    finally:
        new.release()
    return result


def _execute(run, spec, gradient_bytes: float, progress: bool):
    import ray

    from gcsim.real.master import fit_worker_cpus
    from gcsim.real.data import load_run_data
    from gcsim.real.hostcpu import usable_cpus
    from gcsim.real.runner import RealRunResult, ray_session
    from gcsim.real.sampling import shard_indices, slice_sizes
    from gcsim.stragglers import StragglerProcess
    from gcsim.study.machine import cpu_model_name
    from gcsim.trace import write_meta

    cfg = spec.options

    wall0 = time.monotonic()
    status_common = {"scheme": ALLREDUCE, "iterations_total": spec.iterations, "sessions": 1,
                     "session_started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    run.write_status("running", iterations_done=0, **status_common)
    try:
        train_x, train_y, test_x, test_y = load_run_data(cfg)
        shards = shard_indices(len(train_y), spec.n_workers, spec.seed)
        sizes = slice_sizes(cfg.batch_size, spec.n_workers)
        if any(sizes[j] > len(shards[j]) for j in range(spec.n_workers)):
            raise ConfigError("--batch-size", f"at most {min(len(s) for s in shards) * spec.n_workers} "
                              f"(slices must fit their shard of {len(train_y)} training images)", cfg.batch_size)
        draws = StragglerProcess(spec.scenario.stragglers, spec.n_workers, spec.seed).draw_block(range(spec.iterations))
    except BaseException as e:
        run.write_status("failed", reason=str(e) if isinstance(e, GcsimError) else f"{type(e).__name__}: {e}",
                         iterations_done=0, **status_common)
        raise
    stop = {"signal": None}
    old = {}

    def on_signal(signum, frame):
        if stop["signal"] is None:
            stop["signal"] = signal.Signals(signum).name
            record_signal(signum)  # the exit status: 128 + its number
        raise KeyboardInterrupt

    storage = tempfile.mkdtemp(prefix="gcsim-train-")
    try:
        with ray_session(**spec.ray_kwargs()), warnings.catch_warnings():
            # ray.data's deprecated settings, read while Ray Train starts: not ours to fix
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"ray\.")
            if threading_main():
                for sig in (signal.SIGINT, signal.SIGTERM):
                    old[sig] = signal.signal(sig, on_signal)
            from ray.train import FailureConfig, RunConfig, ScalingConfig
            from ray.train.torch import TorchConfig, TorchTrainer

            node_cpus = [float(nd["Resources"].get("CPU", 0.0)) for nd in ray.nodes() if nd.get("Alive")]
            worker_cpus = fit_worker_cpus(node_cpus, spec.n_workers, cfg.worker_cpus)
            config = {
                "cfg": spec.flat(), "run_dir": str(run.path.resolve()),
                "shards": [(ray.put(train_x[idx]), ray.put(train_y[idx])) for idx in shards],
                "test": (ray.put(test_x), ray.put(test_y)), "delay_s": draws.delay_s, "slowdown": draws.slowdown,
                "sizes": sizes, "sid": os.getsid(0),
            }
            del train_x, train_y
            trainer = TorchTrainer(
                _train_loop, train_loop_config=config,
                scaling_config=ScalingConfig(num_workers=spec.n_workers, use_gpu=False,
                                             resources_per_worker={"CPU": worker_cpus},
                                             placement_strategy=cfg.placement.upper()),
                torch_config=TorchConfig(backend="gloo"),
                run_config=RunConfig(name="allreduce", storage_path=storage, failure_config=FailureConfig(max_failures=0)))
            if progress:
                print(f"allreduce: {spec.n_workers} Ray Train workers (gloo), {spec.iterations} iterations ...",
                      file=sys.stderr, flush=True)
            try:
                trainer.fit()
            except KeyboardInterrupt:
                raise
            except Exception as e:  # Ray Train wraps a rank's error in its own
                raise RunFailedError(f"allreduce: training failed ({type(e).__name__}: {_first_cause(e)})") from None
            ray_info = {"address": "embedded", "cluster_cpus": float(ray.cluster_resources().get("CPU", 0.0)),
                        "nodes": len(ray.nodes()), "worker_cpus": worker_cpus, "placement": cfg.placement,
                        "framework": "ray.train.torch.TorchTrainer", "backend": "gloo"}
    except KeyboardInterrupt:
        run.write_status("interrupted", reason=stop["signal"] or "SIGINT", iterations_done=_done(run), **status_common)
        raise RunStoppedError(f"allreduce: stopped by {stop['signal'] or 'SIGINT'} (no resume for allreduce runs)") from None
    except BaseException as e:
        run.write_status("failed", reason=str(e) if isinstance(e, GcsimError) else f"{type(e).__name__}: {e}",
                         iterations_done=_done(run), **status_common)
        raise
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        shutil.rmtree(storage, ignore_errors=True)
    import json

    ranks = json.loads((run.path / "ranks.json").read_text())
    wall_s = time.monotonic() - wall0
    summary = pd.read_csv(run.path / "summary.csv").iloc[0].to_dict()
    run.write_status("finished", iterations_done=spec.iterations, wall_s=wall_s, dead_workers=[], **status_common)
    write_meta(run.path, "real", scheme=ALLREDUCE, collective=ALLREDUCE, n=spec.n_workers, s=0, m=1, policy=spec.policy,
               model=cfg.model, iterations=spec.iterations, test_accuracy=ranks["test_accuracy"], wall_s=wall_s,
               sessions=1, host=socket.gethostname(), host_cpus=os.cpu_count(), usable_cpus=usable_cpus(),
               cpu_model=cpu_model_name(), host_cpu_load=ranks["host_cpu_load"], cpu_probe=None, ray=ray_info,
               worker_niceness=ranks["worker_niceness"], worker_memory_kept=ranks.get("worker_memory_kept"),
               dead_workers=[], other_cpu_scope="host",
               gradient_full_bytes=gradient_bytes, ring_bytes_per_rank=ring_allreduce_bytes(spec.n_workers, gradient_bytes),
               replica_max_abs_diff=ranks["replica_max_abs_diff"],
               simulator_model="uncoded (wait for all n) labelled allreduce; ring all-reduce cost 2(n-1)a + "
                               "2(n-1)/n bytes/b (Patarasuk & Yuan 2009)")
    return RealRunResult(run.path, "finished", spec.iterations, summary, float(ranks["test_accuracy"]), wall_s)


def threading_main() -> bool:
    """True in the main thread (only there may signal handlers be installed)."""
    import threading

    return threading.current_thread() is threading.main_thread()


def _done(run) -> int:
    """Iterations in the run directory's iterations.csv so far (0 when none)."""
    with contextlib.suppress(Exception):
        return int(len(pd.read_csv(run.path / "iterations.csv")))
    return 0


def _first_cause(e: BaseException) -> str:
    """The most specific one-line reason in a Ray Train error: the last ``SomethingError: ...`` line
    of its text (the rank's own exception), else its first line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    for ln in reversed(lines):
        head = ln.split(":", 1)[0]
        if head.endswith(("Error", "Exception")) and " " not in head:
            return ln[:300]
    return (lines[0] if lines else type(e).__name__)[:300]
