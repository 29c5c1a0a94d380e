"""``gcsim compare``: the no-argument form, outputs on disk, and the one-line errors (exit 2)."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from factories import simulated_run

from gcsim.cli import main
from gcsim.compare.rundir import newest_runs

FAST = ["--replications", "2", "--bootstrap", "300", "--no-progress"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """runs/real with an old and a new uncoded run, a gc-fr run and a newer gc-fr run still running."""
    base = tmp_path_factory.mktemp("runs")
    real = base / "real"
    simulated_run(real / "uncoded-20250101T000000Z", [{"name": "uncoded"}], seed=3, iterations=60,
                  created_utc="2025-01-01T00:00:00+00:00")
    simulated_run(real / "uncoded-20250102T000000Z", [{"name": "uncoded"}], created_utc="2025-01-02T00:00:00+00:00")
    simulated_run(real / "gc-fr-20250102T000000Z", [{"name": "gc-fr", "s": 1}],
                  created_utc="2025-01-02T00:00:01+00:00")
    partial = real / "gc-fr-20250103T000000Z"
    shutil.copytree(real / "gc-fr-20250102T000000Z", partial)
    (partial / "meta.json").unlink()  # half-written: meta.json comes last
    simulated_run(base / "other" / "uncoded-n4", [{"name": "uncoded"}], n=4, iterations=40)
    return base


def _run(capsys, *args):
    rc = main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_newest_runs_picks_the_newest_complete_run_per_scheme(root):
    skipped = []
    found = newest_runs(root / "real", skipped=skipped)
    assert [(f.path.name, f.schemes) for f in found] == [("gc-fr-20250102T000000Z", ("gc-fr",)),
                                                        ("uncoded-20250102T000000Z", ("uncoded",))]
    assert len(skipped) == 1 and "gc-fr-20250103T000000Z/meta.json: missing" in skipped[0]


def test_no_argument_form_compares_newest_runs_and_writes_outputs(root, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = _run(capsys, "--runs-root", root / "real", "--mode", "paired", *FAST)
    assert rc == 0, err
    assert "skipped" in err and "gc-fr-20250103T000000Z" in err
    assert "ranking (fastest first): observed gc-fr < uncoded" in out
    (out_dir,) = list((tmp_path / "runs" / "compare").iterdir())  # default runs/compare/<UTC timestamp>/
    assert out.strip().endswith(f"wrote {Path('runs/compare') / out_dir.name}")
    table = pd.read_csv(out_dir / "validation.csv")
    assert sorted(table["run"]) == ["gc-fr-20250102T000000Z", "uncoded-20250102T000000Z"]
    assert set(table["verdict"]) == {"pass"}  # each run against its own calibrated replay
    assert (table["replications"] == 2).all() and (table["warmup"] == 10).all()
    pngs = ["cdf.png", "qq.png", "predicted_vs_measured.png", "timeline_gc-fr.png", "timeline_uncoded.png"]
    report = (out_dir / "report.md").read_text()
    assert "- CPU: wall." in report  # --cpu-source auto: each run calibrated from itself
    for name in pngs:
        data = (out_dir / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
        assert f"]({name})" in report
    cal = json.loads((out_dir / "calibration.json").read_text())
    assert len(cal) == 2 and all(c["n_workers"] == 6 for c in cal.values())


def test_explicit_run_with_calibrate_from_and_tight_band_fails(root, tmp_path, capsys):
    rc, out, err = _run(capsys, root / "real" / "gc-fr-20250102T000000Z", "--calibrate-from",
                        root / "real" / "uncoded-20250102T000000Z", "--mean-band", "0.0001", "--p95-band", "0.0001",
                        "--no-control-variate", "--out", tmp_path / "o", *FAST)
    assert rc == 1 and "FAIL" in out and "calibrated from uncoded-20250102T000000Z" in out
    row = pd.read_csv(tmp_path / "o" / "validation.csv").iloc[0]
    assert row["calibrated_from"] == "uncoded-20250102T000000Z" and row["verdict"] == "fail"
    report = (tmp_path / "o" / "report.md").read_text()
    # the recorded command reruns: a flag is written as its own spelling, not "--control-variate False"
    assert " --no-control-variate " in report and "--control-variate False" not in report
    assert "Errors in expectation not computed (--no-control-variate)" in report
    assert "- CPU: measured;" in report  # --cpu-source auto with --calibrate-from: the workers' CPU clocks


def test_calibrate_from_other_n_is_refused_naming_n(root, tmp_path, capsys):
    rc, out, err = _run(capsys, root / "real" / "gc-fr-20250102T000000Z", "--calibrate-from",
                        root / "other" / "uncoded-n4", "--out", tmp_path / "o", *FAST)
    assert rc == 2 and out == ""
    assert err == ("gcsim: error: n: expected 4 (as in calibration run uncoded-n4), "
                   "got 6 (run gc-fr-20250102T000000Z)\n")
    assert not (tmp_path / "o").exists()


def _break_missing_meta(d):
    (d / "meta.json").unlink()


def _break_version(d):
    meta = json.loads((d / "meta.json").read_text())
    meta["trace_format_version"] = 5
    (d / "meta.json").write_text(json.dumps(meta))


def _break_missing_csv(d):
    (d / "iterations.csv").unlink()


def _break_truncated_csv(d):
    text = (d / "iterations.csv").read_text()
    (d / "iterations.csv").write_text(text[: len(text) // 2])


def _break_columns(d):
    df = pd.read_csv(d / "workers.csv").drop(columns=["arrival_s"])
    df.to_csv(d / "workers.csv", index=False)


def _break_status(d):
    (d / "status.json").write_text(json.dumps({"status": "running", "iterations_done": 3}))  # gcsim real format


def _break_config(d):
    (d / "config.yaml").write_text("n_workers: [unclosed\n")


@pytest.mark.parametrize("breaker, expected", [
    (_break_missing_meta, "meta.json: missing"),
    (_break_version, "meta.json: trace_format_version: expected one of [1, 2, 3, 4], got 5"),
    (_break_missing_csv, "iterations.csv: missing"),
    (_break_truncated_csv, "iterations.csv: column "),
    (_break_columns, "workers.csv: missing columns ['arrival_s']"),
    (_break_status, "status.json: status: expected a finished run, got 'running'"),
    (_break_config, "config.yaml: unreadable YAML"),
])
def test_bad_run_dirs_give_one_line_errors(root, tmp_path, capsys, breaker, expected):
    d = tmp_path / "bad"
    shutil.copytree(root / "real" / "uncoded-20250102T000000Z", d)
    breaker(d)
    rc, out, err = _run(capsys, d, "--out", tmp_path / "o", *FAST)
    assert rc == 2 and out == ""
    assert err.startswith(f"gcsim: error: {d}/") and expected in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("args, expected", [
    (["--mean-band", "-1"], "--mean-band: expected a fraction in (0, 10]"),
    (["--replications", "0"], "--replications: expected an integer >= 1, got 0"),
    (["--warmup", "59"], "--warmup: expected at most 58"),
    (["--runs-root", "nowhere"], "--runs-root: expected a directory holding run directories, got 'nowhere'"),
    # options acting on the measured CPU are refused with wall time, not ignored (a review found a row
    # labelled "given machine state" that was the plain wall-time prediction)
    (["--load-from", "target"], "got '--load-from target with --cpu-source auto, which is wall without "
                                "--calibrate-from'"),
    (["--cpu-source", "wall", "--speed-from", "target"], "got '--speed-from target with --cpu-source wall'"),
    (["--cpu-source", "wall", "--speed-drift", "0.05"], "--speed-drift: expected to be used with --cpu-source"),
    # a drift given where no prediction interval is made: it was silently ignored (review)
    (["--cpu-source", "measured", "--speed-drift", "0.05"], "got '0.05 with no --calibrate-from (each run "
                                                            "calibrated on itself: in sample, no prediction)'"),
    (["--calibrate-from", "CAL", "--mode", "paired", "--speed-drift", "0.05"], "got \"0.05 with --mode paired (a replay"),
    (["--calibrate-from", "CAL", "--speed-from", "target", "--speed-drift", "0.05"],
     "--speed-drift: expected a prediction interval's drift only for predictions"),
])
def test_bad_options_give_one_line_errors(root, tmp_path, capsys, monkeypatch, args, expected):
    monkeypatch.chdir(tmp_path)
    extra = [] if "--runs-root" in args else [root / "real" / "uncoded-20250101T000000Z"]
    args = [str(root / "real" / "uncoded-20250102T000000Z") if a == "CAL" else a for a in args]
    rc, out, err = _run(capsys, *extra, "--out", tmp_path / "o", *FAST, *args)  # args last: they win
    assert rc == 2 and expected in err and err.count("\n") == 1


def test_non_empty_out_is_refused(root, tmp_path, capsys):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "keep.txt").write_text("x")
    rc, _, err = _run(capsys, root / "real" / "uncoded-20250102T000000Z", "--out", tmp_path / "o", *FAST)
    assert rc == 2 and "--out: expected a new or empty directory" in err


def test_a_run_given_twice_is_refused(root, tmp_path, capsys):
    """It was compared twice (two identical rows, counted twice in the ranking), where calibrate and
    --calibrate-from refuse a run given twice."""
    run = root / "real" / "gc-fr-20250102T000000Z"
    rc, out, err = _run(capsys, run, str(run) + "/", "--out", tmp_path / "o", *FAST)
    assert rc == 2 and err.strip().splitlines() == [
        f"gcsim: error: RUN_DIR: expected distinct run directories (a run given twice would count double), "
        f"got '{run} {run}/'"]
    assert not (tmp_path / "o").exists()


def test_a_calibration_too_short_for_the_drift_says_why_there_is_no_prediction_interval(root, tmp_path, capsys):
    short = simulated_run(tmp_path / "uncoded-short", [{"name": "uncoded"}], iterations=30)
    rc, out, err = _run(capsys, root / "real" / "gc-fr-20250102T000000Z", "--calibrate-from", short,
                        "--no-control-variate", "--out", tmp_path / "o", *FAST)
    assert rc in (0, 1), err
    assert "note: no prediction interval: the machine's speed drift could not be measured on the calibration " \
           "run(s) uncoded-short" in err
    assert "no prediction interval" in (tmp_path / "o" / "report.md").read_text()
    assert pd.read_csv(tmp_path / "o" / "validation.csv")["err_mean_pi_lo"].isna().all()


def test_wall_time_says_why_there_is_no_prediction_interval(root, tmp_path, capsys):
    # the PI column was "-" without a reason under --cpu-source wall (found by a review)
    src = simulated_run(tmp_path / "uncoded-w", [{"name": "uncoded"}])
    rc, out, err = _run(capsys, root / "real" / "gc-fr-20250102T000000Z", "--calibrate-from", src,
                        "--cpu-source", "wall", "--no-control-variate", "--out", tmp_path / "o", *FAST)
    assert rc in (0, 1), err
    assert ("note: no prediction interval with --cpu-source wall: the machine's drift is measured on the "
            "workers' CPU clocks (--cpu-source measured, the default with --calibrate-from)") in err
    assert pd.read_csv(tmp_path / "o" / "validation.csv")["err_mean_pi_lo"].isna().all()
