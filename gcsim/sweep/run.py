"""Running a sweep: points evaluated in this process (``local``) or as Ray tasks (``ray``), logged one
line per finished point, resumable, published as ``runs/sweep/<name>-<UTC timestamp>/``.

Run directory (:mod:`gcsim.rundir`: named and claimed exclusively at the start, ``status.json`` in its
vocabulary, files published atomically, ``meta.json`` last):

* ``sweep.yaml`` – the resolved sweep (base scenario inline, every default filled in; grid; engine),
  written first: a sweep file of its own, and what ``--resume`` compares against;
* ``points.jsonl`` – one JSON line per finished point (``point``, ``values``, ``rows``), appended and
  flushed as each point finishes (fsync'd at least every second and at the end): what a resumed sweep
  skips; a torn last line (a kill mid-write) is dropped and that point computed again;
* ``status.json`` – ``running`` / ``interrupted`` / ``failed`` / ``finished`` with the points done, and
  one entry per session (executor, CPUs, points computed, wall seconds, load average before and after);
* ``sweep.csv`` (:mod:`gcsim.sweep.output`), ``plot_<parameter>.png``, ``meta.json`` – when every point
  is done.

A point is evaluated by :func:`evaluate_point`: the same validation and engine as ``gcsim simulate``
(:func:`gcsim.sim.vector.simulate_with` with ``trace="none"``), so its numbers equal ``gcsim simulate``
of the point's scenario (:func:`point_scenario`), whatever the executor. Ray tasks take chunks of
points (one task per point costs more than a point at n = 64); BLAS is pinned to one thread in every
process (:mod:`gcsim.threads`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from gcsim import __version__
from gcsim.errors import ConfigError, GcsimError, RunFailedError
from gcsim.rundir import (CLAIM_NAME, Claim, RunStatus, atomic_write_text, claim_pid, effective_status, new_run_dir,
                          read_status, take_claim, utc_now_iso, write_status)
from gcsim.signals import sigterm_as_interrupt
from gcsim.sweep.config import DEFAULT_SWEEP_ROOT, FIXED_AXIS_COLUMNS, SweepPlan, display
from gcsim.validation import first_difference

#: values of ``gcsim sweep --executor``
EXECUTORS = ("auto", "ray", "local")
POINTS_LOG = "points.jsonl"
#: seconds between updates of a running sweep's status.json ``points_done``
STATUS_EVERY_S = 2.0
#: most points one Ray task takes when the chunk size is chosen automatically
MAX_AUTO_CHUNK = 25
#: Ray tasks per CPU aimed at when the chunk size is chosen automatically
AUTO_TASKS_PER_CPU = 4
#: seconds between fsyncs of points.jsonl (each line is flushed at once: a killed process loses none)
FSYNC_EVERY_S = 1.0

_SCHEME_FIELD = re.compile(r"^schemes\.(\d+)(?:\.(.*))?$")
#: per process: (name, n, s, m, seed) -> why the scheme refused them (refusals can cost 0.1 s and more)
_REFUSALS: dict = {}
_MAX_REFUSALS = 10_000


# ------------------------------------------------------------------------------------------ one point
@dataclass
class PreparedPoint:
    """A point ready to simulate.

    Attributes:
        k: the point's index.
        data: its scenario data (every scheme of the point, refused ones included).
        scenario: the validated scenario of the schemes accepted (None when none is, or the point is
            refused as a whole).
        reasons: index in ``data["schemes"]`` -> why that scheme was refused.
        whole: why the scenario refused the point as a whole ("" when it did not).
    """

    k: int
    data: dict
    scenario: object = None
    reasons: dict = field(default_factory=dict)
    whole: str = ""


def _reason(e: ConfigError, field_name: str | None = None) -> str:
    if e.allowed is None or field_name is None:
        return str(e)
    return f"{field_name}: expected {e.allowed}, got {e.given!r}"


def _scheme_key(spec: dict, n) -> tuple:
    return (spec.get("name"), n, spec.get("s", 0), spec.get("m", 1), spec.get("seed", 0))


def prepare_point(plan: SweepPlan, k: int, memo: dict | None = None) -> PreparedPoint:
    """Validate point ``k`` as ``gcsim simulate`` validates a scenario file, leaving out the schemes
    that refuse the point's parameters (``memo`` remembers refusals across points of one process).

    Raises:
        IndexError: ``k`` outside the grid.
    """
    from gcsim.scenario import validate_scenario

    memo = _REFUSALS if memo is None else memo
    data = plan.point_data(k)
    specs = data["schemes"]
    n = data.get("n_workers")
    pp = PreparedPoint(k, data)
    for i, sp in enumerate(specs):
        why = memo.get(_scheme_key(sp, n))
        if why is not None:
            pp.reasons[i] = why
    live = [i for i in range(len(specs)) if i not in pp.reasons]
    while live:
        try:
            pp.scenario = validate_scenario({**data, "schemes": [specs[i] for i in live]}, base_dir=plan.base_dir)
            return pp
        except ConfigError as e:
            m = _SCHEME_FIELD.match(e.field or "")
            if m is None or int(m.group(1)) >= len(live):  # the point as a whole
                pp.whole = _reason(e)
                return pp
            j, sub = live[int(m.group(1))], m.group(2)
            pp.reasons[j] = _reason(e, sub or "scheme")
            if sub in (None, "s", "m", "seed"):  # depends on (name, n, s, m, seed) only
                if len(memo) > _MAX_REFUSALS:
                    memo.clear()
                memo[_scheme_key(specs[j], n)] = pp.reasons[j]
            live.remove(j)
    if len(pp.reasons) == len(specs) and specs:
        # every scheme refused (some from the memo, unchecked against this point): the scenario's own
        # error, if it has one, names the point as validating it with its schemes would have
        try:
            validate_scenario({**data, "schemes": [{"name": "uncoded"}]}, base_dir=plan.base_dir)
        except ConfigError as e:
            pp.whole = _reason(e)
    return pp


def point_scenario(plan: SweepPlan, k: int):
    """The scenario point ``k`` simulates (its accepted schemes): ``gcsim simulate`` of its
    ``to_yaml()`` gives the same numbers as the sweep's rows.

    Raises:
        ConfigError: ``--point`` outside the grid, or a point every scheme (or the scenario) refuses.
    """
    if not 0 <= k < plan.total:
        raise ConfigError("--point", f"a point index in [0, {plan.total - 1}]", k)
    pp = prepare_point(plan, k, memo={})
    if pp.scenario is None:
        why = pp.whole or "; ".join(f"{pp.data['schemes'][i].get('name')}: {r}" for i, r in sorted(pp.reasons.items()))
        raise ConfigError("--point", "a point with at least one scheme the scenario accepts",
                          _Label(f"{k} (skipped: {why})"))
    return pp.scenario


class _Label(str):
    def __repr__(self) -> str:
        return str(self)


def evaluate_point(plan: SweepPlan, k: int, memo: dict | None = None) -> list[dict]:
    """The rows of point ``k``: one per scheme of the point, in its order (columns of
    :func:`gcsim.sweep.output.csv_columns`; times in seconds). Refused parameters give ``skipped`` rows
    with the reason; a simulation that raises a :class:`~gcsim.errors.GcsimError` (or runs out of memory)
    gives ``failed`` rows. Other exceptions (bugs) propagate."""
    from gcsim.sim.vector import simulate_with

    pp = prepare_point(plan, k, memo)
    data = pp.data
    common: dict = {"point": k}
    for ax, v in zip(plan.axes, plan.values(k)):
        if ax.column not in FIXED_AXIS_COLUMNS:
            common[ax.column] = display(v)
    common.update(n=data.get("n_workers"), iterations=data.get("iterations"), seed=data.get("seed"))

    def row(sp: dict, status: str, reason: str = "", **more) -> dict:
        r = {**common, "scheme": sp.get("label") or sp.get("name"), "s": sp.get("s", 0), "m": sp.get("m", 1),
             "status": status, "reason": reason, "mean_s": None, "p50_s": None, "p95_s": None, "p99_s": None,
             "refusals": None, "engine": ""}
        r.update(more)
        return r

    specs = data["schemes"]
    if pp.scenario is None:
        return [row(sp, "skipped", pp.whole or pp.reasons.get(i, "")) for i, sp in enumerate(specs)]
    failed = ""
    try:
        result = simulate_with(pp.scenario, plan.engine, trace="none", progress=False)
    except GcsimError as e:
        failed = str(e)
    except MemoryError:
        failed = "out of memory"
    rows = []
    if not failed:
        summary = result.summary.set_index("scheme")
    live = iter(pp.scenario.schemes)
    for i, sp in enumerate(specs):
        if i in pp.reasons:
            rows.append(row(sp, "skipped", pp.reasons[i]))
            continue
        spec = next(live)
        sp = {"name": spec.name, "label": spec.label, "s": spec.s, "m": spec.m}
        if failed:
            rows.append(row(sp, "failed", failed))
            continue
        srow = summary.loc[spec.key]
        rows.append(row(sp, "ok", mean_s=float(srow["mean_s"]), p50_s=float(srow["p50_s"]),
                        p95_s=float(srow["p95_s"]), p99_s=float(srow["p99_s"]), refusals=int(srow["refusals"]),
                        engine=result.engine))
    return rows


def run_chunk(plan: SweepPlan, ks: list[int]) -> list[tuple[int, list[dict]]]:
    """Evaluate the points ``ks`` (one Ray task's work), BLAS on one thread. Returns ``[(k, rows)]``."""
    from gcsim.threads import one_blas_thread

    with one_blas_thread():
        return [(k, evaluate_point(plan, k)) for k in ks]


# ------------------------------------------------------------------------------------------ executors
def resolve_executor(executor: str, address: str | None) -> str:
    """``auto`` -> ``ray`` when Ray is importable, else ``local``.

    Raises:
        ConfigError: unknown ``executor``; ``--address`` with the local executor.
    """
    if executor not in EXECUTORS:
        raise ConfigError("--executor", f"one of {', '.join(EXECUTORS)}", executor)
    if executor == "auto":
        executor = "ray" if importlib.util.find_spec("ray") is not None else "local"
    if address and executor != "ray":
        raise ConfigError("--address", "used only with the ray executor (--executor ray, or auto with Ray "
                          "installed)", address)
    return executor


def auto_chunk(points: int, cpus: int) -> int:
    """Points per Ray task: about :data:`AUTO_TASKS_PER_CPU` tasks per CPU, at most :data:`MAX_AUTO_CHUNK`
    points each."""
    return max(1, min(MAX_AUTO_CHUNK, math.ceil(points / max(1, cpus * AUTO_TASKS_PER_CPU))))


def local_points(plan: SweepPlan, todo: list[int]) -> Iterator[tuple[int, list[dict]]]:
    """Evaluate ``todo`` in this process, in order, yielding ``(k, rows)`` as each point finishes."""
    from gcsim.threads import one_blas_thread

    with one_blas_thread():
        for k in todo:
            yield k, evaluate_point(plan, k)


def ray_points(plan: SweepPlan, todo: list[int], *, address: str | None = None, num_cpus: int | None = None,
               chunk_size: int | None = None, connect_timeout_s: float = 30.0,
               on_start: Callable[[], None] | None = None, info: dict | None = None
               ) -> Iterator[tuple[int, list[dict]]]:
    """Evaluate ``todo`` as Ray tasks of ``chunk_size`` points (default :func:`auto_chunk`), yielding
    ``(k, rows)`` as tasks finish. Uses the Ray this process already started, else joins ``address``,
    else starts a private loopback-only Ray with ``num_cpus`` CPUs (default: this machine's) –
    :func:`gcsim.real.runner.ray_session`; ``on_start`` runs once Ray is up; ``info`` receives
    ``cpus`` and ``chunk_size``. Unfinished tasks are cancelled when the generator is closed.

    Raises:
        ConfigError: ``address`` cannot be joined. RunFailedError: Ray could not start, or a task died.
    """
    import ray

    from gcsim.real.runner import ray_session

    if num_cpus is None:
        num_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    with ray_session(address, num_cpus=num_cpus, connect_timeout_s=connect_timeout_s):
        if on_start is not None:
            on_start()
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        size = chunk_size or auto_chunk(len(todo), cpus)
        if info is not None:
            info.update(cpus=cpus, chunk_size=size)
        task = ray.remote(num_cpus=1, max_retries=0)(run_chunk)
        plan_ref = ray.put(plan)
        pending = [task.remote(plan_ref, todo[i:i + size]) for i in range(0, len(todo), size)]
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    try:
                        out = ray.get(ref)
                    except ray.exceptions.RayError as e:
                        first = (str(e).strip().splitlines() or [""])[0]
                        raise RunFailedError(f"sweep: a Ray task failed ({type(e).__name__}: {first[:300]})") from None
                    yield from out
        finally:
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)


