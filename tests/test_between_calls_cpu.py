"""Ray's CPU between a worker's calls (trace format 4 ``between_calls_cpu_s``): left to the measured
dispatch and transfer lags (``in-lags``) or kept after the partitions (``on-path``), findings 38-39."""

import numpy as np
import pandas as pd
import pytest
import yaml
from factories import make_trace, write_run_dir

from gcsim.compare.calibrate import BETWEEN_CALLS, DEFAULT_BETWEEN_CALLS, between_calls_cpu, calibrate
from gcsim.compare.pipeline import CompareOptions
from gcsim.compare.rundir import read_run_dir
from gcsim.compare.scenario_file import write_calibrated_scenario
from gcsim.errors import ConfigError

CALL_CPU_S = 0.003  # the call's own CPU (weights, encoding): the same on every row


def _run(tmp_path, *, with_column=True, missing_every=0):
    """A gc-fr run whose workers' per-call CPU is 3 ms of their own plus 2-6 ms of Ray's between calls."""
    its, wks = make_trace("gc-fr", n=6, s=1, iterations=40, seed=4, partitions=2)
    rng = np.random.default_rng(5)
    wks["compute_cpu_s"] = 0.054 * (1.0 + 0.1 * rng.standard_normal(len(wks)))
    between = rng.uniform(0.002, 0.006, len(wks))
    wks["cpu_s"] = wks["compute_cpu_s"] + CALL_CPU_S + between
    if with_column:
        wks["between_calls_cpu_s"] = between
        if missing_every:  # rows of an older executor: no between-call clock
            wks.loc[wks.index % missing_every == 0, "between_calls_cpu_s"] = np.nan
    cfg = {"name": "b", "n_workers": 6, "iterations": 40, "seed": 1, "schemes": [{"name": "gc-fr", "s": 1}],
           "workload": {"gradient_bytes": 1e6, "model_bytes": 1e6, "cores": 2,
                        "compute": {"dist": "constant", "value": 0.01}},
           "policy": "cancel"}
    (tmp_path).mkdir(parents=True, exist_ok=True)
    return write_run_dir(tmp_path / ("r" if with_column else "old"), {"gc-fr": (its, wks)}, n=6, config=cfg,
                         params={"gc-fr": (1, 1)})


def test_in_lags_leaves_only_the_calls_own_cpu_on_the_path(tmp_path):
    run = read_run_dir(_run(tmp_path))
    cal = calibrate(run, warmup=5, use_measured_cpu=True, between_calls="in-lags")
    # cpu_s - compute_cpu_s - between_calls_cpu_s is exactly the 3 ms of every call
    np.testing.assert_allclose(cal.overhead_values_s, CALL_CPU_S, rtol=1e-6)  # CSV precision
    assert cal.idle_cores_per_worker == pytest.approx(0.0, abs=1e-6)  # nothing left to charge per idle second
    note = next(n for n in cal.notes if n.startswith("Ray's CPU between calls"))
    sent = run.workers_of("gc-fr")
    sent = sent[(sent.iteration >= 5) & sent.send_s.notna()]
    assert f"mean {sent.between_calls_cpu_s.mean() * 1e3:.2f} ms on {len(sent)} of {len(sent)} calls" in note


def test_on_path_ignores_the_column_as_before_format_4(tmp_path):
    # on-path calibrates a format-4 trace exactly as the same trace without the column
    on = calibrate(read_run_dir(_run(tmp_path)), warmup=5, use_measured_cpu=True, between_calls="on-path")
    old = calibrate(read_run_dir(_run(tmp_path, with_column=False)), warmup=5, use_measured_cpu=True,
                    between_calls="in-lags")
    np.testing.assert_array_equal(on.overhead_values_s, old.overhead_values_s)
    assert on.idle_cores_per_worker == old.idle_cores_per_worker
    assert on.overhead_values_s.mean() > CALL_CPU_S + 0.002  # the between-call CPU is in it
    assert any("kept in the per-call CPU after the partitions (--between-calls-cpu on-path)" in n for n in on.notes)
    assert not any("left off" in n for n in on.notes)
    # asked for in-lags, the old trace says its calls keep their whole per-call CPU
    assert any("have no between_calls_cpu_s (a trace before format 4" in n for n in old.notes)
    assert on.describe()["between_calls_cpu"] == "on-path" and old.describe()["between_calls_cpu"] == "in-lags"


