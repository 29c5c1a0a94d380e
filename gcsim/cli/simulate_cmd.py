"""``gcsim simulate SCENARIO``: predict iteration time per scheme and write a run directory."""

from __future__ import annotations

import sys
import time

import click

from gcsim.cli.options import FloatOption, IntOption, model_option
from gcsim.signals import sigterm_as_interrupt
from gcsim.sim.output import DEFAULT_SIM_ROOT
from gcsim.sim.vector import ENGINES, TRACE_LEVELS, simulate_with


def format_table(summary, ranges=None) -> str:
    """The per-scheme table printed after a run: times in seconds, ``speedup`` = mean(uncoded) / mean
    (``-`` when ``uncoded`` was not simulated), loads in partitions and gradient lengths per worker
    and iteration; ``exact`` says whether the scheme decodes the full gradient (an approximate one
    drops gradients: faster, but it trains differently); with ``ranges``
    (:func:`gcsim.sim.drift.mean_ranges`) a ``mean_95%_range_s`` column beside the mean."""
    cols = {"scheme": "scheme", "n": "n", "s": "s", "m": "m", "mean_s": "mean_s", "p50_s": "p50_s",
            "p95_s": "p95_s", "p99_s": "p99_s", "speedup_vs_uncoded": "speedup", "computation_load": "comp_load",
            "communication_load": "comm_load"}
    df = summary[list(cols)].rename(columns=cols)
    # pre-format as text: pandas prints NaN as "NaN" without calling a formatter
    for c in ("mean_s", "p50_s", "p95_s", "p99_s"):
        df[c] = [f"{v:.4f}" for v in df[c]]
    if ranges is not None:
        by = ranges.set_index(ranges["scheme"].astype(str))
        df.insert(df.columns.get_loc("mean_s") + 1, "mean_95%_range_s",
                  [f"{by.at[str(k), 'mean_lo_s']:.4f}-{by.at[str(k), 'mean_hi_s']:.4f}" if str(k) in by.index else "-"
                   for k in summary["scheme"]])
    df["speedup"] = ["-" if v != v else f"{v:.2f}x" for v in df["speedup"]]
    df["comm_load"] = [f"{v:.3g}" for v in df["comm_load"]]
    df.insert(1, "exact", [_exact_text(name) for name in df["scheme"]])
    return df.to_string(index=False)


class _SpeedDrift(FloatOption):
    """``--speed-drift``: ``auto`` (the scenario's ``workload.speed_drift``, as ``gcsim compare
    --speed-drift auto`` takes the calibration's), ``none`` or a fraction in [0, 1)."""

    def __init__(self):
        super().__init__(0.0, 1.0, hi_open=True)

    def _allowed(self) -> str:
        return "auto, none or a fraction in [0, 1)"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip() in ("none", "auto"):
            return value.strip()
        return super().convert(value, param, ctx)


def _ranges(sc, result, engine: str, progress):
    """:func:`gcsim.sim.drift.mean_ranges` of a finished simulation: two more runs of the same engine and
    seed with the workers' CPU work ×(1 ± sd); without per-iteration rows (``--trace none``) the summary's
    means, without a sampling error."""
    import pandas as pd

    from gcsim.sim.drift import mean_ranges

    base = result.iterations
    if base is None or base.empty:
        base = pd.DataFrame({"scheme": result.summary["scheme"], "duration_s": result.summary["mean_s"]})
    return mean_ranges(sc, base, lambda s: simulate_with(s, engine, trace="iterations", progress=progress).iterations)


def _exact_text(label: str) -> str:
    """``yes`` for a scheme that decodes the full gradient, ``no`` for an approximate one (its iteration
    is faster because it drops gradients: the speedup is not comparable), ``?`` for an unknown label."""
    from gcsim.errors import SchemeError
    from gcsim.schemes import scheme_class

    try:
        return "yes" if scheme_class(str(label).split(" ")[0]).exact else "no"
    except SchemeError:  # a label the registry does not know
        return "?"