# ------------------------------------------------------------------------------------------ the log
def read_log(path: Path, plan: SweepPlan) -> dict[int, list[dict]]:
    """Finished points in ``points.jsonl``: ``{k: rows}``. A torn last line (no newline) is cut off the
    file; lines that do not parse, or whose values are not point ``k``'s, are ignored (computed again)."""
    if not path.is_file():
        return {}
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        keep = raw.rfind(b"\n") + 1
        with open(path, "r+b") as f:
            f.truncate(keep)
        raw = raw[:keep]
    done: dict[int, list[dict]] = {}
    for line in raw.splitlines():
        try:
            item = json.loads(line)
            k, rows = item["point"], item["rows"]
            if isinstance(k, int) and 0 <= k < plan.total and isinstance(rows, list) and k not in done \
                    and item.get("values") == [display(v) for v in plan.values(k)]:
                done[k] = rows
        except (ValueError, KeyError, TypeError):
            continue
    return done


class PointLog:
    """Appends one JSON line per finished point to ``points.jsonl``, flushed at once (a killed process
    loses no finished point) and fsync'd every :data:`FSYNC_EVERY_S` seconds and on close."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._f = open(self.path, "a", encoding="utf-8")
        self._synced = time.monotonic()

    def append(self, plan: SweepPlan, k: int, rows: list[dict]) -> None:
        """Log point ``k``'s rows."""
        line = json.dumps({"point": k, "values": [display(v) for v in plan.values(k)], "rows": rows},
                          separators=(",", ":"))
        self._f.write(line + "\n")
        self._f.flush()
        if time.monotonic() - self._synced >= FSYNC_EVERY_S:
            os.fsync(self._f.fileno())
            self._synced = time.monotonic()

    def close(self) -> None:
        """Flush, fsync and close (idempotent)."""
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()


