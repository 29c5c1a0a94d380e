"""What ``gcsim study`` does with one scheme's run directory: start, skip, resume or restart it.

The study keeps one real run per scheme in ``<runs-root>/<scheme>`` (the
:mod:`gcsim.real.rundir` layout). Before running anything it reads what is there:

* nothing (or an empty directory) – **start** a new run;
* ``meta.json`` and ``status.json`` ``finished`` with at least the requested iterations – **skip**;
* finished with fewer iterations than requested – **resume** from its checkpoint up to the new total
  (:func:`gcsim.real.runner.resume_real` extends the run);
* ``interrupted``, ``failed`` or a ``running`` run whose process is gone, with a readable checkpoint
  before the requested total – **resume** from the checkpoint;
* the same without a usable checkpoint (the run stopped before its first checkpoint, or the file is
  corrupt) – **restart**: the old directory is moved aside to ``<runs-root>/.<scheme>.abandoned-<UTC
  timestamp>`` (never deleted) and a new run starts.

A run directory that belongs to another configuration (different seed, scheme parameters, batch
size, straggler specification, ...) is never silently reused or replaced: that is a
:class:`~gcsim.errors.ConfigError` naming the differing field. A run still alive in another process is
a :class:`~gcsim.errors.RunDirError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gcsim.errors import ConfigError, RunDirError
from gcsim.rundir import RunStatus, effective_status

#: RealConfig fields that change what a run measures; a run directory must agree on all of them to
#: be skipped or resumed (``iterations`` may differ: a shorter run is extended).
RESULT_FIELDS = ("scheme", "n_workers", "s", "m", "scheme_seed", "batch_size", "lr", "momentum", "weight_decay",
                 "eval_every", "eval_samples", "model", "dtype", "payload_dtype", "seed", "policy",
                 "max_train_samples", "torch_threads", "cancel_poll_s")

Action = Literal["start", "skip", "resume", "restart"]


@dataclass(frozen=True)
class RunPlan:
    """The decision for one scheme.

    Attributes:
        scheme: scheme CLI name.
        run_dir: ``<runs-root>/<scheme>``.
        action: ``start`` | ``skip`` | ``resume`` | ``restart`` (module docstring).
        reason: one line for the progress output, e.g. ``"interrupted at iteration 120 of 200"``.
        from_iteration: first iteration this session runs (0 for start/restart; the run's count for skip).
    """

    scheme: str
    run_dir: Path
    action: Action
    reason: str
    from_iteration: int = 0


def _check_same_config(run_dir: Path, stored: dict, cfg, scenario) -> None:
    """Raise ConfigError when the stored run was made with other settings than this study's."""
    from gcsim.scenario import load_scenario

    wanted = cfg.model_dump(mode="json")
    for name in RESULT_FIELDS:
        if stored.get(name, wanted[name]) != wanted[name]:
            raise ConfigError(f"{run_dir / 'real.yaml'}: {name}",
                              f"{wanted[name]!r} (this study's value; use another --runs-root or move the run "
                              f"directory away)", stored.get(name))
    try:
        old = load_scenario(run_dir / "config.yaml")
    except ConfigError:
        return  # unreadable config.yaml: the caller restarts the run
    for name in ("stragglers", "cancel_latency_s"):
        a = getattr(old, name)
        b = getattr(scenario, name)
        a = a.model_dump(mode="json") if hasattr(a, "model_dump") else a
        b = b.model_dump(mode="json") if hasattr(b, "model_dump") else b
        if a != b:
            raise ConfigError(f"{run_dir / 'config.yaml'}: {name}",
                              f"{b!r} (this study's scenario; use another --runs-root or move the run directory "
                              f"away)", a)


def plan_run(run_dir: str | Path, cfg, scenario) -> RunPlan:
    """Decide what to do with ``run_dir`` for the run ``cfg`` (see the module docstring).

    Args:
        run_dir: ``<runs-root>/<scheme>``.
        cfg: the study's :class:`gcsim.real.config.RealConfig` for this scheme (``cfg.iterations`` is
            the requested total).
        scenario: the narrowed :class:`gcsim.scenario.Scenario` from
            :func:`gcsim.real.config.resolve_config` (its straggler spec must match the stored one).
    Returns:
        :class:`RunPlan`.
    Raises:
        ConfigError: the directory holds a run of another configuration (field: the file and the
            differing setting).
        RunDirError: the path is a file, a non-empty directory that is not a real run, or a run still
            going in another live process.
    """
    from gcsim.real.rundir import RealRunDir

    path = Path(run_dir)
    total = int(cfg.iterations)
    if not path.exists():
        return RunPlan(cfg.scheme, path, "start", "new run")
    if not path.is_dir():
        raise RunDirError(f"{path}: expected a run directory or nothing, got a file")
    if not (path / "real.yaml").is_file():
        if any(path.iterdir()):
            raise RunDirError(f"{path}: expected a gcsim real run directory (real.yaml) or nothing, got a "
                              f"non-empty directory without real.yaml")
        return RunPlan(cfg.scheme, path, "start", "new run (empty directory)")
    run = RealRunDir(path)
    try:
        stored = run.read_real_config()
        status = run.read_status() or {}
    except RunDirError as e:
        return RunPlan(cfg.scheme, path, "restart", f"unreadable run files ({e})")
    _check_same_config(path, stored, cfg, scenario)
    state = str(status.get("status", "unknown"))
    if effective_status(status or None) is RunStatus.RUNNING:
        raise RunDirError(f"{path / 'status.json'}: status: expected a stopped run, got 'running' (process "
                          f"{status.get('pid')} is still alive)")
    done = status.get("iterations_done")
    done = int(done) if isinstance(done, int) and not isinstance(done, bool) else None
    if state == "finished" and (path / "meta.json").is_file() and done is not None:
        if done >= total:
            return RunPlan(cfg.scheme, path, "skip", f"finished ({done} iterations)", done)
        return RunPlan(cfg.scheme, path, "resume", f"finished with {done} iterations, extending to {total}", done)
    try:
        nxt = int(run.load_checkpoint()["next_iteration"])
    except (RunDirError, KeyError, TypeError, ValueError) as e:
        why = str(e).split(": ", 1)[-1] if isinstance(e, RunDirError) else "checkpoint without next_iteration"
        return RunPlan(cfg.scheme, path, "restart", f"{state}, no usable checkpoint ({why})")
    if nxt >= total:
        return RunPlan(cfg.scheme, path, "restart", f"{state} with a checkpoint at iteration {nxt} "
                       f"but no finished trace")
    was = "stopped while running" if state == "running" else state
    return RunPlan(cfg.scheme, path, "resume", f"{was} at iteration {nxt} of {total}", nxt)


__all__ = ["RESULT_FIELDS", "RunPlan", "plan_run"]
