"""`gcsim study`: real runs per scheme (resumable), the comparison and the headline, on a tiny
CIFAR-10-layout data set written to disk (one Ray start for the module)."""

from __future__ import annotations

import json
import os
import shutil

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest
from factories import make_image_folder, tiny_real_scenario

ray = pytest.importorskip("ray")
pytest.importorskip("torch")  # the study trains models

from gcsim.cli import main  # noqa: E402
from gcsim.errors import ConfigError, RunDirError  # noqa: E402
from gcsim.real.config import resolve_config  # noqa: E402
from gcsim.real.data import prepare_from_image_folder  # noqa: E402
from gcsim.real.runner import run_real  # noqa: E402
from gcsim.study import StudyOptions, run_study  # noqa: E402
from gcsim.study.headline import HEADLINE_COLUMNS  # noqa: E402
from gcsim.study.machine import cpu_model_name  # noqa: E402
from gcsim.rundir import set_aside  # noqa: E402
from gcsim.study.plan import plan_run  # noqa: E402

N, ITERS, BATCH, EVAL = 4, 6, 16, 3
SCHEMES = ["uncoded", "gc-fr"]


@pytest.fixture(scope="module")
def env(tmp_path_factory, module_ray):
    root = tmp_path_factory.mktemp("study")
    make_image_folder(root / "src", train_per_class=8, test_per_class=3)
    prepare_from_image_folder(root / "src", root / "data")
    tiny_real_scenario(root / "tiny.yaml", n=N, iterations=50, seed=3,
                       schemes=[{"name": "uncoded"}, {"name": "gc-fr", "s": 1}, {"name": "pgc-fr", "s": 1}],
                       stragglers={"delay": {"dist": "bimodal", "p": 0.3, "delay": 0.2}})
    yield root


def _options(env, **over):
    opts = dict(scenario=env / "tiny.yaml", schemes=SCHEMES, iterations=ITERS, out_dir=env / "out",
                runs_root=env / "runs", data_dir=env / "data", batch_size=BATCH, eval_every=EVAL, replications=2)
    opts.update(over)
    return StudyOptions(**opts)


def _argv(env, **over):
    args = {"--schemes": ",".join(SCHEMES), "--iterations": ITERS, "--out": env / "out", "--runs-root": env / "runs",
            "--data-dir": env / "data", "--batch-size": BATCH, "--eval-every": EVAL, "--replications": 2}
    args.update(over)
    argv = ["study", str(env / "tiny.yaml"), "--no-progress"]
    for k, v in args.items():
        argv += [k, str(v)]
    return argv


@pytest.fixture(scope="module")
def first(env):
    """A gc-fr run of 3 iterations exists already (resumed to 6); uncoded starts from nothing."""
    spec = resolve_config("gc-fr", env / "tiny.yaml", iterations=3, batch_size=BATCH, eval_every=EVAL,
                          data_dir=str(env / "data"))
    assert run_real(spec, env / "runs" / "gc-fr", progress=False).iterations_done == 3
    lines: list[str] = []
    result = run_study(_options(env), command="gcsim study tiny.yaml", log=lines.append)
    return result, lines


def test_runs_are_started_or_resumed_and_complete(env, first):
    result, lines = first
    assert result.status == "finished"
    assert [r.plan.action for r in result.runs] == ["start", "resume"]
    assert any("uncoded: starting (new run)" in x for x in lines)
    assert any("gc-fr: resuming (finished with 3 iterations, extending to 6)" in x for x in lines)
    for scheme in SCHEMES:
        d = env / "runs" / scheme
        it = pd.read_csv(d / "iterations.csv")
        assert it["iteration"].tolist() == list(range(ITERS)) and set(it["scheme"]) == {scheme}
        status = json.loads((d / "status.json").read_text())
        assert status["status"] == "finished" and status["iterations_done"] == ITERS
        assert (d / "meta.json").is_file()
    assert json.loads((env / "runs" / "gc-fr" / "status.json").read_text())["sessions"] == 2


