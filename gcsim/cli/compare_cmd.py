"""``gcsim compare [RUN_DIR ...]``: check simulated against observed iteration times."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import numpy as np

from gcsim.cli.options import IntOption, command_line, model_option
from gcsim.compare.output import DEFAULT_COMPARE_ROOT
from gcsim.compare.pipeline import DEFAULT_WARMUP, CompareOptions, resolve_cpu_source
from gcsim.compare.verdict import Bands
from gcsim.real.runner import DEFAULT_RUNS_ROOT


def _command_line(ctx: click.Context) -> str:
    """The ``gcsim compare ...`` invocation (see :func:`gcsim.cli.options.command_line`)."""
    return command_line(ctx, "compare", [str(p) for p in ctx.params.get("run_dirs", ())])


def _speed_drift(text: str) -> float | str:
    """``--speed-drift``: ``auto``, ``none`` or a number (range checked by CompareOptions)."""
    if text in ("auto", "none"):
        return text
    try:
        return float(text)
    except ValueError:
        from gcsim.errors import ConfigError
        raise ConfigError("--speed-drift", "auto, none or a fraction in [0, 1)", text) from None


#: ``--cpu-source measured`` options say so first: one wording for all of them.
_WITH_MEASURED = "With --cpu-source measured (auto with --calibrate-from)"


def _option(*param_decls: str, field: str, choices: bool = False, **attrs):
    """A ``gcsim compare`` option whose default (and choices) is :class:`CompareOptions`'s ``field``."""
    return model_option(*param_decls, model=CompareOptions, field=field, choices=choices, **attrs)


def _band_option(stat: str, what: str):
    """``--<stat>-band``: the allowed relative error of ``stat``, default :class:`Bands`'s."""
    return model_option(f"--{stat}-band", f"{stat}_band", model=Bands, field=stat, type=float,
                        help=f"Allowed relative error of {what}.")


#: the help of each option that sets a ``Literal`` field of :class:`CompareOptions` (``--<field>``, '_' as
#: '-'; choices and default from the field), in the order ``--help`` lists them
_CHOICE_HELP = {
    "mode": "scenario: fresh straggler draws per replication (a prediction: out of sample with --calibrate-from "
            "another run, in sample without); paired: replay the run's own draws (same seed) and bootstrap paired "
            "on iterations: a model check, not a prediction.",
    "cpu_source": "Per-partition CPU work: auto = measured with --calibrate-from (a prediction), wall without; "
                  "wall = de-contended compute wall time (best when each run is calibrated from itself: it folds "
                  "the machine's load then into the work); measured = the workers' CPU clocks in the trace, the "
                  "other processes' CPU kept apart (what carries over to another scheme).",
    "load_from": f"{_WITH_MEASURED}: the CPU other processes took from the workers, as measured in the calibration "
                 "run (a pure prediction) or during each target run (the machine's load then, an input recorded "
                 "beside its iteration times, never fitted to them).",
    "speed_from": f"{_WITH_MEASURED} and --calibrate-from: the workers' CPU work (per partition and per call) as "
                  "calibrated; probe = scaled by "
                  "each target's CPU-speed probe (meta.json cpu_probe, timed before its first iteration) over the "
                  "calibration run's (still a prediction); target = scaled to each target's measured CPU per "
                  "partition (a diagnostic of machine-speed drift between runs, basis 'given machine state', not "
                  "a prediction).",
    "background": f"{_WITH_MEASURED}: the steady CPU other processes take from the workers, fitted so the simulated "
                  "calibration run's workers get the cores their CPU clocks say they got, or as measured (all the "
                  "other-process CPU while the master waited, including what ran only on idle cycles).",
    "calibration_window": "With --calibrate-from: steady = calibrate on the calibration runs' steady part, leaving "
                          "out blocks of iterations during which another load came and went (other processes' CPU "
                          "well above the run's own level; the report's notes say which); all = every iteration "
                          "after the warm-up.",
    "scheduler": "How the simulated workers share the cores (workload.scheduler): auto = a simulated "
                 "calibration run's own setting, per-core for a real one (one run queue per core as Linux "
                 "keeps them: it reproduces the spread of the workers' wall time per CPU second, findings "
                 "23-24); per-core or processor-sharing (every computing worker at the same rate) = that "
                 "model, whatever the calibration run.",
    "between_calls_cpu": f"{_WITH_MEASURED}: Ray's CPU between a worker's calls (serialising its reply, "
                         "deserialising the next call; workers.csv between_calls_cpu_s, trace format 4): in-lags = "
                         "its time is in the measured dispatch and transfer lags already, only the call's own CPU "
                         "is simulated after the partitions (Ray's idle-thread CPU in the column leaves the steady "
                         "background too); on-path = all of cpu_s - compute_cpu_s after the partitions (the model "
                         "before format 4; older traces get it either way).",
}


def _choice_options(command):
    """Add to ``command`` one option per :data:`_CHOICE_HELP` field (a click decorator)."""
    for field in reversed(_CHOICE_HELP):  # decorators apply bottom-up: reversed keeps the listed order
        command = _option(f"--{field.replace('_', '-')}", field, field=field, choices=True,
                          help=_CHOICE_HELP[field])(command)
    return command


