"""A whole real run: data, Ray, worker actors, the SGD loop, evaluation, checkpoints, run directory.

:func:`run_real` starts a run; :func:`resume_real` continues one from its checkpoint; both hand the
session to a :class:`RealRun` (setup, one method per iteration, checkpoint, one stop path). The loop per
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

from gcsim.errors import ConfigError, GcsimError, RunDirError, RunFailedError, RunStoppedError
from gcsim.real.reaper import start_ray_reaper, stop_ray_reaper
from gcsim.real.config import RealConfig, RealRunSpec, run_facts, split_legacy_keys, validate_real_config
from gcsim.real.master import (ParameterServer, RunInterrupted, WorkerPool, fit_worker_cpus,
                               resolve_workers_per_process)
from gcsim.real.rundir import METRICS_COLUMNS, RealRunDir
from gcsim.rundir import NewRunDir, RunStatus, effective_status, new_run_dir, read_status
from gcsim.signals import record as record_signal
from gcsim.signals import reset as reset_signal
from gcsim.signals import sigterm_as_interrupt
from gcsim.validation import first_difference

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
        total_wall_s: the same over every session of the run (an earlier one counted up to the
            checkpoint this one resumed from); equals ``wall_s`` for a run of one session.
        sessions: how many sessions the run has had (1 + resumes).
        test_iteration: the iteration after which ``test_accuracy`` was measured (None if never).
        late_signal: ``"SIGINT"``/``"SIGTERM"`` when the first stop signal came after the last
            iteration, while the run was finishing (late replies drained, the end probe): the run is
            complete (``finished``; status.json ``signal_after_last_iteration``) and its end probe was
            skipped if it had not started; a study stops after such a run. None otherwise.
    """

    run_dir: Path
    status: str
    iterations_done: int
    summary: dict = field(default_factory=dict)
    test_accuracy: float = float("nan")
    wall_s: float = 0.0
    total_wall_s: float = 0.0
    sessions: int = 1
    test_iteration: int | None = None
    late_signal: str | None = None


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None,
                connect_timeout_s: float = RealConfig.model_fields["connect_timeout_s"].default):
    """Use the Ray this process already initialised, if any; else join ``address`` or, without
    one, start a **private** local Ray (``address="local"``: never the cluster named by
    ``RAY_ADDRESS`` or a stale ``/tmp/ray/ray_current_cluster``), bound to 127.0.0.1, with its own
    temporary directory and ``num_cpus`` logical CPUs (None: Ray's default, the machine's CPUs); shut
    down (and remove the temporary directory) only what was started here; a watcher ends what is left of a
    private Ray if this process is killed (:mod:`gcsim.real.reaper`). A real run passes
    :meth:`gcsim.real.config.RealRunSpec.ray_kwargs`.

    Args:
        address: Ray cluster to join (``host:port`` of its head, ``auto`` or ``ray://...``); None: private.
        num_cpus: logical CPUs of the private Ray.
        connect_timeout_s: longest wait for a TCP connection to ``address``.

    Raises:
        ConfigError: ``--address`` cannot be joined: nothing listens there within
            ``connect_timeout_s``, the cluster wants an authentication token, or Ray's own reason.
        RunFailedError: the private Ray could not start (one line with Ray's reason).
    """
    import ray

    started, temp_dir = False, None
    if not ray.is_initialized():
        kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        if address:
            check_reachable(address, connect_timeout_s)
        try:
            if address:
                # a loopback head (127.x, localhost): without Ray's "local clusters only" switch Ray 2.60
                # replaced the host by this machine's outward IP, where nothing answered, and retried forever
                host = address.rpartition(":")[0].strip("[]")
                loopback = host in ("localhost", "::1") or host.startswith("127.")
                with loopback_only() if loopback else contextlib.nullcontext():
                    ray.init(address=address, **kwargs)
            else:
                # short path: Ray's socket paths under it must stay below the 107-byte unix limit
                temp_dir = tempfile.mkdtemp(prefix="gcsim-ray-", dir="/tmp" if os.path.isdir("/tmp") else None)
                with loopback_only(), daemons_in_own_process_groups():
                    ray.init(address="local", num_cpus=num_cpus, _temp_dir=temp_dir,
                             _node_ip_address="127.0.0.1", **kwargs)
        except Exception as e:  # Ray raises many kinds (ConnectionError, RuntimeError, ValueError, ...)
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
            first = (str(e).strip().splitlines() or [""])[0]
            if address:
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
                        f"--address: expected a Ray cluster this client may join, got {address!r}, which "
                        f"{why}: set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<the "
                        f"cluster's token> (or put it in ~/.ray/auth_token or RAY_AUTH_TOKEN_PATH)")) from None
                raise ConfigError("--address", message=(
                    f"--address: expected the address of a running Ray cluster, got {address!r} "
                    f"({type(e).__name__}: {first[:200]})")) from None
            raise RunFailedError(f"ray: could not start a private local Ray ({type(e).__name__}: {first})") from None
        started = True
    # a private Ray: a watcher ends what is left of it if this process is killed (gcsim/real/reaper.py)
    reaper = start_ray_reaper(temp_dir) if started and temp_dir is not None else None
    try:
        yield
    finally:
        if started and ray_gcs_reachable():
            ray.shutdown()
        elif started:
            # the private Ray's daemons are gone (killed, or died): Ray's shutdown, and Ray's own exit
            # hook, would wait 60 s for them and then abort this process
            _disarm_ray_exit_hook()
            global ray_abandoned
            ray_abandoned = True
        stop_ray_reaper(reaper)
        if temp_dir is not None:
            shutil.rmtree(temp_dir, ignore_errors=True)


