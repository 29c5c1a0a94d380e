"""``gcsim advise SCENARIO``: which scheme, with which s and m, and how much it saves."""

from __future__ import annotations

import click

from gcsim.cli.options import IntOption


@click.command("advise")
@click.argument("scenario", metavar="SCENARIO")
@click.option("--n", "n_list", default=None, metavar="N[,N...]",
              help="Workers (default the scenario's n_workers); a comma-separated list searches each.")
@click.option("--objective", type=click.Choice(["mean", "p95", "p99"]), default="mean", show_default=True,
              help="What to minimise: mean, p95 or p99 iteration time.")
@click.option("--max-s", type=IntOption(lo=0), default=None, help="Largest s tried (default n - 1).")
@click.option("--max-m", type=IntOption(lo=1), default=4, show_default=True, help="Largest m tried (cce-*).")
@click.option("--iterations", type=IntOption(lo=10), default=1000, show_default=True,
              help="Simulated iterations per candidate (all candidates share the same draws).")
@click.option("--seed", type=IntOption(0, 2**32 - 1), default=None, help="Override the scenario's seed.")
@click.option("--top", type=IntOption(lo=1), default=None, help="Print only the top rows of each ranking.")
@click.option("--out", "out_dir", default=None, metavar="DIR",
              help="Run directory to create (default runs/advise/<scenario>-<UTC timestamp>/).")
@click.pass_context
def command(ctx, scenario, n_list, objective, max_s, max_m, iterations, seed, top, out_dir):
    """Rank every registered scheme over every valid (s, m) for SCENARIO's straggler model.

    Each candidate is simulated on the same keyed draws; the table gives computation and
    communication load, predicted mean and p95 with 95% CIs and the speedup over uncoded. Exact
    schemes are ranked; approximate ones apart, with what they drop. Writes advice.csv, advice.md,
    advice_n<N>.png, config.yaml, meta.json.
    """
    from gcsim.advise.output import format_table, write_advice
    from gcsim.advise.search import advise
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
    if out_dir is not None:
        check_out_dir(out_dir)
    advices = [advise(sc, n=n, objective=objective, max_s=max_s, max_m=max_m, iterations=iterations, seed=seed)
               for n in ns]
    rd = new_run_dir(out_dir, root="runs/advise", prefix=sc.name)
    try:
        write_advice(advices, sc, rd.path, command_line(ctx, "advise", [scenario]))
    except BaseException:
        rd.discard()
        raise
    rd.release()
    for a in advices:
        click.echo(format_table(a, top))
        click.echo(a.verdict)
        click.echo(f"({len(a.table)} candidates in {a.wall_s:.1f} s)")
    click.echo(f"wrote {rd.path}")
