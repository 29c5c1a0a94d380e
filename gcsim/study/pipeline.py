"""The whole study: one real run per scheme (resumable), the comparison, the headline.

:func:`run_study` does, in order:

1. resolve every scheme's run configuration from the scenario (default
   ``scenarios/real_default.yaml``; the schemes default to the scenario's ``schemes`` list) exactly as
   ``gcsim real --scheme <name> --scenario <file>`` would (:func:`gcsim.real.config.resolve_config`);
2. plan each run directory ``<runs-root>/<scheme>`` (:func:`gcsim.study.plan.plan_run`: start, skip a
   finished run, resume an interrupted / failed / shorter one from its checkpoint, or restart one
   without a usable checkpoint);
3. run the real executor in this process (:func:`gcsim.real.runner.run_real` /
   :func:`~gcsim.real.runner.resume_real`, the API behind ``gcsim real``) inside one Ray session;
4. compare every run with its calibrated simulation (:func:`gcsim.compare.pipeline.compare_runs`, the
   API behind ``gcsim compare``; each run calibrated from itself);
5. write into ``--out``: the comparison's files (``validation.csv``, ``calibration.json``, ``cdf.png``,
   ``qq.png``, ``predicted_vs_measured.png``, ``timeline_<scheme>.png``, ``report.md``), the headline
   (``headline.csv``, ``headline.md``), ``accuracy.png``, ``accuracy_time.png``,
   ``time_to_accuracy.csv`` (iterations and training seconds to the test-accuracy targets; input of
   ``gcsim advise --iterations-to-target``) and ``study.json`` (:mod:`gcsim.study.output`).

A study stopped by Ctrl-C or a failed run is continued by running the same command again.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from gcsim.errors import ConfigError, RunFailedError
from gcsim.rundir import set_aside
from gcsim.signals import sigterm_as_interrupt
from gcsim.study.plan import RunPlan, plan_run

#: defaults of the command line.
DEFAULT_OUT_DIR = Path("docs/validation")
DEFAULT_RUNS_ROOT = Path("runs/study")


#: :class:`StudyOptions` fields that are :class:`gcsim.real.config.RealConfig` fields, passed to every
#: real run as they are (None: RealConfig's default); ``tests/test_study.py`` checks the names.
REAL_OPTION_FIELDS = ("data_dir", "address", "batch_size", "eval_every", "max_train_samples")
#: :class:`StudyOptions` fields that are :class:`gcsim.compare.pipeline.CompareOptions` fields
#: (None: CompareOptions' default).
COMPARE_OPTION_FIELDS = ("replications", "mode", "warmup", "seed")


@dataclass(frozen=True)
class StudyOptions:
    """Settings of a study (the ``gcsim study`` options).

    Attributes:
        scenario: scenario YAML (None: ``scenarios/real_default.yaml``).
        schemes: scheme names from the scenario's ``schemes`` list (None: all of them, in its order).
        iterations: iterations per scheme (None: the scenario's ``iterations``).
        out_dir: where the tables, plots and reports go.
        runs_root: parent of the per-scheme run directories.
        data_dir, address, batch_size, eval_every, max_train_samples: :data:`REAL_OPTION_FIELDS`, the
            :class:`gcsim.real.config.RealConfig` options of every real run (None: RealConfig's default;
            validated there, errors name the ``--option``).
        replications, mode, warmup, seed: :data:`COMPARE_OPTION_FIELDS`, the
            :class:`gcsim.compare.pipeline.CompareOptions` of the comparison (None: its default).
        progress: tqdm bars on stderr.
    """

    scenario: str | Path | None = None
    schemes: Sequence[str] | None = None
    iterations: int | None = None
    out_dir: str | Path = DEFAULT_OUT_DIR
    runs_root: str | Path = DEFAULT_RUNS_ROOT
    data_dir: str | Path | None = None
    address: str | None = None
    batch_size: int | None = None
    eval_every: int | None = None
    max_train_samples: int | None = None
    replications: int | None = None
    mode: str | None = None
    warmup: int | None = None
    seed: int | None = None
    progress: bool = False

    def real_options(self) -> dict:
        """The given :data:`REAL_OPTION_FIELDS` (``data_dir`` as a string), for
        :func:`gcsim.real.config.resolve_config`."""
        given = {k: getattr(self, k) for k in REAL_OPTION_FIELDS if getattr(self, k) is not None}
        if "data_dir" in given:
            given["data_dir"] = str(given["data_dir"])
        return given

    def compare_options(self):
        """The :class:`gcsim.compare.pipeline.CompareOptions` of the comparison: the given
        :data:`COMPARE_OPTION_FIELDS` (``warmup`` None stays None: per run), the rest its defaults."""
        from gcsim.compare.pipeline import CompareOptions
        from gcsim.compare.verdict import Bands

        given = {k: getattr(self, k) for k in COMPARE_OPTION_FIELDS if getattr(self, k) is not None}
        return CompareOptions(bands=Bands(), **given)


@dataclass
class SchemeRun:
    """One scheme of the study: its run, plan and (if run now) how long it took.

    Attributes:
        spec: :class:`gcsim.real.config.RealRunSpec` (the narrowed scenario and the options).
        plan: :class:`gcsim.study.plan.RunPlan`.
        session_wall_s: wall seconds this study spent on the run (NaN when skipped).
        session_iterations: iterations run in this study (0 when skipped).
        set_aside_to: where a restarted run's old directory went.
    """

    spec: object
    plan: RunPlan
    session_wall_s: float = float("nan")
    session_iterations: int = 0
    set_aside_to: Path | None = None

    @property
    def scheme(self) -> str:
        return self.spec.scheme


@dataclass
class StudyResult:
    """Outcome of :func:`run_study`.

    Attributes:
        status: ``finished`` or ``interrupted`` (Ctrl-C during a run; nothing written to ``out_dir``).
        runs: one :class:`SchemeRun` per scheme.
        headline: the headline table (:data:`gcsim.study.headline.HEADLINE_COLUMNS`), None if interrupted.
        validation: the comparison's table (``validation.csv``), None if interrupted.
        files: written file name -> path.
        machine: :func:`gcsim.study.machine.describe_machine` at the start.
    """

    status: str
    runs: list[SchemeRun]
    headline: pd.DataFrame | None = None
    validation: pd.DataFrame | None = None
    files: dict = field(default_factory=dict)
    machine: dict = field(default_factory=dict)


def resolve_study(options: StudyOptions) -> tuple[Path, list]:
    """The scenario path and a :class:`gcsim.real.config.RealRunSpec` per scheme.

    Raises:
        ConfigError: unreadable scenario; a scheme not in the scenario's ``schemes`` list or given twice
            (field ``--schemes``); an option the real executor refuses (field: the option).
    """
    from gcsim.real.config import default_scenario_path, resolve_config
    from gcsim.scenario import load_scenario

    path = Path(options.scenario) if options.scenario is not None else default_scenario_path()
    scenario = load_scenario(path)
    available = list(dict.fromkeys(sp.name for sp in scenario.schemes))
    names = list(options.schemes) if options.schemes else available
    if not names:
        raise ConfigError("--schemes", f"at least one scheme (the scenario {path} lists none)", "")
    seen: set[str] = set()
    for name in names:
        if name not in available:
            raise ConfigError("--schemes", f"names from the schemes list of {path} ({', '.join(available)})", name)
        if name in seen:
            raise ConfigError("--schemes", "each scheme at most once", name)
        seen.add(name)
    resolved = []
    for name in names:
        resolved.append(resolve_config(name, path, iterations=options.iterations, **options.real_options()))
    return path, resolved


def _fmt_s(x) -> str:
    return "-" if x is None or not math.isfinite(float(x)) else f"{float(x):.3f}"


def _execute_runs(runs: list[SchemeRun], *, progress: bool, log: Callable[[str], None]) -> bool:
    """Run every planned scheme in one Ray session. Returns False when a run was interrupted (SIGINT or
    SIGTERM during a run: its checkpoint is kept); a SIGTERM between runs raises KeyboardInterrupt like
    Ctrl-C there (:func:`gcsim.signals.sigterm_as_interrupt`: Ray's driver would otherwise exit 15)."""
    with sigterm_as_interrupt() as reinstall:
        return _execute_runs_guarded(runs, progress=progress, log=log, reinstall=reinstall)


def _execute_runs_guarded(runs: list[SchemeRun], *, progress: bool, log: Callable[[str], None],
                          reinstall: Callable[[], None]) -> bool:
    from gcsim.real.data import require_prepared
    from gcsim.real.runner import ray_session, resume_real, run_real

    todo = [r for r in runs if r.plan.action != "skip"]
    for k, r in enumerate(runs, 1):
        if r.plan.action == "skip":
            log(f"[{k}/{len(runs)}] {r.scheme}: skipped, {r.plan.reason} in {r.plan.run_dir}")
    if not todo:
        return True
    for r in todo:
        if r.plan.action != "resume":
            require_prepared(r.spec.options.data_dir)
    with ray_session(**todo[0].spec.ray_kwargs()):
        reinstall()  # ray.init installed the driver's own SIGTERM handler
        for r in todo:
            k = runs.index(r) + 1
            verb = {"start": "starting", "resume": "resuming", "restart": "restarting"}[r.plan.action]
            log(f"[{k}/{len(runs)}] {r.scheme}: {verb} ({r.plan.reason}) in {r.plan.run_dir}")
            if r.plan.action == "restart":
                r.set_aside_to = set_aside(r.plan.run_dir)
                log(f"    the old run directory was moved to {r.set_aside_to}")
            t0 = time.monotonic()
            try:
                if r.plan.action == "resume":
                    res = resume_real(r.plan.run_dir, iterations=r.spec.iterations, progress=progress)
                else:
                    res = run_real(r.spec, r.plan.run_dir, progress=progress)
            except RunFailedError as e:
                raise RunFailedError(f"{r.scheme}: {e} (run directory {r.plan.run_dir} kept; run the same command "
                                     f"again to resume it)") from None
            r.session_wall_s = time.monotonic() - t0
            r.session_iterations = res.iterations_done - (r.plan.from_iteration if r.plan.action == "resume" else 0)
            if res.status == "interrupted":
                log(f"    {r.scheme}: interrupted after {res.iterations_done} iterations (checkpoint kept); "
                    f"run the same command again to resume")
                return False
            if res.late_signal:  # the run finished as the signal came: keep it, start no other
                log(f"    {r.scheme}: finished ({res.iterations_done} iterations); {res.late_signal} arrived after "
                    f"its last iteration, so the study stops here; run the same command again to go on")
                return False
            sm = res.summary or {}
            per_it = r.session_wall_s / max(r.session_iterations, 1)
            acc = f"{res.test_accuracy:.1%}" if res.test_accuracy == res.test_accuracy else "-"
            log(f"    {r.scheme}: {res.iterations_done} iterations, mean {_fmt_s(sm.get('mean_s'))} s, "
                f"p95 {_fmt_s(sm.get('p95_s'))} s, test accuracy {acc}; {r.session_iterations} iterations in "
                f"{r.session_wall_s:.1f} s wall ({per_it:.2f} s/iteration incl. start-up and evaluation)")
    return True


def _settings(path: Path, runs: list[SchemeRun], options: StudyOptions, warmups: dict) -> dict[str, str]:
    spec, co = runs[0].spec, options.compare_options()
    cfg, sc = spec.options, spec.scenario
    stragglers = json.dumps(sc.stragglers.model_dump(mode="json", exclude_none=True), separators=(", ", ": "))
    return {
        "Scenario": f"`{path}` (name `{sc.name}`), n = {spec.n_workers} workers, seed {spec.seed}",
        "Stragglers (injected by the real executor, the simulator's keyed draws)": f"`{stragglers}`; "
                                                                                    f"policy `{spec.policy}`",
        "Training": f"{cfg.model}, CIFAR-10 from `{cfg.data_dir}`, global batch {cfg.batch_size}, SGD lr {cfg.lr} "
                    f"momentum {cfg.momentum}, test evaluation every {cfg.eval_every} iterations",
        "Iterations per scheme": str(spec.iterations),
        "Comparison": f"mode `{co.mode}`, {co.replications} simulated replications per scheme, each run "
                      f"calibrated from itself, warm-up dropped: "
                      + ", ".join(f"{k} {v}" for k, v in warmups.items()) + " iterations",
        "Run directories": f"`{Path(options.runs_root)}/<scheme>`",
    }


def _notes(runs: list[SchemeRun]) -> list[str]:
    out = []
    for r in runs:
        if r.plan.action == "skip":
            out.append(f"`{r.scheme}`: reused the finished run in `{r.plan.run_dir}` ({r.plan.reason})")
        else:
            per_it = r.session_wall_s / max(r.session_iterations, 1)
            extra = f"; the old directory was moved to `{r.set_aside_to}`" if r.set_aside_to else ""
            out.append(f"`{r.scheme}`: {r.plan.action} ({r.plan.reason}): {r.session_iterations} iterations in "
                       f"{r.session_wall_s:.1f} s wall, {per_it:.2f} s per iteration including Ray/actor start-up "
                       f"and evaluations{extra}")
    return out


def run_study(options: StudyOptions, *, command: str = "gcsim study",
              log: Callable[[str], None] = lambda line: None) -> StudyResult:
    """Run the study described by ``options`` (see the module docstring).

    Args:
        options: :class:`StudyOptions`.
        command: the command line recorded in ``headline.md`` / ``report.md``.
        log: receives one progress line per step (per scheme: what is done with its run directory and
            the run's result).
    Returns:
        :class:`StudyResult`.
    Raises:
        ConfigError: bad option or scenario (names the option), a run directory of another
            configuration, ``--out`` or ``--runs-root`` not a writable directory.
        RunDirError: a run directory in use by a live process or not a real run.
        DataError: CIFAR-10 not prepared in the data directory (only when something has to run).
        RunFailedError: a run had to stop (its checkpoint is kept: running the study again resumes it).
    """
    from gcsim.compare.output import write_compare_outputs
    from gcsim.compare.pipeline import compare_runs
    from gcsim.compare.rundir import read_run_dir
    from gcsim.schemes import scheme_class
    from gcsim.study.accuracy import TTA_COLUMNS, accuracy_curve, plot_accuracy, plot_accuracy_time, time_to_accuracy
    from gcsim.study.headline import build_headline, render_headline_md
    from gcsim.study.machine import describe_machine
    from gcsim.study.output import prepare_out_dir, publish

    compare_options = options.compare_options()
    path, resolved = resolve_study(options)
    from gcsim.real.data import require_prepared

    for spec in resolved:  # every run but a finished one needs the data: say so before creating anything
        if not (Path(options.runs_root) / spec.scheme / "meta.json").is_file():
            require_prepared(spec.options.data_dir)
    prepare_out_dir(options.out_dir)  # fail now, not after an hour of runs
    prepare_out_dir(options.runs_root, field="--runs-root")  # (a file there was a traceback after Ray started)
    runs_root = Path(options.runs_root)
    runs = [SchemeRun(spec, plan_run(runs_root / spec.scheme, spec)) for spec in resolved]
    machine = describe_machine()
    if not _execute_runs(runs, progress=options.progress, log=log):
        return StudyResult("interrupted", runs, machine=machine)

    log(f"comparing {len(runs)} run(s) with their simulations ({compare_options.replications} replications each)")
    targets = [(read_run_dir(r.plan.run_dir), [r.scheme]) for r in runs]
    result = compare_runs(targets, options=compare_options, progress=options.progress)
    validation = result.table()
    info = {}
    for (run, _), r in zip(targets, runs):
        mt_path = r.plan.run_dir / "metrics.csv"
        metrics = pd.read_csv(mt_path) if mt_path.is_file() else pd.DataFrame(columns=["iteration", "test_accuracy",
                                                                                      "loss"])
        info[r.scheme] = {"run_dir": r.plan.run_dir, "iterations": len(run.iterations_of(r.scheme)),
                          "metrics": metrics, "exact": bool(scheme_class(r.scheme).exact),
                          "iteration_times": run.iterations_of(r.scheme),
                          "wall_s": float(run.meta.get("wall_s", float("nan")))}
    headline = build_headline(validation, info)
    warmups = {it.label: it.warmup for it in result.items}
    settings = _settings(path, runs, options, warmups)

    def fill(tmp: Path) -> list[str]:
        files = write_compare_outputs(result, tmp / "compare", command=command)
        names = []
        for name, p in files.items():
            p.rename(tmp / name)
            names.append(name)
        (tmp / "headline.csv").write_text(headline.to_csv(index=False, float_format="%.9g"))
        tta = pd.concat([time_to_accuracy(info[s]["metrics"], info[s]["iteration_times"]).assign(scheme=s)
                         for s in headline["scheme"]], ignore_index=True)[TTA_COLUMNS]
        (tmp / "time_to_accuracy.csv").write_text(tta.to_csv(index=False, float_format="%.9g"))
        plot_accuracy({s: info[s]["metrics"] for s in headline["scheme"]},
                      {s: info[s]["exact"] for s in headline["scheme"]}, tmp / "accuracy.png")
        plot_accuracy_time({s: accuracy_curve(info[s]["metrics"], info[s]["iteration_times"])
                            for s in headline["scheme"]},
                           {s: info[s]["exact"] for s in headline["scheme"]}, tmp / "accuracy_time.png")
        plots = {"Test accuracy and training loss per iteration": "accuracy.png",
                 "Test accuracy against training wall time": "accuracy_time.png",
                 "Predicted vs measured mean and p95": "predicted_vs_measured.png",
                 "Iteration-time CDFs, simulated vs measured": "cdf.png"}
        md = render_headline_md(headline, machine=machine, command=command, settings=settings, plots=plots,
                                notes=_notes(runs) + ["Full comparison (CIs, W1, KS, ranking, timelines): "
                                                      "[report.md](report.md), [validation.csv](validation.csv)"])
        (tmp / "headline.md").write_text(md)
        return names + ["headline.csv", "time_to_accuracy.csv", "accuracy.png", "accuracy_time.png", "headline.md"]

    files = publish(options.out_dir, fill, {"command": command, "machine": machine,
                                            "schemes": [r.scheme for r in runs],
                                            "run_dirs": {r.scheme: str(r.plan.run_dir) for r in runs}})
    return StudyResult("finished", runs, headline, validation, files, machine)


__all__ = ["COMPARE_OPTION_FIELDS", "DEFAULT_OUT_DIR", "DEFAULT_RUNS_ROOT", "REAL_OPTION_FIELDS", "SchemeRun", "StudyOptions", "StudyResult", "resolve_study",
           "run_study"]