#: Set when this process's private Ray was found dead at the end of a session and left without
#: ``ray.shutdown`` (:func:`ray_session`): the process must then end with ``os._exit`` once its output is
#: flushed (:func:`gcsim.cli.entry`), as the Ray driver's C++ state crashes the interpreter's own exit.
ray_abandoned = False


def ray_gcs_reachable(timeout_s: float = 1.0) -> bool:
    """Whether this driver's Ray cluster still answers: a TCP connection to its GCS (the cluster's head
    process) within ``timeout_s`` seconds. False when the GCS is gone — Ray's daemons killed by a signal
    of their own, a cluster lost — where every further Ray call (``ray.kill``, removing a placement
    group, ``ray.nodes``, ``ray.shutdown``) waits 60 s for the GCS and then ends the process without a
    word, leaving the run's status ``running``. (A signal to the run's process group no longer reaches a
    private Ray's daemons: :func:`daemons_in_own_process_groups`.) True when Ray is not initialised here
    (nothing to protect)."""
    import ray

    if not ray.is_initialized():
        return True
    try:
        address = ray.get_runtime_context().gcs_address
        host, _, port = address.rpartition(":")
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
        return True
    except (OSError, ValueError, AttributeError):
        return False


@contextmanager
def daemons_in_own_process_groups():
    """While starting the private Ray: each daemon Ray starts (GCS, raylet, dashboard, log and autoscaler
    monitors; the raylet's workers and agents then join the raylet's group) leads a process group of its
    own, in this process's session. A signal sent to the run's process group — Ctrl-C, ``timeout``, a
    batch scheduler's SIGTERM, ``kill -- -PGID`` — then reaches ``gcsim`` alone, which stops at its next
    safe point and shuts Ray down itself; before, a group SIGTERM also ended Ray's daemons under the
    running loop, and the Ray driver exits the process (status 1, no status written) on its next call to
    a dead raylet. The session is kept (not ``setsid``): the kernel's autogroup scheduling shares CPU
    between sessions before niceness, and the workers' niceness is meant against this session's master
    (docs/validation/README.md, finding 9). Ray's daemons stay bound to this process's life
    (``PR_SET_PDEATHSIG``, Ray's own ``preexec_fn``, kept); what they start is ended by
    :mod:`gcsim.real.reaper` if this process is killed. A no-op where Ray's ``ConsolePopen`` is missing
    (another Ray version) or on Windows (Ray already gives its daemons new process groups there)."""
    from ray._private import services

    original = getattr(services, "ConsolePopen", None)
    if original is None or sys.platform == "win32":
        yield
        return

    class _OwnGroupPopen(original):
        def __init__(self, *args, **kwargs):
            inner = kwargs.get("preexec_fn")

            def preexec():
                os.setpgid(0, 0)
                if inner is not None:
                    inner()

            kwargs["preexec_fn"] = preexec
            super().__init__(*args, **kwargs)

    services.ConsolePopen = _OwnGroupPopen
    try:
        yield
    finally:
        services.ConsolePopen = original


def _disarm_ray_exit_hook() -> None:
    """Remove Ray's own ``atexit`` shutdown (``ray._private.worker``): with the cluster's daemons gone it
    would wait 60 s for them and then abort the process; :func:`gcsim.cli.entry` ends it instead."""
    import atexit

    from ray._private import worker as ray_worker

    atexit.unregister(ray_worker.shutdown)


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

    Then the port must answer as a gRPC (HTTP/2) server does (:func:`_check_http2`; skipped with
    ``RAY_USE_TLS``).

    Raises:
        ConfigError: not ``host:port``, no TCP connection within ``timeout_s`` seconds, or not a Ray GCS.
    """
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError("--address", "host:port of a Ray cluster's head (GCS), e.g. 127.0.0.1:6379", address)
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
    except OSError as e:
        raise ConfigError("--address", message=(
            f"--address: expected a reachable Ray cluster (host:port of its head), got {address!r}: no "
            f"connection within {timeout_s:g} s (--connect-timeout): {e.strerror or type(e).__name__}")) from None
    with conn:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("0", "", "false"):
            _check_http2(conn, address, timeout_s)


#: HTTP/2's client connection preface and an empty SETTINGS frame (RFC 7540 §3.5, §6.5)
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _check_http2(conn: socket.socket, address: str, timeout_s: float) -> None:
    """A Ray head's GCS is a gRPC server, so it speaks HTTP/2: to the client preface it answers with a
    SETTINGS frame first (RFC 7540 §3.5: a 9-byte frame header of type 4). Anything else (an HTTP/1 server's
    "HTTP/1.1 400", a closed connection, silence for ``timeout_s``) is not a Ray cluster; ``ray.init`` would
    retry it for minutes (review, 2026-12-05: 168 s against an HTTP server, ``--connect-timeout 5``).

    Raises:
        ConfigError: the answer is not an HTTP/2 SETTINGS frame.
    """
    head = b""
    try:
        conn.settimeout(timeout_s)
        conn.sendall(_HTTP2_PREFACE)
        while len(head) < 9:
            chunk = conn.recv(9 - len(head))
            if not chunk:
                break
            head += chunk
    except OSError:
        pass
    if len(head) == 9 and head[3] == 4:
        return
    if head:  # a little more of the answer for the message (an HTTP/1 status line)
        try:
            conn.settimeout(min(0.2, timeout_s))
            head += conn.recv(64)
        except OSError:
            pass
    text = (head.decode("latin-1").splitlines() or [""])[0].strip()[:60]
    said = (f"answered {text!r}..." if text and all(32 <= ord(ch) < 127 for ch in text) else
            f"answered the bytes {head.hex(' ')}" if head else
            f"sent nothing back within {timeout_s:g} s (--connect-timeout)")
    raise ConfigError("--address", message=(
        f"--address: expected the head of a Ray cluster (its GCS port, 6379 unless `ray start --port` "
        f"said otherwise), got {address!r}, which accepted a connection but is not a Ray GCS: to an "
        f"HTTP/2 (gRPC) greeting it {said}"))


class _StopFlag:
    """First SIGINT or SIGTERM sets the flag (clean stop at the next safe point; ``signal_name``
    says which); a second one raises KeyboardInterrupt."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.set = False
        self.signal_name: str | None = None
        self._old: dict = {}

    def __enter__(self):
        reset_signal()  # a signal that came during an earlier run of a study, which then finished, is not this one's
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
        record_signal(signum)  # the first one names the exit status, as it names status.json's reason

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False