def test_output_files_have_their_rows_and_columns(env, first):
    out = env / "out"
    val = pd.read_csv(out / "validation.csv")
    assert val["scheme"].tolist() == SCHEMES and {"obs_mean_s", "sim_p95_s", "err_mean", "verdict"} <= set(val)
    head = pd.read_csv(out / "headline.csv")
    assert list(head.columns) == HEADLINE_COLUMNS and head["scheme"].tolist() == SCHEMES
    for name in ("report.md", "calibration.json", "cdf.png", "qq.png", "predicted_vs_measured.png",
                 "timeline_uncoded.png", "timeline_gc-fr.png", "accuracy.png", "accuracy_time.png",
                 "time_to_accuracy.csv", "headline.md"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    img = mpimg.imread(out / "accuracy.png")
    assert img.ndim == 3 and img.shape[1] > img.shape[0] > 200
    manifest = json.loads((out / "study.json").read_text())
    assert set(manifest["files"]) == {p.name for p in out.iterdir() if p.name != "study.json"}
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no temporary directory left


def test_headline_values_come_from_the_runs(env, first):
    head = pd.read_csv(env / "out" / "headline.csv").set_index("scheme")
    val = pd.read_csv(env / "out" / "validation.csv").set_index("scheme")
    warmup = min(10, ITERS // 5)
    means = {}
    for scheme in SCHEMES:
        d = env / "runs" / scheme
        dur = pd.read_csv(d / "iterations.csv")["duration_s"].to_numpy(float)[warmup:]
        h = head.loc[scheme]
        means[scheme] = dur.mean()
        assert h["iterations"] == ITERS and h["warmup"] == warmup and bool(h["exact"])
        assert (h["n"], h["s"], h["m"]) == (N, 0 if scheme == "uncoded" else 1, 1)
        assert h["measured_mean_s"] == pytest.approx(dur.mean(), rel=1e-6)
        assert h["measured_p95_s"] == pytest.approx(np.quantile(dur, 0.95), rel=1e-6)
        assert h["simulated_mean_s"] == pytest.approx(val.loc[scheme, "sim_mean_s"], rel=1e-6)
        # abs: the CSV's means carry 9 significant digits, which matters when the error itself is ~1e-5
        assert h["err_mean"] == pytest.approx(h["simulated_mean_s"] / h["measured_mean_s"] - 1, rel=1e-5, abs=1e-7)
        assert h["verdict"] == val.loc[scheme, "verdict"]
        mt = pd.read_csv(d / "metrics.csv")
        assert mt["iteration"].tolist() == [2, 5]
        assert h["test_accuracy"] == pytest.approx(mt["test_accuracy"].iloc[-1])
    assert head.loc["uncoded", "measured_speedup_vs_uncoded"] == pytest.approx(1.0)
    assert head.loc["gc-fr", "measured_speedup_vs_uncoded"] == pytest.approx(means["uncoded"] / means["gc-fr"], rel=1e-5)
    a = pd.read_csv(env / "runs" / "gc-fr" / "metrics.csv")["test_accuracy"].to_numpy()
    b = pd.read_csv(env / "runs" / "uncoded" / "metrics.csv")["test_accuracy"].to_numpy()
    assert head.loc["gc-fr", "accuracy_gap_vs_uncoded"] == pytest.approx(np.abs(a - b).max(), abs=1e-9)
    tta = pd.read_csv(env / "out" / "time_to_accuracy.csv")  # issue 14: the study's time to accuracy
    assert tta.columns.tolist() == ["scheme", "target", "iterations", "wall_s"] and len(tta) == 2 * len(SCHEMES)
    for scheme in SCHEMES:
        d = env / "runs" / scheme
        mt, dur = pd.read_csv(d / "metrics.csv"), pd.read_csv(d / "iterations.csv")["duration_s"].to_numpy(float)
        for target in (0.4, 0.5):
            row = tta[(tta.scheme == scheme) & (tta.target == target)].iloc[0]
            hit = mt[mt["test_accuracy"] >= target]
            want_it = hit["iteration"].iloc[0] + 1 if len(hit) else np.nan
            want_s = dur[: int(want_it)].sum() if len(hit) else np.nan
            pct = round(target * 100)
            for got in (row["iterations"], head.loc[scheme, f"iterations_to_{pct}pct"]):
                assert got == pytest.approx(want_it, nan_ok=True)
            for got in (row["wall_s"], head.loc[scheme, f"wall_s_to_{pct}pct"]):
                assert got == pytest.approx(want_s, rel=1e-6, nan_ok=True)
    md = (env / "out" / "headline.md").read_text()
    assert "gcsim study tiny.yaml" in md and cpu_model_name() in md and f"{os.cpu_count()} CPUs" in md
    assert "ray 2." in md and "torch 2." in md and "| `gc-fr` | 1 | 1 | 6 |" in md


def test_second_invocation_skips_finished_runs(env, first, capsys):
    stamps = {p: p.stat().st_mtime_ns for s in SCHEMES for p in (env / "runs" / s).iterdir()}
    (env / "out" / "README.md").write_text("findings written by a person\n")
    before = pd.read_csv(env / "out" / "headline.csv")
    capsys.readouterr()
    rc = main(_argv(env))
    out = capsys.readouterr().out
    head = pd.read_csv(env / "out" / "headline.csv")
    assert rc == (1 if (head["verdict"] == "fail").any() else 0)
    assert f"[1/2] uncoded: skipped, finished ({ITERS} iterations)" in out and "gc-fr: skipped" in out
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # nothing in the run dirs was rewritten
    assert not [p for s in SCHEMES for p in (env / "runs" / s).iterdir() if p not in stamps]
    pd.testing.assert_frame_equal(head[["measured_mean_s", "measured_p95_s", "test_accuracy"]],
                                  before[["measured_mean_s", "measured_p95_s", "test_accuracy"]])
    assert (env / "out" / "README.md").read_text() == "findings written by a person\n"
    assert "--iterations 6" in (env / "out" / "headline.md").read_text()


@pytest.mark.parametrize("over, field", [
    ({"--schemes": "uncoded,nope"}, "--schemes"),
    ({"--schemes": "uncoded,gc-cr"}, "--schemes"),  # a scheme, but not in the scenario's list
    ({"--schemes": "gc-fr,gc-fr"}, "--schemes"),
    ({"--iterations": "0"}, "--iterations"),
    ({"--batch-size": "8"}, "real.yaml: batch_size"),  # the existing run dirs used 16
])
def test_bad_input_is_one_line_exit_2(env, first, capsys, over, field):
    capsys.readouterr()
    assert main(_argv(env, **over)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "expected" in err


def test_out_that_is_a_file_is_refused_before_running(env, first, capsys, tmp_path):
    (tmp_path / "file").write_text("x")
    capsys.readouterr()
    assert main(_argv(env, **{"--out": tmp_path / "file", "--runs-root": tmp_path / "runs"})) == 2
    assert "--out" in capsys.readouterr().err and not (tmp_path / "runs").exists()


def test_runs_root_that_is_a_file_is_refused_before_running(env, first, capsys, tmp_path):
    """It was a traceback (NotADirectoryError) after Ray had started."""
    (tmp_path / "file").write_text("x")
    capsys.readouterr()
    assert main(_argv(env, **{"--out": tmp_path / "out", "--runs-root": tmp_path / "file"})) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gcsim: error: --runs-root: expected a directory (created if absent), got '{tmp_path / 'file'}'"]
    assert (tmp_path / "file").read_text() == "x"


def _copy_run(env, tmp_path, scheme="gc-fr"):
    d = tmp_path / scheme
    shutil.copytree(env / "runs" / scheme, d)
    return d


def _cfg(env, iterations=ITERS, **over):
    opts = dict(iterations=iterations, batch_size=BATCH, eval_every=EVAL, data_dir=str(env / "data"))
    opts.update(over)
    return resolve_config("gc-fr", env / "tiny.yaml", **opts)


def _set_status(d, status, **fields):
    data = json.loads((d / "status.json").read_text())
    data.update(status=status, **fields)
    (d / "status.json").write_text(json.dumps(data))


def test_plan_resume_restart_and_live_runs(env, first, tmp_path):
    d = _copy_run(env, tmp_path)
    assert plan_run(d, _cfg(env)).action == "skip"
    p = plan_run(d, _cfg(env, iterations=10))
    assert (p.action, p.from_iteration) == ("resume", ITERS)
    (d / "meta.json").unlink()
    _set_status(d, "interrupted", pid=None)
    p = plan_run(d, _cfg(env, iterations=10))
    assert (p.action, p.from_iteration, p.reason) == ("resume", ITERS, "interrupted at iteration 6 of 10")
    _set_status(d, "running", pid=os.getppid())  # a live process that is not this one
    with pytest.raises(RunDirError, match="still alive"):
        plan_run(d, _cfg(env, iterations=10))
    _set_status(d, "failed", pid=None)
    (d / "checkpoint.pt").write_bytes(b"not a checkpoint")
    assert plan_run(d, _cfg(env, iterations=10)).action == "restart"
    (d / "checkpoint.pt").unlink()
    p = plan_run(d, _cfg(env, iterations=10))
    assert p.action == "restart" and "no usable checkpoint" in p.reason
    moved = set_aside(d)
    assert not d.exists() and moved.name.startswith(".gc-fr.abandoned-") and (moved / "real.yaml").is_file()
    assert plan_run(d, _cfg(env)).action == "start"


def test_plan_refuses_a_run_of_another_configuration(env, first, tmp_path):
    d = _copy_run(env, tmp_path)
    # the seed is a run fact: config.yaml holds it (real.yaml before issue 11)
    with pytest.raises(ConfigError, match=r"config.yaml: seed: expected 4 .*got 3"):
        plan_run(d, _cfg(env, seed=4))
    spec = _cfg(env)
    sc = spec.scenario
    other = sc.model_copy(update={"stragglers": sc.stragglers.model_copy(update={"delay": None})})
    with pytest.raises(ConfigError, match="config.yaml: stragglers"):
        plan_run(d, spec.with_scenario(other))
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x.txt").write_text("x")
    with pytest.raises(RunDirError, match="without real.yaml"):
        plan_run(tmp_path / "junk", _cfg(env))


def test_publish_replaces_only_its_own_files(tmp_path):
    from gcsim.study.output import publish

    out = tmp_path / "validation"
    out.mkdir()
    (out / "README.md").write_text("by hand")

    def fill_two(d):
        (d / "a.csv").write_text("1")
        (d / "timeline_old.png").write_text("2")
        return ["a.csv", "timeline_old.png"]

    publish(out, fill_two, {"command": "x"})
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "a.csv", "study.json", "timeline_old.png"]

    def fill_fails(d):
        (d / "a.csv").write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        publish(out, fill_fails, {})
    assert (out / "a.csv").read_text() == "1" and not [p for p in out.iterdir() if p.name.startswith(".")]

    def fill_one(d):
        (d / "a.csv").write_text("3")
        return ["a.csv"]

    publish(out, fill_one, {})
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "a.csv", "study.json"]  # stale PNG removed
    assert (out / "a.csv").read_text() == "3" and (out / "README.md").read_text() == "by hand"


def test_missing_data_is_refused_before_out_and_runs_root_are_created(capsys, tmp_path):
    """A study without CIFAR-10 said so in one line, but only after creating --out and --runs-root."""
    capsys.readouterr()
    argv = ["study", "--schemes", "uncoded", "--iterations", "3", "--data-dir", str(tmp_path / "no-data"),
            "--out", str(tmp_path / "out"), "--runs-root", str(tmp_path / "runs"), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gcsim: error: --data-dir: expected a directory holding CIFAR-10")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_signal_after_a_runs_last_iteration_stops_the_study_there(monkeypatch, tmp_path):
    # the run finished as SIGTERM came (RealRunResult.late_signal): it is kept, and no other run starts
    # (before, the next run's stop flag forgot the signal and the study went on; review)
    import contextlib
    from types import SimpleNamespace

    import gcsim.real.runner as runner
    from gcsim.real.runner import RealRunResult
    from gcsim.study.pipeline import _execute_runs

    called = []

    def fake_resume(run_dir, **k):
        called.append(run_dir)
        return RealRunResult(run_dir, "finished", ITERS, {}, late_signal="SIGTERM")

    monkeypatch.setattr(runner, "resume_real", fake_resume)
    monkeypatch.setattr(runner, "ray_session", lambda **k: contextlib.nullcontext())
    runs = [SimpleNamespace(scheme=s, spec=SimpleNamespace(ray_kwargs=dict, iterations=ITERS),
                            plan=SimpleNamespace(action="resume", run_dir=tmp_path / s, reason="interrupted",
                                                  from_iteration=2))
            for s in SCHEMES]
    lines: list[str] = []
    assert _execute_runs(runs, progress=False, log=lines.append) is False
    assert called == [tmp_path / SCHEMES[0]]
    assert "SIGTERM arrived after its last iteration, so the study stops here" in lines[-1]
