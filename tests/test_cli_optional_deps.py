import pytest

import gcsim.cli as cli_mod


@pytest.mark.parametrize("missing", ["torch", "torchvision", "ray"])
def test_missing_real_extra_is_one_line_exit_2(monkeypatch, capsys, missing):
    def boom(*args, **kwargs):
        raise ModuleNotFoundError(f"No module named '{missing}'", name=missing)

    monkeypatch.setattr(cli_mod.cli, "main", boom)
    assert cli_mod.main(["real", "--scheme", "uncoded"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"missing module '{missing}'" in err and "pip install -e '.[real]'" in err


def test_other_missing_modules_are_not_disguised(monkeypatch):
    def boom(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'nonexistent_pkg'", name="nonexistent_pkg")

    monkeypatch.setattr(cli_mod.cli, "main", boom)
    with pytest.raises(ModuleNotFoundError):
        cli_mod.main(["simulate", "x.yaml"])
