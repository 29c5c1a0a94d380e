"""Which signal stopped a command, for its exit status: ``128 + the signal's number``, the shell's
convention (130 after Ctrl-C / SIGINT, 143 after SIGTERM; POSIX ``sh``, "Exit Status for Commands";
Slurm reports a job step's status so, and ``timeout --preserve-status`` passes it on).

gcsim's SIGINT/SIGTERM handlers (``gcsim real``'s stop flag, :func:`sigterm_as_interrupt` around a
sweep's points and a study's runs) call :func:`record`; the CLI asks :func:`interrupted_exit_status`
when a command ends interrupted, and calls :func:`reset` at the start of every command (its ``main``
may run several in one process).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator

_last_signum: int | None = None


def record(signum: int) -> None:
    """Remember ``signum`` (e.g. ``signal.SIGTERM``) as the signal that interrupted the command."""
    global _last_signum
    _last_signum = int(signum)


def reset() -> None:
    """Forget the recorded signal (a new command, or a new run of a study, starts)."""
    global _last_signum
    _last_signum = None


def stop_line() -> str:
    """The line a command prints when a signal stopped it: ``gcsim: stopped by SIGTERM`` after a recorded
    SIGTERM, else ``gcsim: aborted`` (Ctrl-C)."""
    if _last_signum is not None and _last_signum != int(signal.SIGINT):
        return f"gcsim: stopped by {signal.Signals(_last_signum).name}"
    return "gcsim: aborted"


def interrupted_exit_status() -> int:
    """``128 + signum`` of the recorded signal; 130 (SIGINT) when none was recorded (Ctrl-C reaches a
    command as Python's KeyboardInterrupt without a handler of ours)."""
    return 128 + (_last_signum if _last_signum is not None else int(signal.SIGINT))


@contextlib.contextmanager
def sigterm_as_interrupt(*, only_if_default: bool = False) -> Iterator[Callable[[], None]]:
    """While active, SIGTERM is recorded and raises KeyboardInterrupt, so a batch scheduler's stop leaves
    what Ctrl-C leaves (a resumable run, a removed half-made directory) instead of ending the process
    at once. Yields ``reinstall``: call it after ``ray.init``, whose driver installs its own SIGTERM
    handler (``sys.exit(15)``). The previous handler is put back on exit.

    Args:
        only_if_default: leave SIGTERM alone unless it still has its default action (a caller's own
            handler, e.g. a sweep's or a study's around this run, stays in charge).
    Outside the main thread (where Python cannot set handlers) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread() or (
            only_if_default and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield lambda: None
        return

    def handler(signum, frame):
        record(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield lambda: signal.signal(signal.SIGTERM, handler)
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = ["interrupted_exit_status", "record", "reset", "sigterm_as_interrupt", "stop_line"]