@click.command("compare")
@click.argument("run_dirs", nargs=-1, metavar="[RUN_DIR ...]")
@click.option("--runs-root", default=str(DEFAULT_RUNS_ROOT), show_default=True, metavar="DIR",
              help="Without RUN_DIR: take the newest complete run per scheme under DIR.")
@click.option("--calibrate-from", "calibrate_from", multiple=True, metavar="RUN",
              help="Calibrate compute/network/master from this run only and predict every compared run "
                   "(same n required); repeat it to pool several runs (e.g. the same scheme run before and "
                   "after the targets, which averages the machine's drift). Default: each run calibrates "
                   "from itself.")
@_option("--replications", field="replications", type=int, help="Simulated replications per compared scheme.")
@click.option("--warmup", type=int, default=None,
              help="Iterations dropped at the start of every observed run (the --calibrate-from runs too) "
                   "and every simulated run "
                   f"[default: min({DEFAULT_WARMUP}, iterations // 5)].")
@_band_option("mean", "the mean (0.05 = ±5%)")
@_band_option("p95", "the 95th percentile")
@_choice_options
@_option("--speed-drift", "speed_drift", field="speed_drift", metavar="auto|none|F",
         help="Predictions (--calibrate-from, --cpu-source measured): the CPU-speed drift (a fraction, one "
              "standard deviation) added to the mean error's sampling CI as a prediction interval "
              "(validation.csv err_mean_pi_lo/hi, pi_covers); auto = how far a new run's speed may lie from "
              "the calibration's, sigma_run x sqrt(1 + 1/R) for R calibration runs, sigma_run measured "
              "within each run (and between them when several are given).")
@click.option("--control-variate/--no-control-variate", "control_variate", default=True, show_default=True,
              help="Predictions (--calibrate-from, scenario mode): also estimate each mean and p95 error in "
                   "expectation, the luck of the run's own straggler draws removed by a control variate (the run's "
                   "draws replayed through the same calibration; validation.csv err_mean_cv[_lo/_hi], cv_beta, "
                   "err_p95_cv[_lo/_hi], cv_p95_beta, and cv_note / cv_p95_note saying why one is missing; one more "
                   "simulation per scheme).")
@click.option("--speed-variation/--no-speed-variation", "speed_variation", default=True, show_default=True,
              help="With --cpu-source measured: model the machine's speed shared by every worker of an iteration "
                   "and drifting over iterations (workload.speed_variation: sd and lag-1 autocorrelation of the "
                   "common part of the workers' CPU per partition, measured on their clocks); off: every "
                   "partition's work drawn independently.")
@_option("--bootstrap", "n_resamples", field="n_resamples", type=int,
         help="Bootstrap resamples per confidence interval.")
@_option("--seed", field="seed", type=IntOption(0, 2**32 - 1),
         help="Seed of replications and bootstraps (0 <= seed < 2**32).")
@click.option("--out", "out_dir", default=None, metavar="DIR",
              help=f"Output directory (default {DEFAULT_COMPARE_ROOT}/<UTC timestamp>/).")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr [default: if a terminal].")
