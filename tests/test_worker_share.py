"""The cores the workers got while computing (their CPU clocks against the processor-sharing model)
and the steady background fitted to it (gcsim.compare.worker_share; issue 9, finding 11)."""

import numpy as np
import pandas as pd
import pytest

from gcsim.compare.calibrate import calibrate
from gcsim.compare.pipeline import CompareOptions
from gcsim.compare.rundir import read_run_dir
from gcsim.compare.worker_share import fit_steady_background, worker_cores
from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario
from gcsim.sim.engine import simulate
from gcsim.sim.output import write_sim_run

C = 0.03  # CPU-seconds per partition


def _scenario(wait, cores=2.0, iterations=40, schemes=None):
    return {"name": "share", "n_workers": 6, "iterations": iterations, "seed": 3,
            "schemes": schemes or [{"name": "uncoded"}],
            "stragglers": {"delay": {"dist": "expon", "scale": 0.05}},
            "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": C}, "cores": cores,
                         "background": {"wait": {"dist": "constant", "value": wait},
                                        "finish": {"dist": "constant", "value": wait}}},
            "master": {"decode_s": {"dist": "constant", "value": 0.005}}}


@pytest.mark.parametrize("wait", [0.0, 0.7, 1.4])
def test_worker_cores_inverts_the_simulated_sharing(wait):
    """Six workers on 2 cores with `wait` cores taken at priority share 2 - wait cores: the estimator
    returns that capacity from their CPU clocks and busy intervals alone."""
    res = simulate(validate_scenario(_scenario(wait)))
    got = worker_cores(res.workers, 2.0)
    assert got == pytest.approx(2.0 - wait, abs=2e-3)


def test_worker_cores_uncontended_and_without_clocks():
    res = simulate(validate_scenario(_scenario(0.0, cores=8.0)))  # 6 workers on 8 cores: never contended
    assert worker_cores(res.workers, 8.0) == 8.0
    assert worker_cores(res.workers.drop(columns=["compute_cpu_s"]), 8.0) is None


def test_fit_removes_cpu_that_ran_only_on_idle_cycles(tmp_path):
    """A run whose other processes took 0.5 cores at priority, and whose trace also records 0.8 cores
    of elastic CPU while the master waited (it ran on cycles the workers left idle and slowed no
    one): the measured background is 1.3 cores, the fitted one is back to 0.5."""
    sc = validate_scenario(_scenario(0.5))
    run_dir = write_sim_run(simulate(sc), sc, tmp_path / "run")
    its = pd.read_csv(run_dir / "iterations.csv")
    its["other_cpu_wait_s"] += 0.8 * (its["decodable_s"] - its["start_s"])
    its.to_csv(run_dir / "iterations.csv", index=False)
    run = read_run_dir(run_dir)
    cal = calibrate(run, warmup=2, use_measured_cpu=True)
    assert cal.background_wait_cores == pytest.approx(1.3, abs=0.02)
    fitted, fit = fit_steady_background(run, "uncoded", cal, warmup=2)
    assert fit.measured_wait_cores == cal.background_wait_cores
    assert fitted.background_wait_cores == pytest.approx(0.5, abs=0.02)
    assert fit.observed_worker_cores == pytest.approx(1.5, abs=2e-3)
    assert fit.simulated_worker_cores == pytest.approx(fit.observed_worker_cores, abs=2e-3)
    assert any("fitted to the workers' CPU" in note for note in fitted.notes)
    # everything else of the calibration is kept
    np.testing.assert_array_equal(fitted.compute_values_s, cal.compute_values_s)
    assert fitted.background_finish_cores == cal.background_finish_cores


def test_the_fit_never_exceeds_the_measured_background(tmp_path):
    """Other processes took 0.5 cores at priority but the trace records only 0.2 while the master
    waited: the workers' clocks alone would put 0.5 cores of background, more than the others used.
    The fit is capped at the measured 0.2 (finding 18: beyond it the fit charges the background with a
    slowdown that has another cause), and the note says so."""
    sc = validate_scenario(_scenario(0.5))
    run_dir = write_sim_run(simulate(sc), sc, tmp_path / "run")
    its = pd.read_csv(run_dir / "iterations.csv")
    its["other_cpu_wait_s"] = 0.2 * (its["decodable_s"] - its["start_s"])
    its.to_csv(run_dir / "iterations.csv", index=False)
    run = read_run_dir(run_dir)
    cal = calibrate(run, warmup=2, use_measured_cpu=True)
    assert cal.background_wait_cores == pytest.approx(0.2, abs=0.02)
    fitted, fit = fit_steady_background(run, "uncoded", cal, warmup=2)
    assert fit.observed_worker_cores == pytest.approx(1.5, abs=2e-3)  # what 0.5 cores of background leave
    assert fitted.background_wait_cores == fit.measured_wait_cores == cal.background_wait_cores
    assert fit.simulated_worker_cores > fit.observed_worker_cores + 0.2
    assert any("capped" in note for note in fitted.notes)


