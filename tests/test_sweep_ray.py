"""``gcsim sweep`` with the Ray executor (a Ray module: one Ray per module, ``module_ray``): rows
identical to the local executor's, chunked tasks, and a resume with Ray of a run started locally."""

from __future__ import annotations

import pytest
from factories import SWEEP_GRID as GRID, interrupt_sweep_points, sweep_file

from gcsim.cli import main

pytestmark = pytest.mark.ray


def test_ray_executor_gives_the_local_executors_rows(tmp_path, module_ray, capsys):
    sf = sweep_file(tmp_path, GRID)
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(tmp_path / "local"), "--no-progress"]) == 0
    # default executor: Ray (importable); the module's Ray is used, tasks of 3 points
    assert main(["sweep", str(sf), "--out", str(tmp_path / "ray"), "--chunk-size", "3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "executor ray" in out and "with the ray executor" in out
    assert (tmp_path / "ray" / "sweep.csv").read_bytes() == (tmp_path / "local" / "sweep.csv").read_bytes()
    assert module_ray.is_initialized()  # a Ray this process started before is left running


def test_resume_with_ray_of_a_local_run(tmp_path, module_ray, capsys, monkeypatch):
    sf = sweep_file(tmp_path, {"seed": [1, 2, 3, 4], "s": [0, 1]})
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(tmp_path / "full"), "--no-progress"]) == 0
    restore = interrupt_sweep_points(monkeypatch, at_call=4)
    part = tmp_path / "part"
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(part), "--no-progress"]) == 130
    restore()
    assert main(["sweep", str(sf), "--executor", "ray", "--resume", str(part), "--no-progress"]) == 0
    assert "5 computed" in capsys.readouterr().out
    assert (part / "sweep.csv").read_bytes() == (tmp_path / "full" / "sweep.csv").read_bytes()
