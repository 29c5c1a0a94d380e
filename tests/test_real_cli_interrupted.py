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


def _stopped_by(signum, status="interrupted"):
    """A fake ``resume_real`` whose run a signal stops: the stop flag's handler records it."""
    def fake_resume(run_dir, *a, **k):
        with runner._StopFlag() as stop:  # what a run does around its iterations
            stop._handle(signum, None)  # the signal arrives (called directly: pytest keeps running)
        return SimpleNamespace(run_dir=run_dir, status=status, iterations_done=4, wall_s=1.0, summary=None,
                               test_accuracy=float("nan"))
    return fake_resume


def test_exit_status_names_the_signal_and_does_not_outlive_its_command(monkeypatch, capsys, tmp_path):
    import signal

    monkeypatch.setattr(runner, "resume_real", _stopped_by(signal.SIGTERM))
    assert cli_mod.main(["real", "--resume", str(tmp_path), "--no-progress"]) == 143  # 128 + SIGTERM
    monkeypatch.setattr(runner, "resume_real", _stopped_by(signal.SIGINT))
    assert cli_mod.main(["real", "--resume", str(tmp_path), "--no-progress"]) == 130
    # a signal during a run that then finished anyway is not the next command's, nor a later run's
    monkeypatch.setattr(runner, "resume_real", _stopped_by(signal.SIGTERM, status="finished"))
    assert cli_mod.main(["real", "--resume", str(tmp_path), "--no-progress"]) == 0
    assert "arrived after the last iteration" not in capsys.readouterr().out
    # the same, with the run saying the signal came after its last iteration: still complete, exit 0, said
    late = _stopped_by(signal.SIGTERM, status="finished")
    monkeypatch.setattr(runner, "resume_real", lambda *a, **k: SimpleNamespace(**vars(late(*a, **k)),
                                                                               late_signal="SIGTERM"))
    assert cli_mod.main(["real", "--resume", str(tmp_path), "--no-progress"]) == 0
    assert ("SIGTERM arrived after the last iteration: the run is complete (status.json "
            "signal_after_last_iteration)") in capsys.readouterr().out
    from gcsim.signals import interrupted_exit_status, record

    record(signal.SIGTERM)
    with runner._StopFlag():
        assert interrupted_exit_status() == 130  # a new run starts with nothing recorded
    capsys.readouterr()


def test_a_run_stopped_where_it_cannot_resume_exits_with_the_signal_not_2(monkeypatch, capsys, tmp_path):
    import signal

    from gcsim.errors import RunStoppedError
    from gcsim.signals import record

    def stopped(*a, **k):
        record(signal.SIGTERM)
        raise RunStoppedError("allreduce: stopped by SIGTERM (no resume for allreduce runs)")

    monkeypatch.setattr(runner, "resume_real", stopped)
    assert cli_mod.main(["real", "--resume", str(tmp_path), "--no-progress"]) == 143
    err = capsys.readouterr().err.strip()
    assert err == "gcsim: error: allreduce: stopped by SIGTERM (no resume for allreduce runs)"
