from pathlib import Path
from types import SimpleNamespace

import gcsim.cli as cli_mod
import gcsim.real.runner as runner


def test_interrupted_run_says_how_to_continue_and_exits_130(monkeypatch, capsys, tmp_path):
    run_dir = tmp_path / "my run"
    fake = SimpleNamespace(run_dir=run_dir, status="interrupted", iterations_done=4, wall_s=1.0, summary=None,
                           test_accuracy=float("nan"))
    monkeypatch.setattr(runner, "resume_real", lambda *a, **k: fake)
    assert cli_mod.main(["real", "--resume", str(tmp_path), "--no-progress"]) == 130
    out = capsys.readouterr().out
    assert f"continue with: gcsim real --resume '{run_dir}'" in out
