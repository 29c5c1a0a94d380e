"""``gcsim sweep SWEEP.yaml``: simulate a grid over n, s, m, schemes and straggler parameters."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gcsim.cli.options import IntOption, field_default, model_option
from gcsim.real.config import RealConfig
from gcsim.signals import interrupted_exit_status
from gcsim.sweep.config import DEFAULT_SWEEP_ROOT
from gcsim.sweep.run import AUTO_TASKS_PER_CPU, EXECUTORS, MAX_AUTO_CHUNK, run_sweep


@click.command("sweep")
@click.argument("sweep", metavar="SWEEP.yaml")
@click.option("--out", "out_dir", default=None, metavar="DIR",
              help=f"Run directory to create (default {DEFAULT_SWEEP_ROOT}/<name>-<UTC timestamp>/); must be new or "
                   "empty.")
@click.option("--resume", "resume", default=None, metavar="RUN_DIR",
              help="Continue an interrupted or failed sweep in its directory: finished points are kept, the others "
                   "computed. Refused when the sweep's base, grid or engine differ from the run's.")
@model_option("--executor", model=run_sweep, field="executor", choices=EXECUTORS,
              help="auto: Ray tasks when Ray is installed (the 'real' extra), else local; ray: Ray tasks (a private "
                   "loopback-only Ray on this machine, or --address); local: one process, no Ray.")
@click.option("--address", default=None, metavar="HOST:PORT",
              help="Run the tasks on this Ray cluster (its head's address) instead of a private local Ray.")
@click.option("--connect-timeout", "connect_timeout", type=IntOption(lo=1),
              default=int(field_default(RealConfig, "connect_timeout_s")), show_default=True,
              help="Seconds to wait for --address to answer before a one-line error (as gcsim real).")
@click.option("--num-cpus", type=IntOption(lo=1), default=None,
              help="CPUs of the private Ray (default: this machine's usable CPUs).")
@click.option("--chunk-size", type=IntOption(lo=1), default=None,
              help=f"Points per Ray task (default: about {AUTO_TASKS_PER_CPU} tasks per CPU, at most {MAX_AUTO_CHUNK} "
                   "points each).")
@click.option("--point", "point", type=IntOption(lo=0), default=None,
              help="Print point K's scenario as YAML (the schemes it accepts) and exit: `gcsim simulate` of it "
                   "gives the sweep's numbers for that point. Creates nothing.")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr [default: if a terminal].")
@click.pass_context
def command(ctx, sweep, out_dir, resume, executor, address, connect_timeout, num_cpus, chunk_size, point,
            progress):
    """Simulate every point of SWEEP.yaml's grid (a base scenario and lists of values for n, s, m,
    schemes and any scenario field, e.g. stragglers.delay.p; format in gcsim/sweep/config.py) and write
    a tidy sweep.csv (one row per point and scheme: grid values, status, mean/p50/p95/p99 seconds,
    engine, seed) with plots of mean and p95 iteration time against each swept parameter.

    Each point is simulated as `gcsim simulate` would (same engine, same keyed draws). Parameters a
    scheme refuses (s >= n, ...) are rows with status skipped and the reason. Finished points are logged
    as they finish, so Ctrl-C (or SIGTERM) leaves a run that --resume continues.
    """
    from gcsim.cli.options import command_line
    from gcsim.rundir import check_out_dir
    from gcsim.sweep.config import load_sweep
    from gcsim.sweep.run import resolve_executor

    if progress is None:
        progress = sys.stderr.isatty()
    plan = load_sweep(sweep)
    if point is not None:
        from gcsim.sweep.run import point_scenario
        click.echo(point_scenario(plan, point).to_yaml(), nl=False)
        return
    executor = resolve_executor(executor, address)
    if out_dir is not None and resume is None:
        from gcsim.errors import ConfigError
        from gcsim.sweep.run import POINTS_LOG

        try:
            check_out_dir(out_dir)
        except ConfigError as e:
            if not (Path(out_dir) / POINTS_LOG).is_file():
                raise
            # a sweep's own directory (interrupted, killed or finished): say how to continue it
            raise ConfigError(e.field, message=f"{e}; continue that sweep with: gcsim sweep {sweep} "
                                               f"--resume {out_dir}") from None
    if resume is not None:
        from gcsim.errors import ConfigError
        from gcsim.sweep.run import check_same_sweep

        if out_dir is not None:  # before the header: a refusal is one line (review)
            raise ConfigError("--out", "not given with --resume (the run continues in its own directory)",
                              str(out_dir))
        check_same_sweep(Path(resume), plan)  # before anything is printed: a refusal is one line
    click.echo(f"sweep {plan.name}: {plan.total} points ("
               + " x ".join(f"{len(ax.values)} {ax.key}" for ax in plan.axes) + f"), executor {executor}")
    res = run_sweep(plan, out_dir=out_dir, resume=resume, executor=executor, address=address,
                    connect_timeout_s=connect_timeout, num_cpus=num_cpus,
                    chunk_size=chunk_size, progress=progress, command=command_line(ctx, "sweep", [sweep]))
    if res.status == "interrupted":
        if res.done == 0 and resume is None:
            click.echo("gcsim: interrupted before any point finished; nothing was kept", err=True)
        else:
            click.echo(f"gcsim: interrupted with {res.done} of {res.total} points done; continue with: "
                       f"gcsim sweep {sweep} --resume {res.run_dir}", err=True)
        raise click.exceptions.Exit(interrupted_exit_status())
    counts: dict = {}
    reasons: dict = {}
    for r in res.rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        if r["status"] != "ok":
            key = f"{r['scheme']}: {r['reason']}"
            reasons[key] = reasons.get(key, 0) + 1
    click.echo(f"{res.total} points, {len(res.rows)} rows: " + ", ".join(f"{v} {k}" for k, v in counts.items())
               + f" ({res.computed} computed in {res.wall_s:.1f} s with the {res.executor} executor"
               + (f", {res.total - res.computed} from the earlier sessions" if res.computed < res.total else "") + ")")
    for key, cnt in sorted(reasons.items(), key=lambda kv: -kv[1])[:5]:
        click.echo(f"  {cnt} x {key[:200]}")
    if len(reasons) > 5:
        click.echo(f"  ... {len(reasons) - 5} more reasons in sweep.csv")
    click.echo(f"wrote {res.run_dir}")
