"""The comparison itself: for each measured (run, scheme), build the matching calibrated scenario,
simulate it ``R`` times, compare the iteration times after the warm-up, judge, and rank schemes.

Two modes:

* ``scenario`` (default): each replication draws its own straggler delays from the run's straggler
  spec (seeds derived from ``options.seed`` and the replication index) – the prediction a user gets
  before measuring anything but compute/network/master;
* ``paired`` (trace-driven): every replication keeps the run's own seed, so the keyed straggler
  streams (:mod:`gcsim.stragglers`) reproduce the recorded delays per (worker, iteration); only the
  calibrated compute/master draws change (shuffled empirical values). The bootstrap is then paired
  on iterations (:func:`gcsim.compare.stats.relative_error`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence

import numpy as np
import pandas as pd
from scipy import stats
from tqdm import tqdm

from gcsim.compare.calibrate import DEFAULT_BETWEEN_CALLS, Calibration, calibrate, check_between_calls
from gcsim.compare.control_variate import (ControlVariateError, QuantileControlVariateError, control_variate_error,
                                          control_variate_quantile_error)
from gcsim.compare.estimators import (DRIFT_BLOCK_ITERATIONS, DRIFT_MIN_BLOCKS, background_cores, speed_block_medians,
                                      speed_drift_cv)
from gcsim.compare.run_facts import require_same_n
from gcsim.compare.rundir import RunDir, as_runs
from gcsim.compare.scenario_build import build_scenario
from gcsim.compare.stalls import (load_change_note, mean_error_without, pooled_load_note, short_target_note, slow_stretch,
                                  slow_stretch_note, stall_note, stalled_iterations)
from gcsim.compare.steady import calibration_runs, check_window
from gcsim.compare.stats import (RankAgreement, SampleComparison, compare_samples, drop_warmup, rank_agreement)
from gcsim.compare.verdict import Bands, Verdict, judge
from gcsim.errors import ConfigError

MODES = ("scenario", "paired")
#: where the other-process CPU (``workload.background``) of a prediction comes from
LOAD_SOURCES = ("calibration", "target")
#: where the CPU work per partition of a prediction comes from (``speed_from``)
SPEED_SOURCES = ("calibration", "probe", "target")
#: the choices of ``--cpu-source``
CPU_SOURCES = ("auto", "wall", "measured")


def resolve_cpu_source(cpu_source: str, predicting: bool) -> str:
    """``cpu_source`` with ``"auto"`` made concrete: ``"measured"`` (the workers' CPU clocks and the
    other processes' CPU kept apart, which carries over to another scheme) when ``predicting`` (a
    calibration from other runs), ``"wall"`` (de-contended wall time, which folds the machine's load in
    and fits the run it came from) when each run calibrates from itself. Issue 9: calibrated with wall time
    from a second ``uncoded`` run of the same draws, an hour apart under another load, gc-fr's
    prediction moved from +5.7 % to +18.4 %."""
    if cpu_source != "auto":
        return cpu_source
    return "measured" if predicting else "wall"


#: how the steady other-process CPU of a ``cpu_source="measured"`` calibration is set
BACKGROUND_SOURCES = ("fitted", "measured")
#: ``--scheduler`` of ``gcsim compare`` (:attr:`CompareOptions.scheduler`).
SCHEDULERS = ("auto", "per-core", "processor-sharing")


def basis_of(mode: str, calibrated_from: str | None, run_label: str, given_state: bool = False) -> str:
    """How far a compared number is from a prediction, in words for tables and reports:

    * ``model check``: paired mode replays the run's own straggler draws (not a prediction);
    * ``given machine state``: calibrated on another run but with the target's measured CPU speed
      (``speed_from="target"``) or other-process load (``load_from="target"``): a diagnostic, not a
      prediction;
    * ``in sample``: calibrated on the very run it is scored against, alone or pooled with others
      (``calibrated_from`` is ``"+"``-joined run labels; fresh straggler draws);
    * ``out of sample``: calibrated on another run, fresh draws, scored on iterations the
      calibration never saw – the only kind that tells what gcsim predicts for a scheme nobody ran.
    """
    if mode == "paired":
        return "model check"
    if given_state:
        return "given machine state"
    if calibrated_from is None or run_label in calibrated_from.split("+"):
        return "in sample"
    return "out of sample"
#: default warm-up: min(DEFAULT_WARMUP, iterations // 5) iterations per scheme.
DEFAULT_WARMUP = 10


@dataclass(frozen=True)
class CompareOptions:
    """Settings of a comparison.

    Attributes:
        replications: simulated replications per (run, scheme), ``>= 1``.
        warmup: iterations dropped at the start of every observed and simulated sequence; None =
            ``min(10, iterations // 5)`` per run.
        bands: :class:`~gcsim.compare.verdict.Bands`.
        mode: ``"scenario"`` or ``"paired"`` (module docstring).
        n_resamples: bootstrap resamples.
        seed: seeds the replications (scenario mode) and the bootstraps.
        confidence: confidence level of every interval.
        cpu_source: ``"auto"`` (default) – ``"measured"`` when calibrating from other runs (a prediction),
            ``"wall"`` when each run calibrates from itself (:func:`resolve_cpu_source`); ``"wall"``
            calibrates per-partition CPU work by de-contending measured
            compute wall time over the run's cores; ``"measured"`` uses the workers' own CPU clocks
            (trace columns ``compute_cpu_s`` / ``cpu_s``, version 2) where present, and the cores
            other processes took from the workers (``other_cpu_wait_s`` / ``other_cpu_finish_s``,
            version 3) as ``workload.background``. "wall" folds the machine's load at calibration
            time into the work per partition; "measured" keeps the two apart, so it carries over to
            other schemes (docs/validation/README.md).
        load_from: with ``cpu_source="measured"``: ``"calibration"`` (default) – the other-process
            CPU measured in the calibration run (a pure prediction); ``"target"`` – the one measured
            during each target run (an exogenous input recorded beside the target's iteration times,
            never fitted to them: "what would the model say, given the machine's load at that time").
        speed_from: with ``cpu_source="measured"``: ``"calibration"`` (default) – the workers' CPU work
            (per partition and per call) as calibrated; ``"probe"`` – scaled
            (:meth:`Calibration.at_speed`) by the target run's CPU-speed probe over the
            calibration run's (``meta.json`` ``cpu_probe.start``: partition gradients every worker timed
            before the run's first iteration, :meth:`gcsim.real.master.WorkerPool.probe`), a
            measurement of the machine, not of any iteration, so still a prediction (out of sample);
            ``"target"`` – scaled by the target's median per-partition CPU (its workers'
            clocks) over the calibration's: a diagnostic of how much of an error is the machine's CPU
            speed drifting between runs (a shared VM's cores run 5-9 % faster or slower minutes apart),
            not a prediction (:func:`basis_of` says ``given machine state``).
        background: with ``cpu_source="measured"`` and ``load_from="calibration"``: ``"fitted"``
            (default) – the steady background while the master waits is fitted so that the
            simulated calibration run's workers get the cores its measured workers' CPU clocks say
            they got (:func:`gcsim.compare.worker_share.fit_steady_background`); ``"measured"`` – the
            other-process CPU measured while waiting, all of it charged as a priority load (it
            includes CPU that ran only on cycles the workers left idle).
        speed_drift: for predictions (``--calibrate-from`` with ``cpu_source="measured"``, scenario mode,
            ``speed_from`` not ``"target"``): the CPU-speed drift (one standard deviation, a fraction)
            added to the sampling CI as a *prediction interval* of the mean error
            (:func:`drift_half_width`; two more simulations per target): ``"auto"`` (default) – measured
            on the calibration run(s) (:func:`calibration_speed_cv`), a number – as given (e.g. a
            machine's known run-to-run spread), ``"none"`` – no prediction interval.
        calibration_window: with ``calibrate_from``: ``"steady"`` (default) – calibrate on the
            calibration runs' steady part, leaving out blocks of iterations during which another
            load came and went (:mod:`gcsim.compare.steady`; a note says what was left out);
            ``"all"`` – every iteration after the warm-up.
        control_variate: scenario mode, predictions only (``calibrate_from`` runs other than the
            target): also estimate each prediction's mean error *in expectation*, the luck of the
            target run's straggler draws removed by a control variate
            (:mod:`gcsim.compare.control_variate`; one more simulation per target, replaying its draws).
        speed_variation: with ``cpu_source="measured"``: model the machine's speed common to every
            worker of an iteration, drifting over iterations (``workload.speed_variation``, calibrated
            from the workers' CPU clocks: :mod:`gcsim.compare.speed_variation`); False: every partition's
            work drawn independently.
        scheduler: how the simulated workers share the cores (``workload.scheduler``): ``"auto"``
            (default) – a simulated calibration run's own, ``per-core`` for a real one
            (:func:`gcsim.compare.run_facts.run_scheduler`); ``"per-core"`` / ``"processor-sharing"`` –
            that model whatever the run.
        between_calls_cpu: with ``cpu_source="measured"``: Ray's CPU between calls (trace format 4),
            ``"in-lags"`` – in the measured dispatch and transfer lags already, only the call's own CPU
            on the path after the partitions; ``"on-path"`` – all of ``cpu_s - compute_cpu_s`` after
            the partitions (:data:`gcsim.compare.calibrate.BETWEEN_CALLS`).
    Raises:
        ConfigError: naming the CLI option.
    """

    replications: int = 5
    warmup: int | None = None
    bands: Bands = field(default_factory=Bands)
    mode: Literal["scenario", "paired"] = "scenario"
    n_resamples: int = 2000
    seed: int = 0
    confidence: float = 0.95
    cpu_source: Literal["auto", "wall", "measured"] = "auto"
    load_from: Literal["calibration", "target"] = "calibration"
    speed_from: Literal["calibration", "probe", "target"] = "calibration"
    background: Literal["fitted", "measured"] = "fitted"
    speed_drift: float | str = "auto"
    calibration_window: Literal["steady", "all"] = "steady"
    control_variate: bool = True
    speed_variation: bool = True
    scheduler: Literal["auto", "per-core", "processor-sharing"] = "auto"
    between_calls_cpu: Literal["in-lags", "on-path"] = DEFAULT_BETWEEN_CALLS

    def __post_init__(self):
        if isinstance(self.replications, bool) or not isinstance(self.replications, int) or self.replications < 1:
            raise ConfigError("--replications", "an integer >= 1", self.replications)
        if self.warmup is not None and (not isinstance(self.warmup, int) or self.warmup < 0):
            raise ConfigError("--warmup", "an integer >= 0", self.warmup)
        if self.mode not in MODES:
            raise ConfigError("--mode", f"one of {', '.join(MODES)}", self.mode)
        if not isinstance(self.n_resamples, int) or self.n_resamples < 100:
            raise ConfigError("--bootstrap", "an integer >= 100", self.n_resamples)
        if not 0 < self.confidence < 1:
            raise ConfigError("--confidence", "a number in (0, 1)", self.confidence)
        if self.cpu_source not in CPU_SOURCES:
            raise ConfigError("--cpu-source", f"one of {', '.join(CPU_SOURCES)}", self.cpu_source)
        if self.load_from not in LOAD_SOURCES:
            raise ConfigError("--load-from", f"one of {', '.join(LOAD_SOURCES)}", self.load_from)
        if self.speed_from not in SPEED_SOURCES:
            raise ConfigError("--speed-from", f"one of {', '.join(SPEED_SOURCES)}", self.speed_from)
        if self.background not in BACKGROUND_SOURCES:
            raise ConfigError("--background", f"one of {', '.join(BACKGROUND_SOURCES)}", self.background)
        check_window(self.calibration_window)
        if self.scheduler not in SCHEDULERS:
            raise ConfigError("--scheduler", f"one of {', '.join(SCHEDULERS)}", self.scheduler)
        check_between_calls(self.between_calls_cpu)
        sd = self.speed_drift
        if not (sd in ("auto", "none") or (isinstance(sd, (int, float)) and not isinstance(sd, bool)
                                           and 0 <= sd < 1)):
            raise ConfigError("--speed-drift", "auto, none or a fraction in [0, 1)", sd)


@dataclass
class SchemeComparison:
    """One compared (run, scheme).

    Attributes:
        run: the measured run; scheme: its scheme label; label: unique name in tables.
        warmup: iterations dropped; calibration: what the simulation was calibrated with.
        observed_iterations, observed_workers: the run's rows of this scheme (all iterations).
        simulated_iterations: every replication's iterations.csv rows plus a ``replication`` column.
        simulated_workers: replication 0's workers.csv rows (for the timeline).
        comparison: statistics after warm-up; verdict: pass / warn / fail.
        speed_cv: the calibration runs' CPU-speed drift (:func:`calibration_speed_cv`), NaN when no
            prediction interval was made; speed_dof: the degrees of freedom of its estimate
            (:func:`calibration_speed_dof`; inf for a drift given, not measured), NaN likewise;
            drift_half_width: its share of the mean error's
            prediction interval (:func:`drift_half_width`), NaN likewise.
        expectation: the mean error in expectation (:func:`expectation_error`); all NaN in paired mode,
            in sample, without ``options.control_variate``, or when the run's recorded delays are not
            gcsim's draws.
        expectation_p95: the p95 error in expectation, likewise.
        stalled: iteration numbers the machine stalled (longer than
            :data:`gcsim.compare.stalls.STALL_FACTOR` x the simulated p99); slow: iteration numbers of
            the run's slow blocks (:func:`gcsim.compare.stalls.slow_stretch`). Both stay in the score;
            ``row()`` gives ``err_mean_undisturbed``, the mean error without either.
        disturbance_notes: the stall and slow-stretch notes of this comparison (also in
            :class:`CompareResult`), empty when the machine did neither.
    """

    run: RunDir
    scheme: str
    label: str
    warmup: int
    calibration: Calibration
    observed_iterations: pd.DataFrame
    observed_workers: pd.DataFrame
    simulated_iterations: pd.DataFrame
    simulated_workers: pd.DataFrame
    comparison: SampleComparison
    verdict: Verdict
    mode: str
    load_from: str = "calibration"
    speed_from: str = "calibration"
    speed_cv: float = float("nan")
    speed_dof: float = float("nan")
    drift_half_width: float = float("nan")
    expectation: ControlVariateError = field(
        default_factory=lambda: ControlVariateError.missing("not computed", asked=False))
    expectation_p95: QuantileControlVariateError = field(
        default_factory=lambda: QuantileControlVariateError.missing("not computed", asked=False))
    stalled: tuple[int, ...] = ()
    slow: tuple[int, ...] = ()
    disturbance_notes: tuple[str, ...] = ()

    def observed_sample(self) -> np.ndarray:
        """Observed iteration times after warm-up, seconds ``(N,)``."""
        return drop_warmup(self.observed_iterations, self.warmup)["duration_s"].to_numpy(float)

    def simulated_sample(self) -> np.ndarray:
        """Simulated iteration times after warm-up, all replications pooled, seconds ``(R·N,)``."""
        return drop_warmup(self.simulated_iterations, self.warmup)["duration_s"].to_numpy(float)

    def row(self) -> dict:
        """One ``validation.csv`` row."""
        info = self.run.scheme_row(self.scheme)
        out = {"label": self.label, "run": self.run.label, "run_dir": str(self.run.path), "scheme": self.scheme,
               "executor": self.run.executor, "n": self.run.n_workers, "s": int(info["s"]), "m": int(info["m"]),
               "mode": self.mode, "calibrated_from": "+".join(self.calibration.source),
               "basis": basis_of(self.mode, "+".join(self.calibration.source), self.run.label,
                                 given_state=self.speed_from == "target" or self.load_from == "target"),
               "load_from": self.load_from if self.calibration.background_wait_cores is not None else "none",
               "replications": int(self.simulated_iterations["replication"].nunique()), "warmup": self.warmup}
        out.update(self.comparison.as_row())
        out.update(prediction_interval(out["err_mean"], out["err_mean_lo"], out["err_mean_hi"], self.drift_half_width))
        out.update(self.expectation.as_row())
        out.update(self.expectation_p95.as_row("p95"))
        out.update({f"{k}_cv": v for k, v in prediction_interval(
            self.expectation.value, self.expectation.lo, self.expectation.hi, self.drift_half_width).items()})
        out["speed_cv"] = self.speed_cv
        out["speed_dof"] = self.speed_dof  # inf: a drift given (--speed-drift X), not measured
        disturbed = sorted(set(self.stalled) | set(self.slow))
        out.update(stalled_iterations=len(self.stalled), slow_iterations=len(self.slow),
                   err_mean_undisturbed=(mean_error_without(drop_warmup(self.observed_iterations, self.warmup),
                                                            self.comparison.simulated["mean"], disturbed)
                                         if disturbed else out["err_mean"]))
        out.update(verdict=self.verdict.verdict, reason=self.verdict.reason)
        return out


@dataclass
class CompareResult:
    """All comparisons of one ``gcsim compare`` call.

    Attributes:
        items: one :class:`SchemeComparison` per compared (run, scheme).
        ranking: Kendall-tau agreement of the scheme order (None with fewer than 2 items).
        calibrations: calibration per source (labels joined by ``+``).
        options: the :class:`CompareOptions` used.
        window_notes: what the steady calibration window left out of the ``calibrate_from`` runs, one
            line per run it changed (:mod:`gcsim.compare.steady`; also in the calibration's notes).
        stall_notes: observed iterations the prediction cannot produce (longer than
            :data:`gcsim.compare.stalls.STALL_FACTOR` x its p99), one line per comparison that has any
            (:func:`gcsim.compare.stalls.stall_note`); they stay in the score.
        slow_stretch_notes: target runs during which the machine slowed (blocks of iterations at
            more than :data:`gcsim.compare.stalls.SLOW_BLOCK_FACTOR` x the run's median CPU per
            partition), one line per comparison that has any (:func:`gcsim.compare.stalls.slow_stretch_note`);
            they stay in the score.
        target_notes: a target run whose other-process load differed from the calibration's
            (:func:`gcsim.compare.stalls.load_change_note`) or too short to judge its p95
            (:func:`gcsim.compare.stalls.short_target_note`), one line each.
        simulated_calibration: ``calibrate_from`` holds a simulated run (no measured drift, hence no
            prediction interval with ``--speed-drift auto``).
    """

    items: list[SchemeComparison]
    ranking: RankAgreement | None
    calibrations: dict[str, Calibration]
    options: CompareOptions
    window_notes: tuple[str, ...] = ()
    stall_notes: tuple[str, ...] = ()
    slow_stretch_notes: tuple[str, ...] = ()
    target_notes: tuple[str, ...] = ()
    simulated_calibration: bool = False

    def table(self) -> pd.DataFrame:
        """The ``validation.csv`` table (one row per item)."""
        return pd.DataFrame([it.row() for it in self.items])

    def missing_notes(self) -> list[str]:
        """Lines saying why a prediction has no prediction interval where the user would expect one
        (``--calibrate-from`` with measured CPU, scenario mode, ``--speed-drift auto``): the calibration
        runs carry no CPU clocks or are too short to measure the machine's drift (fewer than
        :data:`gcsim.compare.estimators.DRIFT_MIN_BLOCKS` blocks of
        :data:`gcsim.compare.estimators.DRIFT_BLOCK_ITERATIONS` iterations after the warm-up) or carry no
        CPU clocks; or the prediction uses wall time (``--cpu-source wall``), which has no drift measure."""
        opt = self.options
        asked = (opt.cpu_source == "measured" and opt.mode == "scenario" and opt.speed_drift == "auto"
                 and opt.speed_from != "target")
        preds = [it for it in self.items if it.calibration.source and it.run.label not in it.calibration.source]
        if preds and opt.cpu_source == "wall" and opt.mode == "scenario":
            return ["no prediction interval with --cpu-source wall: the machine's drift is measured on the "
                    "workers' CPU clocks (--cpu-source measured, the default with --calibrate-from)"]
        if not asked or not preds or not all(np.isnan(it.speed_cv) for it in preds):
            return []
        if self.simulated_calibration:
            return [f"no prediction interval: the calibration run(s) {' + '.join(preds[0].calibration.source)} "
                    f"are simulated: their spread is the model's own, not a machine's drift (--speed-drift F "
                    f"gives one by hand)"]
        return [f"no prediction interval: the machine's speed drift could not be measured on the calibration "
                f"run(s) {' + '.join(preds[0].calibration.source)} (it needs the workers' CPU clocks and at least "
                f"{DRIFT_MIN_BLOCKS} blocks of {DRIFT_BLOCK_ITERATIONS} iterations after the warm-up; "
                f"--speed-drift F gives one by hand)"]


def _distinct_run_names(runs: Sequence[RunDir]) -> dict[str, str]:
    """Path -> a name per run that tells the runs apart in tables and file names: the directory name,
    prefixed by as many parent folders as it takes when two runs share it (e.g. ``real_expon/gc-fr``
    and ``real_default/gc-fr``)."""
    paths = list(dict.fromkeys(Path(r.path) for r in runs))
    depth = 1
    while True:
        names = {str(p): "/".join(p.parts[-depth:]) for p in paths}
        if len(set(names.values())) == len(paths) or depth >= max((len(p.parts) for p in paths), default=1):
            return names
        depth += 1


def _with_scheduler(cal: Calibration, options: CompareOptions) -> Calibration:
    """``cal`` with ``options.scheduler`` unless ``"auto"``, and a note saying which scheduler the
    simulation uses (or that ``--scheduler`` had nothing to act on: no shared cores modelled)."""
    if cal.cores is None:
        if options.scheduler == "auto":
            return cal
        note = (f"--scheduler {options.scheduler}: no effect, the workers had a core each (no shared cores "
                f"recorded for the calibration run)")
        return dataclasses.replace(cal, notes=tuple(cal.notes) + (note,))
    scheduler = cal.scheduler if options.scheduler == "auto" else options.scheduler
    how = ("one run queue per core" if scheduler == "per-core"
           else "every computing worker at the same rate")
    note = f"simulated with workload.scheduler: {scheduler} ({how}; --scheduler {options.scheduler})"
    return dataclasses.replace(cal, scheduler=scheduler, notes=tuple(cal.notes) + (note,))


def _default_simulate():
    from gcsim.sim.engine import simulate  # lazy: the simulator is only needed to run a comparison
    return simulate


def default_warmup(iterations: int) -> int:
    """Iterations dropped at the start of a run of ``iterations`` when ``--warmup`` is not given:
    ``min(DEFAULT_WARMUP, iterations // 5)`` (``gcsim compare`` and ``gcsim calibrate``)."""
    return min(DEFAULT_WARMUP, int(iterations) // 5)


def _warmup_for(run: RunDir, scheme: str, warmup: int | None) -> int:
    n_it = int(run.iterations_of(scheme)["iteration"].nunique())
    w = default_warmup(n_it) if warmup is None else warmup
    if n_it - w < 2:
        raise ConfigError("--warmup", f"at most {max(n_it - 2, 0)} (run {run.label}, scheme {scheme} has "
                          f"{n_it} iterations)", w)
    return w


def _replication_seed(base: int, replication: int) -> int:
    """Scenario seed of replication ``r`` (SeedSequence-mixed, < 2**32)."""
    return int(np.random.SeedSequence([int(base), int(replication), 0x5EED]).generate_state(1, dtype=np.uint32)[0])


def simulate_like(run: RunDir, scheme: str, calibration: Calibration, options: CompareOptions,
                  simulate: Callable | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Simulate ``scheme`` of ``run`` ``options.replications`` times with ``calibration``.

    Returns:
        ``(iterations, workers)``: every replication's iterations rows with a ``replication``
        column; replication 0's workers rows.
    Raises:
        RunDirError: the run's config holds values the scenario refuses.
    """
    simulate = simulate or _default_simulate()
    n_it = int(run.iterations_of(scheme)["iteration"].max()) + 1
    its, first_workers = [], None
    for r in range(options.replications):
        if options.mode == "paired":
            sc = build_scenario(run, scheme, calibration, permutation_seed=None if r == 0 else r)
        else:
            sc = build_scenario(run, scheme, calibration, seed=_replication_seed(options.seed, r))
        res = simulate(sc, iterations=n_it, progress=False)
        df = res.iterations.copy()
        df["scheme"] = df["scheme"].astype(str)
        df["replication"] = r
        its.append(df)
        if first_workers is None:
            first_workers = res.workers.copy()
            first_workers["scheme"] = first_workers["scheme"].astype(str)
    return pd.concat(its, ignore_index=True), first_workers


#: The largest fraction of worker-iterations whose recorded delay may differ from the replayed draw in a
#: replay of a run's own straggler draws (:func:`check_replay`).
REPLAY_MAX_BAD_FRACTION = 0.05


def check_replay(observed_workers: pd.DataFrame, simulated_workers: pd.DataFrame, run_label: str,
                 *, tol_s: float = 1e-3, rel_tol: float = 0.05,
                 max_bad_fraction: float = REPLAY_MAX_BAD_FRACTION) -> float:
    """Paired mode only: check the simulation replays the run's recorded straggler delays.

    Compares ``delay_s`` per (iteration, worker); a row disagrees when ``|obs − sim| > tol_s +
    rel_tol·|obs|`` (the real executor records the delay it slept, not the exact draw).

    Returns:
        the fraction of disagreeing rows; 1.0 when no row can be compared (no (iteration, worker) in
        common, or no recorded delay).
    Raises:
        ConfigError: field ``--mode`` when more than ``max_bad_fraction`` of the rows disagree (the run
            was not driven by gcsim's keyed straggler streams with its recorded seed).
    """
    keys = ["iteration", "worker"]
    m = observed_workers[keys + ["delay_s"]].merge(simulated_workers[keys + ["delay_s"]], on=keys,
                                                   suffixes=("_obs", "_sim"))
    o, s = m["delay_s_obs"].to_numpy(float), m["delay_s_sim"].to_numpy(float)
    ok = np.isfinite(o)
    bad = ok & ~(np.abs(o - s) <= tol_s + rel_tol * np.abs(o))
    frac = float(bad.sum() / ok.sum()) if ok.any() else 1.0
    if frac > max_bad_fraction:
        raise ConfigError("--mode", f"scenario for run {run_label} (its recorded delay_s differ from the "
                          f"replayed draws in {frac:.0%} of worker-iterations)", "paired")
    return frac


def probe_cpu_s(run: RunDir, when: str = "start") -> float:
    """The run's CPU-speed probe: median CPU-seconds per partition gradient its workers timed
    before the first iteration (``when="start"``) or after the last (``"end"``) (``meta.json``
    ``cpu_probe``, written by :func:`gcsim.real.runner.run_real`); NaN when the run has none (runs
    made before the probe existed, simulated runs)."""
    probe = (run.meta.get("cpu_probe") or {}).get(when) or {}
    v = probe.get("median_cpu_s")
    return float(v) if isinstance(v, (int, float)) and v > 0 else float("nan")


def speed_ratio(sources: Sequence[RunDir], run: RunDir, scheme: str, speed_from: str, w_src: int, w: int) -> float:
    """Factor on the workers' calibrated CPU work (per partition and per call, :meth:`Calibration.at_speed`)
    for predicting ``(run, scheme)``:
    ``speed_from="probe"`` – the target's probe over the calibration runs' median probe
    (:func:`probe_cpu_s`); ``"target"`` – the target's measured CPU per partition over the
    calibration runs' (:func:`partition_cpu_s`, a diagnostic); 1.0 for ``"calibration"`` or when
    either side is not measured.

    Raises:
        ConfigError: ``speed_from="probe"`` and a run without a probe (field ``--speed-from``).
    """
    if speed_from == "probe":
        f_src = float(np.median([probe_cpu_s(src) for src in sources]))
        f_tgt = probe_cpu_s(run)
        if not (np.isfinite(f_src) and np.isfinite(f_tgt)):
            missing = [r.label for r in [*sources, run] if not np.isfinite(probe_cpu_s(r))]
            raise ConfigError("--speed-from", "calibration or target (runs without a CPU-speed probe in "
                              f"meta.json: {', '.join(missing)})", "probe")
    elif speed_from == "target":
        f_src = float(np.median([partition_cpu_s(src.workers_of(src.schemes[0]), src, w_src) for src in sources]))
        f_tgt = partition_cpu_s(run.workers_of(scheme), run, w, scheme)
    else:
        return 1.0
    return f_tgt / f_src if np.isfinite(f_src) and np.isfinite(f_tgt) and f_src > 0 else 1.0


def partition_cpu_s(workers: pd.DataFrame, run: RunDir, warmup: int, scheme: str | None = None) -> float:
    """Median CPU-seconds per partition the run's workers measured (``compute_cpu_s`` / computation
    load over the arrived rows after ``warmup``); NaN when the trace has no CPU clocks."""
    sch = scheme if scheme is not None else run.schemes[0]
    d = float(run.scheme_row(sch).get("computation_load", 1.0) or 1.0)
    wk = workers[(workers["iteration"] >= warmup) & (workers["status"].astype(str) == "arrived")]
    v = pd.to_numeric(wk["compute_cpu_s"], errors="coerce").to_numpy(float) / d if "compute_cpu_s" in wk else np.zeros(0)
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.median(v)) if v.size else float("nan")


def _fit_background(runs: RunDir | Sequence[RunDir], cal: Calibration, options: CompareOptions, warmup: int,
                    simulate: Callable | None, scheme: str | None = None) -> Calibration:
    """``cal`` with its steady background fitted to the workers' CPU of ``runs`` when ``options`` ask
    for it (``cpu_source="measured"``, ``background="fitted"``, ``load_from="calibration"``), else
    ``cal``. Several (pooled) calibration runs: each is fitted with the pooled calibration and the
    fitted steady rates are averaged."""
    if options.cpu_source != "measured" or options.background != "fitted" or options.load_from != "calibration":
        return cal
    from gcsim.compare.worker_share import fit_pooled_background

    return fit_pooled_background(as_runs(runs), cal, warmup=warmup, simulate=simulate, scheme=scheme)


def _speed_spread(sources: Sequence[RunDir], warmup: int) -> tuple[list[tuple[float, int]], float, int]:
    """What :func:`calibration_speed_cv` and :func:`calibration_speed_dof` are made of:
    ``(within, between, runs)``. ``within``: ``(cv, B − 1)`` of every run-scheme with enough blocks,
    :func:`speed_drift_cv` and its degrees of freedom (:func:`speed_block_medians`); ``between``: the
    coefficient of variation of the run-schemes' median CPU per partition (:func:`partition_cpu_s`), on
    ``runs − 1`` degrees of freedom (NaN with one); ``runs``: run-schemes with CPU clocks (at least 1).
    A source with several schemes counts each scheme as a run."""
    within: list[tuple[float, int]] = []
    meds = []
    for src in sources:
        for sch in src.schemes:
            wk = src.workers_of(sch)
            cv = speed_drift_cv(wk, warmup)
            if np.isfinite(cv):
                within.append((float(cv), int(speed_block_medians(wk, warmup).size) - 1))
            meds.append(partition_cpu_s(wk, src, warmup, sch))
    meds_a = np.array(meds, float)
    meds_a = meds_a[np.isfinite(meds_a)]
    between = float(np.std(meds_a, ddof=1) / np.mean(meds_a)) if meds_a.size >= 2 else float("nan")
    return within, between, max(1, int(meds_a.size))


def _speed_variance_terms(sources: Sequence[RunDir], warmup: int) -> tuple[list[tuple[float, float]], int]:
    """``σ_run²`` of :func:`calibration_speed_cv` as a sum of independent variance estimates, each with
    its degrees of freedom, and the run count ``R``: ``([(c_i, ν_i)], R)``, ``Σ c_i = σ_run²`` (no terms
    without CPU clocks). With
    ``R >= 2`` runs whose medians lie further apart than their own blocks spread (``between > within``),
    the mean of ``within²`` and ``between²``; else ``within²`` alone: runs that happen to agree do not
    make the drift smaller than each shows within itself, which already under-states the drift between
    runs (docs/validation/README.md, findings 25 and 27)."""
    within, between, runs = _speed_spread(sources, warmup)
    if not within:
        return [], runs
    within2 = float(np.mean([cv ** 2 for cv, _ in within]))
    pooled = np.isfinite(between) and between ** 2 > within2
    half = 0.5 if pooled else 1.0
    terms = [(half * cv ** 2 / len(within), float(dof)) for cv, dof in within]
    if pooled:
        terms.append((0.5 * between ** 2, float(runs - 1)))
    return terms, runs


def calibration_speed_cv(sources: Sequence[RunDir], warmup: int) -> float:
    """How far, one standard deviation as a fraction, the CPU speed of a run yet to come may differ from
    the speed the calibration run(s) measured: the CPU-speed drift that :func:`drift_half_width` carries
    through the simulator.

    Model: each run's mean CPU time per partition is a draw around the machine's long-run speed with a
    standard deviation ``σ_run`` (the speed wanders at minute scales: docs/validation/README.md,
    findings 13, 15 and 16). A target's speed differs from the mean of ``R`` calibration runs by
    ``σ_run·sqrt(1 + 1/R)`` (the difference of two independent means). ``σ_run`` is estimated by
    ``within``, the root mean square over the runs (and their schemes) of
    :func:`gcsim.compare.estimators.speed_drift_cv` (the spread of ~10 s block medians inside a run: on
    this project's VM 5.3 % for 20 s blocks against 6.5 % for whole 2-minute runs, finding 16); with
    ``R >= 2`` runs, also by ``between``, the coefficient of variation of their median CPU per partition
    (:func:`partition_cpu_s`), and the two estimates are averaged, ``σ_run² = (within² + between²) / 2``,
    when ``between > within``; else ``σ_run = within`` (a floor: two runs that happen to agree say
    little, and one run's blocks already under-state the drift between runs, finding 25).

    Args:
        sources: the calibration runs (``R`` counts those with CPU clocks; a source with several
            schemes counts each scheme as a run).
        warmup: iterations dropped at the start of each run.
    Returns:
        ``σ_run·sqrt(1 + 1/R)`` (e.g. 0.07 for 7 %); NaN when no run has CPU clocks.
    """
    terms, runs = _speed_variance_terms(sources, warmup)
    if not terms:
        return float("nan")
    return float(np.sqrt(sum(c for c, _ in terms)) * np.sqrt(1.0 + 1.0 / runs))


def calibration_speed_dof(sources: Sequence[RunDir], warmup: int) -> float:
    """Degrees of freedom of :func:`calibration_speed_cv`'s estimate, for Student's t in a 95 % interval
    (the drift is estimated, not known: with seven 20-iteration blocks the quantile is 2.45, not 1.96).

    ``σ_run²`` is a sum of independent variance estimates ``c_i`` (each run's ``within²`` share on its
    ``B_r − 1`` degrees of freedom, :func:`speed_block_medians`; with ``R >= 2`` runs further apart than
    their blocks spread, ``between²/2`` on ``R − 1``), so its degrees of freedom are Satterthwaite's,
    ``ν = (Σ c_i)² / Σ (c_i² / ν_i)`` (Satterthwaite 1946, *Biometrics Bulletin* 2(6):110–114): one run gives ``B − 1``; two runs that
    disagree give close to 1, not the sum of their blocks. ``inf`` when no run has enough blocks; the sum
    of the degrees of freedom when every estimate is 0 (nothing spread).
    """
    terms = [(c, nu) for c, nu in _speed_variance_terms(sources, warmup)[0] if nu > 0]
    if not terms:
        return float("inf")
    total = sum(c for c, _ in terms)
    if total == 0:
        return float(sum(nu for _, nu in terms))
    return float(total ** 2 / sum(c ** 2 / nu for c, nu in terms))


def drift_half_width(run: RunDir, scheme: str, calibration: Calibration, options: CompareOptions, sigma: float,
                     warmup: int, simulate: Callable | None = None, dof: float = float("inf")) -> float:
    """Half-width, in units of the relative mean error, that a CPU-speed drift of ``sigma`` (a
    fraction, one standard deviation) adds to a prediction of ``(run, scheme)``.

    The scenario is simulated with the workers' calibrated CPU work (per partition and per call,
    :meth:`Calibration.at_speed`) scaled by ``1 - sigma`` and ``1 + sigma`` (replication 0's seed:
    common random numbers, so only the speed differs), and the half-width is
    ``z × (mean(1+σ) − mean(1−σ)) / 2 / observed mean``, ``z`` the quantile of ``options.confidence``
    of Student's t with ``dof`` degrees of freedom (the normal one for ``dof = inf``, a σ given, not
    estimated; :func:`calibration_speed_dof` for a σ measured on a few blocks) (a first-order propagation of the speed's uncertainty through the model: the delta method,
    e.g. Law & Kelton, *Simulation Modeling and Analysis*, input-uncertainty).

    Returns:
        the half-width (>= 0); 0.0 when ``sigma`` is 0 (nothing drifted); NaN when ``sigma`` is not a
        finite number in [0, 1) (no CPU clocks to measure it; or a drift of the whole speed or more,
        where a machine ``1 - sigma`` times as fast does not exist: no interval is given).
    """
    if not (np.isfinite(sigma) and 0 <= sigma < 1):
        return float("nan")
    if sigma == 0:
        return 0.0
    one = dataclasses.replace(options, replications=1)
    means = []
    for f in (1.0 - sigma, 1.0 + sigma):
        its, _ = simulate_like(run, scheme, calibration.at_speed(f), one, simulate)
        means.append(float(drop_warmup(its, warmup)["duration_s"].mean()))
    obs_mean = float(drop_warmup(run.iterations_of(scheme), warmup)["duration_s"].mean())
    q = 0.5 + options.confidence / 2.0
    z = float(stats.norm.ppf(q) if not np.isfinite(dof) else stats.t.ppf(q, max(float(dof), 1.0)))
    return abs(z * (means[1] - means[0]) / 2.0 / obs_mean)


def expectation_error(run: RunDir, scheme: str, calibration: Calibration, options: CompareOptions,
                      observed: pd.DataFrame, simulated_s: np.ndarray, warmup: int, simulate: Callable | None = None,
                      *, seed: int = 0, simulated_mean_se_s: float | None = None
                      ) -> tuple[ControlVariateError, QuantileControlVariateError]:
    """The mean and p95 errors of a scenario-mode prediction *in expectation*: the luck of the target run's
    own straggler draws removed with a control variate (:mod:`gcsim.compare.control_variate`).

    The control is one more simulation with the prediction's calibration and the run's own seed, i.e.
    its recorded straggler draws replayed (the same scenario as the prediction's replications but for
    the seed, so its expectation is the prediction's).

    Args:
        run, scheme: the target. calibration: the prediction's. observed: the target's iterations rows
            after ``warmup``. simulated_s: ``(M,)`` the prediction's iteration times after warm-up, seconds.
        simulated_mean_se_s: the prediction's Monte-Carlo standard error (:func:`simulated_mean_se`).
    Returns:
        ``(mean, p95)``: :class:`ControlVariateError` and :class:`QuantileControlVariateError`; all NaN,
        with the reason, when the run's recorded ``delay_s`` are not the replayed draws
        (:func:`check_replay`: a run not driven by gcsim's keyed straggler streams) or the replay lacks an
        observed iteration.
    """
    simulate = simulate or _default_simulate()
    n_it = int(run.iterations_of(scheme)["iteration"].max()) + 1
    res = simulate(build_scenario(run, scheme, calibration), iterations=n_it, progress=False)
    bad = check_replay(run.workers_of(scheme), res.workers[res.workers["scheme"].astype(str) == scheme],
                       run.label, max_bad_fraction=1.0)
    if bad > REPLAY_MAX_BAD_FRACTION:
        why = (f"the run's recorded delay_s differ from its replayed straggler draws in {bad:.1%} of "
               f"worker-iterations (a run not driven by gcsim's keyed straggler streams)")
        return ControlVariateError.missing(why), QuantileControlVariateError.missing(why)
    its = res.iterations
    replay = (drop_warmup(its[its["scheme"].astype(str) == scheme], warmup)
              .set_index("iteration")["duration_s"].reindex(observed["iteration"].to_numpy()).to_numpy(float))
    if not np.all(np.isfinite(replay)):
        why = "the replay of the run's draws lacks an observed iteration"
        return ControlVariateError.missing(why), QuantileControlVariateError.missing(why)
    y = observed["duration_s"].to_numpy(float)
    kw = dict(confidence=options.confidence, n_resamples=options.n_resamples, seed=seed)
    return (control_variate_error(y, replay, simulated_s, simulated_mean_se_s=simulated_mean_se_s, **kw),
            control_variate_quantile_error(y, replay, simulated_s, 0.95, **kw))


def simulated_mean_se(simulated: pd.DataFrame) -> float:
    """Monte-Carlo standard error of a simulated mean, seconds: the spread of the replication means over
    ``sqrt(R)`` (independent replications; Law & Kelton, Simulation Modeling and Analysis, §9.4), which
    holds when a replication's iterations are autocorrelated (``workload.speed_variation``, carry-over);
    NaN with fewer than 2 replications.

    Args:
        simulated: iterations rows after the warm-up with ``duration_s`` and ``replication`` columns.
    """
    if "replication" not in simulated or simulated["replication"].nunique() < 2:
        return float("nan")
    means = simulated.groupby("replication")["duration_s"].mean().to_numpy(float)
    return float(np.std(means, ddof=1) / np.sqrt(means.size))


def prediction_interval(err: float, lo: float, hi: float, drift: float) -> dict:
    """``validation.csv`` columns of the mean error's prediction interval: the sampling CI
    ``[lo, hi]`` around ``err`` widened by the drift half-width ``drift`` in quadrature on each side
    (independent sources of error): ``err_mean_drift``, ``err_mean_pi_lo``, ``err_mean_pi_hi`` and
    ``pi_covers`` (whether the interval holds 0, i.e. the measured mean); the lower end at least -1 (a
    predicted mean is not below 0 s); NaN / None without a drift or without a finite error and CI."""
    if not (np.isfinite(drift) and np.isfinite(err) and np.isfinite(lo) and np.isfinite(hi)):
        return {"err_mean_drift": float("nan"), "err_mean_pi_lo": float("nan"), "err_mean_pi_hi": float("nan"),
                "pi_covers": None}
    p_lo = max(err - float(np.hypot(err - lo, drift)), -1.0)  # a prediction is >= 0 s: the error >= -100 %
    p_hi = err + float(np.hypot(hi - err, drift))
    return {"err_mean_drift": drift, "err_mean_pi_lo": p_lo, "err_mean_pi_hi": p_hi,
            "pi_covers": bool(p_lo <= 0.0 <= p_hi)}


def compare_runs(targets: Sequence[tuple[RunDir, Sequence[str]]], *,
                 calibrate_from: RunDir | Sequence[RunDir] | None = None,
                 options: CompareOptions = CompareOptions(), simulate: Callable | None = None,
                 progress: bool = False) -> CompareResult:
    """Compare every (run, scheme) of ``targets`` with its calibrated simulation.

    Args:
        targets: ``(run, schemes)`` pairs (schemes: labels present in the run).
        calibrate_from: calibrate once from this run (or these runs, pooled: e.g. the calibration
            scheme run before and after the targets, which averages a drift of the machine between
            them) and predict every target (which must have the
            same ``n``); default: each run calibrates from itself.
        options: :class:`CompareOptions`.
        simulate: ``simulate(scenario, iterations=..., progress=False) -> SimResult`` (default
            :func:`gcsim.sim.engine.simulate`); injectable for tests.
        progress: show a tqdm bar on stderr.
    Returns:
        :class:`CompareResult`.
    Raises:
        ConfigError: a target with another ``n`` than ``calibrate_from`` (field ``n``), a warm-up
            leaving fewer than 2 iterations (``--warmup``).
        RunDirError: calibration data missing from a run.
    """
    calibrations: dict[str, Calibration] = {}
    window_notes: list[str] = []
    sources = None if calibrate_from is None else as_runs(calibrate_from)
    options = dataclasses.replace(options, cpu_source=resolve_cpu_source(options.cpu_source, sources is not None))
    if sources is not None:
        for run, _ in targets:
            require_same_n(sources[0], run)
        w_src = min(_warmup_for(src, s, options.warmup) for src in sources for s in src.schemes)
        sources, window_notes = calibration_runs(sources, options.calibration_window, w_src)
        shared = _with_scheduler(calibrate(sources, warmup=w_src, use_measured_cpu=options.cpu_source == "measured",
                                           speed_variation=options.speed_variation,
                                           between_calls=options.between_calls_cpu), options)
        shared = _fit_background(sources, shared, options, w_src, simulate)
        shared = shared.with_window_notes(window_notes)
        calibrations["+".join(shared.source)] = shared
    predicting = (sources is not None and options.speed_drift != "none" and options.cpu_source == "measured"
                  and options.mode == "scenario" and options.speed_from != "target")
    sigma, dof = float("nan"), float("inf")
    simulated_sources = sources is not None and any(src.executor == "sim" for src in sources)
    if predicting:
        sigma = (calibration_speed_cv(sources, w_src) if options.speed_drift == "auto"
                 else float(options.speed_drift))
        if options.speed_drift == "auto":
            dof = calibration_speed_dof(sources, w_src)
        if options.speed_drift == "auto" and simulated_sources:
            # a simulated run's block spread is the model's own noise, not a machine's drift (review)
            sigma, dof = float("nan"), float("inf")
    work = [(run, sch) for run, schemes in targets for sch in schemes]
    counts = pd.Series([sch for _, sch in work]).value_counts()
    run_names = _distinct_run_names([run for run, _ in targets])
    items: list[SchemeComparison] = []
    stall_notes: list[str] = []
    slow_notes: list[str] = []
    target_notes: list[str] = [n for n in (pooled_load_note(sources) if sources is not None else None,) if n]
    bar = tqdm(total=len(work), desc="compare", unit="scheme", disable=not progress)
    try:
        for k, (run, sch) in enumerate(work):
            w = _warmup_for(run, sch, options.warmup)
            if sources is None:
                cal = _with_scheduler(calibrate(run, schemes={run.label: [sch]}, warmup=w,
                                                use_measured_cpu=options.cpu_source == "measured",
                                                speed_variation=options.speed_variation,
                                                between_calls=options.between_calls_cpu), options)
                cal = _fit_background(run, cal, options, w, simulate, scheme=sch)
                calibrations[f"{run.label}:{sch}"] = cal
            else:
                cal = shared
            if options.load_from == "target" and cal.cores is not None and options.cpu_source == "measured":
                w_bg, f_bg, it_bg = background_cores(drop_warmup(run.iterations_of(sch), w))
                if w_bg is not None:
                    idle = cal.n_workers * cal.idle_cores_per_worker  # in the workers' clocks, not the others'
                    w_bg, f_bg = w_bg + idle, (f_bg if f_bg is not None else w_bg) + idle
                    w_bg, f_bg = min(w_bg, float(cal.cores)), min(f_bg, float(cal.cores))  # as calibrate caps it
                    cal = dataclasses.replace(cal, background_wait_cores=w_bg, background_finish_cores=f_bg,
                                              background_per_iteration_cpu_s=it_bg,
                                              background_per_payload_byte_cpu_s=None)  # the target's own
            if options.speed_from != "calibration" and options.cpu_source == "measured" and sources is not None:
                cal = cal.at_speed(speed_ratio(sources, run, sch, options.speed_from, w_src, w))
            sim_its, sim_wks = simulate_like(run, sch, cal, options, simulate)
            if options.mode == "paired":
                check_replay(run.workers_of(sch), sim_wks[sim_wks["scheme"] == sch], run.label)
            obs_its = run.iterations_of(sch)
            obs = drop_warmup(obs_its, w)
            sim = drop_warmup(sim_its, w)
            if options.mode == "paired":
                grid = sim.pivot(index="replication", columns="iteration", values="duration_s")
                grid = grid.reindex(columns=obs["iteration"].to_numpy())
                sim_sample = grid.to_numpy(float)
                if not np.all(np.isfinite(sim_sample)):
                    raise ConfigError("--mode", "scenario (the simulation did not produce every observed iteration)",
                                      "paired")
            else:
                sim_sample = sim["duration_s"].to_numpy(float)
            cmp = compare_samples(obs["duration_s"].to_numpy(float), sim_sample, paired=options.mode == "paired",
                                  confidence=options.confidence, n_resamples=options.n_resamples,
                                  seed=options.seed + k)
            # predictions only: calibrated on the run itself the replay would track it by construction, and
            # the run's own speed is no drift (no prediction interval for an in-sample row)
            out_of_sample = sources is not None and all(run.path != src.path for src in sources)
            drift = (drift_half_width(run, sch, cal, options, sigma, w, simulate, dof) if predicting and out_of_sample
                     else float("nan"))
            if options.mode == "scenario" and options.control_variate and out_of_sample:
                expectation, expectation_p95 = expectation_error(run, sch, cal, options, obs, sim_sample, w, simulate,
                                                                 seed=options.seed + k,
                                                                 simulated_mean_se_s=simulated_mean_se(sim))
            else:
                why = ("paired mode" if options.mode != "scenario" else
                       "--no-control-variate" if not options.control_variate else "in sample")
                expectation = ControlVariateError.missing(why, asked=False)
                expectation_p95 = QuantileControlVariateError.missing(why, asked=False)
            label = sch if counts[sch] == 1 else f"{sch} ({run_names[str(run.path)]})"
            stalled = stalled_iterations(obs, cmp.simulated["p99"])
            stall = stall_note(label, obs, cmp.simulated["mean"], cmp.simulated["p99"], stalled=stalled)
            if stall is not None:
                stall_notes.append(stall)
            slow = slow_stretch(run.workers_of(sch), w)
            slow_note = (None if slow is None else
                         slow_stretch_note(label, obs, run.workers_of(sch), w, cmp.simulated["mean"], stretch=slow))
            if slow_note is not None:
                slow_notes.append(slow_note)
            for note in (load_change_note(label, run, sources, sch) if out_of_sample and options.load_from != "target"
                         else None, short_target_note(label, obs, cmp)):
                if note is not None:
                    target_notes.append(note)
            items.append(SchemeComparison(run=run, scheme=sch, label=label, warmup=w, calibration=cal,
                                          observed_iterations=obs_its, observed_workers=run.workers_of(sch),
                                          simulated_iterations=sim_its, simulated_workers=sim_wks, comparison=cmp,
                                          verdict=judge(cmp, options.bands, expectation={
                                              "mean": (expectation.value, expectation.lo, expectation.hi),
                                              "p95": (expectation_p95.value, expectation_p95.lo,
                                                      expectation_p95.hi)}),
                                          mode=options.mode,
                                          load_from=options.load_from, speed_from=options.speed_from,
                                          speed_cv=sigma if predicting and out_of_sample else float("nan"),
                                          speed_dof=(dof if predicting and out_of_sample and np.isfinite(sigma)
                                                     else float("nan")),
                                          drift_half_width=drift,
                                          expectation=expectation, expectation_p95=expectation_p95,
                                          stalled=tuple(int(i) for i in stalled),
                                          slow=() if slow is None else tuple(int(i) for i in slow.iterations),
                                          disturbance_notes=tuple(n for n in (stall, slow_note) if n is not None)))
            bar.update(1)
    finally:
        bar.close()
    ranking = None
    if len(items) >= 2:
        ranking = rank_agreement({it.label: it.comparison.observed["mean"] for it in items},
                                 {it.label: it.comparison.simulated["mean"] for it in items})
    return CompareResult(items=items, ranking=ranking, calibrations=calibrations, options=options,
                         window_notes=tuple(window_notes), stall_notes=tuple(stall_notes),
                         slow_stretch_notes=tuple(slow_notes), target_notes=tuple(target_notes),
                         simulated_calibration=simulated_sources)


__all__ = ["CPU_SOURCES", "resolve_cpu_source", "REPLAY_MAX_BAD_FRACTION", "SCHEDULERS", "calibration_speed_cv", "calibration_speed_dof", "default_warmup", "drift_half_width", "expectation_error", "prediction_interval", "simulated_mean_se", "BACKGROUND_SOURCES", "LOAD_SOURCES", "SPEED_SOURCES", "probe_cpu_s", "speed_ratio", "basis_of", "CompareOptions", "CompareResult", "MODES", "SchemeComparison", "check_replay", "compare_runs",
           "simulate_like"]