def test_nothing_to_fit_without_cores_or_background(tmp_path):
    sc = validate_scenario(_scenario(0.5))
    run = read_run_dir(write_sim_run(simulate(sc), sc, tmp_path / "run"))
    wall = calibrate(run, warmup=2)  # wall-time calibration: no measured background
    assert fit_steady_background(run, "uncoded", wall) == (wall, None)


def test_background_option_is_checked():
    assert CompareOptions().background == "fitted"
    with pytest.raises(ConfigError, match=r"--background: expected one of fitted, measured, got 'guess'"):
        CompareOptions(background="guess")


def test_calibrate_pools_runs_and_records_them(tmp_path, capsys):
    """`gcsim calibrate A B` pools two runs: the fitted background is the mean of each run's fit,
    the file names both runs, and `gcsim simulate` reads it."""
    import yaml

    from gcsim.cli import main

    dirs = []
    for k, wait in enumerate((0.4, 0.8)):
        sc = validate_scenario({**_scenario(wait), "seed": 10 + k})
        dirs.append(write_sim_run(simulate(sc), sc, tmp_path / f"run{k}"))
    out = tmp_path / "pooled.yaml"
    assert main(["calibrate", str(dirs[0]), str(dirs[1]), "--out", str(out), "--warmup", "2"]) == 0
    text = out.read_text()
    assert "from 2 runs pooled" in text and str(dirs[0]) in text and str(dirs[1]) in text
    assert f"gcsim calibrate {dirs[0]} {dirs[1]}" in text
    wait = yaml.safe_load(text)["workload"]["background"]["wait"]["value"]
    assert wait == pytest.approx(0.6, abs=0.05)  # each run's fit (0.4, 0.8), averaged
    capsys.readouterr()
    assert main(["simulate", str(out), "--iterations", "5", "--schemes", "uncoded", "--out", str(tmp_path / "s")]) == 0


def test_pooling_runs_with_other_stragglers_says_which_was_copied(tmp_path, capsys):
    """Two runs pooled that differ in their straggler model: the first run's is copied, and the
    terminal and the file both say so, naming both runs (issue 12: this was silent); same models: no
    warning."""
    import yaml

    from gcsim.cli import main

    def run(data, name):
        sc = validate_scenario(data)
        return write_sim_run(simulate(sc), sc, tmp_path / name)

    a = run(_scenario(0.4), "a")
    b = run({**_scenario(0.4), "stragglers": {"delay": {"dist": "expon", "scale": 0.2}}}, "b")
    same = run({**_scenario(0.4), "seed": 9}, "same")
    out = tmp_path / "mixed.yaml"
    assert main(["calibrate", str(a), str(b), "--out", str(out), "--warmup", "2"]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: ") == 1
    assert f"stragglers: copied from run a ({a})" in err and f"run b ({b}) differs" in err
    text = out.read_text()
    assert "# WARNING: stragglers: copied from run a" in text
    assert yaml.safe_load(text)["stragglers"]["delay"]["scale"] == 0.05  # the first run's
    assert main(["calibrate", str(a), str(same), "--out", str(tmp_path / "ok.yaml"), "--warmup", "2"]) == 0
    assert "warning" not in capsys.readouterr().err and "WARNING" not in (tmp_path / "ok.yaml").read_text()


def test_a_run_given_twice_is_refused(tmp_path, capsys):
    from gcsim.cli import main

    sc = validate_scenario(_scenario(0.4))
    run = str(write_sim_run(simulate(sc), sc, tmp_path / "run"))
    assert main(["calibrate", run, run, "--out", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "RUN_DIR: expected distinct run directories" in err[0]
    assert not (tmp_path / "x.yaml").exists()
    assert main(["compare", run, "--calibrate-from", run, "--calibrate-from", run + "/", "--cpu-source", "measured",
                 "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--calibrate-from: expected distinct run directories" in err[0]


def test_background_option_needs_measured_cpu(tmp_path, capsys):
    from gcsim.cli import main

    sc = validate_scenario(_scenario(0.4))
    run = str(write_sim_run(simulate(sc), sc, tmp_path / "run"))
    assert main(["compare", run, "--background", "measured", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gcsim: error: --background: expected to be used with --cpu-source measured")
    assert not (tmp_path / "c").exists()
