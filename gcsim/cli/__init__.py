"""The ``gcsim`` command line. Each sub-command lives in its own module of this package and exposes
a click command named ``command``; :func:`main` turns any :class:`GcsimError` into a one-line
message and exit status 2 (no traceback)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import warnings

import click

from gcsim import __version__
from gcsim.errors import GcsimError, RunStoppedError
from gcsim.signals import interrupted_exit_status, stop_line
from gcsim.signals import reset as reset_signal

#: top-level modules of the optional ``real`` extra (pyproject.toml); a command that needs one of them
#: and runs without it gets a one-line error saying how to install them.
OPTIONAL_MODULES = {"torch", "torchvision", "ray", "PIL"}

# sub-command module -> command name (modules are imported lazily so `gcsim simulate` never imports
# torch or ray).
_SUBCOMMANDS = {
    "schemes": "gcsim.cli.schemes_cmd",
    "simulate": "gcsim.cli.simulate_cmd",
    "real": "gcsim.cli.real_cmd",
    "data": "gcsim.cli.data_cmd",
    "compare": "gcsim.cli.compare_cmd",
    "calibrate": "gcsim.cli.calibrate_cmd",
    "study": "gcsim.cli.study_cmd",
    "fit": "gcsim.cli.fit_cmd",
    "advise": "gcsim.cli.advise_cmd",
    "sweep": "gcsim.cli.sweep_cmd",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx):
        return [name for name, mod in _SUBCOMMANDS.items() if importlib.util.find_spec(mod) is not None]

    def get_command(self, ctx, name):
        mod = _SUBCOMMANDS.get(name)
        if mod is None or importlib.util.find_spec(mod) is None:
            return None
        return importlib.import_module(mod).command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gcsim")
def cli():
    """gcsim: how long a synchronous distributed training step takes when workers straggle, and which
    gradient-coding scheme to use about it.

    \b
    gcsim schemes                          list the gradient-coding schemes
    gcsim schemes check gc-cr --n 10 --s 2 verify a scheme decodes every straggler pattern
    gcsim simulate scenarios/heavy_tail.yaml   predict iteration time per scheme
    gcsim sweep SWEEP.yaml                 simulate a grid over n, s, m, schemes, stragglers
    gcsim fit TRACE.csv --out my.yaml      a scenario fitted to measured per-worker times
    gcsim advise my.yaml                   rank every scheme and (s, m) for your cluster
    gcsim data prepare --source cifar10-jpeg.zip   convert CIFAR-10 for gcsim real
    gcsim real --scheme cce-fr             measure it with Ray + PyTorch on CIFAR-10
    gcsim compare                          check predictions against measured runs
    gcsim calibrate RUN --out my.yaml      a scenario calibrated from one measured run
    gcsim study --protocol cross-scheme    measure every scheme, predict each from one
    """


#: click's own wording of a bad value (its INT, FLOAT, Choice and ranges) -> what gcsim's errors say
_CLICK_BAD_VALUE = [
    (re.compile(r"^'?(?P<got>.*?)'? is not a valid integer( range)?\.$"), lambda m: "an integer"),
    (re.compile(r"^'?(?P<got>.*?)'? is not a valid float( range)?\.$"), lambda m: "a number"),
    (re.compile(r"^'?(?P<got>.*?)'? is not one of (?P<choices>.*)\.$"), lambda m: f"one of {m['choices']}"),
    (re.compile(r"^'?(?P<got>.*?)'? is not in the range (?P<range>.*)\.$"), lambda m: f"a value in {m['range']}"),
]


def _bad_parameter_line(e: click.UsageError) -> str | None:
    """``--opt: expected ..., got '...'`` for a value click's own types refused (``'abc' is not a valid
    integer``), the form of every other gcsim error (a review found click's wording in a few options);
    None for other usage errors."""
    if not isinstance(e, click.BadParameter) or e.param is None or not getattr(e.param, "opts", None):
        return None
    for pattern, allowed in _CLICK_BAD_VALUE:
        m = pattern.match(str(e.message).strip())
        if m:
            return f"{e.param.opts[0]}: expected {allowed(m)}, got {m['got']!r}"
    return None


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Returns the exit status (0 ok, 1 check failed, 2 bad input, 128 + the signal's
    number when interrupted: 130 after Ctrl-C, 143 after SIGTERM, :mod:`gcsim.signals`)."""
    args = sys.argv[1:] if argv is None else list(argv)
    reset_signal()  # the exit status of an interrupted command names its own signal (gcsim/signals.py)
    if not args:  # plain `gcsim`: the help, not an error
        with click.Context(cli, info_name="gcsim") as ctx:
            click.echo(cli.get_help(ctx))
        return 0
    try:
        with warnings.catch_warnings(record=True) as caught:
            # held back: printed after a successful command, dropped before a one-line error
            warnings.simplefilter("default")
            from gcsim.threads import one_blas_thread

            with one_blas_thread():  # decodes are many small solves: one BLAS thread (gcsim/threads.py)
                rv = cli.main(args=args, prog_name="gcsim", standalone_mode=False)
        for w in caught:
            click.echo(warnings.formatwarning(w.message, w.category, w.filename, w.lineno).rstrip(), err=True)
        return int(rv or 0)
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.UsageError as e:  # one line, like every other error (exit 2)
        where = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
        click.echo(f"gcsim: error: {_bad_parameter_line(e) or e.format_message()}{where}", err=True)
        return e.exit_code
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.exceptions.Abort:
        click.echo(stop_line(), err=True)
        return interrupted_exit_status()
    except RunStoppedError as e:  # stopped by a signal where it cannot resume: not bad input
        click.echo(f"gcsim: error: {e}", err=True)
        return interrupted_exit_status()
    except GcsimError as e:
        click.echo(f"gcsim: error: {e}", err=True)
        return 2
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in OPTIONAL_MODULES:
            raise
        click.echo(f"gcsim: error: this command needs the optional 'real' dependencies (torch, torchvision, "
                   f"ray): missing module {e.name!r}; install them with: pip install -e '.[real]'", err=True)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def entry() -> None:
    """setuptools console-script wrapper: exits with :func:`main`'s status (with ``os._exit`` once the
    output is flushed when a private Ray died under the run, ``gcsim.real.runner.ray_abandoned``: the
    interpreter's normal exit would crash in the Ray driver's teardown)."""
    rv = main()
    runner = sys.modules.get("gcsim.real.runner")
    if runner is not None and getattr(runner, "ray_abandoned", False):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rv)
    sys.exit(rv)
