"""``gcsim fit TRACE``: fit a scenario (base speeds, delay family, Markov regime) to measured times."""

from __future__ import annotations

import click

from gcsim.cli.options import model_option
from gcsim.errors import ConfigError
from gcsim.fit.check import self_check, with_check_comment
from gcsim.fit.families import FAMILIES
from gcsim.fit.model import fit_trace
from gcsim.fit.report import DEFAULT_FIT_ROOT
from gcsim.fit.traceio import DURATION_NAMES, ITERATION_NAMES, WORKER_NAMES, read_trace


def _one_of(names) -> str:
    """``a, b or c``: the recognised column names, in the order they are tried."""
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


class _FloatOption(click.ParamType):
    """A float option ``> lo``; a bad value is a one-line ConfigError naming the option."""

    name = "number"

    def __init__(self, lo: float, what: str):
        self.lo, self.what = lo, what

    def convert(self, value, param, ctx) -> float:
        import math
        field = param.opts[0] if param is not None and param.opts else "value"
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise ConfigError(field, f"a number > {self.lo:g} ({self.what})", value) from None
        if not math.isfinite(v) or v <= self.lo:
            raise ConfigError(field, f"a number > {self.lo:g} ({self.what})", value)
        return v


def _check_writable(out_yaml: str, force: bool = False) -> None:
    """Refuse an ``--out`` that cannot be written before any work (the file is written atomically at the
    end, so its parent directory must take a new file), or that exists without ``--force`` (nothing
    already written is lost; the same rule as ``gcsim calibrate``): one-line ConfigError."""
    import tempfile
    from pathlib import Path
    p = Path(out_yaml)
    if p.is_dir() or not p.absolute().parent.is_dir():
        raise ConfigError("--out", "a file path in an existing directory", out_yaml)
    if p.exists() and not p.is_file():
        raise ConfigError("--out", "a regular file path (it is replaced)", out_yaml)
    if p.exists() and not force:
        raise ConfigError("--out", "a file that does not exist yet (or --force to replace it)", out_yaml)
    try:
        with tempfile.NamedTemporaryFile(dir=p.absolute().parent, prefix=f".{p.name}.", suffix=".probe"):
            pass
    except OSError as e:
        raise ConfigError("--out", "a file path in a writable directory", f"{out_yaml} ({e.strerror or e})") from None


@click.command("fit")
@click.argument("trace", metavar="TRACE")
@click.option("--out", "out_yaml", default=None, metavar="FILE",
              help="Also write the fitted scenario to FILE (refused if it exists, unless --force).")
@click.option("--force", is_flag=True, default=False, help="Replace an existing --out file.")
@click.option("--run-dir", default=None, metavar="DIR",
              help=f"Report directory to create (default {DEFAULT_FIT_ROOT}/fit-<trace name>-<UTC timestamp>/).")
@click.option("--scheme", default=None,
              help="Run directories: the scheme whose rows to fit (default uncoded when present, else the first).")
@click.option("--worker-col", default=None, help=f"CSV: the worker column (default: {_one_of(WORKER_NAMES)}).")
@click.option("--iteration-col", default=None,
              help=f"CSV: the column ordering the rows (default: {_one_of(ITERATION_NAMES)}).")
@click.option("--duration-col", default=None, help=f"CSV: the time column (default: {_one_of(DURATION_NAMES)}).")
@model_option("--unit-s", model=read_trace, field="unit_s", type=_FloatOption(0, "seconds per unit of the CSV's times"),
              help="Seconds per unit of the CSV's times (e.g. 0.001 for milliseconds).")
@click.option("--families", default=None, metavar="a,b", help=f"Candidate families (default all: {', '.join(FAMILIES)}).")
@model_option("--slow-threshold", model=fit_trace, field="slow_threshold",
              type=_FloatOption(1, "a factor of the worker's median time"),
              help="An iteration is slow (Markov regime) above this factor of the worker's median.")
@click.option("--name", default=None, help="Scenario name (default fit-<trace name>).")
@click.pass_context
def command(ctx, trace, out_yaml, force, run_dir, scheme, worker_col, iteration_col, duration_col, unit_s, families,
            slow_threshold, name):
    """Fit a scenario to the per-worker, per-iteration times in TRACE.

    TRACE is a gcsim run directory (workers.csv: a worker's time is send_s - dispatch_s, seconds) or a
    CSV with one row per worker and iteration: a worker column, an iteration (or time) column that
    orders the rows, and a duration column, in --unit-s seconds per unit (extra columns ignored;
    names matched case-insensitively). Writes a commented scenario YAML and a report (fit.csv,
    report.md, qq.png, delays.png, timeline.png). A bad trace is one line naming file, line, column;
    exit 2.
    """
    import yaml

    from gcsim.cli.options import command_line
    from gcsim.fit.model import scenario_name
    from gcsim.fit.report import fit_table, write_report
    from gcsim.rundir import atomic_write_text, check_out_dir, new_run_dir
    from gcsim.scenario import validate_scenario

    fams = FAMILIES
    if families is not None:
        fams = tuple(f.strip() for f in families.split(",") if f.strip())
        bad = [f for f in fams if f not in FAMILIES]
        if bad or not fams:
            raise ConfigError("--families", f"comma-separated names from {', '.join(FAMILIES)}", families)
    if out_yaml is not None:
        _check_writable(out_yaml, force)
    if run_dir is not None:
        check_out_dir(run_dir, "--run-dir")
    tr = read_trace(trace, scheme=scheme, worker_col=worker_col, iteration_col=iteration_col,
                    duration_col=duration_col, unit_s=unit_s)
    res = fit_trace(tr, families=fams, slow_threshold=slow_threshold, name=name)
    validate_scenario(yaml.safe_load(res.scenario_text))  # the fitted text must be a valid scenario
    check = self_check(res)  # does the fitted scenario reproduce the trace's own uncoded time? (review)
    res.scenario_text = with_check_comment(res.scenario_text, check)
    if check.flagged:
        res.notes.append(check.warning())
    sc_name = name or scenario_name(tr.path)
    rd = new_run_dir(run_dir, root=DEFAULT_FIT_ROOT, prefix=sc_name, field="--run-dir")
    try:
        write_report(res, rd.path, command_line(ctx, "fit", [trace]), check=check)
    except BaseException:
        rd.discard()
        raise
    rd.release()
    if out_yaml is not None:
        try:
            atomic_write_text(out_yaml, res.scenario_text)
        except OSError as e:
            raise ConfigError("--out", f"a writable file path (the report was written to {rd.path})",
                              f"{out_yaml} ({e.strerror or e})") from None
    click.echo(f"{tr.path}: {tr.n_iterations} iterations x {tr.n_workers} workers ({tr.source})")
    for n in res.notes:
        click.echo(f"note: {n}")
    click.echo(f"base per worker (s): {', '.join(f'{b:.4g}' for b in res.base)}")
    click.echo(f"regime: {res.regime.reason}")
    click.echo(check.line())
    table = fit_table(res)
    show = table[["family", "k", "params", "aic", "delta_aic", "ks_d", "ks_p", "chosen"]].copy()
    for c in ("aic", "delta_aic", "ks_d"):
        show[c] = [f"{v:.4g}" for v in show[c]]
    show["ks_p"] = [f"{v:.2g}" for v in show["ks_p"]]
    click.echo(show.to_string(index=False))
    if out_yaml is not None:
        click.echo(f"wrote {out_yaml}")
    click.echo(f"wrote {rd.path}")
