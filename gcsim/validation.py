"""Config validation shared by every pydantic model of gcsim: field types, the in-validator error, and
the translation of a pydantic ``ValidationError`` into one :class:`gcsim.errors.ConfigError` line
(``<field path>: expected <allowed>, got <given>``).

:mod:`gcsim.latency` (distribution specs), :mod:`gcsim.scenario` and :mod:`gcsim.real.config` import
from here; nothing here imports them, so the three form no import cycle (issue 11).

Tagged unions (``Annotated[Union[Annotated[X, Tag(t)], ...], Discriminator(...)]``, e.g.
:data:`gcsim.latency.DistSpec`) put their tag into pydantic's error location; tags start with
:data:`TAG_PREFIX`, are left out of the printed field path, and are resolved to their member model
by reading the union's own ``Tag`` annotations (no table to keep in step).
"""

from __future__ import annotations

import difflib
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictInt, Tag, ValidationError

from gcsim.errors import ConfigError

#: Prefix of the pydantic union tags (stripped from error paths).
TAG_PREFIX = "dist:"

NonNegFinite = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PosFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Probability = Annotated[float, Field(ge=0, le=1)]
NonNegInt = Annotated[StrictInt, Field(ge=0)]
PosInt = Annotated[StrictInt, Field(ge=1)]

#: What a worker's stale work does when the master has moved on: ``cancel`` (interrupted) or
#: ``carry-over`` (finishes, and the worker starts the next iteration late). The one declaration:
#: the scenario's ``policy`` field and ``gcsim real --policy`` (a click Choice of :data:`POLICIES`) use it.
Policy = Literal["cancel", "carry-over"]
#: The allowed values of :data:`Policy`, in order.
POLICIES: tuple[str, ...] = typing.get_args(Policy)


class SpecFieldError(ValueError):
    """Raised inside validators: ``field`` (dotted path relative to the model being validated),
    ``allowed`` (what the field accepts, in words), ``given`` (the value found)."""

    def __init__(self, field: str, allowed: str, given: Any):
        self.field, self.allowed, self.given = field, allowed, given
        super().__init__(f"{field}: expected {allowed}, got {given!r}")


class GivenLabel(str):
    """A string whose repr is itself, for ``given`` values that are descriptions, not values
    (``got missing``, ``got unknown key 'x'``)."""

    def __repr__(self) -> str:
        return str(self)


#: ``given`` of a required field that is absent.
MISSING = GivenLabel("missing")


def config_error_from_validation(exc: ValidationError, prefix: str | None = None,
                                 root: Any = None) -> ConfigError:
    """Turn a pydantic ValidationError into one ConfigError (the first error).

    Args:
        exc: the error pydantic raised.
        prefix: field path prepended to the error's location (e.g. the scenario field a spec sits in).
        root: the model (or annotated type) that was validated, to name the keys a mapping allows;
            None names none.
    Returns:
        a :class:`ConfigError` whose message is ``<field path>: expected <allowed>, got <given>``.
    """
    errors = exc.errors(include_url=False)
    err = errors[0]
    if err.get("type") == "missing":  # a misspelt key shows as missing + unknown: name the unknown one (review)
        parent = tuple(err.get("loc", ()))[:-1]
        err = next((e for e in errors if e.get("type") == "extra_forbidden"
                    and tuple(e.get("loc", ()))[:-1] == parent), err)
    loc = tuple(err.get("loc", ()))
    path = _strip(loc)
    if prefix:
        path = [prefix] + path
    etype = err.get("type", "")
    given = err.get("input")
    ctx = err.get("ctx") or {}
    inner = ctx.get("error")
    if isinstance(inner, SpecFieldError):
        return ConfigError(_join(path + [inner.field]), inner.allowed, inner.given)
    field = _join(path) or "scenario"
    if etype == "extra_forbidden":
        model = _model_at(loc[:-1], root)
        allowed = f"one of the keys {', '.join(model.model_fields)}" if model is not None else "a known key"
        label = f"unknown key {path[-1]!r}" if path else "unknown key"
        close = difflib.get_close_matches(str(path[-1]), list(model.model_fields), n=1, cutoff=0.75) \
            if model is not None and path else []
        if close:
            label += f" (did you mean {close[0]!r}?)"
        return ConfigError(field, allowed, GivenLabel(label))
    if etype in ("model_type", "model_attributes_type", "dict_type"):
        model = _model_at(loc, root)
        if model is not None:
            return ConfigError(field, f"a mapping with the keys {', '.join(model.model_fields)}", given)
        return ConfigError(field, "a mapping", given)
    if etype == "missing":
        return ConfigError(field, "a value (required field)", MISSING)
    if etype == "dist_kind":
        if isinstance(given, dict):
            given = given.get("dist", MISSING)
        return ConfigError(_join(path + ["dist"]), "a mapping with a 'dist' key naming the distribution", given)
    if etype == "too_short":
        return ConfigError(field, f"at least {ctx.get('min_length', 1)} item(s)", given)
    msg = str(err.get("msg", "invalid value"))
    for pre in ("Input should be ", "Value error, ", "Assertion failed, "):
        if msg.startswith(pre):
            msg = msg[len(pre):]
    if msg.startswith("expected "):
        msg = msg[len("expected "):]
    return ConfigError(field, msg, given)


