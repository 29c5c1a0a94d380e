"""The CPU-speed probe (issue 9): every real run times a few partition gradients on every worker
before its first iteration and after its last (meta.json ``cpu_probe``); ``gcsim compare
--speed-from probe`` scales a calibration's CPU work per partition by the target's probe over the
calibration run's, so a machine that runs faster or slower than when the calibration run was made
is predicted from a measurement of the machine, not of the target's iterations."""

import json

import numpy as np
import pytest

from gcsim.cli import main
from gcsim.compare.pipeline import CompareOptions, compare_runs, probe_cpu_s, speed_ratio
from gcsim.compare.rundir import read_run_dir
from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate
from factories import random_images

C = 0.03  # CPU-seconds per partition in the calibration run


def _run(tmp_path, name, compute_s, schemes, probe_s):
    """A simulated run whose workers' CPU per partition is ``compute_s`` (two cores, no background),
    with a ``cpu_probe`` of ``probe_s`` CPU-seconds per partition written into its meta.json
    (None: no probe, as in runs made before it existed)."""
    from gcsim.sim.output import write_sim_run

    sc = validate_scenario({
        "name": name, "n_workers": 6, "iterations": 40, "seed": 3, "schemes": schemes,
        "workload": {"gradient_bytes": 0, "cores": 2.0, "compute": {"dist": "constant", "value": compute_s}},
        "master": {"decode_s": {"dist": "constant", "value": 0.002}},
        "stragglers": {"delay": {"dist": "constant", "value": 0.0}}})
    path = write_sim_run(simulate(sc), sc, tmp_path / name)
    if probe_s is not None:
        meta = json.loads((path / "meta.json").read_text())
        meta["cpu_probe"] = {"start": {"median_cpu_s": probe_s, "reps": 5, "workers": 6},
                             "end": {"median_cpu_s": probe_s * 1.01, "reps": 5, "workers": 6}}
        (path / "meta.json").write_text(json.dumps(meta))
    return read_run_dir(path)


def test_probe_of_a_run_and_the_ratio(tmp_path):
    src = _run(tmp_path, "src", C, [{"name": "uncoded"}], C)
    tgt = _run(tmp_path, "tgt", 1.3 * C, [{"name": "gc-fr", "s": 1}], 1.3 * C)
    old = _run(tmp_path, "old", C, [{"name": "uncoded"}], None)
    assert probe_cpu_s(src) == pytest.approx(C) and probe_cpu_s(src, "end") == pytest.approx(1.01 * C)
    assert np.isnan(probe_cpu_s(old))
    assert speed_ratio([src], tgt, "gc-fr", "probe", 2, 2) == pytest.approx(1.3)
    assert speed_ratio([src], tgt, "gc-fr", "calibration", 2, 2) == 1.0
    # the diagnostic reads the target's own workers' clocks: the same 1.3 here (constant compute)
    assert speed_ratio([src], tgt, "gc-fr", "target", 2, 2) == pytest.approx(1.3, rel=1e-6)
    with pytest.raises(ConfigError, match=r"--speed-from.*without a CPU-speed probe in meta.json: old"):
        speed_ratio([old], tgt, "gc-fr", "probe", 2, 2)


def test_probe_carries_a_faster_machine_into_the_prediction(tmp_path):
    # calibrated on uncoded at 30 ms per partition; the gc-fr target ran on a machine 30 % slower,
    # which both runs' probes saw before their first iteration (no stragglers: times are exact)
    src = _run(tmp_path, "src", C, [{"name": "uncoded"}], C)
    tgt = _run(tmp_path, "tgt", 1.3 * C, [{"name": "gc-fr", "s": 1}], 1.3 * C)
    opts = dict(replications=2, warmup=2, cpu_source="measured", n_resamples=200)
    plain = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src, options=CompareOptions(**opts))
    probed = compare_runs([(tgt, ["gc-fr"])], calibrate_from=src, options=CompareOptions(speed_from="probe", **opts))
    e_plain = plain.items[0].comparison.rel_error["mean"].value
    e_probe = probed.items[0].comparison.rel_error["mean"].value
    assert e_plain < -0.1  # predicted at the calibration run's speed: too fast
    assert abs(e_probe) < 1e-9  # constant compute, no stragglers: the scaled prediction is exact
    # the probe is a measurement of the machine, not of the target's iterations: still a prediction
    assert probed.table()["basis"].tolist() == ["out of sample"]


def test_speed_from_probe_on_runs_without_probe_is_a_one_line_error(tmp_path, capsys):
    src = _run(tmp_path, "src", C, [{"name": "uncoded"}], None)
    tgt = _run(tmp_path, "tgt", C, [{"name": "gc-fr", "s": 1}], None)
    assert main(["compare", str(tgt.path), "--calibrate-from", str(src.path), "--cpu-source", "measured",
                 "--speed-from", "probe", "--replications", "1", "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--speed-from" in err and "src, tgt" in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "cmp").exists()


def test_worker_probe_times_partition_gradients():
    pytest.importorskip("torch")
    from gcsim.real.worker import GradientWorker

    shard = random_images(40)
    w = GradientWorker(1)
    with pytest.raises(RuntimeError, match="setup"):
        w.probe(2)
    w.setup({1: shard}, scheme="uncoded", n=3, s=0, m=1, scheme_seed=0, model="small-cnn", model_seed=0,
            dtype="float32", payload_dtype="float32", batch_size=48, sampler_seed=0, cancel_poll_s=0.01)
    out = w.probe(3)
    assert out["worker"] == 1 and len(out["cpu_s"]) == len(out["wall_s"]) == 3
    assert all(c > 0 for c in out["cpu_s"]) and all(t > 0 for t in out["wall_s"])
    with pytest.raises(ValueError, match="reps: expected >= 1, got 0"):
        w.probe(0)


def test_calibrated_scenario_names_the_probe(tmp_path):
    src = _run(tmp_path, "src", C, [{"name": "uncoded"}], C)
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(src.path), "--out", str(out)]) == 0
    header = [ln for ln in out.read_text().splitlines() if ln.startswith("#")]
    assert any("CPU-speed probe" in ln and "30.00 ms (src)" in ln for ln in header)
    old = _run(tmp_path, "old", C, [{"name": "uncoded"}], None)
    assert main(["calibrate", str(old.path), "--out", str(tmp_path / "old.yaml")]) == 0
    assert "CPU-speed probe" not in (tmp_path / "old.yaml").read_text()