def _of_session(measured: dict | None, sessions: int) -> dict | None:
    """``measured`` (a dict of this session's machine measurements) with ``"session": sessions`` added
    when the run has had more than one session, so a reader of meta.json knows it does not cover the
    earlier ones (found by a review); as given otherwise."""
    if not isinstance(measured, dict) or sessions <= 1:
        return measured
    return {**measured, "session": int(sessions)}


def run_real(spec: RealRunSpec, out_dir: str | Path | None = None, *, progress: bool = True,
             hooks: RunHooks | None = None) -> RealRunResult:
    """Start the real run ``spec`` (resolved with :func:`gcsim.real.config.resolve_config`).

    Args:
        spec: the run: its narrowed scenario (stragglers, ...; written as config.yaml with
            ``workload.gradient_bytes`` / ``model_bytes`` set to this run's message sizes) and options.
        out_dir: run directory (default ``runs/real/<scheme>-<UTC timestamp>``, see
            :func:`gcsim.rundir.new_run_dir`); created and claimed before anything runs; absent or empty.
        progress: show a tqdm bar on stderr.
        hooks: optional :class:`RunHooks`.
    Returns:
        :class:`RealRunResult` (status ``finished`` or ``interrupted``).
    Raises:
        DataError: CIFAR-10 not prepared in ``spec.options.data_dir``.
        RunFailedError: the run had to stop (status ``failed``, checkpoint written).
        RunDirError: ``out_dir`` already holds a run.
        ConfigError: ``--out`` is a file, a non-empty directory (its files are never overwritten), or
            cannot be created. A run that stops before writing a checkpoint removes its directory.
    """
    from gcsim.real.data import require_prepared

    require_prepared(spec.options.data_dir)
    if out_dir is not None and (Path(out_dir) / "real.yaml").is_file():
        st = effective_status(read_status(out_dir))
        if not (Path(out_dir) / "checkpoint.pt").is_file() and st in (RunStatus.DEAD, RunStatus.FAILED, None):
            raise RunDirError(f"{out_dir}: holds a run that stopped before its first checkpoint (status "
                              f"{st.value if st else 'missing'}; nothing to resume): remove it or choose another --out")
        raise RunDirError(f"{out_dir}: already holds a run (use --resume {out_dir} to continue it)")
    with sigterm_as_interrupt(only_if_default=True):
        # created and claimed now, exclusively: two runs never share a directory
        new = new_run_dir(out_dir, root=DEFAULT_RUNS_ROOT, prefix=spec.scheme, prefix_field="--scheme")
        try:
            return _start_new_run(spec, new, progress=progress, hooks=hooks)
        except BaseException:
            if not (new.path / "checkpoint.pt").is_file():
                new.discard()  # stopped before its first checkpoint: nothing could resume it
            raise
        finally:
            new.release()


def _start_new_run(spec: RealRunSpec, new: NewRunDir, *, progress: bool, hooks: RunHooks | None) -> RealRunResult:
    """The body of :func:`run_real` once its directory ``new`` is claimed."""
    from gcsim.real.model import build_model, num_parameters

    opts = spec.options
    run = RealRunDir(new.path)
    # the message sizes of this run (what the simulator should charge for them)
    n_params = num_parameters(build_model(opts.model, seed=spec.seed, dtype=opts.dtype))
    item = {"float32": 4, "float64": 8}
    scenario = spec.scenario
    workload = scenario.workload.model_copy(update={"gradient_bytes": float(n_params * item[opts.payload_dtype]),
                                                    "model_bytes": float(n_params * item[opts.dtype])})
    # the workers notice a cancel only between partitions (gcsim.real.worker): the simulator replays
    # this run with the same cancel semantics
    spec = spec.with_scenario(scenario.model_copy(update={"workload": workload, "cancel_granularity": "partition"}))
    run.write_config(spec)
    return guard_run(run, lambda: RealRun(run, spec, checkpoint=None, progress=progress, hooks=hooks).execute(),
                    new)


