"""``gcsim sweep`` with the Ray executor (a Ray module: one Ray per module, ``module_ray``): rows
identical to the local executor's, chunked tasks, and a resume with Ray of a run started locally."""

from __future__ import annotations

import pytest
import yaml

from gcsim.cli import main

from test_sweep import BASE, GRID, read_rows, sweep_file  # noqa: F401  (shared tiny sweep)

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
    import gcsim.sweep.run as sweep_run
    sf = sweep_file(tmp_path, {"seed": [1, 2, 3, 4], "s": [0, 1]})
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(tmp_path / "full"), "--no-progress"]) == 0
    real, calls = sweep_run.evaluate_point, []

    def interrupted(plan, k, memo=None):
        calls.append(k)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(plan, k, memo)

    monkeypatch.setattr(sweep_run, "evaluate_point", interrupted)
    part = tmp_path / "part"
    assert main(["sweep", str(sf), "--executor", "local", "--out", str(part), "--no-progress"]) == 130
    monkeypatch.setattr(sweep_run, "evaluate_point", real)
    assert main(["sweep", str(sf), "--executor", "ray", "--resume", str(part), "--no-progress"]) == 0
    assert "5 computed" in capsys.readouterr().out
    assert (part / "sweep.csv").read_bytes() == (tmp_path / "full" / "sweep.csv").read_bytes()
