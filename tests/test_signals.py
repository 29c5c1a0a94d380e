"""gcsim/signals.py: the exit status of an interrupted command names its signal (128 + its number), and
SIGTERM stops a sweep's points or a study's runs as Ctrl-C does. Handlers are called directly: a real
signal to the pytest process would end the session if a handler regressed."""

import signal

import pytest

from gcsim.signals import interrupted_exit_status, record, reset, sigterm_as_interrupt, stop_line


def test_exit_status_is_128_plus_the_recorded_signal():
    reset()
    assert interrupted_exit_status() == 130  # nothing recorded: Ctrl-C reached Python's own handler
    record(signal.SIGTERM)
    assert interrupted_exit_status() == 143
    reset()
    assert interrupted_exit_status() == 130


def test_the_stop_line_names_the_signal():
    reset()
    assert stop_line() == "gcsim: aborted"  # Ctrl-C
    record(signal.SIGINT)
    assert stop_line() == "gcsim: aborted"
    record(signal.SIGTERM)
    assert stop_line() == "gcsim: stopped by SIGTERM"
    reset()


def test_sigterm_as_interrupt_records_raises_and_gives_the_handler_back():
    def callers_own(signum, frame):
        raise AssertionError("not while the guard is active")

    previous = signal.signal(signal.SIGTERM, callers_own)
    try:
        reset()
        with sigterm_as_interrupt() as reinstall:
            handler = signal.getsignal(signal.SIGTERM)
            with pytest.raises(KeyboardInterrupt):
                handler(signal.SIGTERM, None)
            assert interrupted_exit_status() == 143
            signal.signal(signal.SIGTERM, lambda s, f: None)  # what ray.init does
            reinstall()
            assert signal.getsignal(signal.SIGTERM) is handler
        assert signal.getsignal(signal.SIGTERM) is callers_own
        # only_if_default leaves a caller's own handler in charge (a run inside a study or sweep)
        with sigterm_as_interrupt(only_if_default=True):
            assert signal.getsignal(signal.SIGTERM) is callers_own
    finally:
        signal.signal(signal.SIGTERM, previous)
        reset()