def guard_run(run: RealRunDir, execute: Callable[[], RealRunResult], new: NewRunDir | None = None) -> RealRunResult:
    """Run ``execute()`` (a real run in ``run``, started by :func:`run_real` or continued by
    :func:`resume_real`) so that a run that stops on an error is either resumable or gone.

    Args:
        run: the run directory ``execute`` writes.
        execute: the run itself; returns its :class:`RealRunResult`, which is returned unchanged.
        new: the claim on ``run``'s directory when this call created it (a new run); None on resume.
    Raises:
        RunFailedError: from ``execute``; when ``run`` holds a checkpoint the message ends with how
            to continue it (``(checkpoint kept: continue with gcsim real --resume <dir>)``).
        BaseException: anything else ``execute`` raises (KeyboardInterrupt included), unchanged.
        In both cases a new run (``new`` given) that left no checkpoint is removed first: nothing could
        resume it, and a rerun with the same ``--out`` must find it free.
    """
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


def run_record(scenario) -> dict:
    """What a run is, as its checkpoint records it: the narrowed scenario (``config.yaml``) as JSON,
    without ``iterations`` (the one fact a ``--resume`` may change)."""
    record = scenario.model_dump(mode="json")
    record.pop("iterations", None)
    return record


#: Options a ``--resume`` may change (where and how the workers run, not what is measured).
RESUME_OVERRIDES = ("address", "connect_timeout_s", "placement_timeout_s", "setup_timeout_s", "fetch_timeout_s",
                    "worker_cpus", "placement", "workers_per_process")


def resume_real(run_dir: str | Path, *, iterations: int | None = None, progress: bool = True,
                hooks: RunHooks | None = None, overrides: dict | None = None) -> RealRunResult:
    """Continue the run in ``run_dir`` from its checkpoint with fresh workers.

    Reads ``config.yaml`` (what the run is) and ``real.yaml`` (its options); a ``real.yaml`` written
    before issue 11 repeats the run facts, which must then agree with ``config.yaml``
    (:func:`gcsim.real.config.split_legacy_keys`).

    Args:
        iterations: new total number of iterations (default: the run's own).
        overrides: :data:`RESUME_OVERRIDES` fields to change (e.g. ``address``: another cluster;
            None values are ignored); saved to real.yaml.
    Raises:
        RunDirError: not a real run directory, no checkpoint, a bad ``real.yaml`` or ``config.yaml``
            (one line naming the file and the field, e.g. an old real.yaml's ``n_workers`` that
            differs from config.yaml's).
        as :func:`run_real` otherwise.
    """
    from gcsim.scenario import load_scenario

    run = RealRunDir(run_dir)
    raw = run.read_real_config()
    if iterations is not None:
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
            raise ConfigError("--iterations", "an integer >= 1", iterations)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    bad = sorted(set(given) - set(RESUME_OVERRIDES))
    if bad:
        raise ConfigError("--resume", f"only --iterations and {', '.join(RESUME_OVERRIDES)} changed", bad[0])
    try:
        scenario = load_scenario(run.path / "config.yaml")
        run_facts(scenario)  # one schemes entry
    except ConfigError as e:
        raise RunDirError(f"{run.path / 'config.yaml'}: {e}") from None
    try:
        raw = split_legacy_keys(raw, scenario)
    except ConfigError as e:
        raise RunDirError(f"{run.path / 'real.yaml'}: {e}") from None
    if given:
        try:
            validate_real_config({**raw, **given}, scenario, option_names=True)
        except ConfigError:
            raise
        except Exception:  # real.yaml itself is bad: reported below
            pass
    raw.update(given)
    try:
        spec = validate_real_config(raw, scenario, option_names=False)
    except ConfigError as e:
        raise RunDirError(f"{run.path / 'real.yaml'}: {e}") from None
    if iterations is not None:
        spec = spec.with_iterations(iterations)
    status = run.read_status()
    if effective_status(status) is RunStatus.RUNNING:
        raise RunDirError(f"{run.path / 'status.json'}: status: expected a stopped run, got 'running' "
                          f"(process {status.get('pid')} is still alive)")
    checkpoint = run.load_checkpoint()
    saved = checkpoint.get("run")  # absent in checkpoints written before it was recorded
    diff = first_difference(saved, run_record(scenario)) if isinstance(saved, dict) else None
    if diff:
        keys, want, got = diff
        field = ".".join(map(str, keys))
        raise RunDirError(f"{run.path / 'config.yaml'}: {field}: expected {want!r} (what the run's checkpoint was "
                          f"made with: a resume continues the same run), got {got!r}")
    if int(checkpoint["next_iteration"]) >= spec.iterations:
        raise RunDirError(f"{run.path}: iterations: expected more than the {checkpoint['next_iteration']} already "
                          f"done, got {spec.iterations} (pass --iterations to extend the run)")
    if iterations is not None or given:
        run.write_config(spec)
    with sigterm_as_interrupt(only_if_default=True):
        return guard_run(run, lambda: RealRun(run, spec, checkpoint=checkpoint, progress=progress,
                                              hooks=hooks).execute())


