"""Click parameter types whose bad values are one-line :class:`~gcsim.errors.ConfigError` messages.

Click reports a bad option value as a three-line usage error; these types raise a ConfigError
instead, which :func:`gcsim.cli.main` prints as ``gcsim: error: --iterations: expected an integer
>= 1, got '0'`` with exit status 2 (field, allowed values, given value on one line).
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import typing
from typing import Any, Literal

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


class FloatOption(click.ParamType):
    """A finite number option in ``[lo, hi]`` (``[lo, hi)`` with ``hi_open``).

    Raises (from :meth:`convert`):
        ConfigError: the value is not a finite number or is out of range; the field is the option name.
    """

    name = "number"

    def __init__(self, lo: float, hi: float, *, hi_open: bool = False):
        self.lo, self.hi, self.hi_open = float(lo), float(hi), hi_open

    def _allowed(self) -> str:
        return f"a number in [{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"

    def convert(self, value, param, ctx) -> float:
        field = (param.opts[0] if param is not None and param.opts else "value")
        if isinstance(value, bool):
            raise ConfigError(field, self._allowed(), value)
        try:
            number = float(value) if isinstance(value, (int, float)) else float(str(value).strip())
        except ValueError:
            raise ConfigError(field, self._allowed(), value) from None
        if not math.isfinite(number) or number < self.lo or number > self.hi or (self.hi_open and number == self.hi):
            raise ConfigError(field, self._allowed(), value)
        return number

    def get_metavar(self, param, ctx=None) -> str:  # click >= 8.2 passes ctx
        return "NUMBER"

    def __repr__(self) -> str:
        return f"FloatOption({self.lo}, {self.hi}, hi_open={self.hi_open})"


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
        if param.is_flag and isinstance(value, bool):  # --flag / --no-flag: the spelling that gives value
            flags = param.opts if value else param.secondary_opts
            if flags:
                parts.append(flags[0])
            continue
        parts += [param.opts[0], str(value)]
    return " ".join(shlex.quote(str(p)) for p in parts)


# ----------------------------------------------------------------------------------- model defaults
def field_default(model: type, name: str) -> Any:
    """The default of field ``name`` of ``model``, a pydantic model class (``model_fields``) or a
    dataclass, so that a CLI option states the model's default instead of a copy of it.

    Raises:
        KeyError: ``model`` has no field ``name``, or the field has no default.
    """
    fields = getattr(model, "model_fields", None)
    if fields is not None:
        if name not in fields or fields[name].is_required():
            raise KeyError(f"{model.__name__}.{name}: no such field with a default")
        return fields[name].get_default(call_default_factory=True)
    for f in dataclasses.fields(model):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            break
    raise KeyError(f"{model.__name__}.{name}: no such field with a default")


def parameter_default(func, name: str) -> Any:
    """The default of keyword ``name`` of ``func`` (e.g. ``simulate_with``'s ``engine``), so that a CLI
    option states the function's default instead of a copy of it.

    Raises:
        KeyError: ``func`` has no parameter ``name`` with a default.
    """
    import inspect

    param = inspect.signature(func).parameters.get(name)
    if param is None or param.default is inspect.Parameter.empty:
        raise KeyError(f"{func.__name__}({name}=...): no such parameter with a default")
    return param.default


def field_choices(model: type, name: str) -> list[str]:
    """The allowed values of field ``name`` of ``model`` (pydantic model or dataclass) annotated
    ``Literal[...]`` (or ``Optional[Literal[...]]``), in their declared order.

    Raises:
        KeyError: no such field; TypeError: the field is not a ``Literal``.
    """
    hint = typing.get_type_hints(model)[name]
    args = [hint] if typing.get_origin(hint) is Literal else list(typing.get_args(hint))
    for a in args:
        if typing.get_origin(a) is Literal:
            return [str(v) for v in typing.get_args(a)]
    raise TypeError(f"{model.__name__}.{name}: expected a Literal field, got {hint!r}")


def model_option(*param_decls: str, model, field: str, choices=False, **attrs):
    """``click.option(*param_decls, **attrs)`` whose default is ``model``'s default of ``field``, shown in
    the help: ``model`` is a pydantic model or dataclass (:func:`field_default`) or a function (the
    default of its keyword ``field``, :func:`parameter_default`). ``choices``: a sequence of allowed values
    (a ``click.Choice``), ``True`` for the values of the model field's ``Literal`` (:func:`field_choices`),
    or ``False``. ``attrs`` may not set ``default``.

    Raises:
        KeyError, TypeError: as :func:`field_default` / :func:`field_choices` (at import time, a bug).
    """
    if "default" in attrs:
        raise TypeError("model_option: the default comes from the model, not from attrs")
    if choices is True:
        attrs["type"] = click.Choice(field_choices(model, field))
    elif choices:
        attrs["type"] = click.Choice(list(choices))
    attrs.setdefault("show_default", True)
    is_model = isinstance(model, type)
    default = field_default(model, field) if is_model else parameter_default(model, field)
    return click.option(*param_decls, default=default, **attrs)
