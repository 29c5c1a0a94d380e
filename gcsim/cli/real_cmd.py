"""``gcsim real``: measure iteration time of a gradient-coding scheme with a Ray parameter server
training a CNN on CIFAR-10 (see :mod:`gcsim.real.runner`)."""

from __future__ import annotations

import shlex
import sys
from functools import partial
from pathlib import Path

import click

from gcsim.cli.options import field_choices, field_default
from gcsim.real.config import RealConfig
from gcsim.signals import interrupted_exit_status
from gcsim.validation import POLICIES


def _default(name: str) -> str:
    """``[<RealConfig's default of name>]`` for the help (the option itself defaults to None: not given,
    so that a ``--resume`` keeps the run's saved value)."""
    value = field_default(RealConfig, name)
    return f"[{value:g}]" if isinstance(value, float) else f"[{value}]"


@click.command(name="real")
@click.option("--scheme", default=None, help="Scheme CLI name (see `gcsim schemes`), e.g. cce-fr; `allreduce`: the "
              "all-reduce baseline (Ray Train, gloo; gcsim/real/allreduce.py).")
@click.option("--scenario", "scenario_path", type=click.Path(path_type=Path), default=None,
              help="Scenario YAML with the stragglers, policy and defaults [default: scenarios/real_default.yaml].")
@click.option("--workers", type=int, default=None, help="Number of workers n (= partitions) [scenario].")
@click.option("--s", "s", type=int, default=None, help="Stragglers tolerated [scenario's entry for the scheme].")
@click.option("--m", "m", type=int, default=None, help="Communication reduction [scenario's entry for the scheme].")
@click.option("--iterations", type=int, default=None, help="SGD iterations [scenario].")
@click.option("--batch-size", type=int, default=None, help=f"Global mini-batch B, split over the n partitions {_default('batch_size')}.")
@click.option("--lr", type=float, default=None, help=f"SGD learning rate {_default('lr')}.")
@click.option("--model", type=click.Choice(field_choices(RealConfig, "model")), default=None,
              help=f"Model {_default('model')}.")
@click.option("--eval-every", type=int, default=None, help=f"Evaluate on the test set every E iterations {_default('eval_every')}.")
@click.option("--checkpoint-every", type=int, default=None, help=f"Checkpoint every K iterations {_default('checkpoint_every')}.")
@click.option("--seed", type=int, default=None, help="Seed of model, data sampling and stragglers [scenario].")
@click.option("--policy", type=click.Choice(POLICIES), default=None,
              help="Straggler-work policy [scenario].")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help=f"Directory holding cifar-10-batches-py {_default('data_dir')}.")
@click.option("--max-train-samples", type=int, default=None, help="Use only the first N training images.")
@click.option("--address", default=None, help="Join this Ray cluster (host:port of its head) instead of starting "
              "a private local Ray; with --resume, overrides the saved address.")
@click.option("--connect-timeout", "connect_timeout_s", type=float, default=None,
              help=f"Seconds to reach --address {_default('connect_timeout_s')}.")
@click.option("--placement-timeout", "placement_timeout_s", type=float, default=None,
              help=f"Seconds to place the workers' placement group {_default('placement_timeout_s')}.")
@click.option("--setup-timeout", "setup_timeout_s", type=float, default=None,
              help=f"Seconds for every worker to start and load its data {_default('setup_timeout_s')}.")
@click.option("--fetch-timeout", "fetch_timeout_s", type=float, default=None,
              help=f"Seconds to fetch a used reply before its worker counts as lost {_default('fetch_timeout_s')}.")
@click.option("--worker-cpus", type=float, default=None,
              help="Logical CPUs per worker actor [the most, at most 1, that fits every node's CPUs].")
@click.option("--placement", type=click.Choice(field_choices(RealConfig, "placement")), default=None,
              help=f"Spread the workers over the nodes or pack them onto few {_default('placement')}.")
@click.option("--workers-per-process", "workers_per_process", default=None, metavar="K|auto",
              help="Logical workers per Ray actor process: K share one process and one torch import (each in "
                   "its own thread; CPU measured per thread); 1: a process per worker [auto: 1 up to 16 workers "
                   "per node, else the fewest per process that keep 16 processes per node].")
@click.option("--ray-num-cpus", type=int, default=None, help="Logical CPUs of the embedded Ray [n workers].")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory [runs/real/<scheme>-<UTC timestamp>].")
@click.option("--resume", "resume_dir", type=click.Path(path_type=Path), default=None,
              help="Continue the run in this directory from its checkpoint (with it only --iterations, "
                   "--address, the timeouts, --worker-cpus, --placement and --workers-per-process; other "
                   "options are refused: the run keeps its own).")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr [default: if a terminal].")
