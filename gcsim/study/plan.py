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

#: :class:`gcsim.real.config.RealConfig` fields (real.yaml) that change what a run measures; a run
#: directory must agree on all of them to be skipped or resumed.
RESULT_OPTIONS = ("batch_size", "lr", "momentum", "weight_decay", "eval_every", "eval_samples", "model", "dtype",
                  "payload_dtype", "max_train_samples", "torch_threads", "cancel_poll_s")
#: Run facts (config.yaml, :data:`gcsim.real.config.RUN_FACT_PATHS`) a run directory must agree on
#: (``iterations`` may differ: a shorter run is extended).
RESULT_FACTS = ("scheme", "n_workers", "s", "m", "scheme_seed", "seed", "policy")
#: Both (the names as the ``real.yaml`` of runs before issue 11 had them).
RESULT_FIELDS = RESULT_FACTS + RESULT_OPTIONS

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


def _check_same_config(run_dir: Path, stored: dict, spec) -> None:
    """Raise ConfigError when the stored run was made with other settings than this study's: an option
    in real.yaml (``stored``), a run fact in config.yaml (or repeated, differently, in an older
    real.yaml), the straggler specification or the cancel latency."""
    from gcsim.real.config import RUN_FACT_PATHS, run_facts, split_legacy_keys
    from gcsim.scenario import load_scenario

    wanted = spec.options.model_dump(mode="json")
    for name in RESULT_OPTIONS:
        if stored.get(name, wanted[name]) != wanted[name]:
            raise ConfigError(f"{run_dir / 'real.yaml'}: {name}",
                              f"{wanted[name]!r} (this study's value; use another --runs-root or move the run "
                              f"directory away)", stored.get(name))
    try:
        old = load_scenario(run_dir / "config.yaml")
        facts = run_facts(old)
    except ConfigError:
        return  # unreadable config.yaml: the caller restarts the run
    try:
        split_legacy_keys(stored, old)
    except ConfigError as e:
        raise ConfigError(f"{run_dir / 'real.yaml'}: {e.field}", e.allowed, e.given) from None
    want_facts = spec.run_facts()
    for name in RESULT_FACTS:
        if facts[name] != want_facts[name]:
            raise ConfigError(f"{run_dir / 'config.yaml'}: {name}",
                              f"{want_facts[name]!r} (this study's value, config.yaml's {RUN_FACT_PATHS[name]}; use "
                              f"another --runs-root or move the run directory away)", facts[name])
    scenario = spec.scenario
    for name in ("stragglers", "cancel_latency_s"):
        a = getattr(old, name)
        b = getattr(scenario, name)
        a = a.model_dump(mode="json") if hasattr(a, "model_dump") else a
        b = b.model_dump(mode="json") if hasattr(b, "model_dump") else b
        if a != b:
            raise ConfigError(f"{run_dir / 'config.yaml'}: {name}",
                              f"{b!r} (this study's scenario; use another --runs-root or move the run directory "
                              f"away)", a)


def plan_run(run_dir: str | Path, spec) -> RunPlan:
    """Decide what to do with ``run_dir`` for the run ``spec`` (see the module docstring).

    Args:
        run_dir: ``<runs-root>/<scheme>``.
        spec: the study's :class:`gcsim.real.config.RealRunSpec` for this scheme, from
            :func:`gcsim.real.config.resolve_config` (``spec.iterations`` is the requested total; its
            run facts, options and straggler spec must match the stored ones).
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
    total = int(spec.iterations)
    if not path.exists():
        return RunPlan(spec.scheme, path, "start", "new run")
    if not path.is_dir():
        raise RunDirError(f"{path}: expected a run directory or nothing, got a file")
    if not (path / "real.yaml").is_file():
        if any(path.iterdir()):
            raise RunDirError(f"{path}: expected a gcsim real run directory (real.yaml) or nothing, got a "
                              f"non-empty directory without real.yaml")
        return RunPlan(spec.scheme, path, "start", "new run (empty directory)")
    run = RealRunDir(path)
    try:
        stored = run.read_real_config()
        status = run.read_status() or {}
    except RunDirError as e:
        return RunPlan(spec.scheme, path, "restart", f"unreadable run files ({e})")
    _check_same_config(path, stored, spec)
    state = str(status.get("status", "unknown"))
    if effective_status(status or None) is RunStatus.RUNNING:
        raise RunDirError(f"{path / 'status.json'}: status: expected a stopped run, got 'running' (process "
                          f"{status.get('pid')} is still alive)")
    done = status.get("iterations_done")
    done = int(done) if isinstance(done, int) and not isinstance(done, bool) else None
    if state == "finished" and (path / "meta.json").is_file() and done is not None:
        if done >= total:
            return RunPlan(spec.scheme, path, "skip", f"finished ({done} iterations)", done)
        return RunPlan(spec.scheme, path, "resume", f"finished with {done} iterations, extending to {total}", done)
    try:
        nxt = int(run.load_checkpoint()["next_iteration"])
    except (RunDirError, KeyError, TypeError, ValueError) as e:
        why = str(e).split(": ", 1)[-1] if isinstance(e, RunDirError) else "checkpoint without next_iteration"
        return RunPlan(spec.scheme, path, "restart", f"{state}, no usable checkpoint ({why})")
    if nxt >= total:
        return RunPlan(spec.scheme, path, "restart", f"{state} with a checkpoint at iteration {nxt} "
                       f"but no finished trace")
    was = "stopped while running" if state == "running" else state
    return RunPlan(spec.scheme, path, "resume", f"{was} at iteration {nxt} of {total}", nxt)


__all__ = ["RESULT_FACTS", "RESULT_FIELDS", "RESULT_OPTIONS", "RunPlan", "plan_run"]
