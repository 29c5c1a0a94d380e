"""``gcsim study [SCENARIO]``: measure every scheme with the real executor, compare with the simulator,
write the headline (see :mod:`gcsim.study`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pandas as pd

from gcsim.cli.options import IntOption, command_line, field_default, model_option
from gcsim.compare.calibrate import BETWEEN_CALLS
from gcsim.compare.pipeline import DEFAULT_WARMUP, CompareOptions
from gcsim.real.config import DEFAULT_SCENARIO_NAME, RealConfig
from gcsim.signals import interrupted_exit_status
from gcsim.study.pipeline import StudyOptions
from gcsim.study.protocol import DEFAULT_MODELS, NEIGHBOUR_SESSIONS, PROTOCOLS, ProtocolOptions


def _real_default(name: str) -> str:
    """``[<RealConfig's default of name>]`` for the help (the option defaults to None: RealConfig's
    default applies; a ``None`` default reads ``all``)."""
    value = field_default(RealConfig, name)
    return "[all]" if value is None else f"[{value}]"


def _command_line(ctx: click.Context) -> str:
    """The ``gcsim study ...`` invocation (see :func:`gcsim.cli.options.command_line`)."""
    return command_line(ctx, "study", [str(ctx.params["scenario"])] if ctx.params.get("scenario") is not None else [])


def _scheme_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [x.strip() for x in value.split(",")]
    if not all(names):
        from gcsim.errors import ConfigError

        raise ConfigError("--schemes", "a comma-separated list of scheme names (e.g. uncoded,gc-fr)", value)
    return names


#: ``gcsim study --help`` (the scenario's default file name from :data:`gcsim.real.config.DEFAULT_SCENARIO_NAME`)
_HELP = f"""Measure every scheme on CIFAR-10, predict it with the simulator, compare, and write the headline.

    \b
    For each scheme of SCENARIO (default scenarios/{DEFAULT_SCENARIO_NAME}; --schemes to choose) it runs
    the real executor (as `gcsim real`) into <runs-root>/<scheme>: a finished run is skipped, an
    interrupted or failed one is resumed from its checkpoint (restarted when it has none; the old
    directory is moved to <runs-root>/.<scheme>.abandoned-<time>). Then it compares all runs with
    their calibrated simulations (as `gcsim compare`) and writes into --out: validation.csv,
    calibration.json, cdf.png, qq.png, predicted_vs_measured.png, timeline_<scheme>.png, report.md,
    headline.csv, headline.md (with the machine and this command), accuracy.png and study.json.

    \b
    gcsim study                                      # the nine schemes, 200 iterations each
    gcsim study --schemes uncoded,gc-fr --iterations 20 --out /tmp/v --runs-root /tmp/r

    \b
    Exit status: 0 every verdict pass or warn, 1 some fail, 2 bad input, 130 interrupted by Ctrl-C
    or 143 by SIGTERM (run the same command again to resume).
    """


def _resolved_short(r) -> str:
    """``"13/14 in order, 0 wrong"``: the pairs whose measured means differ by more than their noise that
    the prediction orders as measured (the rank target, gcsim.study.protocol.resolved_rank_agreement)."""
    n = int(r.resolved_pairs) if "resolved_pairs" in r and pd.notna(r.resolved_pairs) else 0
    if not n:
        return "none"
    return f"{int(r.concordant_resolved)}/{n} in order, {int(r.discordant_resolved)} wrong"


@click.command("study", help=_HELP)
@click.argument("scenario", required=False, default=None, metavar="[SCENARIO]")
@click.option("--schemes", default=None, metavar="A,B,...",
              help="Schemes to study, from the scenario's schemes list [all of them].")
@click.option("--iterations", type=IntOption(lo=1), default=None, help="Iterations per scheme [scenario].")
@model_option("--out", "out_dir", model=StudyOptions, field="out_dir", metavar="DIR",
              help="Where the tables, plots and reports go (other files there are kept).")
@model_option("--runs-root", model=StudyOptions, field="runs_root", metavar="DIR",
              help="Parent of the per-scheme run directories <DIR>/<scheme>.")
@click.option("--data-dir", default=None, metavar="DIR",
              help=f"Directory holding cifar-10-batches-py {_real_default('data_dir')}.")
@click.option("--address", default=None, help="Join this Ray cluster instead of starting an embedded Ray.")
@click.option("--batch-size", type=IntOption(lo=1), default=None, help=f"Global mini-batch B {_real_default('batch_size')}.")
@click.option("--eval-every", type=IntOption(lo=1), default=None,
              help=f"Evaluate every E iterations {_real_default('eval_every')}.")
@click.option("--max-train-samples", type=IntOption(lo=1), default=None,
              help=f"Use only the first N training images {_real_default('max_train_samples')}.")
@model_option("--replications", model=CompareOptions, field="replications", type=IntOption(lo=1),
              help="Simulated replications per scheme in the comparison.")
@model_option("--mode", model=CompareOptions, field="mode", choices=True,
              help="Comparison mode (see gcsim compare --help).")
@click.option("--warmup", type=IntOption(lo=0), default=None,
              help=f"Iterations dropped before comparing [min({DEFAULT_WARMUP}, iterations // 5)].")
@click.option("--protocol", type=click.Choice(PROTOCOLS), default=None,
              help=f"Run the {' or '.join(PROTOCOLS)} validation protocol instead (issue 9): per straggler model "
                   f"(SCENARIO, default {' and '.join(DEFAULT_MODELS)}) uncoded, every exact scheme and "
                   "ignore-stragglers, uncoded again; every scheme predicted out of sample from uncoded "
                   "(calibrated on its steady part, as gcsim compare --calibration-window steady, and on every "
                   "iteration) and from gc-fr, with model checks and diagnostics beside. "
                   f"--out default {field_default(ProtocolOptions, 'out_dir')}, --runs-root default "
                   f"{field_default(ProtocolOptions, 'runs_root')}.")
@click.option("--noisy-neighbour", is_flag=True, default=False,
              help="With --protocol: keep one core busy at normal priority during the runs (ended by PID).")
@model_option("--neighbour-session", model=ProtocolOptions, field="neighbour_session", choices=NEIGHBOUR_SESSIONS,
              help="With --noisy-neighbour: start the busy loop in this session (served before the niced "
                   "workers) or in a session of its own, like another terminal's job (with the kernel's "
                   "autogroup scheduling it then shares the CPU fairly with the whole run).")
@model_option("--between-calls-cpu", model=ProtocolOptions, field="between_calls_cpu", choices=BETWEEN_CALLS,
              help="With --protocol: the model of Ray's CPU between a worker's calls in every comparison (see "
                   "gcsim compare --help).")
@click.option("--progress/--no-progress", default=None, help="Progress bars on stderr [if a terminal].")
def command(scenario, schemes, iterations, out_dir, runs_root, data_dir, address, batch_size, eval_every,
            max_train_samples, replications, mode, warmup, protocol, noisy_neighbour, neighbour_session,
            between_calls_cpu, progress):
    """``gcsim study``; its help is :data:`_HELP`."""
    from gcsim.study import StudyOptions, run_study

    ctx = click.get_current_context()
    if neighbour_session != "same" and not noisy_neighbour:
        from gcsim.errors import ConfigError

        raise ConfigError("--neighbour-session", "only with --noisy-neighbour", neighbour_session)
    if protocol is not None:
        return _protocol(ctx, scenario, schemes, iterations, out_dir, runs_root, data_dir, eval_every,
                         max_train_samples, replications, warmup, noisy_neighbour, neighbour_session,
                         between_calls_cpu, progress)
    if ctx.get_parameter_source("between_calls_cpu") == click.core.ParameterSource.COMMANDLINE:
        from gcsim.errors import ConfigError

        raise ConfigError("--between-calls-cpu", "only with --protocol cross-scheme (a plain study calibrates each "
                          "run on itself from wall time)", between_calls_cpu)
    if noisy_neighbour:
        from gcsim.errors import ConfigError

        raise ConfigError("--noisy-neighbour", "only with --protocol cross-scheme", "without --protocol")
    options = StudyOptions(
        scenario=scenario, schemes=_scheme_list(schemes), iterations=iterations, out_dir=Path(out_dir),
        runs_root=Path(runs_root), data_dir=data_dir, address=address, batch_size=batch_size, eval_every=eval_every,
        max_train_samples=max_train_samples, replications=replications, mode=mode, warmup=warmup,
        progress=sys.stderr.isatty() if progress is None else progress)
    result = run_study(options, command=_command_line(ctx), log=click.echo)
    if result.status == "interrupted":
        click.echo("gcsim study: interrupted; run the same command again to resume", err=True)
        ctx.exit(interrupted_exit_status())
    from gcsim.compare.report import verdict_table

    click.echo(verdict_table(result.validation))
    h = result.headline
    if h["measured_speedup_vs_uncoded"].notna().any():
        click.echo("measured speedup vs uncoded: " + ", ".join(
            f"{s} {v:.2f}x" for s, v in zip(h["scheme"], h["measured_speedup_vs_uncoded"])))
    click.echo("test accuracy: " + ", ".join(
        f"{s} {v:.1%}" if v == v else f"{s} -" for s, v in zip(h["scheme"], h["test_accuracy"])))
    click.echo(f"wrote {result.files['headline.md'].parent} (headline.md, headline.csv, accuracy.png, report.md, "
               f"validation.csv, ...)")
    return 1 if (result.validation["verdict"] == "fail").any() else 0


def _protocol(ctx, scenario, schemes, iterations, out_dir, runs_root, data_dir, eval_every, max_train_samples,
              replications, warmup, noisy_neighbour, neighbour_session, between_calls_cpu, progress) -> int:
    """``gcsim study --protocol cross-scheme`` (:mod:`gcsim.study.protocol`)."""
    from gcsim.study.protocol import ProtocolOptions, run_protocol

    defaults = {p.name: p.default for p in ctx.command.params}
    options = ProtocolOptions(
        scenarios=[scenario] if scenario is not None else None, schemes=_scheme_list(schemes), iterations=iterations,
        noisy_neighbour=noisy_neighbour, neighbour_session=neighbour_session,
        out_dir=field_default(ProtocolOptions, "out_dir") if out_dir == defaults["out_dir"] else Path(out_dir),
        runs_root=field_default(ProtocolOptions, "runs_root") if runs_root == defaults["runs_root"] else Path(runs_root),
        data_dir=data_dir, max_train_samples=max_train_samples, eval_every=eval_every, replications=replications,
        warmup=warmup, between_calls_cpu=between_calls_cpu,
        progress=sys.stderr.isatty() if progress is None else progress)
    result = run_protocol(options, command=_command_line(ctx), log=click.echo)
    if result.status == "interrupted":
        click.echo("gcsim study: interrupted; run the same command again to resume", err=True)
        ctx.exit(interrupted_exit_status())
    def pct(v, fmt: str = "6.1%") -> str:
        """A fraction as a percentage; ``-`` where it is not defined (e.g. the noise floor of a calibration
        that pools both runs of the calibration scheme)."""
        return f"{'-':>{len(format(0.0, fmt))}}" if pd.isna(v) else format(v, fmt)

    for _, r in result.summary.iterrows():
        cv = getattr(r, "worst_abs_mean_err_expectation", float("nan"))
        cv95 = getattr(r, "worst_abs_p95_err_expectation", float("nan"))
        click.echo(f"{r.model:>14} {r.comparison:<28} worst |mean err| {pct(r.worst_abs_mean_err)}  "
                   f"in expectation {pct(cv)}  "
                   f"worst |p95 err| {pct(r.worst_abs_p95_err)}  "
                   f"in expectation {pct(cv95)}  "
                   f"tau {'  - ' if pd.isna(r.kendall_tau) else f'{r.kendall_tau:+.2f}'}  "
                   f"resolved pairs {_resolved_short(r)}  noise floor {pct(r.noise_floor_mean_err, '+.1%')}")
    click.echo(f"wrote {result.files['protocol.md'].parent} (protocol.md, protocol.csv, protocol_summary.csv)")
    return 0