def refusal_lines(refusals: dict) -> list[str]:
    """One line per scheme whose decoder refused arrived sets at run time (issue 16): how many
    iterations waited past a refusal, and the first refused pattern with its reason."""
    out = []
    for label, items in refusals.items():
        if items:
            it, ref = items[0]
            out.append(f"{label}: {len({i for i, _ in items})} iterations waited past a refused decode "
                       f"({len(items)} refusals; first: iteration {it}, arrived {list(ref.arrived)}: {ref.reason})")
    return out


class _Given(str):
    def __repr__(self) -> str:
        return str(self)


def stats_t_ratio(dof: float) -> float:
    """Student's t 97.5 % quantile with ``dof`` degrees of freedom over the normal one (1.96)."""
    from scipy import stats

    return float(stats.t.ppf(0.975, dof) / stats.norm.ppf(0.975))


@click.command("simulate")
@click.argument("scenario", metavar="SCENARIO")
@click.option("--out", "out_dir", default=None, metavar="DIR",
              help=f"Run directory to create (default {DEFAULT_SIM_ROOT}/<scenario>-<UTC timestamp>/).")
@click.option("--iterations", type=IntOption(lo=1), default=None, help="Override the scenario's iterations (>= 1).")
@click.option("--seed", type=IntOption(0, 2**32 - 1), default=None,
              help="Override the scenario's seed (0 <= seed < 2**32).")
@click.option("--schemes", "schemes", default=None, metavar="a,b",
              help="Comma-separated scheme names (or labels) of the scenario to run (default all).")
@model_option("--engine", model=simulate_with, field="engine", choices=ENGINES,
              help="auto: the vectorised engine whenever it models the scenario (cancel policy, no CPU sharing, "
                   "iterations that do not overlap), else SimPy; vector/simpy force one.")
@model_option("--trace", model=simulate_with, field="trace", choices=TRACE_LEVELS,
              help="Per-iteration/per-worker files to write: full (iterations.csv + workers.csv), iterations, "
                   "none (summary only; with the vector engine memory then does not grow with workers).")
@click.option("--speed-drift", "speed_drift", type=_SpeedDrift(), default=None, metavar="auto|SD|none",
              help="How far the CPU speed of the run you predict may lie from the scenario's, one standard "
                   "deviation as a fraction in [0, 1) (0.075 = 7.5 %): each scheme's expected mean gets a 95 % "
                   "range (two more simulations; 0: the simulation's sampling error alone). auto, the default: the "
                   "scenario's workload.speed_drift, which gcsim calibrate measures and writes (no range "
                   "without one); none: no range.")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr [default: if a terminal].")
