"""``gcsim calibrate RUN_DIR [RUN_DIR ...] --out my_cluster.yaml``: a scenario calibrated from measured run(s)."""

from __future__ import annotations

import click

from gcsim.cli.options import IntOption, command_line, model_option
from gcsim.compare.calibrate import BETWEEN_CALLS
from gcsim.compare.pipeline import DEFAULT_WARMUP
from gcsim.compare.scenario_file import write_calibrated_scenario
from gcsim.compare.steady import CALIBRATION_WINDOWS


@click.command("calibrate")
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True)
@click.option("--out", "out_path", required=True, metavar="FILE.yaml",
              help="Scenario file to write (refused if it exists, unless --force); empirical "
                   "distributions go to FILE.<name>.csv beside it.")
@model_option("--warmup", model=write_calibrated_scenario, field="warmup", type=IntOption(0), show_default=False,
              help="Iterations dropped at the start of the run before calibrating (at least 2 must be left, as in gcsim compare) "
                   f"[default: min({DEFAULT_WARMUP}, iterations // 5), as gcsim compare].")
@model_option("--calibration-window", model=write_calibrated_scenario, field="calibration_window", choices=CALIBRATION_WINDOWS,
              help="steady = calibrate on the run's steady part, leaving out blocks of iterations during which "
                   "another load came and went (the file's comments say which); all = every iteration after "
                   "the warm-up.")
@model_option("--between-calls-cpu", model=write_calibrated_scenario, field="between_calls_cpu", choices=BETWEEN_CALLS,
              help="With the workers' CPU clocks: Ray's CPU between a worker's calls (workers.csv "
                   "between_calls_cpu_s, trace format 4): in-lags = its time is in the measured dispatch and "
                   "transfer lags already, only the call's own CPU goes into workload.call_overhead (Ray's "
                   "idle-thread CPU in the column leaves workload.background too); on-path = all of cpu_s - "
                   "compute_cpu_s (older traces get it either way).")
@click.option("--force", is_flag=True, default=False, help="Replace an existing --out file.")
def command(run_dirs, out_path, warmup, calibration_window, between_calls_cpu, force):
    """Write a scenario calibrated from one run (real or simulated, any scheme), or from several
    runs with the same n pooled (e.g. one scheme run before and after other work, so that a drift of
    the machine between them averages out; the first run supplies what is copied).

    \b
    Copied from the run: n_workers, stragglers, policy, message sizes. Calibrated from what it
    measured: per-partition CPU work and per-call overhead (the workers' CPU clocks), the cores
    the workers shared and the share other processes on the machine took from them
    (workload.background), how they shared the cores (workload.scheduler: per-core for a real run,
    one run queue per core), the model-broadcast lag, the gradient transfer, the master's decode +
    update time. The file lists every scheme valid for the run's n; edit schemes, stragglers or
    iterations and run `gcsim simulate FILE.yaml`. Comments in the file say what was measured.

    \b
    gcsim real --scheme uncoded --iterations 200 --out runs/real/my-uncoded
    gcsim calibrate runs/real/my-uncoded --out my_cluster.yaml
    gcsim simulate my_cluster.yaml
    """
    from gcsim.compare.rundir import read_distinct_run_dirs
    from gcsim.compare.scenario_file import pooled_differences

    runs = read_distinct_run_dirs(run_dirs, "RUN_DIR")
    cmd = command_line(click.get_current_context(), "calibrate", [str(p) for p in run_dirs])
    path, side = write_calibrated_scenario(runs, out_path, command=cmd, warmup=warmup, force=force,
                                           calibration_window=calibration_window,
                                           between_calls_cpu=between_calls_cpu,
                                           on_note=lambda note: click.echo(f"note: {note}", err=True))
    for warning in pooled_differences(runs):
        click.echo(f"warning: {warning}", err=True)
    from gcsim.compare.stalls import pooled_load_note

    load_note = pooled_load_note(runs)  # as gcsim compare says it for the same runs
    if load_note:
        click.echo(f"note: {load_note}", err=True)
    click.echo(f"wrote {path}" + (f" (+ {', '.join(p.name for p in side)})" if side else ""))
    click.echo(f"next: gcsim simulate {path}")
    return 0