def command(scheme, scenario_path, workers, s, m, iterations, batch_size, lr, model, eval_every, checkpoint_every,
            seed, policy, data_dir, max_train_samples, address, connect_timeout_s, placement_timeout_s, setup_timeout_s,
            fetch_timeout_s, worker_cpus, placement, workers_per_process, ray_num_cpus, out_dir, resume_dir,
            progress):
    """Train on CIFAR-10 with a Ray parameter server using a gradient-coding scheme and measure
    the iteration time under the scenario's injected stragglers.

    \b
    gcsim data prepare --source ~/datasets/cifar10-jpeg.zip   # once
    gcsim real --scheme cce-fr
    gcsim real --scheme uncoded --iterations 100 --out runs/real/uncoded-test
    gcsim real --resume runs/real/cce-fr-20250101T000000Z
    """
    from gcsim.errors import ConfigError, GcsimError
    from gcsim.real.config import resolve_config
    from gcsim.real.runner import resume_real, run_real

    if workers_per_process is not None and workers_per_process.strip().isdigit():
        workers_per_process = int(workers_per_process)  # else "auto" or a bad value RealConfig names
    cluster = dict(address=address, connect_timeout_s=connect_timeout_s, placement_timeout_s=placement_timeout_s,
                   setup_timeout_s=setup_timeout_s, fetch_timeout_s=fetch_timeout_s, worker_cpus=worker_cpus,
                   placement=placement, workers_per_process=workers_per_process)
    if progress is None:
        progress = sys.stderr.isatty()
    if resume_dir is not None:
        fixed = {"--scheme": scheme, "--scenario": scenario_path, "--workers": workers, "--s": s, "--m": m,
                 "--batch-size": batch_size, "--lr": lr, "--model": model, "--eval-every": eval_every,
                 "--checkpoint-every": checkpoint_every, "--seed": seed, "--policy": policy, "--data-dir": data_dir,
                 "--max-train-samples": max_train_samples, "--ray-num-cpus": ray_num_cpus, "--out": out_dir}
        for option, value in fixed.items():
            if value is not None:  # the run keeps its own: refused rather than silently ignored
                raise ConfigError(option, "no value with --resume (the run keeps its own; only --iterations, "
                                  "--address, the timeouts, --worker-cpus, --placement and --workers-per-process "
                                  "may change)", str(value) if isinstance(value, Path) else value)
        from gcsim.real.allreduce import ALLREDUCE

        from gcsim.real.rundir import RealRunDir

        if not resume_dir.is_dir():
            from gcsim.validation import GivenLabel

            raise ConfigError("--resume", "the directory of a gcsim real run",
                              GivenLabel(f"{str(resume_dir)!r} (no such directory)"))

        try:
            saved = RealRunDir(resume_dir).scheme()
        except GcsimError:
            saved = None  # resume_real says what is wrong with the directory
        if saved == ALLREDUCE:
            raise ConfigError("--resume", "a parameter-server run (an allreduce run cannot be resumed: start a new "
                              "one)", str(resume_dir))
        result = resume_real(resume_dir, iterations=iterations, progress=progress, overrides=cluster)
    else:
        if scheme is None:
            raise ConfigError("--scheme", "a scheme name (see `gcsim schemes`)", None)
        from gcsim.real.allreduce import ALLREDUCE, resolve_allreduce_config, run_allreduce

        allreduce = scheme == ALLREDUCE
        if allreduce and workers_per_process is not None:
            raise ConfigError("--workers-per-process", message=(
                f"--workers-per-process: expected no value with --scheme allreduce (Ray Train runs one process "
                f"per rank), got {workers_per_process!r}"))
        try:
            spec = (resolve_allreduce_config if allreduce else partial(resolve_config, scheme))(
                scenario_path, n_workers=workers, s=s, m=m, iterations=iterations, batch_size=batch_size,
                lr=lr, model=model, eval_every=eval_every, checkpoint_every=checkpoint_every, seed=seed,
                policy=policy, data_dir=None if data_dir is None else str(data_dir),
                max_train_samples=max_train_samples, ray_num_cpus=ray_num_cpus, **cluster)
        except ConfigError as e:
            if e.field == "scenario" and scenario_path is not None:  # the file given with --scenario
                raise ConfigError("--scenario", e.allowed, e.given) from None
            raise
        result = (run_allreduce if allreduce else run_real)(spec, out_dir, progress=progress)
    sm = result.summary
    click.echo(f"run directory: {result.run_dir}")
    sessions = getattr(result, "sessions", 1)
    total = (f"; {result.total_wall_s:.1f} s over its {sessions} sessions" if sessions > 1 and result.total_wall_s
             else "")
    click.echo(f"status: {result.status}, iterations: {result.iterations_done}, wall: {result.wall_s:.1f} s"
               f"{' this session' if total else ''}{total}")
    if sm:
        click.echo(f"iteration time (s): mean {sm['mean_s']:.4f}  p50 {sm['p50_s']:.4f}  p95 {sm['p95_s']:.4f}  "
                   f"p99 {sm['p99_s']:.4f}")
    if result.test_accuracy == result.test_accuracy:
        at = getattr(result, "test_iteration", None)
        click.echo(f"test accuracy: {result.test_accuracy:.4f}"
                   + (f" (measured after {at + 1} iterations)" if at is not None else ""))
    dead = (sm or {}).get("dead_workers")
    if dead == dead and dead:  # not NaN, not 0
        click.echo(f"workers lost: {int(dead)} (status.json dead_workers says which, when and why)")
    late = getattr(result, "late_signal", None)
    if late:  # every iteration was done: nothing to resume, so the command succeeded (exit 0)
        click.echo(f"{late} arrived after the last iteration: the run is complete (status.json "
                   f"signal_after_last_iteration); its end-of-run CPU-speed probe was skipped")
    if result.status == "interrupted":
        click.echo(f"continue with: gcsim real --resume {shlex.quote(str(result.run_dir))}")
        click.get_current_context().exit(interrupted_exit_status())