def command(scenario, out_dir, iterations, seed, schemes, engine, trace, speed_drift, progress):
    """Simulate SCENARIO (YAML) and report the iteration-time distribution of every scheme.

    Writes config.yaml, summary.csv, iterations.csv, workers.csv, cdf.png, bars.png and meta.json;
    with a speed drift (workload.speed_drift or --speed-drift) also prediction_range.csv: each scheme's
    mean with its 95 % range on another run of the machine. A bad scenario or option exits with
    status 2 and creates nothing.
    """
    from gcsim.rundir import new_run_dir
    from gcsim.scenario import load_scenario
    from gcsim.sim.engine import apply_overrides
    from gcsim.sim.output import write_sim_run

    from gcsim.errors import ConfigError

    if progress is None:
        progress = sys.stderr.isatty()
    sc = load_scenario(scenario)
    wanted = schemes.split(",") if schemes is not None else None
    try:
        sc = apply_overrides(sc, schemes=wanted, iterations=iterations, seed=seed)
    except ConfigError as e:
        if e.field in ("schemes", "iterations", "seed"):  # they came from the options: name the option
            raise ConfigError(f"--{e.field}", e.allowed, e.given) from None
        raise
    auto_without_drift = speed_drift == "auto" and sc.workload.speed_drift is None
    speed_drift = None if speed_drift == "auto" else speed_drift  # None: the scenario's own
    if speed_drift is not None:
        from gcsim.scenario import SpeedDrift

        drift = None if speed_drift == "none" else SpeedDrift(sd=speed_drift)
        sc = sc.model_copy(update={"workload": sc.workload.model_copy(update={"speed_drift": drift})})
    with sigterm_as_interrupt():  # SIGTERM leaves what Ctrl-C leaves: no run dir, exit 143
        # created (exclusively) before simulating: a bad --out fails now, parallel runs never share one
        run = new_run_dir(out_dir, root=DEFAULT_SIM_ROOT, prefix=sc.name)
        try:
            result = simulate_with(sc, engine, trace=trace, progress=progress)
            t_range = time.perf_counter()
            ranges = _ranges(sc, result, engine, progress) if sc.workload.speed_drift is not None else None
            range_s = time.perf_counter() - t_range
            path = write_sim_run(result, sc, run, ranges=ranges)
        except MemoryError:
            run.discard()
            raise ConfigError("iterations", "a run that fits in memory (fewer iterations, workers or schemes)",
                              _Given(f"{sc.iterations} (out of memory)")) from None
        except OSError as e:
            run.discard()
            raise ConfigError("--out", "a directory the run can be written to",
                              _Given(f"{str(run.path)!r} ({e.strerror or type(e).__name__})")) from None
        except BaseException:
            run.discard()
            raise
    click.echo(f"{sc.name}: n={sc.n_workers}, {sc.iterations} iterations, seed {sc.seed}, policy {sc.policy} "
               f"(simulated in {result.wall_s:.1f} s"
               f"{f' + {range_s:.1f} s for the range' if ranges is not None and range_s >= 0.05 else ''}, "
               f"engine {result.engine}"
               f"{' because of ' + result.engine_note if result.engine_note else ''})")
    click.echo(format_table(result.summary, ranges))
    if ranges is not None:
        d = sc.workload.speed_drift
        source = "--speed-drift" if speed_drift is not None else "the scenario's workload.speed_drift"
        if d.sd == 0:
            click.echo(f"mean_95%_range_s: this simulation's sampling error alone (speed drift 0, {source}; "
                       f"prediction_range.csv)")
        else:
            measured = d.dof is not None and speed_drift is None  # estimated by gcsim calibrate, not given
            click.echo(f"mean_95%_range_s: the expected mean on this machine at another time, its CPU speed "
                       f"drifting by {d.sd * 100:.3g} % (one SD"
                       f"{'' if d.dof is None else f', {d.dof:g} degrees of freedom'}; {source}), with this "
                       f"simulation's sampling error (prediction_range.csv). Not in it: one run's own straggler "
                       f"luck (a few hundred iterations: several %) and the model's error (1-3 % on our VM)"
                       + ("; a drift measured on one run's own blocks under-states the drift between runs (1.4x on "
                          "our VM)" if measured else "") + ": docs/validation/README.md findings 25-27.")
            if d.dof is not None and d.dof < 3:
                click.echo(f"note: the drift was estimated on {d.dof:g} degrees of freedom (calibration runs that "
                           f"disagree): Student's t widens the range {stats_t_ratio(d.dof):.1f}x over a known "
                           f"drift; one more calibration run narrows it")
        short = [str(k) for k, v in zip(ranges["scheme"], ranges["sampling_se_s"]) if not v == v]  # NaN
        if short:
            click.echo(f"note: no sampling error in the range of {', '.join(short)}: fewer than 4 iterations "
                       f"(batch means need 2 batches of 2); the range is the drift's alone")
    elif auto_without_drift:  # asked for by name (the default says nothing): say why there is no range
        click.echo("no mean_95%_range_s: the scenario has no workload.speed_drift (gcsim calibrate writes one "
                   "from a run of at least 3 blocks of 20 iterations); give one with --speed-drift 0.075")
    for line in refusal_lines(result.refusals):
        click.echo(line)
    click.echo(f"wrote {path}")