# ------------------------------------------------------------------------------------------ run dirs
@dataclass
class SweepResult:
    """Outcome of :func:`run_sweep`.

    Attributes:
        run_dir: the run directory.
        status: ``finished`` or ``interrupted`` (failures raise).
        total: points in the grid; done: points finished (all sessions); computed: points computed in
            this session (the rest were read from ``points.jsonl``).
        rows: every row, point order (``finished`` only).
        executor: ``local`` or ``ray``; wall_s: this session's wall-clock seconds.
        files: what was written (``finished`` only).
    """

    run_dir: Path
    status: str
    total: int
    done: int
    computed: int
    rows: list = field(default_factory=list)
    executor: str = "local"
    wall_s: float = 0.0
    files: list = field(default_factory=list)


def _first_difference(a, b) -> str:
    """The first difference of two sweep documents, for the --resume error ("grid.seed[1]: 2 there, 3 here")."""
    keys, x, y = first_difference(a, b) or ((), a, b)
    path = "".join(f"[{k}]" if isinstance(k, int) else (f".{k}" if i else str(k)) for i, k in enumerate(keys))
    return f"{path}: {x!r} there, {y!r} here" if len(repr(x)) + len(repr(y)) < 160 else f"{path} differs"


def check_same_sweep(run_dir: Path, plan: SweepPlan) -> None:
    """Refuse to resume ``run_dir`` with another sweep.

    Raises:
        ConfigError: ``--resume``: not a sweep run directory, or its base / grid / engine differ from
            ``plan``'s (naming the first difference).
    """
    from gcsim.yamlio import read_yaml

    sweep = run_dir / "sweep.yaml"
    if not run_dir.is_dir() or not sweep.is_file():
        raise ConfigError("--resume", "a sweep run directory (holding sweep.yaml)", str(run_dir))
    try:
        _, stored = read_yaml(sweep)
        stored_id = {"base": {k: v for k, v in stored["base"].items() if k != "name"}, "grid": stored["grid"],
                     "engine": stored["engine"]}
    except Exception as e:  # unreadable or edited: not this sweep's
        raise ConfigError("--resume", "a sweep run directory with a readable sweep.yaml",
                          _Label(f"{str(run_dir)!r} ({type(e).__name__})")) from None
    new_id = plan.identity()
    if stored_id != new_id:
        raise ConfigError("--resume", "a run of the same sweep (same base, grid and engine)",
                          _Label(f"{str(run_dir)!r}, whose {_first_difference(stored_id, new_id)}"))