def test_rows_without_the_column_keep_their_whole_per_call_cpu(tmp_path):
    run = read_run_dir(_run(tmp_path, missing_every=3))
    cal = calibrate(run, warmup=5, use_measured_cpu=True, between_calls="in-lags", speed_variation=False)
    wk = run.workers_of("gc-fr")
    wk = wk[(wk.iteration >= 5) & wk.send_s.notna()]
    whole = (wk.cpu_s - wk.compute_cpu_s)[wk.between_calls_cpu_s.isna()].to_numpy()
    assert whole.size and (whole > CALL_CPU_S).all()
    over = np.sort(cal.overhead_values_s)
    # every row with the column gives 3 ms; the others their cpu_s - compute_cpu_s (idle split aside)
    assert np.sum(np.isclose(over, CALL_CPU_S, rtol=1e-6)) >= len(wk) - whole.size - 2
    assert any(f"{whole.size} of {len(wk)} calls have no between_calls_cpu_s" in n for n in cal.notes)


def test_between_calls_cpu_reads_nan_without_the_column():
    assert np.isnan(between_calls_cpu(pd.DataFrame({"cpu_s": [0.1, 0.2]}))).all()
    np.testing.assert_array_equal(between_calls_cpu(pd.DataFrame({"between_calls_cpu_s": [0.004, -1e-6, None]})),
                                  [0.004, 0.0, np.nan])


def test_a_bad_model_is_refused_by_name(tmp_path):
    run = read_run_dir(_run(tmp_path))
    with pytest.raises(ConfigError, match=r"--between-calls-cpu: expected one of in-lags, on-path, got 'lag'"):
        calibrate(run, use_measured_cpu=True, between_calls="lag")
    with pytest.raises(ConfigError, match="--between-calls-cpu"):
        CompareOptions(between_calls_cpu="off")
    assert DEFAULT_BETWEEN_CALLS in BETWEEN_CALLS
    assert CompareOptions().between_calls_cpu == DEFAULT_BETWEEN_CALLS


def test_gcsim_calibrate_writes_the_calls_own_cpu(tmp_path):
    path = _run(tmp_path)
    out, side = write_calibrated_scenario(read_run_dir(path), tmp_path / "c.yaml", command="gcsim calibrate",
                                          warmup=5, between_calls_cpu="in-lags")
    data = yaml.safe_load(out.read_text())
    spec = data["workload"]["call_overhead"]
    if spec.get("file"):
        values = pd.read_csv(out.parent / spec["file"])["seconds"].to_numpy()
    else:
        values = np.atleast_1d(spec.get("values", spec.get("value")))
    np.testing.assert_allclose(values, CALL_CPU_S, rtol=1e-6)
    assert "left off the per-call CPU" in out.read_text()
    assert "(Ray's CPU between calls left to the lags: --between-calls-cpu in-lags)" in out.read_text()


def test_pooling_an_old_trace_with_a_new_one_warns(tmp_path):
    from gcsim.compare.scenario_file import pooled_differences

    new, old = read_run_dir(_run(tmp_path)), read_run_dir(_run(tmp_path, with_column=False))
    assert not any("between_calls_cpu_s" in w for w in pooled_differences([new, new]))
    warn = [w for w in pooled_differences([new, old]) if w.startswith("between_calls_cpu_s")]
    assert len(warn) == 1 and f"recorded in run(s) {new.label} but not in {old.label}" in warn[0]


def test_the_cli_refuses_the_model_without_measured_cpu(tmp_path, capsys):
    from gcsim.cli import main

    path = str(_run(tmp_path))
    other = next(m for m in BETWEEN_CALLS if m != DEFAULT_BETWEEN_CALLS)  # the default is harmless
    assert main(["compare", path, "--cpu-source", "wall", "--between-calls-cpu", other,
                 "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gcsim: error: --between-calls-cpu: expected to be used with "
                                               "--cpu-source measured")
    assert not (tmp_path / "c").exists()
    assert main(["calibrate", path, "--between-calls-cpu", "lags", "--out", str(tmp_path / "x.yaml")]) == 2
    assert "--between-calls-cpu" in capsys.readouterr().err


def test_the_pooled_background_caps_use_the_calibrations_model(tmp_path, monkeypatch):
    # a pooled calibration caps each run's fitted background by that run calibrated alone: with the same
    # model of the between-call CPU as the pooled one (else the idle-time CPU in the cap is another's)
    import gcsim.compare.calibrate as calibrate_module
    from gcsim.compare.worker_share import fit_pooled_background

    runs = [read_run_dir(_run(tmp_path / k)) for k in ("a", "b")]
    for model in BETWEEN_CALLS:
        cal = calibrate(runs, warmup=5, use_measured_cpu=True, between_calls=model)
        assert cal.between_calls == model
        seen = []
        real = calibrate_module.calibrate

        def spy(*args, **kwargs):
            seen.append(kwargs.get("between_calls"))
            return real(*args, **kwargs)

        monkeypatch.setattr(calibrate_module, "calibrate", spy)
        fit_pooled_background(runs, cal, warmup=5)
        monkeypatch.setattr(calibrate_module, "calibrate", real)
        assert seen == [model, model]
