"""``gcsim sweep`` (issue 13, deliverable 4): grid expansion, skipped points, equality with ``gcsim
simulate`` of the same point, resume after an interruption, one-line errors. The Ray executor's check
is in test_sweep_ray.py (a Ray module). Tiny sizes, no wall-clock assertions."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from factories import SWEEP_BASE as BASE, SWEEP_GRID as GRID, interrupt_sweep_points, read_rows, sweep_file

from gcsim.cli import main
from gcsim.errors import ConfigError
from gcsim.sweep.config import load_sweep, validate_sweep
from gcsim.sweep.run import POINTS_LOG, evaluate_point, run_sweep

def test_grid_expansion_counts_and_order(tmp_path):
    plan = load_sweep(sweep_file(tmp_path, GRID))
    assert plan.total == 2 * 3 * 2 * 2
    # point k takes itertools.product's k-th combination (first key slowest)
    assert [plan.values(k) for k in range(plan.total)] == list(itertools.product(*GRID.values()))
    data = plan.point_data(plan.total - 1)  # n=6, [gc-cr, ignore-stragglers], s=1, p=0.2
    assert data["n_workers"] == 6 and data["stragglers"]["delay"]["p"] == 0.2
    assert [(sp["name"], sp["s"]) for sp in data["schemes"]] == [("gc-cr", 1), ("ignore-stragglers", 1)]
    assert plan.columns() == ["schemes", "stragglers.delay.p"]  # n and s are columns of every row
    # without a schemes key every point runs the base's schemes
    plan2 = validate_sweep({"base": BASE, "grid": {"seed": [1, 2, 3], "iterations": [10, 20]}})
    assert plan2.total == 6 and plan2.point_data(5)["schemes"] == [{"name": "uncoded", "s": 0, "m": 1, "seed": 0,
                                                                   "label": None}]
    res = run_sweep(plan, out_dir=tmp_path / "run", executor="local", progress=False)
    rows = read_rows(tmp_path / "run" / "sweep.csv")
    assert res.status == "finished" and len(rows) == 2 * 2 * 2 * (1 + 1 + 2)  # one row per (point, scheme)
    assert [int(r["point"]) for r in rows] == sorted(int(r["point"]) for r in rows)
    assert list(rows[0]) == ["point", "schemes", "stragglers.delay.p", "n", "scheme", "s", "m", "status", "reason",
                             "mean_s", "p50_s", "p95_s", "p99_s", "iterations", "refusals", "engine", "seed"]
    out = tmp_path / "run"
    for f in ("sweep.yaml", "points.jsonl", "status.json", "meta.json", "plot_n.png", "plot_s.png",
              "plot_stragglers.delay.p.png"):
        assert (out / f).is_file(), f
    assert json.loads((out / "status.json").read_text())["status"] == "finished"
    assert not (out / ".gcsim-claim").exists()


def test_invalid_points_are_skipped_rows_with_the_reason(tmp_path):
    plan = validate_sweep({"base": BASE,
                           "grid": {"n": [4, 6], "schemes": ["uncoded", "gc-fr", "ignore-stragglers"], "s": [1, 4]}})
    rows = {(r["n"], r["scheme"], r["s"]): r for k in range(plan.total) for r in evaluate_point(plan, k)}
    # s >= n: refused by the scheme, the row says why
    r = rows[(6, "ignore-stragglers", 4)]
    assert r["status"] == "ok"
    r = rows[(4, "ignore-stragglers", 4)]
    assert r["status"] == "skipped" and r["mean_s"] is None and "s" in r["reason"] and "4" in r["reason"]
    # (s+1) must divide n for gc-fr; uncoded refuses any s > 0
    assert rows[(6, "gc-fr", 1)]["status"] == "ok"
    assert rows[(6, "gc-fr", 4)]["status"] == "skipped" and "divid" in rows[(6, "gc-fr", 4)]["reason"]
    assert rows[(6, "uncoded", 1)]["status"] == "skipped"
    # two swept fields that clash only in one combination: the scenario refuses that point as a whole
    overhead = {"dist": "constant", "value": 0.001}
    plan = validate_sweep({"base": {**BASE, "workload": {**BASE["workload"], "cores": 2, "call_overhead": overhead}},
                           "grid": {"workload.cores": [2, None], "workload.call_overhead": [None, overhead]}})
    rows = [r for k in range(plan.total) for r in evaluate_point(plan, k)]
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "skipped"]
    assert "workload.call_overhead" in rows[3]["reason"] and "workload.cores" in rows[3]["reason"]


def test_a_value_that_clashes_with_an_unswept_base_field_is_refused_at_load():
    # n = 4 against the base's worker_scale of 6 factors, or cores: null against the base's call_overhead:
    # every point with that value would be skipped, so nothing runs (before: a sweep of skipped rows)
    with pytest.raises(ConfigError, match=r"^grid\.n\[1\]: 4 clashes with the base's stragglers\.worker_scale, "
                                          r"which no grid key sweeps.*expected a list of n_workers=4 factors, got 6"):
        validate_sweep({"base": {**BASE, "stragglers": {**BASE["stragglers"], "worker_scale": [1.0] * 6}},
                        "grid": {"n": [6, 4]}})
    base = {**BASE, "workload": {**BASE["workload"], "cores": 2,
                                 "call_overhead": {"dist": "constant", "value": 0.001}}}
    with pytest.raises(ConfigError, match=r"^grid\.workload\.cores\[1\]: null clashes with the base's "
                                          r"workload\.call_overhead"):
        validate_sweep({"base": base, "grid": {"workload.cores": [2, None]}})
    assert validate_sweep({"base": base, "grid": {"workload.cores": [2, 4]}}).total == 2


def test_a_repeated_grid_value_is_refused():
    with pytest.raises(ConfigError, match=r"^grid\.n\[2\]: expected values that differ .*, got 6, as grid\.n\[0\]$"):
        validate_sweep({"base": BASE, "grid": {"n": [6, 4, 6]}})
    with pytest.raises(ConfigError, match=r"^grid\.stragglers\.delay\[1\]"):
        validate_sweep({"base": BASE, "grid": {"stragglers.delay": [{"dist": "expon", "scale": 0.1}] * 2}})


def test_a_value_valid_only_with_another_axis_is_left_to_the_points():
    # worker_scale of 4 factors on a base of n = 6, with n swept over [4, 6]: valid at n = 4, so the two
    # points with the other n are skipped, not the sweep refused (review)
    plan = validate_sweep({"base": BASE, "grid": {"n": [4, 6], "stragglers.worker_scale": [[1.0] * 4, [1.0] * 6]}})
    rows = [r for k in range(plan.total) for r in evaluate_point(plan, k)]
    assert [r["status"] for r in rows] == ["ok", "skipped", "skipped", "ok"]
    assert "worker_scale" in rows[1]["reason"]
    # a value no other axis makes valid is still refused at load
    with pytest.raises(ConfigError, match=r"^grid\.stragglers\.worker_scale\[0\]"):
        validate_sweep({"base": BASE, "grid": {"n": [5, 6], "stragglers.worker_scale": [[1.0] * 4]}})


def _simulate_cli(tmp_path: Path, scenario: Path, out: str) -> dict:
    assert main(["simulate", str(scenario), "--out", str(tmp_path / out), "--no-progress", "--trace", "none"]) == 0
    return {r["scheme"]: r for r in read_rows(tmp_path / out / "summary.csv")}


def test_values_equal_gcsim_simulate_of_the_same_point(tmp_path, capsys):
    grid = {"schemes": [["uncoded"], ["gc-cr", "gc-mds"]], "policy": ["cancel", "carry-over"], "s": [0, 1],
            "seed": [3, 4]}
    sf = sweep_file(tmp_path, grid)
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    capsys.readouterr()
    rows = read_rows(tmp_path / "run" / "sweep.csv")
    ok = [r for r in rows if r["status"] == "ok"]
    assert {r["engine"] for r in ok} == {"vector", "simpy"}  # carry-over needs SimPy
    from gcsim.scenario import load_scenario
    from gcsim.sim.vector import simulate_with
    for k in sorted({int(r["point"]) for r in ok}):
        assert main(["sweep", str(sf), "--point", str(k)]) == 0
        point_yaml = tmp_path / f"p{k}.yaml"
        point_yaml.write_text(capsys.readouterr().out)
        summary = _simulate_cli(tmp_path, point_yaml, f"sim{k}")
        capsys.readouterr()
        exact = simulate_with(load_scenario(point_yaml), "auto", trace="none").summary.set_index("scheme")
        for r in (r for r in ok if int(r["point"]) == k):
            for col in ("mean_s", "p50_s", "p95_s", "p99_s"):
                assert float(r[col]) == float(exact.loc[r["scheme"], col])  # bit for bit (repr round-trips)
                assert f"{float(r[col]):.9g}" == summary[r["scheme"]][col]  # what gcsim simulate wrote
            assert int(r["iterations"]) == int(summary[r["scheme"]]["iterations"])


def test_resume_computes_only_the_missing_points_and_equals_an_uninterrupted_run(tmp_path):
    plan = load_sweep(sweep_file(tmp_path, GRID))
    full = run_sweep(plan, out_dir=tmp_path / "full", executor="local", progress=False)
    assert full.computed == plan.total

    def stop_after_5(k, seen=[]):
        seen.append(k)
        if len(seen) == 5:
            raise KeyboardInterrupt

    part = run_sweep(plan, out_dir=tmp_path / "part", executor="local", progress=False, on_point=stop_after_5)
    assert part.status == "interrupted" and part.done == 5
    run_dir = tmp_path / "part"
    assert json.loads((run_dir / "status.json").read_text())["status"] == "interrupted"
    assert not (run_dir / "sweep.csv").exists() and not (run_dir / "meta.json").exists()
    with open(run_dir / POINTS_LOG, "a") as f:  # a kill in the middle of a write: a torn last line
        f.write('{"point": 7, "values": [')
    computed = []
    res = run_sweep(plan, resume=run_dir, executor="local", progress=False, on_point=computed.append)
    assert res.status == "finished" and sorted(computed) == list(range(5, plan.total))
    assert (run_dir / "sweep.csv").read_bytes() == (tmp_path / "full" / "sweep.csv").read_bytes()
    assert len(json.loads((run_dir / "status.json").read_text())["sessions"]) == 2
    # resuming a finished run computes nothing
    again = run_sweep(plan, resume=run_dir, executor="local", progress=False, on_point=computed.append)
    assert again.status == "finished" and again.computed == 0 and len(computed) == plan.total - 5


def test_sigterm_in_the_cli_exits_143_and_a_later_command_is_not_marked(tmp_path, capsys, monkeypatch):
    # a batch scheduler's SIGTERM: resumable like Ctrl-C, exit status 128 + 15 as a shell reports it;
    # the next command in the same process (main is called twice) starts with no signal recorded
    import signal

    import gcsim.sweep.run as sweep_run

    sf = sweep_file(tmp_path, {"seed": [1, 2, 3, 4]})
    real, calls = sweep_run.evaluate_point, []

    def terminated_at_the_third(plan, k, memo=None):
        calls.append(k)
        if len(calls) == 3:  # SIGTERM arrives: the handler in place runs (the sweep's own turns it into
            # an interrupt; called directly, so a regression fails this test instead of ending pytest)
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        return real(plan, k, memo)

    monkeypatch.setattr(sweep_run, "evaluate_point", terminated_at_the_third)
    out = tmp_path / "run"
    before = signal.getsignal(signal.SIGTERM)
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(out), "--no-progress"]) == 143
    assert f"--resume {out}" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before  # the sweep's handler was given back
    monkeypatch.setattr(sweep_run, "evaluate_point", real)
    restore = interrupt_sweep_points(monkeypatch, at_call=1)  # now a Ctrl-C
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(tmp_path / "b"), "--no-progress"]) == 130
    restore()


def test_ctrl_c_in_the_cli_leaves_a_resumable_run_and_says_how(tmp_path, capsys, monkeypatch):
    sf = sweep_file(tmp_path, {"seed": [1, 2, 3, 4, 5, 6]})
    restore = interrupt_sweep_points(monkeypatch, at_call=3)
    out = tmp_path / "run"
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(out), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert f"--resume {out}" in err and "2 of 6 points done" in err
    restore()
    # the same command again (as after a kill): refused, and told how to continue (a review found the
    # refusal said only "remove the directory or choose another")
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("gcsim: error: --out: expected a new or empty directory")
    assert err.endswith(f"; continue that sweep with: gcsim sweep {sf} --resume {out}")
    assert main(["sweep", str(sf), "--executor", "local", "--resume", str(out), "--no-progress"]) == 0
    assert "4 computed" in capsys.readouterr().out
    assert len(read_rows(out / "sweep.csv")) == 6


def test_resume_of_another_sweep_is_refused_in_one_line(tmp_path, capsys):
    sf = sweep_file(tmp_path, {"seed": [1, 2]})
    out = tmp_path / "run"
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    other = sweep_file(tmp_path, {"seed": [1, 3]}, name="other")
    assert main(["sweep", str(other), "--executor", "local", "--resume", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("gcsim: error: --resume:") and "grid.seed[1]: 2 there, 3 here" in err
    base2 = tmp_path / "base2.yaml"
    base2.write_text(yaml.safe_dump({"base": {**BASE, "iterations": 31}, "grid": {"seed": [1, 2]}}))
    assert main(["sweep", str(base2), "--executor", "local", "--resume", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "base.iterations: 30 there, 31 here" in err


@pytest.mark.parametrize("doc, field", [
    ({"base": BASE, "gird": {"n": [4]}}, "gird: expected one of the keys"),
    ({"base": BASE, "grid": {"n": [4, 0]}}, "grid.n[1]: expected"),
    ({"base": BASE, "grid": {"stragglers.delay.q": [0.1]}}, "grid.stragglers.delay.q: expected a field of the base"),
    ({"base": BASE, "grid": {"stragglers.delay.p": [0.1, 1.5]}}, "grid.stragglers.delay.p[1]: expected"),
    ({"base": BASE, "grid": {"schemes": ["gc-xx"]}}, "grid.schemes[0].name: expected one of uncoded"),
    ({"base": BASE, "grid": {"s": [1, -1]}}, "grid.s[1]: expected an integer >= 0, got -1"),
    ({"base": BASE, "grid": {"n": 4}}, "grid.n: expected a valid list, got 4"),
    ({"base": BASE, "grid": {"n": []}}, "grid.n: expected at least 1 item"),
    ({"base": {**BASE, "n_workers": "six"}, "grid": {"n": [4]}}, "base.n_workers: expected"),
    ({"base": "missing.yaml", "grid": {"n": [4]}}, "base: expected an existing scenario file"),
    ({"base": BASE, "grid": {"name": ["a"]}}, "grid.name: expected a scenario field other than name"),
    ({"base": BASE, "engine": "fast", "grid": {"n": [4]}}, "engine: expected"),
])
def test_bad_sweep_fields_are_one_line_exit_2(tmp_path, capsys, doc, field):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(doc))
    out = tmp_path / "run"
    assert main(["sweep", str(p), "--executor", "local", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"gcsim: error: {field}"), err
    assert "Traceback" not in err and not out.exists()


def test_bad_options_are_one_line_exit_2(tmp_path, capsys):
    sf = sweep_file(tmp_path, {"seed": [1]})
    for args, start in ((["--executor", "local", "--address", "127.0.0.1:1"], "--address: expected used only"),
                        (["--point", "5"], "--point: expected a point index in [0, 0]"),
                        (["--executor", "local", "--resume", str(tmp_path)],
                         "--resume: expected a sweep run directory"),
                        (["--executor", "local", "--out", str(tmp_path)], "--out: expected a new or empty directory")):
        assert main(["sweep", str(sf), "--no-progress", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith(f"gcsim: error: {start}"), err


def test_local_executor_leaves_ray_unimported(tmp_path):
    sf = sweep_file(tmp_path, {"seed": [1, 2]})
    code = ("import json, sys\nfrom gcsim.cli import main\n"
            f"rc = main(['sweep', {str(sf)!r}, '--executor', 'local', '--out', {str(tmp_path / 'run')!r}, "
            "'--no-progress'])\n"
            "print(json.dumps({'rc': rc, 'ray': 'ray' in sys.modules, 'torch': 'torch' in sys.modules}))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"rc": 0, "ray": False, "torch": False}


def test_inline_and_path_base_give_the_same_plan(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(BASE))
    by_path = validate_sweep({"base": "base.yaml", "grid": {"s": [0]}}, base_dir=tmp_path)
    inline = validate_sweep({"base": BASE, "grid": {"s": [0]}}, base_dir=tmp_path)
    assert by_path.identity() == inline.identity()
    with pytest.raises(ConfigError):
        validate_sweep({"base": BASE, "grid": {"n": [2], "n_workers": [3]}})


def test_resume_claim_respects_a_live_holder_and_takes_over_a_dead_or_reused_one(tmp_path):
    import os

    from gcsim.rundir import CLAIM_NAME, process_start_ticks
    from gcsim.sweep.run import _claim_existing

    marker = tmp_path / CLAIM_NAME
    ppid, ticks = os.getppid(), process_start_ticks(os.getppid())
    marker.write_text(f"{ppid} {ticks}\n" if ticks else f"{ppid}\n")  # a live process holds it
    with pytest.raises(ConfigError, match=rf"--resume: expected a sweep no other process is running, .*process {ppid} "
                                          r"holds it"):
        _claim_existing(tmp_path)
    if ticks:  # the same PID, a later process: the run that claimed it is gone
        marker.write_text(f"{ppid} {int(ticks) + 1}\n")
        assert _claim_existing(tmp_path).path == marker
        assert marker.read_text().split()[0] == str(os.getpid())


def test_a_running_sweep_keeps_its_status_current(tmp_path, monkeypatch):
    # status.json said points_done 0 for a whole session (found by a review): it now follows the run
    import gcsim.sweep.run as sweep_run

    monkeypatch.setattr(sweep_run, "STATUS_EVERY_S", 0.0)
    plan = load_sweep(sweep_file(tmp_path, {"seed": [1, 2, 3, 4]}))
    seen = []
    run_sweep(plan, out_dir=tmp_path / "run", executor="local", progress=False,
              on_point=lambda k: seen.append(json.loads((tmp_path / "run" / "status.json").read_text())))
    assert [st["points_done"] for st in seen] == [1, 2, 3, 4] and {st["status"] for st in seen} == {"running"}


def test_resume_with_out_is_one_line_before_the_header(tmp_path, capsys):
    # the "sweep NAME: N points ..." header was printed before this refusal (review)
    sf = sweep_file(tmp_path, {"seed": [1, 2]})
    assert main(["sweep", str(sf), "--resume", str(tmp_path / "r"), "--out", str(tmp_path / "o"),
                 "--executor", "local", "--no-progress"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("gcsim: error: --out: expected not given with --resume") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_bare_scheme_name_takes_the_base_entry_of_that_name(tmp_path):
    # the base lists cce-fr with m = 2: naming cce-fr on the axis keeps m = 2 (it drew exactly on gc-fr
    # with the default m = 1, review 2026-12-05); an m axis overrides it; a mapping is taken as written
    import copy

    base = copy.deepcopy(BASE)
    base["schemes"] = [{"name": "uncoded"}, {"name": "cce-fr", "s": 1, "m": 2}]
    p = tmp_path / "named.yaml"
    p.write_text(yaml.safe_dump({"name": "named", "base": base,
                                 "grid": {"schemes": ["cce-fr", {"name": "cce-fr", "s": 1}, "gc-fr"]}}))
    sw = load_sweep(p)
    def key(schemes):
        return [(sp["name"], sp.get("s"), sp.get("m")) for sp in schemes]

    got = [key(sw.point_data(k)["schemes"]) for k in range(3)]
    assert got == [[("cce-fr", 1, 2)],
                   [("cce-fr", 1, None)],  # a mapping as written: m defaults
                   [("gc-fr", None, None)]]  # not in the base: as named
    p.write_text(yaml.safe_dump({"name": "named", "base": base, "grid": {"schemes": ["cce-fr"], "m": [3]}}))
    assert key(load_sweep(p).point_data(0)["schemes"]) == [("cce-fr", 1, 3)]
