"""The one error hierarchy of gcsim.

Every error a user can cause derives from :class:`GcsimError`; the CLI turns any of them into a
one-line message on stderr and exit status 2 (no traceback).

    GcsimError
    ├── ConfigError        bad scenario / CLI configuration (names the field path)
    ├── SchemeError        bad scheme name or parameters
    │   └── NotDecodableError  (internal) a decode was asked of an arrival set that cannot decode
    ├── DataError          missing or malformed data set on disk
    ├── RunDirError        missing, half-written or incompatible run directory / trace
    └── RunFailedError     a real run had to stop (e.g. more than s workers lost)
"""

from __future__ import annotations


class GcsimError(Exception):
    """Base class of every error gcsim raises on purpose."""


def describe(field: str, allowed: str, given: object) -> str:
    """Return the one-line message ``"<field>: expected <allowed>, got <given>"``.

    All user-facing validation messages use this shape so they name the field, the allowed values
    and the value that was given.
    """
    return f"{field}: expected {allowed}, got {given!r}"


class ConfigError(GcsimError, ValueError):
    """A configuration value (scenario file, CLI option) is invalid."""

    def __init__(self, field: str, allowed: str | None = None, given: object = None, message: str | None = None):
        self.field = field
        self.allowed = allowed
        self.given = given
        super().__init__(message if message is not None else describe(field, allowed or "?", given))


class SchemeError(GcsimError, ValueError):
    """An unknown scheme name or parameters that a scheme refuses.

    Build it with :meth:`param` so the message names the parameter, what is allowed and what was
    given, e.g. ``scheme gc-fr: s: expected s+1 dividing n=8, got 2``.
    """

    @classmethod
    def param(cls, scheme: str, field: str, allowed: str, given: object) -> "SchemeError":
        return cls(f"scheme {scheme}: {describe(field, allowed, given)}")


class NotDecodableError(SchemeError):
    """Raised by :meth:`Scheme.decode_or_raise` when the arrived messages cannot be decoded."""


class DataError(GcsimError):
    """A data set on disk is missing, incomplete or malformed."""


class RunDirError(GcsimError):
    """A run directory is missing files, half-written, or of another trace-format version."""


class RunFailedError(GcsimError):
    """A real run could not continue (e.g. more than s workers are gone)."""


class RunStoppedError(RunFailedError):
    """A run stopped by SIGINT or SIGTERM where it cannot continue with ``--resume`` (an allreduce run;
    a run stopped before its first iteration). The CLI prints it on one line like any error but exits
    with ``128 +`` the signal's number (130, 143; :mod:`gcsim.signals`), not 2: the command was stopped,
    the input was not bad."""
