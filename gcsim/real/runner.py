"""A whole real run: data, Ray, worker actors, the SGD loop, evaluation, checkpoints, run directory.

:func:`run_real` starts a run; :func:`resume_real` continues one from its checkpoint. The loop per
iteration is :meth:`ParameterServer.step` (dispatch, collect, decode; :mod:`gcsim.real.master`),
then an SGD-with-momentum step (``torch.optim.SGD``) on the decoded gradient. Every ``eval_every``
iterations the model is evaluated on the test set (``metrics.csv``); every ``checkpoint_every``
iterations the checkpoint and the trace files are written (atomically) and ``status.json`` updated.

Outcomes (``status.json``):

* ``finished`` – all iterations done; ``summary.csv`` and finally ``meta.json`` are written;
* ``failed`` – :class:`RunFailedError` (e.g. more than ``s`` workers dead): a checkpoint at the last
  completed iteration is written, so ``--resume`` continues with fresh workers;
* ``interrupted`` – SIGINT (Ctrl-C) or SIGTERM (batch schedulers): the first one stops at the next safe
  point (while waiting for replies or between iterations) and writes a checkpoint at the last finished
  iteration; ``reason`` names the signal; a second one aborts at once and leaves the last checkpoint
  as it was.

Lost workers (dead actor, dead node, lost payload; :mod:`gcsim.real.master`) are printed as they
happen and listed in ``status.json``'s ``dead_workers`` (worker, iteration, cause, session), counted
in summary.csv's ``dead_workers``. No wait is unbounded: reaching ``--address``
(``connect_timeout_s``), placing the workers (one placement-group bundle per worker process,
``placement_timeout_s``), their setup (``setup_timeout_s``) and fetching used payloads
(``fetch_timeout_s``) each end in a one-line error.

Timing: every ``*_s`` column counts from the time origin, the first dispatch of the run; a resumed
run continues the clock from the last recorded ``end_s``, so times stay increasing (the pause is not
counted). Evaluation and checkpoints happen between iterations (after one's ``end_s``, before the
next one's ``start_s``).

RNG state: the model is initialised from ``seed``; the checkpoint stores torch's generator state;
the data sampler (:mod:`gcsim.real.sampling`) and the straggler draws (:mod:`gcsim.stragglers`) are
keyed by (seed, worker/partition, iteration) and need no saved state.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from gcsim.errors import ConfigError, GcsimError, RunDirError, RunFailedError
from gcsim.real.config import RealConfig, validate_real_config
from gcsim.real.master import (ParameterServer, RunInterrupted, WorkerPool, fit_worker_cpus,
                               resolve_workers_per_process)
from gcsim.real.rundir import METRICS_COLUMNS, RealRunDir
from gcsim.rundir import NewRunDir, RunStatus, effective_status, new_run_dir, read_status

#: Default parent of new run directories.
DEFAULT_RUNS_ROOT = Path("runs/real")

#: Partition gradients each worker times in the CPU-speed probe before the first iteration and
#: after the last (``meta.json`` ``cpu_probe``; :meth:`gcsim.real.master.WorkerPool.probe`).
CPU_PROBE_REPS = 5


@dataclass
class RunHooks:
    """Optional callbacks (tests, fault injection).

    Attributes:
        after_dispatch: ``(iteration, pool)``, called right after an iteration's tasks were dispatched.
    """

    after_dispatch: Callable | None = None


@dataclass
class RealRunResult:
    """Outcome of :func:`run_real` / :func:`resume_real`.

    Attributes:
        run_dir: the run directory.
        status: ``finished`` or ``interrupted`` (failures raise instead).
        iterations_done: iterations completed (all sessions).
        summary: the summary.csv row (dict; empty if no iteration completed).
        test_accuracy: last measured test accuracy (fraction 0..1; NaN if never evaluated).
        wall_s: wall-clock seconds of this session (including Ray start and evaluation).
    """

    run_dir: Path
    status: str
    iterations_done: int
    summary: dict = field(default_factory=dict)
    test_accuracy: float = float("nan")
    wall_s: float = 0.0


@contextmanager
def ray_session(cfg: RealConfig):
    """Use the Ray this process already initialised, if any; else join ``cfg.address`` or, without
    one, start a **private** local Ray (``address="local"``: never the cluster named by
    ``RAY_ADDRESS`` or a stale ``/tmp/ray/ray_current_cluster``), bound to 127.0.0.1, with its own
    temporary directory and ``ray_num_cpus`` logical CPUs (default ``n_workers``); shut down (and
    remove the temporary directory) only what was started here.

    Raises:
        ConfigError: ``--address`` cannot be joined: nothing listens there within
            ``connect_timeout_s``, the cluster wants an authentication token, or Ray's own reason.
        RunFailedError: the private Ray could not start (one line with Ray's reason).
    """
    import ray

    started, temp_dir = False, None
    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        if cfg.address:
            check_reachable(cfg.address, cfg.connect_timeout_s)
        try:
            if cfg.address:
                # a loopback head (127.x, localhost): without Ray's "local clusters only" switch Ray 2.60
                # replaced the host by this machine's outward IP, where nothing answered, and retried forever
                host = cfg.address.rpartition(":")[0].strip("[]")
                loopback = host in ("localhost", "::1") or host.startswith("127.")
                with loopback_only() if loopback else contextlib.nullcontext():
                    ray.init(address=cfg.address, **kwargs)
            else:
                # short path: Ray's socket paths under it must stay below the 107-byte unix limit
                temp_dir = tempfile.mkdtemp(prefix="gcsim-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
                with loopback_only():
                    ray.init(address="local", num_cpus=cfg.ray_num_cpus or cfg.n_workers, _temp_dir=temp_dir,
                             _node_ip_address="127.0.0.1", **kwargs)
        except Exception as e:  # Ray raises many kinds (ConnectionError, RuntimeError, ValueError, ...)
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            first = (str(e).strip().splitlines() or [""])[0]
            if cfg.address:
                # Ray 2.60 says only "Failed to connect" when the GCS refused a driver without the token (the
                # reason, InvalidAuthToken, is in its log); the port answered (check_reachable), so without
                # token mode here a refused token is the likely cause
                no_token = os.environ.get("RAY_AUTH_MODE", "").lower() != "token"
                said_auth = "auth" in f"{type(e).__name__} {e}".lower()
                if said_auth or (no_token and isinstance(e, ConnectionError)):
                    why = ("requires token authentication" if said_auth else
                           f"answered but refused this client ({type(e).__name__}: {first[:80]}), most likely "
                           f"because it requires token authentication")
                    raise ConfigError("--address", message=(
                        f"--address: expected a Ray cluster this client may join, got {cfg.address!r}, which "
                        f"{why}: set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the "
                        f"cluster's token> (or put it in ~/.ray/auth_token or RAY_AUTH_TOKEN_PATH)")) from None
                raise ConfigError("--address", message=(
                    f"--address: expected the address of a running Ray cluster, got {cfg.address!r} "
                    f"({type(e).__name__}: {first[:200]})")) from None
            raise RunFailedError(f"ray: could not start a private local Ray ({type(e).__name__}: {first})") from None
        started = True
    try:
        yield
    finally:
        if started:
            ray.shutdown()
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


@contextmanager
def loopback_only():
    """While starting the private Ray: its daemons (GCS, raylet, agents) and the driver listen on
    127.0.0.1 only. ``_node_ip_address="127.0.0.1"`` alone does not do it (Ray 2.60 still listened on
    every interface, issue 10): Ray binds loopback only with its "local clusters only" switch
    (``ray_constants.ENABLE_RAY_CLUSTER``, env ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``), set here for
    the start and restored after (the env var too: the worker processes Ray starts later inherit the
    daemons' environment, not this one's)."""
    from ray._private import ray_constants

    key = ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR
    old_const, old_env = ray_constants.ENABLE_RAY_CLUSTER, os.environ.get(key)
    ray_constants.ENABLE_RAY_CLUSTER = False
    os.environ[key] = "0"
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = old_const
        if old_env is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old_env


def check_reachable(address: str, timeout_s: float) -> None:
    """Bounded check that something listens at a Ray ``host:port`` address (``ray.init`` itself
    may retry for many minutes). ``auto`` and ``ray://`` addresses are left to Ray.

    Raises:
        ConfigError: not ``host:port``, or no TCP connection within ``timeout_s`` seconds.
    """
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError("--address", "host:port of a Ray cluster's head (GCS), e.g. 127.0.0.1:6379", address)
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise ConfigError("--address", message=(
            f"--address: expected a reachable Ray cluster (host:port of its head), got {address!r}: no "
            f"connection within {timeout_s:g} s (--connect-timeout): {e.strerror or type(e).__name__}")) from None


class _StopFlag:
    """First SIGINT or SIGTERM sets the flag (clean stop at the next safe point; ``signal_name``
    says which); a second one raises KeyboardInterrupt."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.set = False
        self.signal_name: str | None = None
        self._old: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._old[sig] = signal.getsignal(sig)
                signal.signal(sig, self._handle)
        return self

    def reinstall(self) -> None:
        """Take the signals back after ``ray.init``: a Ray driver installs its own SIGTERM handler,
        which ended the process at once (no checkpoint, status ``failed``; issue 10)."""
        if self._old and threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        if self.set:
            raise KeyboardInterrupt
        self.set = True
        self.signal_name = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False


def run_real(cfg: RealConfig, scenario, out_dir: str | Path | None = None, *, progress: bool = True,
             hooks: RunHooks | None = None) -> RealRunResult:
    """Start a real run of ``cfg`` (resolved with :func:`gcsim.real.config.resolve_config`).

    Args:
        cfg: the run options.
        scenario: the narrowed :class:`gcsim.scenario.Scenario` (stragglers; written as config.yaml
            with ``workload.gradient_bytes`` / ``model_bytes`` set to this run's message sizes).
        out_dir: run directory (default ``runs/real/<scheme>-<UTC timestamp>``, see
            :func:`gcsim.rundir.new_run_dir`); created and claimed before anything runs; absent or empty.
        progress: show a tqdm bar on stderr.
        hooks: optional :class:`RunHooks`.
    Returns:
        :class:`RealRunResult` (status ``finished`` or ``interrupted``).
    Raises:
        DataError: CIFAR-10 not prepared in ``cfg.data_dir``.
        RunFailedError: the run had to stop (status ``failed``, checkpoint written).
        RunDirError: ``out_dir`` already holds a run.
        ConfigError: ``--out`` is a file, a non-empty directory (its files are never overwritten), or
            cannot be created. A run that stops before writing a checkpoint removes its directory.
    """
    from gcsim.real.data import require_prepared
    from gcsim.real.model import build_model, num_parameters

    require_prepared(cfg.data_dir)
    if out_dir is not None and (Path(out_dir) / "real.yaml").is_file():
        st = effective_status(read_status(out_dir))
        if not (Path(out_dir) / "checkpoint.pt").is_file() and st in (RunStatus.DEAD, RunStatus.FAILED, None):
            raise RunDirError(f"{out_dir}: holds a run that stopped before its first checkpoint (status "
                              f"{st.value if st else 'missing'}; nothing to resume): remove it or choose another --out")
        raise RunDirError(f"{out_dir}: already holds a run (use --resume {out_dir} to continue it)")
    # created and claimed now, exclusively: two runs never share a directory
    new = new_run_dir(out_dir, root=DEFAULT_RUNS_ROOT, prefix=cfg.scheme, prefix_field="--scheme")
    run = RealRunDir(new.path)
    try:
        # the message sizes of this run (what the simulator should charge for them)
        n_params = num_parameters(build_model(cfg.model, seed=cfg.seed, dtype=cfg.dtype))
        item = {"float32": 4, "float64": 8}
        workload = scenario.workload.model_copy(update={"gradient_bytes": float(n_params * item[cfg.payload_dtype]),
                                                        "model_bytes": float(n_params * item[cfg.dtype])})
        # the workers notice a cancel only between partitions (gcsim.real.worker): the simulator replays
        # this run with the same cancel semantics
        scenario = scenario.model_copy(update={"workload": workload, "cancel_granularity": "partition"})
        run.write_config(cfg.model_dump(mode="json"), scenario.to_yaml())
        return _guarded(run, lambda: _execute(run, cfg, scenario, checkpoint=None, progress=progress, hooks=hooks),
                        new)
    finally:
        new.release()


def _guarded(run: RealRunDir, execute: Callable[[], RealRunResult], new: NewRunDir | None = None) -> RealRunResult:
    """Run ``execute()``; when it raises, a new run (``new``) that left no checkpoint is removed
    (nothing could resume it, and a rerun with the same ``--out`` must find it free), and a failed run
    with a checkpoint says how to continue it."""
    try:
        return execute()
    except RunFailedError as e:
        if run.checkpoint_path.is_file():
            raise RunFailedError(f"{e} (checkpoint kept: continue with gcsim real --resume "
                                 f"{shlex.quote(str(run.path))})") from None
        if new is not None:
            new.discard()
        raise
    except BaseException:
        if new is not None and not run.checkpoint_path.is_file():
            new.discard()
        raise


#: Options a ``--resume`` may change (where and how the workers run, not what is measured).
RESUME_OVERRIDES = ("address", "connect_timeout_s", "placement_timeout_s", "setup_timeout_s", "fetch_timeout_s",
                    "worker_cpus", "placement", "workers_per_process")


def resume_real(run_dir: str | Path, *, iterations: int | None = None, progress: bool = True,
                hooks: RunHooks | None = None, overrides: dict | None = None) -> RealRunResult:
    """Continue the run in ``run_dir`` from its checkpoint with fresh workers.

    Args:
        iterations: new total number of iterations (default: the run's own).
        overrides: :data:`RESUME_OVERRIDES` fields to change (e.g. ``address``: another cluster;
            None values are ignored); saved to real.yaml.
    Raises:
        RunDirError: not a real run directory, or no checkpoint.
        as :func:`run_real` otherwise.
    """
    from gcsim.scenario import load_scenario

    run = RealRunDir(run_dir)
    raw = run.read_real_config()
    if iterations is not None:
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
            raise ConfigError("--iterations", "an integer >= 1", iterations)
        raw["iterations"] = int(iterations)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    bad = sorted(set(given) - set(RESUME_OVERRIDES))
    if bad:
        raise ConfigError("--resume", f"only --iterations and {', '.join(RESUME_OVERRIDES)} changed", bad[0])
    if given:
        try:
            validate_real_config({**raw, **given}, option_names=True)
        except ConfigError:
            raise
        except Exception:  # real.yaml itself is bad: reported below
            pass
    raw.update(given)
    try:
        cfg = validate_real_config(raw, option_names=False)
    except ConfigError as e:
        raise RunDirError(f"{run.path / 'real.yaml'}: {e}") from None
    try:
        scenario = load_scenario(run.path / "config.yaml")
    except ConfigError as e:
        raise RunDirError(f"{run.path / 'config.yaml'}: {e}") from None
    status = run.read_status()
    if effective_status(status) is RunStatus.RUNNING:
        raise RunDirError(f"{run.path / 'status.json'}: status: expected a stopped run, got 'running' "
                          f"(process {status.get('pid')} is still alive)")
    checkpoint = run.load_checkpoint()
    if int(checkpoint["next_iteration"]) >= cfg.iterations:
        raise RunDirError(f"{run.path}: iterations: expected more than the {checkpoint['next_iteration']} already "
                          f"done, got {cfg.iterations} (pass --iterations to extend the run)")
    if iterations is not None:
        scenario = scenario.model_copy(update={"iterations": cfg.iterations})
    if iterations is not None or given:
        run.write_config(cfg.model_dump(mode="json"), scenario.to_yaml())
    return _guarded(run, lambda: _execute(run, cfg, scenario, checkpoint=checkpoint, progress=progress, hooks=hooks))


def _load_data(cfg: RealConfig):
    from gcsim.real.data import load_split

    train_x, train_y = load_split(cfg.data_dir, train=True)
    test_x, test_y = load_split(cfg.data_dir, train=False)
    if cfg.max_train_samples is not None:
        train_x, train_y = train_x[: cfg.max_train_samples], train_y[: cfg.max_train_samples]
    if cfg.eval_samples is not None:
        test_x, test_y = test_x[: cfg.eval_samples], test_y[: cfg.eval_samples]
    return train_x, train_y, test_x, test_y


def _execute(run: RealRunDir, cfg: RealConfig, scenario, *, checkpoint: dict | None, progress: bool,
             hooks: RunHooks | None) -> RealRunResult:
    import ray
    import torch
    from tqdm import tqdm

    from gcsim.real.model import build_model, evaluate, get_flat_weights, num_parameters, set_flat_grad
    from gcsim.real.hostcpu import HostCpuMeter, session_cpu_s
    from gcsim.real.sampling import shard_indices, slice_sizes
    from gcsim.schemes import make_scheme
    from gcsim.stragglers import StragglerProcess
    from gcsim.trace import summarize, write_meta

    hooks = hooks or RunHooks()
    wall0 = time.monotonic()
    started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds")
    start_it = int(checkpoint["next_iteration"]) if checkpoint else 0
    sessions = int(checkpoint.get("sessions", 1)) + 1 if checkpoint else 1
    status_common = {"scheme": cfg.scheme, "iterations_total": cfg.iterations, "sessions": sessions,
                     "session_started_utc": started_utc}
    run.write_status("running", iterations_done=start_it, **status_common)
    (run.path / "meta.json").unlink(missing_ok=True)  # complete again only when this session finishes

    try:
        train_x, train_y, test_x, test_y = _load_data(cfg)
        scheme = make_scheme(cfg.scheme, cfg.n_workers, cfg.s, cfg.m, cfg.scheme_seed, payload_dtype=cfg.payload_dtype)
        torch.set_num_threads(cfg.torch_threads)
        model = build_model(cfg.model, seed=cfg.seed, dtype=cfg.dtype)
        optimizer = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum,
                                    weight_decay=cfg.weight_decay)
        if checkpoint:
            model.load_state_dict(checkpoint["model"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            torch.set_rng_state(checkpoint["torch_rng"])
            prior_it, prior_wk, prior_mt = run.read_traces(start_it)
        else:
            prior_it = prior_wk = prior_mt = None
        shards = shard_indices(len(train_y), scheme.k, cfg.seed)
        sizes = slice_sizes(cfg.batch_size, scheme.k)
        too_big = [j for j in range(scheme.k) if sizes[j] > len(shards[j])]
        if too_big:
            raise ConfigError("--batch-size", f"at most {min(len(s) for s in shards) * scheme.k} "
                              f"(slices must fit their shard of {len(train_y)} training images)", cfg.batch_size)
        stragglers = StragglerProcess(scenario.stragglers, cfg.n_workers, cfg.seed)
    except BaseException as e:
        run.write_status("failed", reason=f"{type(e).__name__}: {e}", iterations_done=start_it, **status_common)
        raise

    ps_ref: list = [None]  # the ParameterServer once created (checkpoints record its deaths)
    metrics: list[dict] = prior_mt.to_dict("records") if prior_mt is not None else []
    loss_window: list[float] = list(checkpoint.get("loss_window", [])) if checkpoint else []
    test_acc = float(metrics[-1]["test_accuracy"]) if metrics else float("nan")
    done = start_it

    def save_checkpoint(next_iteration: int, clock_s: float) -> None:
        run.save_checkpoint({
            "next_iteration": int(next_iteration), "model": model.state_dict(),
            "optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
            "time_offset_s": float(clock_s), "loss_window": list(loss_window), "sessions": sessions,
            "scheme": cfg.scheme, "dead_workers": dead_workers(ps_ref[0]),
        })

    def write_traces(ps: ParameterServer, with_summary: bool) -> None:
        it_df, wk_df = ps.iterations_frame(), ps.workers_frame()
        summary = summarize(it_df, {ps.label: scheme.describe()}) if with_summary and len(it_df) else None
        run.write_traces(it_df, wk_df, summary, pd.DataFrame(metrics, columns=METRICS_COLUMNS))
        ps.staleness_frame().to_csv(run.path / "staleness.csv", index=False)  # gcsim.real.staleness

    prior_deaths = list(checkpoint.get("dead_workers", [])) if checkpoint else []

    def dead_workers(ps: ParameterServer | None) -> list[dict]:
        now = [] if ps is None else [{"worker": w, **d, "session": sessions} for w, d in sorted(ps.deaths.items())]
        return prior_deaths + now

    with _StopFlag() as stop, contextlib.ExitStack() as stack:
        pool = None
        try:
            stack.enter_context(ray_session(cfg))
            stop.reinstall()
            total_cpus = float(ray.cluster_resources().get("CPU", cfg.n_workers))
            node_cpus = [float(nd["Resources"].get("CPU", 0.0)) for nd in ray.nodes() if nd.get("Alive")]
            per_process = resolve_workers_per_process(cfg.workers_per_process, cfg.n_workers, node_cpus)
            worker_cpus = fit_worker_cpus(node_cpus, cfg.n_workers, cfg.worker_cpus, workers_per_process=per_process)
            pool = WorkerPool(cfg.n_workers, torch_threads=cfg.torch_threads, num_cpus=worker_cpus,
                              placement=cfg.placement, placement_timeout_s=cfg.placement_timeout_s,
                              workers_per_process=per_process)
            pool.setup(dict(scheme=cfg.scheme, n=cfg.n_workers, s=cfg.s, m=cfg.m, scheme_seed=cfg.scheme_seed,
                            model=cfg.model, model_seed=cfg.seed, dtype=cfg.dtype, payload_dtype=cfg.payload_dtype,
                            batch_size=cfg.batch_size, sampler_seed=cfg.seed, cancel_poll_s=cfg.cancel_poll_s),
                       train_x, train_y, shards, timeout_s=cfg.setup_timeout_s, should_stop=lambda: stop.set)
            cpu_probe = {"start": pool.probe(CPU_PROBE_REPS, timeout_s=cfg.setup_timeout_s), "end": None}
        except BaseException as e:
            if pool is not None:
                pool.shutdown()
            if isinstance(e, (RunInterrupted, KeyboardInterrupt)):
                e = RunFailedError(f"stopped by {stop.signal_name or 'SIGINT'} before the first iteration "
                                   f"of this session")
            reason = str(e) if isinstance(e, GcsimError) else f"{type(e).__name__}: {e}"
            run.write_status("failed", reason=reason, iterations_done=start_it, **status_common)
            if isinstance(e, RunFailedError):
                raise e from None
            raise
        offset = float(checkpoint.get("time_offset_s", 0.0)) if checkpoint else 0.0
        if prior_it is not None and len(prior_it):
            offset = max(offset, float(prior_it["end_s"].max()))
        local = [i for i in pool.info if i.get("host") == socket.gethostname()]
        local_pids = sorted({int(i["pid"]) for i in local})  # K workers of a process share its pid
        niceness = _worker_niceness(pool.info)
        ps = ParameterServer(pool, scheme, stragglers, policy=cfg.policy, scheme_label=cfg.scheme,
                             t0=time.time() - offset, slice_sizes=sizes, n_params=num_parameters(model),
                             should_stop=lambda: stop.set, after_dispatch=hooks.after_dispatch,
                             cpu_meter=HostCpuMeter(local_pids), fetch_timeout_s=cfg.fetch_timeout_s,
                             on_death=lambda w, t, cause: tqdm.write(
                                 f"worker {w} lost in iteration {t}: {cause}", file=sys.stderr))
        ps.prior_deaths = len(prior_deaths)
        ps_ref[0] = ps
        if prior_it is not None:
            ps.iteration_rows = prior_it.to_dict("records")
            ps.worker_rows = {(int(r["iteration"]), int(r["worker"])): r for r in prior_wk.to_dict("records")}
            if (run.path / "staleness.csv").exists():
                prior_st = pd.read_csv(run.path / "staleness.csv")
                ps.staleness_rows = prior_st[prior_st["iteration"] < start_it].to_dict("records")
        bar = tqdm(total=cfg.iterations, initial=start_it, desc=cfg.scheme, unit="it", disable=not progress,
                   dynamic_ncols=True)
        status = "finished"
        cpu_before, cpu_load = (_host_cpu_times(), time.process_time(), session_cpu_s()), None  # machine load while iterating
        eval_cpu_s = 0.0  # the master's test-set evaluations, left out of that load
        try:
            for it in range(start_it, cfg.iterations):
                if stop.set:
                    raise RunInterrupted(f"interrupted before iteration {it}")
                res = ps.step(it, get_flat_weights(model))
                set_flat_grad(model, res.gradient)
                optimizer.step()
                row = ps.end_iteration()
                done = it + 1
                if np.isfinite(res.loss):
                    loss_window.append(res.loss)
                bar.update(1)
                bar.set_postfix_str(f"t={row['duration_s']:.3f}s loss={res.loss:.3f}"
                                    + (f" acc={test_acc:.3f}" if np.isfinite(test_acc) else ""))
                last = it == cfg.iterations - 1
                if (it + 1) % cfg.eval_every == 0 or last:
                    eval0 = time.process_time()
                    test_loss, test_acc = evaluate(model, test_x, test_y)
                    eval_cpu_s += time.process_time() - eval0
                    metrics.append({"iteration": it, "loss": float(np.mean(loss_window)) if loss_window else np.nan,
                                    "test_loss": test_loss, "test_accuracy": test_acc, "elapsed_s": ps.clock()})
                    loss_window = []
                if (it + 1) % cfg.checkpoint_every == 0 or last:
                    save_checkpoint(it + 1, ps.clock())
                    write_traces(ps, with_summary=last)
                    run.write_status("running", iterations_done=done, dead_workers=dead_workers(ps), **status_common)
            ps.drain(timeout_s=5.0)
            cpu_load = _cpu_load_between(cpu_before, (_host_cpu_times(), time.process_time(), session_cpu_s()),
                                         eval_cpu_s)
            cpu_probe["end"] = pool.probe(CPU_PROBE_REPS, timeout_s=cfg.setup_timeout_s)
        except RunFailedError as e:
            ps.abandon_iteration()
            ps.drain(timeout_s=1.0)
            save_checkpoint(done, ps.clock())
            write_traces(ps, with_summary=True)
            run.write_status("failed", reason=str(e), iterations_done=done, checkpoint_iteration=done,
                             dead_workers=dead_workers(ps), **ps.refusal_status(), **status_common)
            raise
        except RunInterrupted:
            ps.abandon_iteration()
            save_checkpoint(done, ps.clock())
            write_traces(ps, with_summary=True)
            status = "interrupted"
        except KeyboardInterrupt:  # second Ctrl-C: leave the last checkpoint as it is
            ps.abandon_iteration()
            write_traces(ps, with_summary=True)
            status = "interrupted"
        except BaseException as e:
            ps.abandon_iteration()
            write_traces(ps, with_summary=True)
            run.write_status("failed", reason=f"{type(e).__name__}: {e}", iterations_done=done,
                             dead_workers=dead_workers(ps), **ps.refusal_status(), **status_common)
            raise
        finally:
            bar.close()
            pool.shutdown()
        ray_info = {"address": cfg.address or "embedded", "cluster_cpus": total_cpus,
                    "nodes": len(ray.nodes()), "worker_cpus": worker_cpus, "placement": cfg.placement,
                    "workers_per_process": pool.k, "worker_processes": len(pool.processes)}

    wall_s = time.monotonic() - wall0
    it_df = ps.iterations_frame()
    summary = summarize(it_df, {ps.label: scheme.describe()}).iloc[0].to_dict() if len(it_df) else {}
    if status == "interrupted":
        run.write_status("interrupted", reason=stop.signal_name or "SIGINT", iterations_done=done,
                         dead_workers=dead_workers(ps), **ps.refusal_status(),
                         checkpoint_iteration=int(run.load_checkpoint()["next_iteration"])
                         if run.checkpoint_path.is_file() else None, **status_common)
        return RealRunResult(run.path, status, done, summary, test_acc, wall_s)
    run.write_status("finished", iterations_done=done, wall_s=wall_s, dead_workers=dead_workers(ps),
                     **ps.refusal_status(), **status_common)
    write_meta(run.path, "real", scheme=cfg.scheme, n=cfg.n_workers, s=cfg.s, m=cfg.m, policy=cfg.policy,
               model=cfg.model, iterations=done, test_accuracy=test_acc, wall_s=wall_s, sessions=sessions,
               host=socket.gethostname(), host_cpus=os.cpu_count(), usable_cpus=_usable_cpus(),
               cpu_model=cpu_model_name(), host_cpu_load=cpu_load, cpu_probe=cpu_probe, ray=ray_info, worker_niceness=niceness, dead_workers=dead_workers(ps),
               other_cpu_scope=("host" if len(local) == cfg.n_workers else
                                f"master's host only ({len(local)} of {cfg.n_workers} workers on it)"))
    return RealRunResult(run.path, status, done, summary, test_acc, wall_s)


def _worker_niceness(info: list[dict]) -> int | None:
    """Niceness of the first worker process on this host (Ray's ``RAY_worker_niceness``, 15 by
    default), from ``/proc/<pid>/stat``; None when unknown."""
    host = socket.gethostname()
    for i in info:
        if i.get("host") != host:
            continue
        try:
            with open(f"/proc/{int(i['pid'])}/stat") as f:
                text = f.read()
            return int(text[text.rindex(")") + 2:].split()[16])
        except (OSError, ValueError, IndexError, KeyError):
            return None
    return None


def cpu_model_name() -> str:
    """The machine's CPU model (``/proc/cpuinfo``), recorded in meta.json beside the load."""
    from gcsim.study.machine import cpu_model_name as _name

    return _name()


def _usable_cpus() -> int | None:
    """CPUs this process may run on (``os.sched_getaffinity``), None where unsupported."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _host_cpu_times() -> list[int] | None:
    """The machine-wide ``cpu`` line of ``/proc/stat`` (clock ticks: user nice system idle iowait irq
    softirq steal ...), None where unavailable (not Linux)."""
    try:
        with open("/proc/stat") as f:
            head = f.readline().split()
        return [int(x) for x in head[1:]] if head and head[0] == "cpu" else None
    except (OSError, ValueError):
        return None


def _cpu_load_between(before: tuple, after: tuple, excluded_cpu_s: float = 0.0) -> dict | None:
    """Average CPU use while iterating, in cores, from two ``(_host_cpu_times(), time.process_time())``
    readings: ``busy_cores`` (the whole machine: everything but idle and iowait), ``niced_cores``
    (processes with niceness > 0: Ray starts its workers at niceness 15, ``RAY_worker_niceness``, so
    mostly this run's workers), ``master_cores`` (this process, the master), and ``other_cores`` =
    busy - niced - master: Ray's daemons and any other load on the machine, which takes precedence
    over the niced workers and so leaves them fewer cores; plus the 1-minute load average at the end.
    ``excluded_cpu_s`` of this process (test-set evaluations) are left out of busy and master.
    With a third element in each reading (:func:`gcsim.real.hostcpu.session_cpu_s`): also
    ``this_session_cores`` (master, Ray, workers and whatever else this terminal started) and
    ``other_sessions_cores`` (busy - this session), and ``autogroup`` (the kernel shares CPU between
    sessions before niceness, so other sessions' load is not served after the workers but beside them).
    None where ``/proc/stat`` is unavailable."""
    (a, p0, *s0), (b, p1, *s1) = before, after
    if a is None or b is None or len(a) < 5 or len(a) != len(b):
        return None
    d = [y - x for x, y in zip(a, b)]
    total = sum(d[:8])
    if total <= 0:
        return None
    cores = os.cpu_count() or 1  # /proc/stat's cpu line sums every online CPU
    wall_s = total / cores / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
    if wall_s <= 0:
        return None
    excluded = max(excluded_cpu_s, 0.0) / wall_s
    busy, niced = cores * (total - d[3] - d[4]) / total - excluded, cores * d[1] / total
    master = (p1 - p0) / wall_s - excluded
    out = {"busy_cores": round(busy, 3), "niced_cores": round(niced, 3), "master_cores": round(max(master, 0.0), 3),
           "other_cores": round(max(busy - niced - master, 0.0), 3), "loadavg_1m_end": round(os.getloadavg()[0], 2)}
    if s0 and s1 and math.isfinite(s0[0]) and math.isfinite(s1[0]):
        # this session (master, Ray, workers) vs every other session: with autogroup scheduling the
        # other sessions are not served after the niced workers but fairly against this whole session
        own = (s1[0] - s0[0] - max(excluded_cpu_s, 0.0)) / wall_s
        out["this_session_cores"] = round(max(own, 0.0), 3)
        out["other_sessions_cores"] = round(max(busy - own, 0.0), 3)
    from gcsim.real.hostcpu import autogroup_enabled

    out["autogroup"] = autogroup_enabled()
    return out
