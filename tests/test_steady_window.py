"""The steady part of a calibration run (gcsim.compare.steady): blocks of iterations during which
another load came and went are left out of the calibration, and only those."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from gcsim.cli import main
from gcsim.compare.rundir import read_run_dir
from gcsim.compare.scenario_file import calibrated_scenario
from gcsim.compare.steady import (ABS_TOLERANCE_CORES, BLOCK_ITERATIONS, block_scatter_cores, restrict_to_steady,
                                  steady_window, tolerance_cores)
from factories import make_trace, write_run_dir

ROOT = Path(__file__).resolve().parents[1]
#: a committed real run whose second half overlapped a simulation in another session (finding 18)
DISTURBED = ROOT / "docs/validation/protocol-steal-2026-12-03/runs/real_expon/uncoded-a"
#: the noisy-neighbour exponential pass's calibration run: a transient on top of the neighbour's core
NEIGHBOUR = ROOT / "docs/validation/protocol-steal-2026-12-03/runs-noisy/real_expon/uncoded-a"
#: the Intel pass's exponential calibration run: five blocks at twice the run's level
INTEL_QUIET = ROOT / "docs/validation/protocol-2026-12-02/runs/real_expon/uncoded-a"
WARMUP = 10


def _run_with_load(tmp_path: Path, cores_of_iteration, iterations: int = 200, name: str = "run"):
    """A run directory whose other-process CPU is ``cores_of_iteration(i)`` cores in iteration i
    (split 80 / 20 between the wait and finish phases)."""
    its, wks = make_trace(iterations=iterations, seed=3)
    cores = np.array([cores_of_iteration(i) for i in range(iterations)], dtype=float)
    its["other_cpu_wait_s"] = 0.8 * cores * its["duration_s"]
    its["other_cpu_finish_s"] = 0.2 * cores * its["duration_s"]
    return read_run_dir(write_run_dir(tmp_path / name, {"uncoded": (its, wks)}))


def test_a_load_that_came_midway_is_left_out(tmp_path):
    run = _run_with_load(tmp_path, lambda i: 0.1 if i < 90 else 1.0)
    win = steady_window(run, "uncoded", WARMUP)
    assert win.dropped_iterations == tuple(range(90, 200))
    assert win.kept_iterations == tuple(range(0, 90))  # the warm-up stays: the calibration drops it
    assert win.level_cores == pytest.approx(0.1)
    assert len(win.block_cores) == 10 and win.block_cores[:4] == pytest.approx([0.1] * 4)
    assert "iterations 10–89; left out 90–199" in win.note and "took 1.00 cores against 0.10 in the rest" in win.note
    # the load was still there at the end: the note does not claim it went
    assert "a load from iteration 90 to the end of the run" in win.note and "came and went" not in win.note
    restricted, notes = restrict_to_steady(run, WARMUP)
    assert notes == [win.note]
    assert restricted.iterations["iteration"].tolist() == list(range(90))
    assert sorted(restricted.workers["iteration"].unique()) == list(range(90))
    assert len(run.iterations) == 200  # the run itself is left as it was


def test_a_load_that_left_midway_is_left_out_too(tmp_path):
    run = _run_with_load(tmp_path, lambda i: 0.9 if i < 50 else 0.2)
    win = steady_window(run, "uncoded", WARMUP)
    assert win.dropped_iterations == tuple(range(10, 50))  # blocks 10-29 and 30-49
    assert "a load that came and went" in win.note
    assert win.level_cores == pytest.approx(0.2)


def test_a_steady_run_keeps_every_iteration_and_is_returned_as_is(tmp_path):
    rng = np.random.default_rng(0)
    noise = rng.uniform(0.85, 1.15, size=200)  # +-15 % block-to-block, as quiet runs show
    run = _run_with_load(tmp_path, lambda i: 0.3 * noise[i])
    win = steady_window(run, "uncoded", WARMUP)
    assert win.dropped_iterations == () and win.note == ""
    restricted, notes = restrict_to_steady(run, WARMUP)
    assert restricted is run and notes == []


def test_a_steady_part_too_short_keeps_everything_with_a_note(tmp_path):
    # three quiet blocks, then a core taken for the remaining seven: fewer than a third would stay
    run = _run_with_load(tmp_path, lambda i: 0.1 if i < WARMUP + 3 * BLOCK_ITERATIONS else 1.0)
    win = steady_window(run, "uncoded", WARMUP)
    assert win.dropped_iterations == () and len(win.kept_iterations) == 200
    assert "changed throughout the run" in win.note


def test_beside_a_steady_neighbour_a_tenth_of_a_core_more_is_a_change(tmp_path):
    """At a level of 1.07 cores (a neighbour holding a core) the old rule, max(0.15, 50 % of the level),
    let +0.12 and +0.36 cores pass; the workers then got 0.53-0.70 cores instead of 0.89."""
    extra = {5: 0.36, 6: 0.12}  # blocks after the warm-up, as in runs-noisy/real_expon/uncoded-a
    run = _run_with_load(tmp_path, lambda i: 1.07 + extra.get(max(0, i - WARMUP) // BLOCK_ITERATIONS, 0.0)
                         if i >= WARMUP else 1.07)
    win = steady_window(run, "uncoded", WARMUP)
    assert win.dropped_iterations == tuple(range(110, 150))
    assert win.level_cores == pytest.approx(1.07)


def test_a_load_that_wanders_by_itself_keeps_its_wandering(tmp_path):
    """Other-process CPU that moves +-0.07 cores block to block around 1.3 (the same-session
    neighbour's runs): no block is a change, though several lie more than 0.1 above the level."""
    wander = [1.39, 1.27, 1.25, 1.36, 1.34, 1.27, 1.36, 1.33, 1.40, 1.27]  # protocol-noisy gc-cr's blocks
    run = _run_with_load(tmp_path, lambda i: wander[max(0, i - WARMUP) // BLOCK_ITERATIONS] if i >= WARMUP
                         else 1.3, iterations=WARMUP + 10 * BLOCK_ITERATIONS)
    win = steady_window(run, "uncoded", WARMUP)
    assert win.block_cores == pytest.approx(wander)
    assert win.dropped_iterations == () and win.note == ""


def test_tolerance_terms():
    # an absolute floor, or the run's own scatter where that is larger
    assert tolerance_cores() == pytest.approx(ABS_TOLERANCE_CORES) == pytest.approx(0.1)
    assert tolerance_cores(0.01) == pytest.approx(ABS_TOLERANCE_CORES)
    assert tolerance_cores(0.2) == pytest.approx(3 * 0.2)
    # a step moves two differences only: the scatter stays that of the steady blocks
    steps = np.array([0.10, 0.11, 0.10, 0.11, 0.90, 0.91, 0.90, 0.10, 0.11, 0.10])
    assert block_scatter_cores(steps) == pytest.approx(1.4826 * 0.01 / np.sqrt(2))
    assert block_scatter_cores(np.array([0.3])) == 0.0


def test_without_other_process_columns_nothing_is_judged(tmp_path):
    its, wks = make_trace(iterations=120, seed=1)  # other_cpu_* NaN: not measured
    run = read_run_dir(write_run_dir(tmp_path / "old", {"uncoded": (its, wks)}))
    win = steady_window(run, "uncoded", WARMUP)
    assert win.dropped_iterations == () and win.note == "" and np.isnan(win.level_cores)


@pytest.mark.parametrize("iterations, blocks", [(215, 10), (220, 11), (200, 10)])
def test_a_short_last_block_joins_the_one_before(tmp_path, iterations, blocks):
    run = _run_with_load(tmp_path, lambda i: 0.2, iterations=iterations)
    assert len(steady_window(run, "uncoded", WARMUP).block_cores) == blocks


def test_the_committed_disturbed_run_loses_its_second_half():
    """Finding 18's run: a simulation in another session took up to a core in its last 110 iterations."""
    run = read_run_dir(DISTURBED)
    win = steady_window(run, "uncoded", WARMUP)
    assert win.dropped_iterations == tuple(range(90, 200))
    assert max(win.block_cores[:4]) < 0.15 < 0.4 < min(win.block_cores[4:])


def test_the_committed_neighbour_run_loses_its_transient():
    """The noisy exponential pass's calibration run: 40 iterations at 1.19-1.43 cores against 1.07-1.08."""
    run = read_run_dir(NEIGHBOUR)
    win = steady_window(run, "uncoded", WARMUP)
    assert win.dropped_iterations == tuple(range(110, 150))
    assert "1.19–1.43 cores against 1.07–1.08" in win.note


def test_a_quiet_run_with_a_doubled_load_for_five_blocks_loses_them():
    """The Intel pass's exponential uncoded-a (2026-12-02): 0.16-0.25 cores, 0.34-0.39 in five blocks.
    A tolerance of a tenth of the CPU left (0.18 cores here) kept three of them and the pass's worst
    error rose from 7.4 to 11.8 %: on a quiet machine the floor is 0.1 core."""
    run = read_run_dir(INTEL_QUIET)
    win = steady_window(run, "uncoded", WARMUP)
    assert win.dropped_iterations == tuple(range(50, 150))
    assert "0.34–0.39 cores" in win.note


def test_calibrated_scenario_charges_the_steady_load_only():
    run = read_run_dir(DISTURBED)
    steady, cal_steady = calibrated_scenario(run, warmup=WARMUP, background="measured", window="steady")
    every, cal_every = calibrated_scenario(run, warmup=WARMUP, background="measured", window="all")
    wait_steady = steady["workload"]["background"]["wait"]["value"]
    wait_every = every["workload"]["background"]["wait"]["value"]
    assert wait_steady < 0.2 < 0.4 < wait_every
    assert any("left out 90–199" in n for n in cal_steady.notes)
    assert not any("left out" in n for n in cal_every.notes)


def test_cli_calibrate_window_and_its_errors(tmp_path, capsys):
    run = _run_with_load(tmp_path, lambda i: 0.1 if i < 90 else 1.0)
    assert main(["calibrate", str(run.path), "--out", str(tmp_path / "steady.yaml")]) == 0
    assert "left out 90–199" in (tmp_path / "steady.yaml").read_text()
    # on a line of its own, not buried in the Notes
    assert "# Calibration window (gcsim/compare/steady.py): run: calibrated on its steady part, iterations 10–89" \
        in (tmp_path / "steady.yaml").read_text()
    assert "note: run: calibrated on its steady part, iterations 10–89; left out 90–199" in capsys.readouterr().err
    assert main(["calibrate", str(run.path), "--out", str(tmp_path / "all.yaml"), "--calibration-window", "all"]) == 0
    assert "left out" not in (tmp_path / "all.yaml").read_text()
    assert "note:" not in capsys.readouterr().err
    assert yaml.safe_load((tmp_path / "all.yaml").read_text())["n_workers"] == 4
    capsys.readouterr()
    rc = main(["calibrate", str(run.path), "--out", str(tmp_path / "x.yaml"), "--calibration-window", "bogus"])
    err = capsys.readouterr().err
    assert rc == 2 and "--calibration-window" in err and "bogus" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.yaml").exists()


def test_cli_compare_says_what_the_window_left_out(tmp_path, capsys):
    """`gcsim compare --calibrate-from` a disturbed run prints the steady window's note on the terminal
    (not only in report.md) and records it on the result."""
    from gcsim.compare.pipeline import CompareOptions, compare_runs

    calib = _run_with_load(tmp_path, lambda i: 0.1 if i < 90 else 1.0, name="calib")
    target = _run_with_load(tmp_path, lambda i: 0.1, name="target")
    res = compare_runs([(target, target.schemes)], calibrate_from=[calib], options=CompareOptions(replications=1))
    assert len(res.window_notes) == 1 and "left out 90–199" in res.window_notes[0]
    every = compare_runs([(target, target.schemes)], calibrate_from=[calib],
                         options=CompareOptions(replications=1, calibration_window="all"))
    assert every.window_notes == ()
    capsys.readouterr()
    rc = main(["compare", str(target.path), "--calibrate-from", str(calib.path), "--replications", "1",
               "--out", str(tmp_path / "cmp")])
    assert rc in (0, 1)
    err = capsys.readouterr().err
    assert "note: calib: calibrated on its steady part" in err
    assert "left out 90–199" in (tmp_path / "cmp" / "report.md").read_text()


def test_the_written_file_says_when_the_background_fit_hit_its_cap(tmp_path):
    """The neighbour run: even the measured background leaves the simulated workers more than their clocks
    say they got (0.97 vs 0.89 cores); the file must not call the value fitted."""
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(NEIGHBOUR), "--out", str(out)]) == 0
    text = out.read_text()
    assert "the steady wait value is the MEASURED one: the fit to the workers' CPU clocks hit its cap" in text
    assert "where their clocks say 0.892" in text and "FITTED, not copied" not in text
