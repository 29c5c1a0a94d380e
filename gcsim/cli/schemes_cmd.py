"""``gcsim schemes``: list the gradient-coding schemes, or verify one decodes every straggler pattern.

    gcsim schemes            (or: gcsim schemes list)
    gcsim schemes check gc-cr --n 10 --s 2 [--m 1] [--seed 0] [--max-patterns 100000] [--samples 2000]
                                           [--payload-dtype float64|float32]

``check`` exits 0 when every checked pattern decodes, 1 on the first failing pattern (printed),
2 on bad parameters (handled by :func:`gcsim.cli.main`).
"""

from __future__ import annotations

import math
import sys

import click

from gcsim.cli.options import IntOption, model_option
from gcsim.errors import SchemeError
from gcsim.schemes import make_scheme, scheme_class, scheme_names
from gcsim.schemes.base import ERROR_TOLERANCE
from gcsim.schemes.verify import verify_scheme


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def scheme_listing() -> str:
    """The table ``gcsim schemes`` prints: name, exact?, uses m?, constraints, reference."""
    rows = [["name", "exact", "uses m", "constraints", "reference"]]
    for name in scheme_names():
        cls = scheme_class(name)
        rows.append([name, "yes" if cls.exact else "no", "yes" if cls.uses_m else "no", cls.constraints, cls.reference])
    return _table(rows)


@click.group(name="schemes", invoke_without_command=True)
@click.pass_context
def command(ctx: click.Context) -> None:
    """List the gradient-coding schemes (name, exact?, uses m?, constraints, reference)."""
    if ctx.invoked_subcommand is not None:
        return
    click.echo(scheme_listing())


@command.command(name="list")
def list_schemes() -> None:
    """List the gradient-coding schemes (same as plain `gcsim schemes`)."""
    click.echo(scheme_listing())


class _GivenLabel(str):
    def __repr__(self) -> str:
        return str(self)


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3e}"


@command.command(name="check")
@click.argument("name")
@click.option("--n", "n", type=IntOption(), required=True, help="number of workers")
@click.option("--s", "s", type=IntOption(), required=True, help="stragglers tolerated")
@model_option("--m", "m", model=make_scheme, field="m", type=IntOption(), help="communication reduction (cce-* only)")
@model_option("--seed", model=make_scheme, field="seed", type=IntOption(),
              help="construction seed (gc-cr) and check seed")
@model_option("--max-patterns", model=verify_scheme, field="max_patterns", type=IntOption(),
              help="enumerate a straggler-set size exhaustively while C(n, size) is at most this")
@model_option("--samples", model=verify_scheme, field="samples", type=IntOption(),
              help="random straggler sets per size beyond --max-patterns")
@model_option("--payload-dtype", model=make_scheme, field="payload_dtype", choices=list(ERROR_TOLERANCE),
              help="precision of the coded messages (float64: the simulator; float32: gcsim real)")
@click.option("--progress/--no-progress", default=None, help="Progress bar on stderr [default: if a terminal].")
@click.pass_context
def check(ctx: click.Context, name: str, n: int, s: int, m: int, seed: int, max_patterns: int, samples: int,
          payload_dtype: str, progress: bool | None) -> None:
    """Verify scheme NAME decodes every straggler pattern of size <= s (structured worst cases first)."""
    from gcsim.schemes.patterns import format_kinds

    try:
        scheme = make_scheme(name, n=n, s=s, m=m, seed=seed, payload_dtype=payload_dtype)
        r = verify_scheme(scheme, max_patterns=max_patterns, samples=samples, seed=seed,
                          progress=sys.stderr.isatty() if progress is None else progress)
    except MemoryError:
        # the schemes hold dense (n x n) coefficients: a huge n cannot be built
        raise SchemeError.param(name, "n", "a number of workers whose n x n encoding fits in memory",
                                _GivenLabel(f"{n} (out of memory)")) from None
    how = []
    if r.exhaustive_sizes:
        how.append(f"all sets of size {', '.join(map(str, r.exhaustive_sizes))}")
    if r.sampled_sizes:
        how.append(f"contiguous and near-contiguous blocks at every shift, then {r.samples} random sets "
                   f"(seed {r.seed}) of size {', '.join(map(str, r.sampled_sizes))}")
    click.echo(f"scheme {r.scheme}: n={r.n} s={r.s} m={r.m} seed={seed} ({'exact' if r.exact else 'approximate'}, "
               f"{r.payload_dtype} payloads)")
    click.echo(f"patterns tried:  {r.patterns_tried} ({'; '.join(how)})")
    click.echo(f"by kind:         {format_kinds(r.kinds)}")
    if r.exact:
        click.echo(f"worst residual:  {_fmt(r.worst_residual)}  (max |a^T B_S - 1|, tolerance {r.residual_tolerance:g})")
        click.echo(f"worst rel error: {_fmt(r.worst_error)}  (decoded vs true sum of random gradients, "
                   f"{r.payload_dtype} payloads, tolerance {r.tolerance:g})")
    else:
        click.echo(f"worst rel error: {_fmt(r.worst_error)}  (decoded vs the scheme's rule, tolerance {r.tolerance:g})")
    click.echo(f"worst cond:      {r.worst_cond:.3e}")
    if r.passed:
        click.echo("PASS")
        return
    click.echo(f"FAIL: stragglers {list(r.failed_pattern)}: {r.failure}")
    ctx.exit(1)