def command(run_dirs, runs_root, calibrate_from, replications, warmup, mean_band, p95_band, mode, cpu_source,
            load_from, speed_from, background, calibration_window, speed_drift, control_variate, speed_variation,
            scheduler, between_calls_cpu, n_resamples, seed, out_dir, progress):
    """Simulate each measured run and report how well prediction matches reality.

    \b
    For each run (default: the newest real run per scheme under --runs-root) it builds the matching
    scenario (same n, scheme, s, m, stragglers, policy, iterations), calibrates what the scenario
    does not say (per-partition compute, transfer time vs payload, master overhead) from the run's
    trace, simulates it --replications times and compares iteration times after the warm-up: mean,
    p50, p95, p99 relative errors with bootstrap 95% CIs, Wasserstein-1 / mean, KS, and whether the
    schemes are ranked in the observed order (Kendall tau).

    \b
    Verdict per run: PASS when the CIs of the mean and p95 errors lie inside the bands, WARN when
    only the point estimates do, FAIL otherwise; a prediction is judged on its errors in
    expectation (its run's straggler luck taken out), other rows on the raw errors. Prints the
    table and writes validation.csv,
    calibration.json, cdf.png, qq.png, predicted_vs_measured.png, timeline_<scheme>.png, report.md.
    Exit status: 0 all pass or warn, 1 some fail, 2 bad input (one line on stderr).
    """
    from gcsim.compare.output import write_compare_outputs
    from gcsim.compare.pipeline import compare_runs
    from gcsim.compare.report import verdict_table
    from gcsim.compare.rundir import newest_runs, read_distinct_run_dirs, read_run_dir
    from gcsim.errors import ConfigError
    from gcsim.rundir import check_out_dir, new_run_dir

    asked_cpu_source = cpu_source
    cpu_source = resolve_cpu_source(cpu_source, predicting=bool(calibrate_from))
    options = CompareOptions(replications=replications, warmup=warmup, bands=Bands(mean=mean_band, p95=p95_band),
                             mode=mode, n_resamples=n_resamples, seed=seed, cpu_source=cpu_source,
                             load_from=load_from, speed_from=speed_from, background=background,
                             speed_drift=_speed_drift(speed_drift), calibration_window=calibration_window,
                             control_variate=control_variate, speed_variation=speed_variation,
                             scheduler=scheduler, between_calls_cpu=between_calls_cpu)
    ctx = click.get_current_context()
    if cpu_source != "measured":  # options that act on the measured CPU only: refused, not silently ignored
        # (after CompareOptions, which checks every value first)
        how = (f"--cpu-source {cpu_source}" if asked_cpu_source != "auto"
               else "--cpu-source auto, which is wall without --calibrate-from")
        defaults = CompareOptions()
        for flag, field, value in (("--background", "background", background), ("--load-from", "load_from", load_from),
                                   ("--speed-from", "speed_from", speed_from),
                                   ("--between-calls-cpu", "between_calls_cpu", between_calls_cpu),
                                   ("--speed-drift", "speed_drift", speed_drift)):
            harmless = {str(getattr(defaults, field))} | ({"none"} if field == "speed_drift" else set())
            if ctx.get_parameter_source(field) == click.core.ParameterSource.COMMANDLINE and str(value) not in harmless:
                raise ConfigError(flag, "to be used with --cpu-source measured (wall time folds the machine's load "
                                  "and speed into the work per partition: there is no measured CPU to act on)",
                                  f"{flag} {value} with {how}")
    if (ctx.get_parameter_source("speed_drift") == click.core.ParameterSource.COMMANDLINE
            and str(speed_drift).strip() not in ("auto", "none")):
        # a drift given where no prediction interval is made: refused, not silently ignored (review)
        why = ("--mode paired (a replay of each target's own draws is a model check, not a prediction)"
               if mode == "paired" else
               "--speed-from target (each target's own speed is given: there is no drift to allow for)"
               if speed_from == "target" else
               "no --calibrate-from (each run calibrated on itself: in sample, no prediction)"
               if not calibrate_from else None)
        if why is not None:
            raise ConfigError("--speed-drift", "a prediction interval's drift only for predictions (--calibrate-from, "
                              "--mode scenario, --speed-from calibration or probe)", f"{speed_drift} with {why}")
    if out_dir is not None:
        check_out_dir(out_dir)
    if run_dirs:
        runs = read_distinct_run_dirs(run_dirs, "RUN_DIR")
        targets = [(r, r.schemes) for r in runs]
    else:
        skipped: list[str] = []
        found = newest_runs(runs_root, skipped=skipped)
        for line in skipped:
            click.echo(f"gcsim compare: skipped {line}", err=True)
        targets = [(read_run_dir(f.path), list(f.schemes)) for f in found]
    source = read_distinct_run_dirs(calibrate_from, "--calibrate-from") or None
    if progress is None:
        progress = sys.stderr.isatty()
    out = new_run_dir(out_dir, root=DEFAULT_COMPARE_ROOT, prefix="")  # before the expensive part
    try:
        result = compare_runs(targets, calibrate_from=source, options=options, progress=progress)
        files = write_compare_outputs(result, out, command=_command_line(click.get_current_context()))
    except BaseException:
        out.discard()
        raise

    table = result.table()
    src = (f"calibrated from {' + '.join(r.label for r in source)}" if source is not None
           else "each run calibrated from itself (in sample)")
    click.echo(f"{len(table)} scheme(s) compared, {options.mode} mode, {options.replications} replication(s), "
               f"{src}")
    click.echo(verdict_table(table))
    warmups = sorted({int(it.warmup) for it in result.items})
    if warmups:
        click.echo(f"obs: the measured run after its first {'/'.join(map(str, warmups))} iteration(s) (the warm-up, "
                   f"--warmup), so its mean can differ from what gcsim real printed")
    for note in (*result.window_notes, *result.stall_notes, *result.slow_stretch_notes, *result.target_notes,
                 *result.missing_notes()):
        click.echo(f"note: {note}", err=True)
    for it in result.items:  # a prediction without its expectation for a reason the user did not choose
        for what, x in (("mean", it.expectation), ("p95", it.expectation_p95)):
            if x.failed:
                click.echo(f"note: {it.label}: no {what} error in expectation: {x.reason}", err=True)
    if result.ranking is not None:
        rk = result.ranking
        click.echo(f"ranking (fastest first): observed {rk.observed_text()}; predicted "
                   f"{rk.predicted_text()}; Kendall tau "
                   + (f"{rk.tau:+.2f}" if np.isfinite(rk.tau) else "undefined (the observed or the predicted means all tie)")
                   + ("" if rk.verdict() == "same order" else f"  {rk.verdict()}"))
    click.echo(f"wrote {Path(files['report.md']).parent}")
    return 1 if (table["verdict"] == "fail").any() else 0
