"""The optional 'real' extra (torch, torchvision, ray): a missing module is a one-line exit 2, and
the simulator never imports any of them."""

import json
import subprocess
import sys

import pytest
import yaml

import gcsim.cli as cli_mod

REAL_MODULES = ("torch", "torchvision", "ray")


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


def test_simulate_leaves_torch_and_ray_unimported(tmp_path):
    """``gcsim simulate`` in a fresh interpreter: the run is written and none of torch, torchvision
    or ray is in ``sys.modules`` afterwards (the real executor's imports stay lazy)."""
    scen = tmp_path / "tiny.yaml"
    scen.write_text(yaml.safe_dump({
        "name": "tiny", "n_workers": 4, "iterations": 20, "seed": 0,
        "schemes": [{"name": "uncoded"}, {"name": "gc-fr", "s": 1}],
        "workload": {"gradient_bytes": 1e6, "compute": {"dist": "constant", "value": 0.01}},
        "stragglers": {"delay": {"dist": "constant", "value": 0.02}},
    }))
    out = tmp_path / "run"
    code = (
        "import json, sys\n"
        "from gcsim.cli import main\n"
        f"rc = main(['simulate', {str(scen)!r}, '--out', {str(out)!r}, '--no-progress'])\n"
        f"print(json.dumps({{'rc': rc, 'loaded': [m for m in {REAL_MODULES!r} if m in sys.modules]}}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"rc": 0, "loaded": []}
    assert out.is_dir() and (out / "summary.csv").is_file()