def _claim_existing(run_dir: Path) -> Claim:
    """Claim an existing run directory for this process (refused while another live process holds it)."""
    try:
        claim = take_claim(run_dir)
    except OSError as e:
        raise ConfigError("--resume", "a sweep run directory this user can write",
                          _Label(f"{str(run_dir)!r} ({e.strerror or type(e).__name__})")) from None
    if claim is None:
        pid = claim_pid(run_dir / CLAIM_NAME)
        raise ConfigError("--resume", "a sweep no other process is running",
                          _Label(f"{str(run_dir)!r} ({f'process {pid}' if pid else 'another process'} holds it)"))
    return claim


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_sweep(plan: SweepPlan, *, out_dir: str | Path | None = None, resume: str | Path | None = None,
              executor: str = "auto", address: str | None = None, connect_timeout_s: float = 30.0,
              num_cpus: int | None = None, chunk_size: int | None = None, progress: bool = True, command: str = "",
              on_point: Callable[[int], None] | None = None) -> SweepResult:
    """Run (or continue) a sweep and publish it.

    Args:
        plan: the validated sweep (:func:`gcsim.sweep.config.load_sweep`).
        out_dir: the new run directory (default ``runs/sweep/<name>-<UTC timestamp>``); must be new or empty.
        resume: an existing run directory of the same sweep: its finished points are kept, the others
            computed (``out_dir`` must then be None).
        executor: ``auto`` (Ray when importable, else local), ``ray`` or ``local`` (this process, no Ray).
        address: a Ray cluster's ``host:port`` (ray executor); None starts a private local Ray.
        connect_timeout_s: seconds ``address`` has to answer.
        num_cpus: CPUs of the private Ray (default: this machine's usable CPUs).
        chunk_size: points per Ray task (default :func:`auto_chunk`).
        progress: a tqdm bar on stderr.
        command: the command line, recorded in status.json and meta.json.
        on_point: called with each finished point's index after it is logged (tests: interruption).
    Returns:
        :class:`SweepResult` (``status`` ``interrupted`` after Ctrl-C / SIGTERM: the run directory is
        resumable, or removed when it was new and no point had finished).
    Raises:
        ConfigError: bad ``out_dir`` / ``resume`` / ``executor`` / ``address``, or a resume of another
            sweep. RunFailedError: Ray could not start or a task died (status ``failed``, resumable).
    """
    t0 = time.perf_counter()
    executor = resolve_executor(executor, address)
    if resume is not None and out_dir is not None:
        raise ConfigError("--out", "not given with --resume (the run continues in its own directory)", str(out_dir))
    new = None
    if resume is not None:
        run_dir = Path(resume)
        check_same_sweep(run_dir, plan)
        st = read_status(run_dir) or {}
        claim = _claim_existing(run_dir)
    else:
        new = new_run_dir(out_dir, root=DEFAULT_SWEEP_ROOT, prefix=plan.name)
        run_dir, claim, st = new.path, None, {}
        try:
            import yaml
            atomic_write_text(run_dir / "sweep.yaml", yaml.safe_dump(plan.resolved(), sort_keys=False, width=100))
        except BaseException:
            new.discard()
            raise

    def release():
        if new is not None:
            new.release()
        else:
            claim.release()

    total = plan.total
    sessions = list(st.get("sessions", [])) if isinstance(st.get("sessions"), list) else []
    session = {"started_utc": utc_now_iso(), "executor": executor, "address": address, "load_before": _load(),
               "points_computed": 0}
    computed = 0
    log = None
    done: dict = {}
    try:
        done = read_log(run_dir / POINTS_LOG, plan)
        finished = effective_status(st or None) is RunStatus.FINISHED
        if finished and len(done) == total and (run_dir / "meta.json").is_file():
            release()
            return SweepResult(run_dir, RunStatus.FINISHED.value, total, total, 0, _rows(done, total),
                               executor, time.perf_counter() - t0, [])
        todo = [k for k in range(total) if k not in done]
        write_status(run_dir, RunStatus.RUNNING, points_total=total, points_done=len(done), command=command,
                     sessions=sessions)
        log = PointLog(run_dir / POINTS_LOG)
        info: dict = {}
        with sigterm_as_interrupt() as reinstall, _bar(progress, total, len(done), plan.name, executor) as bar:
            if not todo:
                points = iter(())
            elif executor == "ray":
                points = ray_points(plan, todo, address=address, num_cpus=num_cpus, chunk_size=chunk_size,
                                    connect_timeout_s=connect_timeout_s, on_start=reinstall, info=info)
            else:
                points = local_points(plan, todo)
            try:
                shown = time.monotonic()
                for k, rows in points:
                    log.append(plan, k, rows)
                    done[k] = rows
                    computed += 1
                    if bar is not None:
                        bar.update(1)
                    if time.monotonic() - shown >= STATUS_EVERY_S:  # status.json follows the run (not per point)
                        write_status(run_dir, RunStatus.RUNNING, points_total=total, points_done=len(done),
                                     command=command, sessions=sessions)
                        shown = time.monotonic()
                    if on_point is not None:
                        on_point(k)
            finally:
                close = getattr(points, "close", None)
                if close is not None:
                    close()
        log.close()
        session.update(info)
    except KeyboardInterrupt:
        if log is not None:
            log.close()
        session.update(points_computed=computed, wall_s=round(time.perf_counter() - t0, 3), load_after=_load())
        if new is not None and not done_count(run_dir, plan):
            new.discard()
            return SweepResult(run_dir, RunStatus.INTERRUPTED.value, total, 0, computed, [], executor,
                               time.perf_counter() - t0, [])
        write_status(run_dir, RunStatus.INTERRUPTED, points_total=total, points_done=len(done), command=command,
                     sessions=sessions + [session])
        release()
        return SweepResult(run_dir, RunStatus.INTERRUPTED.value, total, len(done), computed, [], executor,
                           time.perf_counter() - t0, [])
    except BaseException as e:
        if log is not None:
            with contextlib.suppress(Exception):
                log.close()
        if new is not None and computed == 0 and not done_count(run_dir, plan):
            new.discard()
            raise
        session.update(points_computed=computed, wall_s=round(time.perf_counter() - t0, 3), load_after=_load())
        with contextlib.suppress(Exception):
            write_status(run_dir, RunStatus.FAILED, points_total=total, points_done=len(done), command=command,
                         error=f"{type(e).__name__}: {e}"[:500], sessions=sessions + [session])
        release()
        raise

    # every point done: publish
    from gcsim.sweep.output import write_csv, write_plots

    rows = _rows(done, total)
    session.update(points_computed=computed, wall_s=round(time.perf_counter() - t0, 3), load_after=_load())
    sessions.append(session)
    files = [run_dir / "sweep.csv"]
    try:
        write_csv(plan, rows, run_dir / "sweep.csv")
        files += write_plots(plan, rows, run_dir)
        counts: dict = {}
        engines: dict = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            if r.get("engine"):
                engines[r["engine"]] = engines.get(r["engine"], 0) + 1
        meta = {"kind": "sweep", "name": plan.name, "gcsim_version": __version__, "created_utc": utc_now_iso(),
                "points": total, "rows": len(rows), "status_counts": counts, "engines": engines,
                "grid": {ax.key: len(ax.values) for ax in plan.axes}, "engine": plan.engine, "command": command,
                "sessions": sessions, "python": sys.version.split()[0]}
        write_status(run_dir, RunStatus.FINISHED, points_total=total, points_done=total, command=command,
                     sessions=sessions)
        atomic_write_text(run_dir / "meta.json", json.dumps(meta, indent=2, default=str))
        files.append(run_dir / "meta.json")
    finally:
        release()
    return SweepResult(run_dir, RunStatus.FINISHED.value, total, total, computed, rows, executor,
                       time.perf_counter() - t0, files)


def done_count(run_dir: Path, plan: SweepPlan) -> int:
    """Finished points logged in ``run_dir`` (0 when there is no log)."""
    return len(read_log(Path(run_dir) / POINTS_LOG, plan))


def _rows(done: dict, total: int) -> list[dict]:
    return [r for k in range(total) for r in done[k]]


@contextlib.contextmanager
def _bar(progress: bool, total: int, initial: int, name: str, executor: str):
    if not progress:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=total, initial=initial, unit="point", desc=f"sweep {name} ({executor})", file=sys.stderr)
    try:
        yield bar
    finally:
        bar.close()


__all__ = ["AUTO_TASKS_PER_CPU", "EXECUTORS", "POINTS_LOG", "PointLog", "PreparedPoint", "SweepResult", "auto_chunk", "check_same_sweep",
           "done_count", "evaluate_point", "local_points", "point_scenario", "prepare_point", "ray_points",
           "read_log", "resolve_executor", "run_chunk", "run_sweep"]
