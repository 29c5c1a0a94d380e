"""Malformed inputs a new user can give: scenarios, flags, run directories, image folders (issue 15).

Every case runs the real CLI entry point (:func:`gcsim.cli.main`) in a scratch working directory and
asserts: exit status 2, exactly one line on stderr of the shape ``gcsim: error: <field>: expected
<allowed>, got <given>`` matching the case's pattern, no traceback, and no file created, changed or
removed anywhere under the working directory.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from pathlib import Path

import pytest
import yaml

from gcsim.cli import main

SCENARIO = {
    "name": "mal", "n_workers": 4, "iterations": 5, "seed": 1,
    "schemes": [{"name": "uncoded"}, {"name": "gc-fr", "s": 1}],
    "workload": {"gradient_bytes": 1e3, "model_bytes": 1e3, "compute": {"dist": "constant", "value": 0.01}},
    "stragglers": {"delay": {"dist": "bimodal", "p": 0.2, "delay": 0.05}},
}
ONE_LINE = re.compile(r"^gcsim: error: [^\n]*: expected [^\n]*, got [^\n]*\n$")


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Relative path -> (size, mtime_ns) of everything under ``root`` (directories: size 0)."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        out[str(p.relative_to(root))] = (0 if p.is_dir() else st.st_size, st.st_mtime_ns)
    return out


def _refused(argv: list[str], pattern: str, cwd: Path, capsys) -> str:
    """Run ``gcsim argv`` in ``cwd``; assert the one-line refusal matching ``pattern`` and no file
    change under ``cwd``. Returns the line."""
    before = _snapshot(cwd)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        rc = main(argv)
    finally:
        os.chdir(old)
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err and "Warning" not in err, err
    assert ONE_LINE.match(err), err
    assert re.search(pattern, err), (pattern, err)
    assert _snapshot(cwd) == before, "files were created, changed or removed"
    return err


@pytest.fixture
def work(tmp_path):
    """A scratch working directory holding ``ok.yaml`` (a valid scenario)."""
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump(SCENARIO))
    return tmp_path


def _bomb(levels: int = 6, width: int = 10) -> str:
    lines = ["l0: &l0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


SCENARIO_TEXTS = {
    "nested 3000 deep": ("name: x\nn_workers: " + "[" * 3000 + "]" * 3000 + "\n",
                         r"scenario: expected YAML with nesting at most 64 levels deep, got '.*': deeper at line 2$"),
    "alias bomb": (_bomb(), r"scenario: expected YAML with at most 100000 values with aliases expanded, got "
                            r"'.*': more \(alias expansion\) at line \d+$"),
    "alias bomb inside a field": (yaml.safe_dump(SCENARIO) + "extra:\n  " + _bomb().replace("\n", "\n  "),
                                  r"scenario: expected YAML with at most 100000 values with aliases expanded"),
    "recursive alias": ("a: &a [1, *a]\n", r"scenario: expected YAML with no recursive aliases, got '.*': one at "
                                            r"line 1$"),
    "too many aliases": ("a: &a 1\nb: [" + ", ".join(["*a"] * 1001) + "]\n",
                         r"scenario: expected YAML with at most 1000 aliases, got '.*': more at line 2$"),
    "over 1 MiB": ("name: x\n" + "#" * (1 << 20) + "\n",
                   r"scenario: expected YAML with a file of at most 1048576 bytes, got '.*': 1048585 bytes$"),
    "name of 300 characters": (yaml.safe_dump({**SCENARIO, "name": "a" * 300}),
                               r"name: expected letters, digits, '_', '\.', '-', at most 100 of them \(used in "
                               r"directory names\), got 'aaaaaaaaaaaaaaaaaaaa'\.\.\. \(300 characters\)$"),
    "key given twice": ("name: a\nname: b\n", r"name: expected a key given once, got 'name' twice \(lines 1 and 2\)$"),
    "huge delays": (yaml.safe_dump({**SCENARIO, "stragglers": {"delay": {"dist": "constant", "value": 1e308}}}),
                    r"stragglers\.delay: expected draws that keep the simulated run under"),
}


@pytest.mark.parametrize("case", list(SCENARIO_TEXTS))
def test_malformed_scenario(case, work, capsys):
    text, pattern = SCENARIO_TEXTS[case]
    (work / "bad.yaml").write_text(text)
    for extra in ([], ["--out", "o"]):
        _refused(["simulate", "bad.yaml", "--no-progress", *extra], pattern, work, capsys)


FLAGS = {
    "compare --seed -1": (["compare", "--seed", "-1"], r"--seed: expected an integer in \[0, 4294967295\], got -1$"),
    "simulate --seed 2**32": (["simulate", "ok.yaml", "--seed", str(2**32)],
                              r"--seed: expected an integer in \[0, 4294967295\], got 4294967296$"),
    "simulate --iterations 0": (["simulate", "ok.yaml", "--iterations", "0"],
                                r"--iterations: expected an integer >= 1, got 0$"),
    "--out under /proc": (["simulate", "ok.yaml", "--out", "/proc/gcsim-x"],
                          r"--out: expected a path where a directory can be created, got '/proc/gcsim-x' \("),
    "--out a file": (["simulate", "ok.yaml", "--out", "ok.yaml"],
                     r"--out: expected a new or empty directory, got 'ok.yaml' \(not a directory\)$"),
    "--out a name of 300 bytes": (["simulate", "ok.yaml", "--out", "d" * 300],
                                  r"--out: expected a path whose every name is at most 255 bytes, got 'd+'$"),
    "real without --scheme": (["real"], r"--scheme: expected a scheme name \(see `gcsim schemes`\), got None$"),
    "real --scheme unknown": (["real", "--scheme", "foo"],
                              r"--scheme: expected one of uncoded, .*, or allreduce \(the all-reduce baseline\), "
                              r"got 'foo'$"),
    "real --resume of no directory": (["real", "--resume", "no-such-run"],
                                      r"--resume: expected the directory of a gcsim real run, got 'no-such-run' "
                                      r"\(no such directory\)$"),
}


@pytest.mark.parametrize("case", list(FLAGS))
def test_malformed_flag(case, work, capsys):
    argv, pattern = FLAGS[case]
    if "/proc" in case and not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    _refused(argv + ["--no-progress"] if argv[0] == "simulate" else argv, pattern, work, capsys)


def test_out_holding_files_is_refused_and_left_alone(work, capsys):
    (work / "full").mkdir()
    (work / "full" / "mine.txt").write_text("keep")
    _refused(["simulate", "ok.yaml", "--out", "full", "--no-progress"],
             r"--out: expected a new or empty directory, got 'full' \(holding mine\.txt\)$", work, capsys)


# --------------------------------------------------------------------------- run directories
@pytest.fixture(scope="module")
def sim_run(tmp_path_factory):
    """A complete simulated run directory (a valid input of ``gcsim compare``)."""
    root = tmp_path_factory.mktemp("simrun")
    (root / "s.yaml").write_text(yaml.safe_dump(SCENARIO))
    assert main(["simulate", str(root / "s.yaml"), "--out", str(root / "run"), "--no-progress"]) == 0
    return root / "run"


def _dup_first_row(name):
    def f(d):
        lines = (d / name).read_text().splitlines(keepends=True)
        (d / name).write_text("".join(lines[:2] + lines[1:]))
    return f


def _status(data):
    def f(d):
        (d / "status.json").write_text(json.dumps(data))
    return f


def _dead_pid() -> int:
    pid = 2**22 - 7
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            pass
        pid -= 1


RUN_DIRS = {
    "duplicate iteration rows": (_dup_first_row("iterations.csv"),
                                 r"iterations\.csv: expected one row per \(scheme, iteration\), got 1 duplicate "
                                 r"row\(s\), first at scheme=uncoded, iteration=0 \(hand-edited\?\)$"),
    "duplicate worker rows": (_dup_first_row("workers.csv"),
                              r"workers\.csv: expected one row per \(scheme, iteration, worker\), got 1 duplicate"),
    "status outside the vocabulary": (_status({"status": "bogus"}),
                                      r"status\.json: status: expected one of running, finished, interrupted, "
                                      r"failed, got 'bogus'$"),
    "status running, process gone": (_status({"status": "running", "pid": _dead_pid()}),
                                     r"status\.json: status: expected a finished run, got 'running' \(its process "
                                     r"is gone: dead, or half-written\)$"),
    "status running, process gone, a checkpoint left": (
        lambda d: (_status({"status": "running", "pid": _dead_pid()})(d), (d / "checkpoint.pt").write_bytes(b"x")),
        r"status\.json: status: expected a finished run, got 'running' \(its process is gone: dead, or "
        r"half-written\); gcsim real --resume .*run continues it from its last checkpoint$"),
    "status not an object": (_status([1, 2]), r"status\.json: expected a JSON object, got list$"),
    "config.yaml alias bomb": (lambda d: (d / "config.yaml").write_text(_bomb()),
                               r"config\.yaml: expected YAML with at most 100000 values with aliases expanded, got more "
                               r"\(alias expansion\) at line 5$"),
}


@pytest.mark.parametrize("case", list(RUN_DIRS))
def test_malformed_run_dir(case, sim_run, work, capsys):
    import shutil

    breaker, pattern = RUN_DIRS[case]
    shutil.copytree(sim_run, work / "run")
    breaker(work / "run")
    line = _refused(["compare", "run", "--out", "cmp", "--no-progress"], pattern, work, capsys)
    assert line.startswith("gcsim: error: run/") or line.startswith(f"gcsim: error: {work}")


# --------------------------------------------------------------------------- image folders
def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` x ``height`` 1-bit pixels (an empty image stream)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))


@pytest.fixture
def image_folder(work):
    pytest.importorskip("PIL")
    from gcsim.real.data import make_random_image_folder

    return make_random_image_folder(work / "src", train_per_class=1, test_per_class=1)


@pytest.mark.parametrize("width, height, pattern", [
    (20000, 20000, r"image train/cat/0\.png: size: expected 32x32, got a far larger image"),
    (33, 32, r"image train/cat/0\.png: size: expected 32x32, got 33x32$"),
])
def test_image_size_checked_before_decoding(width, height, pattern, image_folder, work, capsys):
    pytest.importorskip("torchvision")
    (image_folder / "train" / "cat" / "0.png").write_bytes(_png_header_only(width, height))
    _refused(["data", "prepare", "--source", "src", "--data-dir", "d"], pattern, work, capsys)


def test_data_prepare_without_torchvision_converts_nothing(image_folder, work, capsys, monkeypatch):
    import importlib.util

    import gcsim.real.data as data

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torchvision" else real_find_spec(name, *a))
    decoded = []
    monkeypatch.setattr(data, "_decode_image", lambda e: decoded.append(e))
    before = _snapshot(work)
    old = os.getcwd()
    os.chdir(work)
    try:
        rc = main(["data", "prepare", "--source", "src", "--data-dir", "d"])
    finally:
        os.chdir(old)
    err = capsys.readouterr().err
    assert rc == 2 and err == ("gcsim: error: this command needs the optional 'real' dependencies (torch, "
                               "torchvision, ray): missing module 'torchvision'; install them with: pip install "
                               "-e '.[real]'\n")
    assert decoded == [] and _snapshot(work) == before


def test_plain_gcsim_prints_help_and_exits_0(capsys):
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Usage: gcsim [OPTIONS] COMMAND [ARGS]...") and "simulate" in out and err == ""


# --------------------------------------------------------------------------- gcsim fit / advise / replay (issue 12)
def _trace_text(T: int = 30, W: int = 3, header: str = "worker,iteration,duration") -> str:
    import numpy as np
    x = 1.0 + np.random.default_rng(0).exponential(0.1, size=(T, W))
    return header + "\n" + "".join(f"{w},{t},{x[t, w]:.6f}\n" for t in range(T) for w in range(W))


def _lines(text: str, drop: int | None = None, replace: tuple[int, str] | None = None) -> str:
    rows = text.splitlines(keepends=True)
    if replace is not None:
        rows[replace[0]] = replace[1]
    if drop is not None:
        del rows[drop]
    return "".join(rows)


GOOD = _trace_text()
TRACES = {
    "wrong column names": (_trace_text(header="a,b,c"),
                           r"bad\.csv:1: worker column: expected a column named one of worker, worker_id, rank "
                           r"\(or pass --worker-col\), got columns 'a', 'b', 'c'$"),
    "a worker's row missing in the middle": (_lines(GOOD, drop=1 + 3 * 10 + 1),
                                             r"bad\.csv:\d+: column 'worker': expected a row for every worker .*, got no "
                                             r"row for worker 1 at iteration 10$"),
    "text in a number cell": (_lines(GOOD, replace=(7, "0,2,fast\n")),
                              r"bad\.csv:8: column 'duration': expected a number >= 0 .*, got 'fast'$"),
    "5 iterations": (_trace_text(T=5), r"bad\.csv:\d+: column 'iteration': expected at least 20 iterations .*got 5$"),
    "empty file": ("", r"bad\.csv:1: expected a header line naming the columns, got an empty file$"),
    "header only": ("worker,iteration,duration\n", r"bad\.csv:2: expected rows of worker, iteration, duration, got none$"),
    "non-UTF-8 bytes": (GOOD.encode()[:60] + b"\xff\xfe" + GOOD.encode()[60:],
                        r"bad\.csv:\d+: column \d+: expected UTF-8 text, got byte 0xff"),
    "huge value": (_lines(GOOD, replace=(4, "0,1,1e300\n")),
                   r"bad\.csv:5: column 'duration': expected a number >= 0 and <= 1e\+06 .*, got '1e300'$"),
    "infinite value": (_lines(GOOD, replace=(4, "0,1,inf\n")), r"bad\.csv:5: column 'duration': .*, got 'inf'$"),
    "per-worker timestamps": ("worker,timestamp,duration\n" + "".join(f"{w},{t + w / 10},1.{t}\n" for t in range(30)
                                                                      for w in range(3)),
                              r"bad\.csv:2: column 'timestamp': expected values the workers share at one iteration"),
    "a row given twice": (GOOD + "1,4,2.0\n", r"bad\.csv:92: column 'iteration': expected one row per worker and "
                                              r"iteration, got worker 1 at 4 again \(first on line 15\)$"),
}


@pytest.mark.parametrize("case", list(TRACES))
def test_malformed_trace(case, work, capsys):
    text, pattern = TRACES[case]
    (work / "bad.csv").write_bytes(text if isinstance(text, bytes) else text.encode())
    for extra in ([], ["--out", "fit.yaml"]):
        _refused(["fit", "bad.csv", *extra], pattern, work, capsys)


def test_fit_directory_that_is_not_a_run(work, capsys):
    (work / "notarun").mkdir()
    (work / "notarun" / "x.txt").write_text("hello")
    _refused(["fit", "notarun"], r"notarun: expected a gcsim run directory \(with workers\.csv\) or a CSV file of "
                                 r"worker, iteration, duration, got a directory without workers\.csv$", work, capsys)
    _refused(["fit", "nothere.csv"], r"nothere\.csv: expected a gcsim run directory or a CSV file .*does not exist$",
             work, capsys)


@pytest.mark.parametrize("column", ["iteration", "n_partitions", "dispatch_s", "send_s"])
def test_fit_run_dir_with_text_in_a_cell(column, sim_run, work, capsys):
    import shutil

    import pandas as pd
    shutil.copytree(sim_run, work / "run")
    df = pd.read_csv(work / "run" / "workers.csv")
    df[column] = df[column].astype(object)
    df.loc[2, column] = "abc"
    df.to_csv(work / "run" / "workers.csv", index=False)
    _refused(["fit", "run"], rf"run/workers\.csv:4: column '{column}': expected .*, got 'abc'$", work, capsys)


FIT_FLAGS = {
    "--out under /proc": (["--out", "/proc/gcsim-fit.yaml"], r"--out: expected a file path in a writable directory, "
                                                             r"got '/proc/gcsim-fit\.yaml \("),
    "--out a directory": (["--out", "."], r"--out: expected a file path in an existing directory, got '\.'$"),
    "--out in a missing directory": (["--out", "no/such/x.yaml"],
                                     r"--out: expected a file path in an existing directory, got 'no/such/x\.yaml'$"),
    "--unit-s 0": (["--unit-s", "0"], r"--unit-s: expected a number > 0 .*, got '0'$"),
    "--unit-s making times huge": (["--unit-s", "1e6"], r"good\.csv:2: column 'duration': expected a number >= 0 and "
                                                        r"<= 1 \(.*units of 1e\+06 s"),
    "--families bogus": (["--families", "gamma,bogus"], r"--families: expected comma-separated names from"),
    "--worker-col absent": (["--worker-col", "host"], r"good\.csv:1: worker column: expected one of the header's "
                                                      r"columns \(worker, iteration, duration\), got 'host'$"),
}


@pytest.mark.parametrize("case", list(FIT_FLAGS))
def test_malformed_fit_flag(case, work, capsys):
    if "/proc" in case and not Path("/proc").is_dir():
        pytest.skip("no /proc here")
    (work / "good.csv").write_text(GOOD)
    _refused(["fit", "good.csv", *FIT_FLAGS[case][0]], FIT_FLAGS[case][1], work, capsys)


def test_fit_out_existing_file_is_refused_without_force(work, capsys):
    """Like ``gcsim calibrate``: an existing --out is never replaced silently (nothing already written is
    lost); with --force it is replaced by the fitted scenario."""
    (work / "good.csv").write_text(GOOD)
    (work / "mine.yaml").write_text("hand-edited\n")
    _refused(["fit", "good.csv", "--out", "mine.yaml"],
             r"--out: expected a file that does not exist yet \(or --force to replace it\), got 'mine\.yaml'$", work, capsys)
    old = os.getcwd()
    os.chdir(work)
    try:
        assert main(["fit", "good.csv", "--out", "mine.yaml", "--force", "--run-dir", "rep"]) == 0
    finally:
        os.chdir(old)
    assert yaml.safe_load((work / "mine.yaml").read_text())["stragglers"]


def test_fit_out_write_failure_is_one_line_and_keeps_the_old_file(work, capsys, monkeypatch):
    import gcsim.rundir as rundir
    (work / "good.csv").write_text(GOOD)
    (work / "mine.yaml").write_text("hand-edited\n")
    real = rundir.atomic_write_text

    def failing(path, text):
        if str(path).endswith("mine.yaml"):
            raise OSError(28, "No space left on device")
        return real(path, text)
    monkeypatch.setattr(rundir, "atomic_write_text", failing)
    old = os.getcwd()
    os.chdir(work)
    try:
        rc = main(["fit", "good.csv", "--out", "mine.yaml", "--force", "--run-dir", "rep"])
    finally:
        os.chdir(old)
    err = capsys.readouterr().err
    assert rc == 2 and ONE_LINE.match(err) and "Traceback" not in err, err
    assert "--out: expected a writable file path (the report was written to rep), got 'mine.yaml (No space" in err
    assert (work / "mine.yaml").read_text() == "hand-edited\n"
    assert (work / "rep" / "meta.json").is_file()  # the report is complete


ADVISE_FLAGS = {
    "--n 0": (["--n", "0"], r"--n: expected an integer >= 1 or a comma-separated list of them, got '0'$"),
    "--max-s n": (["--max-s", "4"], r"--max-s: expected an integer < n \(at most 3 for n=4; .*\), got 4$"),
    "--max-s above n": (["--max-s", "50"], r"--max-s: expected an integer < n .*, got 50$"),
    "--max-m 0": (["--max-m", "0"], r"--max-m: expected an integer >= 1, got 0$"),
}


@pytest.mark.parametrize("case", list(ADVISE_FLAGS))
def test_malformed_advise_flag(case, work, capsys):
    err = _refused(["advise", "ok.yaml", *ADVISE_FLAGS[case][0]], ADVISE_FLAGS[case][1], work, capsys)
    assert err.startswith("gcsim: error: --"), err


def test_advise_objective_bogus(work, capsys):  # click's choice, worded like every other error
    assert main(["advise", str(work / "ok.yaml"), "--objective", "bogus"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("gcsim: error: --objective: expected one of 'mean', 'p95', 'p99', got 'bogus'")


@pytest.mark.parametrize("argv, line", [
    (["compare", "--replications", "abc"], "--replications: expected an integer, got 'abc'"),
    (["real", "--lr", "x"], "--lr: expected a number, got 'x'"),
    (["data", "prepare", "--expect-train-per-class", "0"], "--expect-train-per-class: expected a value in x>=1, got '0'"),
])
def test_clicks_own_types_speak_like_gcsim(argv, line, capsys):
    # click's "Invalid value for '--replications': 'abc' is not a valid integer." (review)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gcsim: error: {line} (see 'gcsim ") and err.count("\n") == 1


def _replay_scenario(work, **replay):
    (work / "good.csv").write_text(GOOD)  # 3 workers x 30 iterations
    data = {**SCENARIO, "n_workers": 3, "iterations": 30, "schemes": [{"name": "uncoded"}, {"name": "gc-cr", "s": 1}],
            "stragglers": {"replay": {"file": "good.csv", **replay}}}
    (work / "rp.yaml").write_text(yaml.safe_dump(data))


def test_replay_file_that_does_not_exist(work, capsys):
    _replay_scenario(work, file="nothere.csv")
    for argv in (["simulate", "rp.yaml", "--no-progress"], ["advise", "rp.yaml"]):
        _refused(argv, r"stragglers\.replay\.file: expected an existing trace CSV or gcsim run directory, got "
                       r"'nothere\.csv'$", work, capsys)


def test_replay_rule_error_when_the_run_is_longer(work, capsys):
    _replay_scenario(work, rule="error")
    _refused(["simulate", "rp.yaml", "--no-progress", "--iterations", "31"],
             r"stragglers\.replay\.rule: expected a trace with at least n_workers=3 workers and iterations=31 "
             r"iterations, or rule wrap / block-bootstrap; the trace has 3 workers x 30 iterations, got 'error'$",
             work, capsys)
    _refused(["advise", "rp.yaml"], r"--iterations: expected at most 30 \(the replayed trace's iterations; "
                                    r"stragglers\.replay\.rule is error: .*\), got 1000$", work, capsys)


def test_calibrate_a_run_directory_that_does_not_exist_or_is_a_file(work, capsys):
    _refused(["calibrate", "nope", "--out", "c.yaml"], r"nope: expected a gcsim run directory, got a path that does not exist$",
             work, capsys)
    (work / "afile").write_text("x")
    _refused(["calibrate", "afile", "--out", "c.yaml"], r"afile: expected a gcsim run directory, got a path that is not a directory$",
             work, capsys)
