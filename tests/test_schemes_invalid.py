"""Invalid scheme parameters: a SchemeError naming the field, allowed values and given value from the
API; one line on stderr and exit status 2 (no traceback) from the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gcsim.cli import main
from gcsim.errors import SchemeError
from gcsim.schemes import make_scheme
from gcsim.schemes.gc_cr import GcCr

# (name, n, s, m, regex the message must match: field, allowed values, given value)
INVALID = [
    ("gc-cr", 4, 4, 1, r"scheme gc-cr: s: expected 0 <= s < n=4, got 4"),
    ("cce-fr", 3, 5, 1, r"s: expected 0 <= s < n=3, got 5"),
    ("gc-fr", 8, 2, 1, r"scheme gc-fr: s: expected s\+1 dividing n=8, got 2"),
    ("pgc-fr", 6, 3, 1, r"scheme pgc-fr: s: expected s\+1 dividing n=6, got 3"),
    ("cce-fr", 8, 1, 2, r"scheme cce-fr: s\+m: expected a divisor of n=8 .*got 3"),
    ("cce-cr", 6, 1, 0, r"m: expected an integer >= 1, got 0"),
    ("cce-fr", 6, 1, -1, r"m: expected an integer >= 1, got -1"),
    ("cce-cr", 5, 2, 4, r"scheme cce-cr: m: expected 1 <= m <= n - s = 3 .*got 4"),
    ("gc-cr", 6, 1, 2, r"scheme gc-cr: m: expected 1 \(this scheme has no communication reduction\), got 2"),
    ("gc-mds", 8, 2, 1, r"scheme gc-mds: s: expected a value with n - s odd \(n=8\).*got 2"),
    ("uncoded", 4, 1, 1, r"scheme uncoded: s: expected 0 .*got 1"),
    ("gc-cr", 0, 0, 1, r"n: expected an integer >= 1, got 0"),
    ("pgc-cr", 4, -1, 1, r"s: expected an integer >= 0, got -1"),
    ("nope", 4, 1, 1, r"scheme: expected one of uncoded, ignore-stragglers, gc-fr, .*pgc-cr, got 'nope'"),
]


@pytest.mark.parametrize("name,n,s,m,pattern", INVALID)
def test_api_rejects_with_a_clear_scheme_error(name, n, s, m, pattern):
    with pytest.raises(SchemeError, match=pattern):
        make_scheme(name, n=n, s=s, m=m)


def test_api_rejects_non_integers_and_bad_matrices():
    with pytest.raises(SchemeError, match=r"n: expected an integer >= 1, got 4.0"):
        make_scheme("gc-cr", n=4.0, s=1)
    with pytest.raises(SchemeError, match=r"matrix row 0: expected non-zero on partition 0, zero outside"):
        GcCr.from_matrix([[1, 0, 1, 1], [0, 1, 1, 0], [0, 0, 1, 1], [1, 0, 0, 1]], s=1)
    with pytest.raises(SchemeError, match=r"matrix: expected a square"):
        GcCr.from_matrix([[1, 0, 1]], s=1)
    with pytest.raises(SchemeError, match=r"arrived message id: expected 0..3, got 4"):
        make_scheme("gc-fr", n=4, s=1).decode([0, 4])


@pytest.mark.parametrize("name,n,s,m,pattern", INVALID)
def test_cli_exit_2_one_line(name, n, s, m, pattern, capsys):
    rc = main(["schemes", "check", name, "--n", str(n), "--s", str(s), "--m", str(m)])
    captured = capsys.readouterr()
    assert rc == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gcsim: error: "), captured.err
    assert __import__("re").search(pattern, lines[0])
    assert captured.out == ""


def test_cli_console_script_exit_2_without_traceback():
    exe = Path(sys.executable).with_name("gcsim")
    proc = subprocess.run([str(exe), "schemes", "check", "cce-fr", "--n", "8", "--s", "1", "--m", "2"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "gcsim: error: scheme cce-fr: s+m: expected a divisor of n=8 (s=1, m=2), got 3"
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    # click usage error (missing --s) also exits 2
    proc = subprocess.run([str(exe), "schemes", "check", "gc-fr", "--n", "8"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "--s" in proc.stderr


@pytest.mark.parametrize("name", ["gc-cr", "uncoded", "cce-cr"])
def test_negative_seed_is_a_scheme_error_not_a_numpy_traceback(name, capsys):
    with pytest.raises(SchemeError, match=r"seed: expected an integer >= 0, got -1"):
        make_scheme(name, n=4, s=0, seed=-1)
    assert main(["schemes", "check", name, "--n", "4", "--s", "0", "--seed", "-1"]) == 2
    err = capsys.readouterr().err
    assert err == "gcsim: error: seed: expected an integer >= 0, got -1\n"


@pytest.mark.parametrize("args,message", [
    (["--n", "abc", "--s", "1"], "gcsim: error: --n: expected an integer, got 'abc'\n"),
    (["--n", "6", "--s", "1.5"], "gcsim: error: --s: expected an integer, got '1.5'\n"),
    (["--n", "6", "--s", "1", "--samples", "x"], "gcsim: error: --samples: expected an integer, got 'x'\n"),
])
def test_cli_non_integer_option_is_one_line(args, message, capsys):
    assert main(["schemes", "check", "gc-cr", *args]) == 2
    captured = capsys.readouterr()
    assert captured.err == message and captured.out == ""


def test_cli_out_of_memory_is_one_line_naming_n(monkeypatch, capsys):
    import gcsim.cli.schemes_cmd as cmd

    def too_big(*a, **k):
        raise MemoryError("Unable to allocate 298. GiB")
    monkeypatch.setattr(cmd, "make_scheme", too_big)
    assert main(["schemes", "check", "uncoded", "--n", "200000", "--s", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gcsim: error: scheme uncoded: n: expected ") and err.endswith(
        "got 200000 (out of memory)\n"), err


def test_schemes_list_is_an_alias_of_the_listing(capsys):
    assert main(["schemes"]) == 0
    listing = capsys.readouterr().out
    assert main(["schemes", "list"]) == 0
    assert capsys.readouterr().out == listing and "cce-cr" in listing
