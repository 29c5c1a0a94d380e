"""`gcsim simulate` end to end: outputs on disk, determinism, and every malformed-scenario case."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from gcsim.cli import main
from gcsim.scenario import load_scenario
from gcsim.trace import ITERATION_COLUMNS, SUMMARY_COLUMNS, WORKER_COLUMNS, read_meta

SCENARIO = {
    "name": "cli_case", "n_workers": 6, "iterations": 40, "seed": 3,
    "schemes": [{"name": "uncoded"}, {"name": "gc-fr", "s": 1}, {"name": "gc-cr", "s": 2}],
    "workload": {"gradient_bytes": 1e6, "model_bytes": 1e6, "compute": {"dist": "constant", "value": 0.02}},
    "network": {"latency_s": 0.001, "bandwidth_bytes_per_s": 1e9},
    "stragglers": {"delay": {"dist": "pareto", "b": 2.5, "scale": 0.02}},
}


def _write(tmp_path, data, name="s.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


def test_outputs_on_disk(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "gc-fr" in text and "speedup" in text and f"wrote {out}" in text
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["config.yaml", "summary.csv", "iterations.csv", "workers.csv", "cdf.png", "bars.png", "meta.json"])
    assert read_meta(out)["executor"] == "sim"
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns) == SUMMARY_COLUMNS and list(summary.scheme) == ["uncoded", "gc-fr", "gc-cr"]
    its = pd.read_csv(out / "iterations.csv")
    assert list(its.columns) == ITERATION_COLUMNS and len(its) == 3 * 40
    workers = pd.read_csv(out / "workers.csv")
    assert list(workers.columns) == WORKER_COLUMNS and len(workers) == 3 * 40 * 6
    # the summary is computed from the iterations written next to it
    g = its[its.scheme == "gc-fr"].duration_s
    row = summary.set_index("scheme").loc["gc-fr"]
    assert row.mean_s == pytest.approx(g.mean(), rel=1e-8) and row.p99_s == pytest.approx(np.quantile(g, 0.99), rel=1e-8)
    assert summary.set_index("scheme").loc["uncoded", "speedup_vs_uncoded"] == 1.0
    for png in ("cdf.png", "bars.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the resolved config loads back to the same scenario
    assert load_scenario(out / "config.yaml") == load_scenario(_write(tmp_path, SCENARIO, "again.yaml"))


def test_same_seed_byte_identical_and_other_seed_differs(tmp_path):
    scen = str(_write(tmp_path, SCENARIO))
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    for d, seed in zip(dirs, ["3", "3", "4"]):
        assert main(["simulate", scen, "--out", str(d), "--seed", seed, "--no-progress"]) == 0
    for name in ("config.yaml", "summary.csv", "iterations.csv", "workers.csv", "cdf.png", "bars.png"):
        assert (dirs[0] / name).read_bytes() == (dirs[1] / name).read_bytes(), name
    ma, mb = (json.loads((d / "meta.json").read_text()) for d in dirs[:2])
    ma.pop("created_utc"), mb.pop("created_utc")
    assert ma == mb
    assert (dirs[0] / "iterations.csv").read_bytes() != (dirs[2] / "iterations.csv").read_bytes()
    assert "seed: 4" in (dirs[2] / "config.yaml").read_text()


def test_default_out_dir_and_options(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scen = str(_write(tmp_path, SCENARIO))
    assert main(["simulate", scen, "--iterations", "7", "--schemes", "gc-cr,uncoded"]) == 0
    (run,) = list((tmp_path / "runs" / "sim").iterdir())
    assert run.name.startswith("cli_case-") and run.name.endswith("Z")
    its = pd.read_csv(run / "iterations.csv")
    assert list(dict.fromkeys(its.scheme)) == ["uncoded", "gc-cr"] and its.iteration.max() == 6
    # stderr is no terminal here: no bar by default (a log file would fill with its frames), --progress asks
    assert "simulate:" not in capsys.readouterr().err
    assert main(["simulate", scen, "--iterations", "7", "--out", str(tmp_path / "b"), "--progress"]) == 0
    assert "simulate" in capsys.readouterr().err  # the tqdm bar


def _mutate(path_value):
    def f(d):
        *parents, key = path_value[0]
        cur = d
        for p in parents:
            cur = cur[p]
        if path_value[1] is _DELETE:
            del cur[key]
        else:
            cur[key] = path_value[1]
        return d
    return f


_DELETE = object()

MALFORMED = {
    "unknown key": ((("stragglers", "dealy"), {"dist": "expon", "scale": 1}), "stragglers.dealy: expected one of the keys"),
    "wrong type": ((("n_workers",), "six"), "n_workers: expected a valid integer, got 'six'"),
    "negative scale": ((("stragglers", "delay", "scale"), -0.5), "stragglers.delay.scale: expected a number > 0"),
    "unknown distribution": ((("stragglers", "delay", "dist"), "paretto"),
                             "stragglers.delay.dist: expected one of constant, shifted_expon"),
    "refused scheme parameters": ((("schemes",), [{"name": "gc-fr", "s": 3}]),
                                  "schemes.0.s: expected s+1 dividing n=6 (scheme gc-fr), got 3"),
    "unknown scheme": ((("schemes",), [{"name": "gc-nope"}]), "schemes.0.name: expected one of uncoded"),
    "empty scheme list": ((("schemes",), []), "schemes: expected at least 1 item(s), got []"),
    "missing empirical file": ((("stragglers", "delay"), {"dist": "empirical", "file": "nowhere.csv"}),
                               "stragglers.delay.file: expected an existing CSV file of measured seconds, got 'nowhere.csv'"),
    "bad policy": ((("policy",), "drop"), "policy: expected 'cancel' or 'carry-over', got 'drop'"),
    "missing field": ((("workload",), _DELETE), "workload: expected a value (required field), got missing"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_scenario_one_line_exit_2_no_output(case, tmp_path, monkeypatch, capsys):
    import copy
    monkeypatch.chdir(tmp_path)
    mutation, message = MALFORMED[case]
    scen = _write(tmp_path, _mutate(mutation)(copy.deepcopy(SCENARIO)))
    for extra in ([], ["--out", str(tmp_path / "out")]):
        assert main(["simulate", str(scen), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("gcsim: error: "), err
        assert message in err, err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # no runs/, no out/, no temp dir


def test_a_misspelt_required_key_is_named_with_its_likely_spelling(tmp_path, capsys):
    # `n_worker: 6` is both an unknown key and a missing n_workers: the error names the key the user wrote
    # (review 2026-12-05: it said only "n_workers: ... got missing")
    import copy
    sc = copy.deepcopy(SCENARIO)
    sc["n_worker"] = sc.pop("n_workers")
    assert main(["simulate", str(_write(tmp_path, sc)), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gcsim: error: n_worker: expected one of the keys name, n_workers,")
    assert err.rstrip().endswith("got unknown key 'n_worker' (did you mean 'n_workers'?)")


@pytest.mark.parametrize("content,message", [
    ("name: [unclosed", "scenario: expected valid YAML"),
    ("- just\n- a list\n", "scenario: expected a YAML mapping of scenario fields, got a list, ['just', 'a list']"),
    ("just a string\n", "scenario: expected a YAML mapping of scenario fields, got a str, 'just a string'"),
])
def test_unparseable_scenario_file(content, message, tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text(content)
    assert main(["simulate", str(p), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "o").exists()


def test_bad_options_exit_2(tmp_path, capsys):
    scen = str(_write(tmp_path, SCENARIO))
    assert main(["simulate", str(tmp_path / "missing.yaml")]) == 2
    assert "scenario: expected an existing YAML file" in capsys.readouterr().err
    assert main(["simulate", scen, "--schemes", "gc-mds", "--out", str(tmp_path / "o")]) == 2
    # the option is --schemes (it named the scenario field, as `gcsim study --schemes` does not)
    assert ("gcsim: error: --schemes: expected names from the scenario (uncoded, gc-fr, gc-cr), got 'gc-mds'"
            in capsys.readouterr().err)
    assert main(["simulate", scen, "--schemes", ",", "--out", str(tmp_path / "o")]) == 2
    assert "gcsim: error: --schemes: expected at least one of uncoded, gc-fr, gc-cr" in capsys.readouterr().err
    assert main(["simulate", scen, "--iterations", "0"]) == 2
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    assert main(["simulate", scen, "--out", str(tmp_path / "full")]) == 2
    assert "--out: expected a new or empty directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "s.yaml"]
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["x"]


def test_empirical_delays_from_csv_on_disk(tmp_path):
    # two workers, uncoded: the iteration waits for the larger of two delays resampled from {0.1, 0.3}:
    # E[max] = 0.1·P(both 0.1) + 0.3·(1 - 1/4) = 0.25 s (plus 0.02 s compute).
    (tmp_path / "traces").mkdir()
    pd.DataFrame({"worker": [0, 1, 2, 3], "seconds": [0.1, 0.3, 0.1, 0.3]}).to_csv(tmp_path / "traces" / "d.csv", index=False)
    data = dict(SCENARIO, n_workers=2, iterations=2000, schemes=[{"name": "uncoded"}],
                network={"latency_s": 0.0}, workload={"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.02}},
                stragglers={"delay": {"dist": "empirical", "file": "traces/d.csv", "column": "seconds"}})
    out = tmp_path / "run"
    assert main(["simulate", str(_write(tmp_path, data)), "--out", str(out), "--no-progress"]) == 0
    w = pd.read_csv(out / "workers.csv")
    assert set(np.round(w.delay_s, 12)) == {0.1, 0.3}
    d = pd.read_csv(out / "iterations.csv").duration_s
    assert abs(d.mean() - 0.27) < 4 * d.std(ddof=1) / np.sqrt(len(d))
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    assert cfg["stragglers"]["delay"]["file"] == str((tmp_path / "traces" / "d.csv").resolve())


@pytest.mark.parametrize("args,message", [
    (["--iterations", "0"], "gcsim: error: --iterations: expected an integer >= 1, got 0\n"),
    (["--iterations", "ten"], "gcsim: error: --iterations: expected an integer >= 1, got 'ten'\n"),
    (["--seed", "-1"], "gcsim: error: --seed: expected an integer in [0, 4294967295], got -1\n"),
    (["--seed", "4294967296"], "gcsim: error: --seed: expected an integer in [0, 4294967295], got 4294967296\n"),
])
def test_bad_option_values_are_one_line(args, message, tmp_path, capsys):
    scen = str(_write(tmp_path, SCENARIO))
    assert main(["simulate", scen, "--out", str(tmp_path / "o"), *args]) == 2
    assert capsys.readouterr().err == message
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("make_out", [
    lambda tmp: (tmp / "afile").write_text("keep") and tmp / "afile" / "run",  # parent is a file
    lambda tmp: tmp / "afile",  # an existing file
])
def test_out_that_cannot_be_a_directory_is_one_line_and_keeps_files(make_out, tmp_path, capsys):
    scen = str(_write(tmp_path, SCENARIO))
    (tmp_path / "afile").write_text("keep")
    out = make_out(tmp_path)
    assert main(["simulate", scen, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gcsim: error: --out: expected ") and str(out) in err, err
    assert (tmp_path / "afile").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "s.yaml"]


def test_unwritable_parent_is_refused_before_simulating(tmp_path, capsys, monkeypatch):
    import gcsim.sim.engine as engine
    scen = str(_write(tmp_path, SCENARIO))
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    calls = []
    monkeypatch.setattr(engine, "_simulate_scheme", lambda *a, **k: calls.append(1))
    try:
        import os
        if os.access(locked, os.W_OK):  # running as root: permission bits do not apply, pretend they do
            real_access = os.access
            monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(locked)
                                else real_access(p, mode, **kw))
        assert main(["simulate", scen, "--out", str(locked / "run"), "--no-progress"]) == 2
    finally:
        locked.chmod(0o755)
    err = capsys.readouterr().err
    assert err.startswith("gcsim: error: --out: expected a path under a writable directory, got ") and calls == []
    assert list(locked.iterdir()) == []


def test_sigterm_while_writing_leaves_nothing_and_exits_143(tmp_path, monkeypatch, capsys):
    import os
    import signal

    import gcsim.sim.output as output

    class Terminated(Exception):
        pass

    def fallback(signum, frame):  # what the test sees if gcsim installs no handler of its own
        raise Terminated

    def plot_then_terminate(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, fallback)
    try:
        monkeypatch.setattr(output, "plot_cdf", plot_then_terminate)
        assert main(["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(tmp_path / "run"),
                     "--no-progress"]) == 143
        assert signal.getsignal(signal.SIGTERM) is fallback  # restored afterwards
        assert capsys.readouterr().err.splitlines()[-1] == "gcsim: stopped by SIGTERM"
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]  # no run dir, no hidden temp dir


def test_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    import gcsim.sim.engine as engine

    def oom(*a, **k):
        raise MemoryError
    monkeypatch.setattr(engine, "_simulate_scheme", oom)
    assert main(["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(tmp_path / "o"), "--no-progress",
                 "--engine", "simpy"]) == 2
    err = capsys.readouterr().err
    assert err == ("gcsim: error: iterations: expected a run that fits in memory (fewer iterations, workers or "
                   "schemes), got 40 (out of memory)\n")
    assert not (tmp_path / "o").exists()


def test_table_shows_a_dash_for_speedup_without_uncoded(tmp_path, capsys):
    scen = str(_write(tmp_path, SCENARIO))
    assert main(["simulate", scen, "--out", str(tmp_path / "o"), "--no-progress", "--schemes", "gc-fr,gc-cr"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[1].split()
    rows = [ln.split() for ln in lines[2:4]]
    assert header[9] == "speedup" and [r[9] for r in rows] == ["-", "-"], lines
    assert header[1] == "exact" and [r[1] for r in rows] == ["yes", "yes"], lines
    assert "NaN" not in "\n".join(lines)


def test_table_marks_approximate_schemes(tmp_path, capsys):
    scen = str(_write(tmp_path, {**SCENARIO, "schemes": [{"name": "uncoded"}, {"name": "ignore-stragglers", "s": 1}]}))
    assert main(["simulate", scen, "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    rows = {r.split()[0]: r.split()[1] for r in capsys.readouterr().out.splitlines()[2:4]}
    assert rows == {"uncoded": "yes", "ignore-stragglers": "no"}


@pytest.mark.parametrize("where", ["simulating", "writing"])
def test_ctrl_c_exits_130_and_leaves_no_partial_run_dir(where, tmp_path, monkeypatch, capsys):
    import gcsim.sim.engine as engine
    import gcsim.sim.output as output

    def interrupt(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(*((engine, "_simulate_scheme", interrupt) if where == "simulating"
                          else (output, "plot_bars", interrupt)))
    monkeypatch.chdir(tmp_path)
    scen = str(_write(tmp_path, SCENARIO))
    assert main(["simulate", scen, "--out", str(tmp_path / "run"), "--no-progress", "--engine", "simpy"]) == 130
    assert main(["simulate", scen, "--no-progress", "--engine", "simpy"]) == 130  # default runs/sim/<name>-<stamp>
    assert capsys.readouterr().err.splitlines()[-1] == "gcsim: aborted"
    leftovers = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert [p for p in leftovers if p not in ("s.yaml", "runs", "runs/sim")] == []


def test_out_dot_in_an_empty_working_directory(tmp_path, monkeypatch):
    scen = str(_write(tmp_path, SCENARIO))
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert main(["simulate", scen, "--out", ".", "--no-progress"]) == 0
    assert sorted(p.name for p in here.iterdir()) == sorted(
        ["config.yaml", "summary.csv", "iterations.csv", "workers.csv", "cdf.png", "bars.png", "meta.json"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here", "s.yaml"]  # no temporary sibling left


def test_a_write_failure_in_an_existing_empty_dir_leaves_it_empty(tmp_path, monkeypatch, capsys):
    """An existing empty --out (e.g. '.') is filled in place; a failure part-way removes what was written."""
    import gcsim.sim.output as output

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(output, "plot_bars", disk_full)
    out = tmp_path / "empty"
    out.mkdir()
    assert main(["simulate", str(_write(tmp_path, SCENARIO)), "--out", str(out), "--no-progress"]) == 2
    assert capsys.readouterr().err == (f"gcsim: error: --out: expected a directory the run can be written to, "
                                       f"got '{out}' (No space left on device)\n")
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("argv,message", [
    (["simulate"], "gcsim: error: Missing argument 'SCENARIO'. (see 'gcsim simulate --help')\n"),
    (["simulate", "x.yaml", "--zzzz"], "gcsim: error: No such option '--zzzz'. (see 'gcsim simulate --help')\n"),
    (["schemes", "check", "gc-fr", "--n", "8"], "gcsim: error: Missing option '--s'. (see 'gcsim schemes check --help')\n"),
])
def test_click_usage_errors_are_one_line_exit_2(argv, message, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err == message