def _strip(loc: tuple) -> list:
    return [x for x in loc if not (isinstance(x, str) and x.startswith(TAG_PREFIX))]


def _join(parts: list) -> str:
    return ".".join(str(x) for x in parts)


def _tagged_member(union: Any, tag: str) -> Any:
    """The member of a tagged union annotated with ``Tag(tag)``, or None."""
    for member in typing.get_args(union):
        if typing.get_origin(member) is typing.Annotated:
            inner, *meta = typing.get_args(member)
            if any(isinstance(m, Tag) and m.tag == tag for m in meta):
                return inner
        else:
            found = _tagged_member(member, tag) if typing.get_origin(member) is typing.Union else None
            if found is not None:
                return found
    return None


def _model_at(loc: tuple, root: Any) -> type[BaseModel] | None:
    """Walk the types along an error location (union tags included) to the model it points into."""
    cur: Any = root
    for part in loc:
        cur = _unwrap(cur)
        if isinstance(part, str) and part.startswith(TAG_PREFIX):
            cur = _tagged_member(cur, part)
            continue
        if isinstance(part, int):
            args = typing.get_args(cur)
            cur = args[0] if args else None
            continue
        if isinstance(cur, type) and issubclass(cur, BaseModel) and part in cur.model_fields:
            cur = cur.model_fields[part].annotation
        else:
            return None
    cur = _unwrap(cur)
    return cur if isinstance(cur, type) and issubclass(cur, BaseModel) else None


def _unwrap(t: Any) -> Any:
    """``Annotated[X, ...]`` -> ``X``; ``Optional[X]`` -> ``X``; a real union is left as it is."""
    while True:
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            t = typing.get_args(t)[0]
        elif origin is typing.Union:
            args = [a for a in typing.get_args(t) if a is not type(None)]
            if len(args) != 1:
                return t
            t = args[0]
        else:
            return t


__all__ = ["GivenLabel", "MISSING", "NonNegFinite", "NonNegInt", "POLICIES", "Policy", "PosFinite", "PosInt", "Probability",
           "SpecFieldError", "TAG_PREFIX", "config_error_from_validation"]


def first_difference(a: Any, b: Any) -> tuple[tuple, Any, Any] | None:
    """Where two plain-data documents (dicts, lists, scalars: parsed YAML or JSON) first differ.

    Dict keys are visited in ``a``'s order, then ``b``'s extra keys; lists of the same length item by
    item; anything else (lists of different lengths included) compares with ``==``.

    Returns:
        ``(keys, a_value, b_value)``: the path of keys (dict keys, list indices) to the first
        difference and the two values there (None where a key is missing); None when equal.
    """
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            d = first_difference(a.get(key), b.get(key))
            if d:
                return (key, *d[0]), d[1], d[2]
        return None
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y)
            if d:
                return (i, *d[0]), d[1], d[2]
        return None
    return None if a == b else ((), a, b)
