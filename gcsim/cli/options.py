"""Click parameter types whose bad values are one-line :class:`~gcsim.errors.ConfigError` messages.

Click reports a bad option value as a three-line usage error; these types raise a ConfigError
instead, which :func:`gcsim.cli.main` prints as ``gcsim: error: --iterations: expected an integer
>= 1, got '0'`` with exit status 2 (field, allowed values, given value on one line).
"""

from __future__ import annotations

import shlex

import click

from gcsim.errors import ConfigError


class IntOption(click.ParamType):
    """An integer option, optionally bounded: ``lo <= value`` and ``value <= hi`` (None: unbounded).

    Raises (from :meth:`convert`):
        ConfigError: the value is not an integer or is out of range; the field is the option name
            (e.g. ``--iterations``).
    """

    name = "integer"

    def __init__(self, lo: int | None = None, hi: int | None = None):
        self.lo, self.hi = lo, hi

    def _allowed(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"an integer in [{self.lo}, {self.hi}]"
        if self.lo is not None:
            return f"an integer >= {self.lo}"
        if self.hi is not None:
            return f"an integer <= {self.hi}"
        return "an integer"

    def convert(self, value, param, ctx) -> int:
        field = (param.opts[0] if param is not None and param.opts else "value")
        if isinstance(value, bool):
            raise ConfigError(field, self._allowed(), value)
        if isinstance(value, int):
            number = value
        else:
            try:
                number = int(str(value).strip(), 10)
            except ValueError:
                raise ConfigError(field, self._allowed(), value) from None
        if (self.lo is not None and number < self.lo) or (self.hi is not None and number > self.hi):
            raise ConfigError(field, self._allowed(), number)
        return number

    def get_metavar(self, param, ctx=None) -> str:  # click >= 8.2 passes ctx
        return "INTEGER"

    def __repr__(self) -> str:
        return f"IntOption({self.lo}, {self.hi})"


def command_line(ctx: click.Context, name: str, positional: list[str]) -> str:
    """The invocation ``gcsim <name> <positional...> [--opt value ...]`` rebuilt from the parsed
    parameters that differ from their defaults (``--progress`` left out), shell-quoted; recorded in
    reports so a result says how to reproduce it."""
    parts = ["gcsim", name, *positional]
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name == "progress":
            continue
        value = ctx.params.get(param.name)
        if value is None or value == param.default:
            continue
        if isinstance(value, (tuple, list)):  # a repeatable option: once per value
            for v in value:
                parts += [param.opts[0], str(v)]
            continue
        parts += [param.opts[0], str(value)]
    return " ".join(shlex.quote(str(p)) for p in parts)