class RealRun:
    """One session of a real run: setup, the iterations, checkpoints, and one stop path.

    :meth:`execute` runs, in order: :meth:`_prepare` (data, scheme, model, optimizer, the prior
    traces of a resumed run, straggler draws), :meth:`_start_workers` (Ray, the worker pool, its
    setup and CPU-speed probe), :meth:`_start_server` (the :class:`ParameterServer` with the prior
    rows), :meth:`step` per iteration (evaluation and :meth:`checkpoint` every ``eval_every`` /
    ``checkpoint_every`` iterations and after the last), then :meth:`_conclude` (status.json,
    meta.json). Whatever stops the iterations goes through :meth:`_stop`.

    Args:
        run: the run directory (real.yaml and config.yaml already written).
        spec: the run (:class:`gcsim.real.config.RealRunSpec`).
        checkpoint: the checkpoint to continue from (``--resume``), None for a new run.
        progress: show a tqdm bar on stderr.
        hooks: optional :class:`RunHooks`.
    """

    def __init__(self, run: RealRunDir, spec: RealRunSpec, *, checkpoint: dict | None, progress: bool,
                 hooks: RunHooks | None):
        self.run, self.spec, self.opts = run, spec, spec.options
        self.checkpoint_in, self.progress, self.hooks = checkpoint, progress, hooks or RunHooks()
        self.wall0 = time.monotonic()
        self.start_it = int(checkpoint["next_iteration"]) if checkpoint else 0
        self.sessions = int(checkpoint.get("sessions", 1)) + 1 if checkpoint else 1
        # earlier sessions' wall time, up to the checkpoint resumed from (0 in checkpoints before this field)
        self.prior_wall_s = float(checkpoint.get("wall_s", 0.0)) if checkpoint else 0.0
        self.status_common = {"scheme": spec.scheme, "iterations_total": spec.iterations, "sessions": self.sessions,
                              "session_started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        self.loss_window: list[float] = list(checkpoint.get("loss_window", [])) if checkpoint else []
        self.prior_deaths: list[dict] = list(checkpoint.get("dead_workers", [])) if checkpoint else []
        self.metrics: list[dict] = []
        self.test_acc = float("nan")
        self.done = self.start_it  # iterations completed (all sessions)
        self.ps: ParameterServer | None = None
        self.pool: WorkerPool | None = None
        self.stop: _StopFlag | None = None
        self.eval_cpu_s = 0.0  # the master's test-set evaluations, left out of the machine load
        self.cpu_load = None

    # ------------------------------------------------------------------ the session
    def execute(self) -> RealRunResult:
        """Run the session. Returns :class:`RealRunResult` (``finished`` or ``interrupted``).

        Raises:
            RunFailedError: the run had to stop (status ``failed``; a checkpoint is written when the
                iterations had started); anything else that stopped it (status ``failed``) as raised.
        """
        self.run.write_status("running", iterations_done=self.start_it, **self.status_common)
        (self.run.path / "meta.json").unlink(missing_ok=True)  # complete again only when this session finishes
        self._prepare()
        with _StopFlag() as stop, contextlib.ExitStack() as stack:
            self.stop = stop
            self._start_workers(stack)
            self._start_server()
            status = "finished"
            try:
                for it in range(self.start_it, self.spec.iterations):
                    if stop.set:
                        raise RunInterrupted(f"interrupted before iteration {it}")
                    self.step(it)
                self._finish_iterations()
            except BaseException as e:
                status = self._stop(e)  # "interrupted", or it raises
            finally:
                self.bar.close()
                alive = ray_gcs_reachable()
                if alive:  # else the actors ended with the cluster, and every Ray call would hang (60 s)
                    self.pool.shutdown()
            import ray

            self.ray_info = {"address": self.opts.address or "embedded", "cluster_cpus": self.total_cpus,
                             "nodes": len(ray.nodes()) if alive else None, "worker_cpus": self.worker_cpus,
                             "placement": self.opts.placement, "workers_per_process": self.pool.k,
                             "worker_processes": len(self.pool.processes)}
        return self._conclude(status, late_signal=stop.signal_name if status == "finished" and stop.set else None)

    def _prepare(self) -> None:
        """Data, scheme, model and optimizer (restored from the checkpoint on resume), the prior
        traces, the shards and slice sizes, the straggler process. Writes status ``failed`` and
        re-raises on any error (DataError, a ``--batch-size`` slice larger than its shard, ...)."""
        import torch

        from gcsim.real.data import load_run_data
        from gcsim.real.model import build_model
        from gcsim.real.sampling import shard_indices, slice_sizes
        from gcsim.schemes import make_scheme
        from gcsim.stragglers import StragglerProcess

        spec, opts, ck = self.spec, self.opts, self.checkpoint_in
        try:
            self.train_x, self.train_y, self.test_x, self.test_y = load_run_data(opts)
            self.scheme = make_scheme(spec.scheme_name, spec.n_workers, spec.s, spec.m, spec.scheme_seed,
                                      payload_dtype=opts.payload_dtype)
            torch.set_num_threads(opts.torch_threads)
            self.model = build_model(opts.model, seed=spec.seed, dtype=opts.dtype)
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=opts.lr, momentum=opts.momentum,
                                             weight_decay=opts.weight_decay)
            if ck:
                self.model.load_state_dict(ck["model"])
                self.optimizer.load_state_dict(ck["optimizer"])
                torch.set_rng_state(ck["torch_rng"])
                self.prior_it, self.prior_wk, prior_mt = self.run.read_traces(self.start_it)
            else:
                self.prior_it = self.prior_wk = prior_mt = None
            k = self.scheme.k
            self.shards = shard_indices(len(self.train_y), k, spec.seed)
            self.sizes = slice_sizes(opts.batch_size, k)
            if any(self.sizes[j] > len(self.shards[j]) for j in range(k)):
                raise ConfigError("--batch-size", f"at most {min(len(s) for s in self.shards) * k} (slices must fit "
                                  f"their shard of {len(self.train_y)} training images)", opts.batch_size)
            self.stragglers = StragglerProcess(spec.scenario.stragglers, spec.n_workers, spec.seed)
        except BaseException as e:
            self.run.write_status("failed", reason=f"{type(e).__name__}: {e}", iterations_done=self.start_it,
                                  **self.status_common)
            raise
        self.metrics = prior_mt.to_dict("records") if prior_mt is not None else []
        self.test_acc = float(self.metrics[-1]["test_accuracy"]) if self.metrics else float("nan")

    def _start_workers(self, stack: contextlib.ExitStack) -> None:
        """Ray (entered on ``stack``), the worker pool, its setup and the first CPU-speed probe. A
        failure or a stop signal here ends the session before its first iteration: the pool is shut
        down, status ``failed`` written, and a RunFailedError (a signal becomes one) or the error raised."""
        import ray

        spec, opts, stop = self.spec, self.opts, self.stop
        try:
            stack.enter_context(ray_session(**spec.ray_kwargs()))
            stop.reinstall()
            self.total_cpus = float(ray.cluster_resources().get("CPU", spec.n_workers))
            node_cpus = [float(nd["Resources"].get("CPU", 0.0)) for nd in ray.nodes() if nd.get("Alive")]
            per_process = resolve_workers_per_process(opts.workers_per_process, spec.n_workers, node_cpus)
            self.worker_cpus = fit_worker_cpus(node_cpus, spec.n_workers, opts.worker_cpus,
                                               workers_per_process=per_process)
            self.pool = WorkerPool(spec.n_workers, torch_threads=opts.torch_threads, num_cpus=self.worker_cpus,
                                   placement=opts.placement, placement_timeout_s=opts.placement_timeout_s,
                                   workers_per_process=per_process)
            self.pool.setup(dict(scheme=spec.scheme_name, n=spec.n_workers, s=spec.s, m=spec.m,
                                 scheme_seed=spec.scheme_seed, model=opts.model, model_seed=spec.seed,
                                 dtype=opts.dtype, payload_dtype=opts.payload_dtype, batch_size=opts.batch_size,
                                 sampler_seed=spec.seed, cancel_poll_s=opts.cancel_poll_s),
                            self.train_x, self.train_y, self.shards, timeout_s=opts.setup_timeout_s,
                            should_stop=lambda: stop.set)
            self.cpu_probe = {"start": self.pool.probe(CPU_PROBE_REPS, timeout_s=opts.setup_timeout_s), "end": None}
        except BaseException as e:
            if self.pool is not None:
                self.pool.shutdown()
            if isinstance(e, (RunInterrupted, KeyboardInterrupt)):
                e = RunStoppedError(f"stopped by {stop.signal_name or 'SIGINT'} before the first iteration "
                                    f"of this session")
            reason = str(e) if isinstance(e, GcsimError) else f"{type(e).__name__}: {e}"
            self.run.write_status("failed", reason=reason, iterations_done=self.start_it, **self.status_common)
            if isinstance(e, RunFailedError):
                raise e from None
            raise

    def _start_server(self) -> None:
        """The :class:`ParameterServer` (its clock continues a resumed run's), the prior trace rows,
        the progress bar and the first machine-load reading."""
        from tqdm import tqdm

        from gcsim.real.hostcpu import HostCpuMeter, HostStealLog, host_cpu_times, session_cpu_s, worker_niceness
        from gcsim.real.model import num_parameters

        spec, opts, ck, pool = self.spec, self.opts, self.checkpoint_in, self.pool
        offset = float(ck.get("time_offset_s", 0.0)) if ck else 0.0
        if self.prior_it is not None and len(self.prior_it):
            offset = max(offset, float(self.prior_it["end_s"].max()))
        self.local = [i for i in pool.info if i.get("host") == socket.gethostname()]
        local_pids = sorted({int(i["pid"]) for i in self.local})  # K workers of a process share its pid
        self.niceness = worker_niceness(pool.info)
        self.memory_kept = bool(pool.info) and all(bool(i.get("memory_kept")) for i in pool.info)
        ps = ParameterServer(pool, self.scheme, self.stragglers, policy=spec.policy, scheme_label=spec.scheme,
                             t0=time.time() - offset, slice_sizes=self.sizes, n_params=num_parameters(self.model),
                             should_stop=lambda: self.stop.set, after_dispatch=self.hooks.after_dispatch,
                             cpu_meter=HostCpuMeter(local_pids), fetch_timeout_s=opts.fetch_timeout_s,
                             on_death=lambda w, t, cause: tqdm.write(
                                 f"worker {w} lost in iteration {t}: {cause}", file=sys.stderr))
        ps.prior_deaths = len(self.prior_deaths)
        self.ps = ps
        if self.prior_it is not None:
            ps.iteration_rows = self.prior_it.to_dict("records")
            ps.worker_rows = {(int(r["iteration"]), int(r["worker"])): r for r in self.prior_wk.to_dict("records")}
            if (self.run.path / "staleness.csv").exists():
                prior_st = pd.read_csv(self.run.path / "staleness.csv")
                ps.staleness_rows = prior_st[prior_st["iteration"] < self.start_it].to_dict("records")
        self.bar = tqdm(total=spec.iterations, initial=self.start_it, desc=spec.scheme, unit="it",
                        disable=not self.progress, dynamic_ncols=True)
        self.cpu_before = (host_cpu_times(), time.process_time(), session_cpu_s())  # machine load while iterating
        # host.csv: steal per iteration (a resume keeps the earlier sessions' rows)
        prior_host = [] if self.prior_it is None else HostStealLog.read_prior(self.run.path / "host.csv", self.start_it)
        self.host_log = HostStealLog(prior_host)

    # ------------------------------------------------------------------ one iteration
    def step(self, it: int) -> None:
        """Iteration ``it``: dispatch, collect and decode (:meth:`ParameterServer.step`), the SGD
        step, the progress bar; then evaluation and :meth:`checkpoint` when due.

        Raises:
            RunInterrupted: a stop was asked while waiting for replies.
            RunFailedError: more than ``s`` workers lost, or another reason the run cannot go on.
        """
        from gcsim.real.model import evaluate, get_flat_weights, set_flat_grad

        ps, opts = self.ps, self.opts
        res = ps.step(it, get_flat_weights(self.model))
        set_flat_grad(self.model, res.gradient)
        self.optimizer.step()
        row = ps.end_iteration()
        self.host_log.record(ps.label, it, row["end_s"])
        self.done = it + 1
        if np.isfinite(res.loss):
            self.loss_window.append(res.loss)
        self.bar.update(1)
        self.bar.set_postfix_str(f"t={row['duration_s']:.3f}s loss={res.loss:.3f}"
                                 + (f" acc={self.test_acc:.3f}" if np.isfinite(self.test_acc) else ""))
        last = it == self.spec.iterations - 1
        if (it + 1) % opts.eval_every == 0 or last:
            eval0 = time.process_time()
            test_loss, self.test_acc = evaluate(self.model, self.test_x, self.test_y)
            self.eval_cpu_s += time.process_time() - eval0
            self.metrics.append({"iteration": it,
                                 "loss": float(np.mean(self.loss_window)) if self.loss_window else np.nan,
                                 "test_loss": test_loss, "test_accuracy": self.test_acc, "elapsed_s": ps.clock()})
            self.loss_window = []
        if (it + 1) % opts.checkpoint_every == 0 or last:
            self.checkpoint(with_summary=last)
            self.run.write_status("running", iterations_done=self.done, dead_workers=self.dead_workers(),
                                  **self.status_common)

    def _finish_iterations(self) -> None:
        """After the last iteration: late replies drained, the machine load measured, the second probe."""
        from gcsim.real.hostcpu import cpu_load_between, host_cpu_times, session_cpu_s

        self.ps.drain(timeout_s=5.0)
        self.cpu_load = cpu_load_between(self.cpu_before, (host_cpu_times(), time.process_time(), session_cpu_s()),
                                         self.eval_cpu_s)
        if not self.stop.set:  # a stop signal now: every iteration is done; end promptly, without the probe
            self.cpu_probe["end"] = self.pool.probe(CPU_PROBE_REPS, timeout_s=self.opts.setup_timeout_s)

    # ------------------------------------------------------------------ checkpoint and traces
    def checkpoint(self, *, with_summary: bool) -> None:
        """Save the checkpoint at the iterations done (model, optimizer, torch RNG, clock, loss window,
        sessions, deaths) and write the traces (summary.csv only when ``with_summary``)."""
        self.save_checkpoint()
        self.write_traces(with_summary=with_summary)

    def save_checkpoint(self) -> None:
        """``checkpoint.pt`` at :attr:`done` (the next iteration to run), atomically."""
        import torch

        self.run.save_checkpoint({
            "next_iteration": int(self.done), "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
            "time_offset_s": float(self.ps.clock()), "loss_window": list(self.loss_window),
            "sessions": self.sessions, "scheme": self.spec.scheme, "dead_workers": self.dead_workers(),
            "run": run_record(self.spec.scenario), "wall_s": self.prior_wall_s + time.monotonic() - self.wall0,
        })

    def write_traces(self, *, with_summary: bool) -> None:
        """iterations.csv, workers.csv, metrics.csv, staleness.csv, host.csv and (``with_summary``)
        summary.csv."""
        from gcsim.trace import summarize

        ps = self.ps
        it_df, wk_df = ps.iterations_frame(), ps.workers_frame()
        summary = summarize(it_df, {ps.label: self.scheme.describe()}) if with_summary and len(it_df) else None
        self.run.write_traces(it_df, wk_df, summary, pd.DataFrame(self.metrics, columns=METRICS_COLUMNS))
        ps.staleness_frame().to_csv(self.run.path / "staleness.csv", index=False)  # gcsim.real.staleness
        self.host_log.write(self.run.path / "host.csv")  # gcsim.real.hostcpu.HostStealLog

    def dead_workers(self) -> list[dict]:
        """Workers lost in earlier sessions and this one: ``{"worker", "iteration", "cause", "session", ...}``."""
        ps = self.ps
        now = [] if ps is None else [{"worker": w, **d, "session": self.sessions} for w, d in sorted(ps.deaths.items())]
        return self.prior_deaths + now

    # ------------------------------------------------------------------ the one stop path
    def _stop(self, e: BaseException) -> str:
        """Whatever ended the iterations early: abandon the iteration in flight, keep what can be kept,
        write the traces and say why.

        * RunFailedError (e.g. more than ``s`` workers lost): late replies drained (1 s), checkpoint,
          traces, status ``failed`` with the checkpoint's iteration; re-raised;
        * RunInterrupted (first Ctrl-C / SIGTERM): checkpoint, traces; returns ``"interrupted"``;
        * KeyboardInterrupt (a second signal): traces only, the last checkpoint left as it was;
          returns ``"interrupted"``;
        * anything else: traces, status ``failed`` naming the exception; re-raised.
        """
        ps = self.ps
        failed = isinstance(e, RunFailedError)
        interrupted = isinstance(e, (RunInterrupted, KeyboardInterrupt))
        ps.abandon_iteration()
        if failed:
            ps.drain(timeout_s=1.0)
        if failed or isinstance(e, RunInterrupted):
            self.save_checkpoint()
        self.write_traces(with_summary=True)
        if interrupted:
            return "interrupted"
        reason = str(e) if failed else f"{type(e).__name__}: {e}"
        where = {"checkpoint_iteration": self.done} if failed else {}
        self.run.write_status("failed", reason=reason, iterations_done=self.done, **where,
                              dead_workers=self.dead_workers(), **ps.refusal_status(), **self.status_common)
        raise e

    def _test_iteration(self) -> int | None:
        """The iteration after which the last test accuracy was measured (metrics.csv), None if never."""
        return int(self.metrics[-1]["iteration"]) if self.metrics else None

    # ------------------------------------------------------------------ the outcome
    def _conclude(self, status: str, late_signal: str | None = None) -> RealRunResult:
        """status.json (``interrupted`` or ``finished``) and, when finished, meta.json (written last).
        ``late_signal``: the stop signal that came after the last iteration (:class:`RealRunResult`)."""
        from gcsim.real.hostcpu import usable_cpus
        from gcsim.study.machine import cpu_model_name
        from gcsim.trace import summarize, write_meta

        run, spec, ps, done = self.run, self.spec, self.ps, self.done
        wall_s = time.monotonic() - self.wall0
        total_wall_s = self.prior_wall_s + wall_s
        it_df = ps.iterations_frame()
        summary = summarize(it_df, {ps.label: self.scheme.describe()}).iloc[0].to_dict() if len(it_df) else {}
        if status == "interrupted":
            run.write_status("interrupted", reason=self.stop.signal_name or "SIGINT", iterations_done=done,
                             dead_workers=self.dead_workers(), **ps.refusal_status(),
                             checkpoint_iteration=int(run.load_checkpoint()["next_iteration"])
                             if run.checkpoint_path.is_file() else None, **self.status_common)
            return RealRunResult(run.path, status, done, summary, self.test_acc, wall_s, total_wall_s, self.sessions,
                                 test_iteration=self._test_iteration())
        run.write_status("finished", iterations_done=done, wall_s=total_wall_s, dead_workers=self.dead_workers(),
                         **ps.refusal_status(), **self.status_common,
                         **({"signal_after_last_iteration": late_signal} if late_signal else {}))
        n, local = spec.n_workers, self.local
        write_meta(run.path, "real", scheme=spec.scheme, n=n, s=spec.s, m=spec.m, policy=spec.policy,
                   model=self.opts.model, iterations=done, test_accuracy=self.test_acc, wall_s=total_wall_s,
                   session_wall_s=wall_s,
                   sessions=self.sessions, host=socket.gethostname(), host_cpus=os.cpu_count(),
                   usable_cpus=usable_cpus(), cpu_model=cpu_model_name(),
                   # both measured in this session only: a resumed run says which (the trace covers all)
                   host_cpu_load=_of_session(self.cpu_load, self.sessions),
                   cpu_probe=_of_session(self.cpu_probe, self.sessions), ray=self.ray_info, worker_niceness=self.niceness,
                   # gcsim/real/allocator.py: freed memory kept in every worker process (finding 34)
                   worker_memory_kept=self.memory_kept,
                   dead_workers=self.dead_workers(),
                   other_cpu_scope=("host" if len(local) == n else
                                    f"master's host only ({len(local)} of {n} workers on it)"))
        return RealRunResult(run.path, status, done, summary, self.test_acc, wall_s, total_wall_s, self.sessions,
                             test_iteration=self._test_iteration(), late_signal=late_signal)
