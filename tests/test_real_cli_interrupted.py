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


def test_resume_refuses_options_it_would_ignore(monkeypatch, capsys, tmp_path):
    """`gcsim real --resume DIR --lr 0.1` ran the run on with its own lr, silently: an option the run
    cannot change is a one-line error (exit 2) before anything runs."""
    called = []
    monkeypatch.setattr(runner, "resume_real", lambda *a, **k: called.append(1))
    for option, value in (("--lr", "0.1"), ("--scheme", "uncoded"), ("--workers", "12"), ("--seed", "3"),
                          ("--batch-size", "64"), ("--data-dir", str(tmp_path)), ("--out", str(tmp_path / "o"))):
        assert cli_mod.main(["real", "--resume", str(tmp_path), option, value, "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"gcsim: error: {option}: expected no value with --resume"), err
    assert not called
