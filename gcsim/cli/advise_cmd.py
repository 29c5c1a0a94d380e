"""``gcsim advise SCENARIO``: which scheme, with which s and m, and how much it saves."""

from __future__ import annotations

import click
import pandas as pd

from gcsim.advise.output import DEFAULT_ADVISE_ROOT
from gcsim.advise.search import DECODE_CHECKS, OBJECTIVES, VERIFY_TOP, advise
from gcsim.cli.options import IntOption, model_option


@click.command("advise")
@click.argument("scenario", metavar="SCENARIO")
@click.option("--n", "n_list", default=None, metavar="N[,N...]",
              help="Workers (default the scenario's n_workers); a comma-separated list searches each. A "
                   "scenario with per-worker factors (stragglers.worker_scale, as `gcsim fit` writes) is "
                   "tied to its own n until you edit them.")
@model_option("--objective", model=advise, field="objective", choices=OBJECTIVES,
              help="What to minimise: mean, p95 or p99 iteration time.")
@click.option("--max-s", type=IntOption(lo=0), default=None, help="Largest s tried (default n - 1; with several --n, capped at each n - 1).")
@model_option("--max-m", model=advise, field="max_m", type=IntOption(lo=1), help="Largest m tried (cce-*).")
@click.option("--iterations", type=IntOption(lo=10), default=1000, show_default=True,
              help="Simulated iterations per candidate (>= 10; all candidates share the same draws).")
@click.option("--seed", type=IntOption(0, 2**32 - 1), default=None, help="Override the scenario's seed.")
@click.option("--top", type=IntOption(lo=1), default=None, help="Print only the top rows of each ranking.")
@click.option("--iterations-to-target", "to_target", default=None, metavar="SCHEME=ITERS[,...]|CSV",
              help="Iterations each scheme needs to reach a target accuracy (e.g. uncoded=150,pgc-fr=600, or "
                   "time_to_accuracy.csv of `gcsim study`): also rank by predicted time to target "
                   "= iterations x predicted mean iteration time.")
@click.option("--accuracy-target", type=click.FloatRange(0, 1, min_open=True), default=None,
              help="Which target of an --iterations-to-target CSV (fraction, e.g. 0.5).")
@model_option("--decode-check", model=advise, field="decode_check", choices=DECODE_CHECKS,
              help=f"Check the decodes (refusals of ill-conditioned sets) of the top {VERIFY_TOP} exact rows, re-ranking "
                   "until they are all checked (other rows of gc-cr/gc-mds/cce-cr are then lower bounds, marked >=), "
                   "or of every row (minutes at n >= 64).")
@click.option("--thorough", is_flag=True, default=False,
              help="The reference search: build every candidate whatever its construction check costs (cce-cr/cce-fr "
                   "with s near n: minutes each at n >= 64) and check every decode.")
@click.option("--out", "out_dir", default=None, metavar="DIR",
              help=f"Run directory to create (default {DEFAULT_ADVISE_ROOT}/<scenario>-<UTC timestamp>/).")
@click.pass_context
def command(ctx, scenario, n_list, objective, max_s, max_m, iterations, seed, top, to_target, accuracy_target,
            decode_check, thorough, out_dir):
    """Rank every registered scheme over every valid (s, m) for SCENARIO's straggler model.

    Each candidate is simulated on the same keyed draws (the vectorised engine where it models the
    scenario, one run per timing class; else SimPy); the table gives computation and
    communication load, predicted mean and p95 with 95% CIs and the speedup over uncoded. Exact
    schemes are ranked; approximate ones apart, with what they drop. Writes advice.csv, advice.md,
    advice_n<N>.png, config.yaml, meta.json. With --iterations-to-target, candidates of the named
    schemes are also ranked by predicted time to target (time_to_target.csv). With
    workload.speed_drift in SCENARIO (sd > 0; `gcsim calibrate` writes one), the top 3 distinct exact
    timings, uncoded and the best approximate row are simulated again on a machine sd slower and
    faster (the slower/faster column), and the verdict says whether the best choice changes.
    """
    from gcsim.advise.output import format_table, not_searched_text, write_advice
    from gcsim.advise.target import format_time_to_target, parse_iterations_to_target, time_to_target
    from gcsim.cli.options import command_line
    from gcsim.errors import ConfigError
    from gcsim.rundir import check_out_dir, new_run_dir
    from gcsim.scenario import load_scenario

    sc = load_scenario(scenario)
    ns = [sc.n_workers]
    if n_list is not None:
        try:
            ns = [int(x) for x in n_list.split(",") if x.strip()]
        except ValueError:
            raise ConfigError("--n", "an integer >= 1 or a comma-separated list of them", n_list) from None
        if not ns or min(ns) < 1:
            raise ConfigError("--n", "an integer >= 1 or a comma-separated list of them", n_list)
    if max_s is not None and max_s >= max(ns):
        raise ConfigError("--max-s", f"an integer < n (at most {max(ns) - 1} for n={max(ns)}; s counts stragglers "
                          f"among the n workers)", max_s)
    if accuracy_target is not None and to_target is None:
        raise ConfigError("--accuracy-target", "used only with --iterations-to-target", accuracy_target)
    to_target_iters = parse_iterations_to_target(to_target, accuracy_target) if to_target is not None else None
    if out_dir is not None:
        check_out_dir(out_dir)
    advices = [advise(sc, n=n, objective=objective, max_s=max_s, max_m=max_m, iterations=iterations, seed=seed,
                      decode_check=decode_check, thorough=thorough) for n in ns]
    targets = None
    if to_target_iters is not None:
        targets = pd.concat([time_to_target(a.table, to_target_iters) for a in advices], ignore_index=True)
    rd = new_run_dir(out_dir, root=DEFAULT_ADVISE_ROOT, prefix=sc.name)
    try:
        write_advice(advices, sc, rd.path, command_line(ctx, "advise", [scenario]), targets=targets)
    except BaseException:
        rd.discard()
        raise
    rd.release()
    for a in advices:
        click.echo(format_table(a, top))
        click.echo(a.verdict)
        if targets is not None:
            click.echo(format_time_to_target(targets, a.n, top))
        if a.not_searched:
            click.echo(not_searched_text(a))
        click.echo(f"({len(a.table)} candidates, {a.timing_classes or len(a.table)} simulated, in {a.wall_s:.1f} s)")
    click.echo(f"wrote {rd.path}")
