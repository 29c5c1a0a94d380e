"""Real-executor building blocks without Ray: models and flat gradients, partition sampling,
run-option resolution, data download refusal."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

torch = pytest.importorskip("torch")

from gcsim.errors import ConfigError, DataError, RunDirError  # noqa: E402
from gcsim.real import data  # noqa: E402
from gcsim.real.config import default_scenario_path, resolve_config  # noqa: E402
from gcsim.real.model import (build_model, get_flat_grad, get_flat_weights, num_parameters, set_flat_grad,  # noqa: E402
                              set_flat_weights, slice_gradient)
from gcsim.real.sampling import shard_indices, slice_positions, slice_sizes  # noqa: E402
from factories import random_images  # noqa: E402


@pytest.mark.parametrize("name, n_params", [("small-cnn", 188810), ("resnet18", 11173962)])
def test_slice_gradients_sum_to_the_batch_gradient(name, n_params):
    """No batch statistics (small CNN has no norm layer, resnet18 uses GroupNorm): the gradients of
    the slices of a mini-batch sum exactly to the mini-batch gradient."""
    model = build_model(name, seed=1, dtype="float64")
    assert num_parameters(model) == n_params
    x, y = random_images(6 if name == "small-cnn" else 3)
    full, loss = slice_gradient(model, x, y, len(y))
    cut = 2 if name == "small-cnn" else 1
    g1, _ = slice_gradient(model, x[:cut], y[:cut], len(y))
    g2, _ = slice_gradient(model, x[cut:], y[cut:], len(y))
    assert np.max(np.abs(g1 + g2 - full)) <= 1e-12 * np.max(np.abs(full))
    assert np.isfinite(loss) and loss > 0


def test_flat_weights_and_gradients_round_trip():
    a = build_model("small-cnn", seed=1)
    b = build_model("small-cnn", seed=2)
    wa = get_flat_weights(a)
    assert wa.shape == (188810,) and wa.dtype == np.float32
    assert not np.array_equal(wa, get_flat_weights(b))
    set_flat_weights(b, wa)
    assert np.array_equal(get_flat_weights(b), wa)
    g = np.arange(wa.size, dtype=np.float32)
    set_flat_grad(b, g)
    assert np.array_equal(get_flat_grad(b), g)
    with pytest.raises(ValueError, match="expected length 188810"):
        set_flat_grad(b, np.zeros(wa.size + 1))
    # the same seed gives the same initial model (master and workers agree without sending it)
    assert np.array_equal(get_flat_weights(build_model("small-cnn", seed=1)), wa)
    # building a model leaves the global torch RNG alone
    torch.manual_seed(7)
    before = torch.rand(1)
    torch.manual_seed(7)
    build_model("small-cnn", seed=3)
    assert torch.equal(torch.rand(1), before)


def test_sampling_shards_and_slices():
    shards = shard_indices(103, 6, seed=4)
    allidx = np.concatenate(shards)
    assert sorted(allidx.tolist()) == list(range(103)) and [len(s) for s in shards] == [18, 17, 17, 17, 17, 17]
    assert slice_sizes(26, 6).tolist() == [5, 5, 4, 4, 4, 4]
    p = slice_positions(17, 5, seed=4, iteration=9, partition=2)
    assert len(set(p.tolist())) == 5 and p.max() < 17
    assert np.array_equal(p, slice_positions(17, 5, seed=4, iteration=9, partition=2))
    assert not np.array_equal(p, slice_positions(17, 5, seed=4, iteration=10, partition=2))
    with pytest.raises(ConfigError, match="batch_size: expected at most 17"):
        slice_positions(17, 18, seed=4, iteration=0, partition=0)
    with pytest.raises(ConfigError, match="training images: expected at least one per partition"):
        shard_indices(3, 6, seed=0)


def test_resolve_config_takes_defaults_from_the_scenario(tmp_path):
    cfg = resolve_config("cce-fr")  # scenarios/real_default.yaml
    scenario = cfg.scenario
    assert (cfg.n_workers, cfg.s, cfg.m, cfg.iterations, cfg.policy) == (6, 1, 2, 200, "cancel")
    assert [s.name for s in scenario.schemes] == ["cce-fr"] and scenario.seed == cfg.seed
    cfg = resolve_config("gc-fr", n_workers=4, s=1, iterations=7, policy="carry-over")
    scenario = cfg.scenario
    assert (cfg.n_workers, cfg.s, cfg.m, cfg.iterations) == (4, 1, 1, 7)
    assert scenario.n_workers == 4 and scenario.iterations == 7 and scenario.policy == "carry-over"


@pytest.mark.parametrize("kwargs, match", [
    (dict(scheme="nope"), r"--scheme: expected one of .*got 'nope'"),
    (dict(scheme="cce-fr", m=3), r"--scheme/--workers/--s/--m: expected parameters the scheme accepts"),
    (dict(scheme="gc-fr", n_workers=0), r"--workers: expected greater than or equal to 1, got 0"),
    (dict(scheme="gc-fr", batch_size=-3), r"--batch-size: expected greater than or equal to 1, got -3"),
    # fewer images than partitions: an empty slice trained on NaN losses before
    (dict(scheme="uncoded", batch_size=5), r"--batch-size: expected an integer >= the number of workers n=6 .*got 5"),
    # the options are --connect-timeout etc.; the error named the field (--connect-timeout-s), no such option
    (dict(scheme="gc-fr", connect_timeout_s=0), r"^--connect-timeout: expected greater than 0, got 0$"),
    (dict(scheme="gc-fr", placement_timeout_s=0), r"^--placement-timeout: expected greater than 0, got 0$"),
    (dict(scheme="gc-fr", setup_timeout_s=-1), r"^--setup-timeout: expected greater than 0, got -1$"),
    (dict(scheme="gc-fr", fetch_timeout_s=1e9), r"^--fetch-timeout: expected less than or equal to 3600, got"),
])
def test_resolve_config_errors_name_the_option(kwargs, match):
    scheme = kwargs.pop("scheme")
    with pytest.raises(ConfigError, match=match):
        resolve_config(scheme, **kwargs)


@pytest.mark.parametrize("edit, iterations, error, match", [
    # was "real.yaml: invalid (1 validation error for RealConfig)": no field, no value
    ({}, 0, ConfigError, r"^--iterations: expected an integer >= 1, got 0$"),
    ({"lr": "fast"}, None, RunDirError, r"real\.yaml: lr: expected a valid number, .*got 'fast'$"),
    # was accepted on resume (the batch check lived only in resolve_config) and trained on NaN losses
    ({"batch_size": 3}, 30, RunDirError, r"real\.yaml: batch_size: expected an integer >= the number of workers n=6"),
])
def test_resume_checks_real_yaml_and_iterations_before_anything_runs(tmp_path, edit, iterations, error, match):
    spec = resolve_config("gc-fr", iterations=5)
    (tmp_path / "real.yaml").write_text(yaml.safe_dump({**spec.options.model_dump(mode="json"), **edit}))
    (tmp_path / "config.yaml").write_text(spec.scenario.to_yaml())
    from gcsim.real.runner import resume_real

    with pytest.raises(error, match=match):
        resume_real(tmp_path, iterations=iterations, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "real.yaml"]


def test_worker_scale_must_match_workers(tmp_path):
    sc = yaml.safe_load(default_scenario_path().read_text())
    sc["stragglers"]["worker_scale"] = [1.0] * 6
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(sc))
    with pytest.raises(ConfigError, match=r"--workers: expected 6 \(the scenario's stragglers.worker_scale"):
        resolve_config("gc-fr", tmp_path / "s.yaml", n_workers=4)


def test_download_without_network_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "network_available", lambda *a, **k: False)
    with pytest.raises(DataError, match=r"download: expected network access .*--source"):
        data.download_cifar10(tmp_path)


@pytest.mark.parametrize("state", ["interrupted", "failed"])
def test_compare_names_a_stopped_real_run_and_how_to_continue_it(tmp_path, state):
    """A real run stopped by Ctrl-C or a failure has no meta.json; compare said only 'meta.json: missing'."""
    from gcsim.compare.rundir import read_run_dir

    (tmp_path / "status.json").write_text(json.dumps({"status": state, "iterations_done": 3}))
    with pytest.raises(RunDirError, match=rf"status.json: status: expected 'finished', got '{state}' \(continue "
                                          rf"it with gcsim real --resume {tmp_path}\)$"):
        read_run_dir(tmp_path)


@pytest.mark.parametrize("status, checkpoint, match", [
    ({"status": "running", "pid": 2**22 + 12345}, False, r"stopped before its first checkpoint \(status dead; nothing to "
                                                          r"resume\): remove it or choose another --out$"),
    ({"status": "failed"}, False, r"stopped before its first checkpoint \(status failed"),
    ({"status": "failed"}, True, r"already holds a run \(use --resume .* to continue it\)$"),
])
def test_rerun_into_a_directory_killed_before_its_checkpoint_says_what_to_do(tmp_path, status, checkpoint, match):
    """A run killed outright (SIGKILL) before its first checkpoint leaves real.yaml and a 'running'
    status: a rerun with the same --out must not send the user to a --resume that cannot work."""
    from gcsim.real.runner import run_real

    bdir = tmp_path / "data" / data.BATCHES_DIR
    bdir.mkdir(parents=True)
    for name in (*data.TRAIN_FILES, data.TEST_FILE, data.META_FILE):
        (bdir / name).write_bytes(b"")  # require_prepared only looks for the files
    spec = resolve_config("gc-fr", iterations=5, data_dir=str(tmp_path / "data"))
    out = tmp_path / "run"
    out.mkdir()
    (out / "real.yaml").write_text(yaml.safe_dump(spec.options.model_dump(mode="json")))
    (out / "status.json").write_text(json.dumps(status))
    if checkpoint:
        (out / "checkpoint.pt").write_bytes(b"x")
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(RunDirError, match=match):
        run_real(spec, out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == before


# ---------------------------------------------------------------- one config source (issue 11)
def _old_run_dir(path, **edit):
    """A run directory as runs before issue 11 wrote it: real.yaml repeats the run facts of config.yaml."""
    spec = resolve_config("gc-fr", iterations=5)
    path.mkdir(exist_ok=True)
    (path / "real.yaml").write_text(yaml.safe_dump({**spec.flat(), **edit}))
    (path / "config.yaml").write_text(spec.scenario.to_yaml())
    return spec


def test_real_yaml_holds_options_only_and_config_yaml_the_run(tmp_path):
    from gcsim.real.config import LEGACY_RUN_KEYS, RealConfig
    from gcsim.real.rundir import RealRunDir

    spec = resolve_config("gc-fr", n_workers=4, s=1, iterations=7, seed=3, policy="carry-over")
    assert not set(LEGACY_RUN_KEYS) & set(RealConfig.model_fields)
    RealRunDir(tmp_path).write_config(spec)
    real = yaml.safe_load((tmp_path / "real.yaml").read_text())
    assert set(real) == set(RealConfig.model_fields) and real["batch_size"] == 192
    conf = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert (conf["n_workers"], conf["iterations"], conf["seed"], conf["policy"]) == (4, 7, 3, "carry-over")
    assert conf["schemes"] == [{"name": "gc-fr", "s": 1, "m": 1, "seed": 0, "label": None}]
    assert RealRunDir(tmp_path).scheme() == "gc-fr"


def test_old_real_yaml_with_the_run_facts_is_accepted_on_resume(tmp_path):
    """The run facts agree with config.yaml: resume reads the directory and stops only at the missing
    checkpoint (nothing written)."""
    from gcsim.real.runner import resume_real

    _old_run_dir(tmp_path)
    with pytest.raises(RunDirError, match=r"checkpoint\.pt: missing"):
        resume_real(tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "real.yaml"]


@pytest.mark.parametrize("edit, field, want, got", [
    ({"n_workers": 4}, "n_workers", "6", "4"),
    ({"seed": 9}, "seed", "1", "9"),
    ({"policy": "carry-over"}, "policy", "'cancel'", "'carry-over'"),
    ({"s": 2}, "s", "1", "2"),
    ({"scheme": "uncoded"}, "scheme", "'gc-fr'", "'uncoded'"),
])
def test_old_real_yaml_disagreeing_with_config_yaml_is_refused_in_one_line(tmp_path, edit, field, want, got):
    from gcsim.real.runner import resume_real
    from gcsim.study.plan import plan_run

    spec = _old_run_dir(tmp_path / "run", **edit)
    with pytest.raises(RunDirError) as e:
        resume_real(tmp_path / "run", progress=False)
    msg = str(e.value)
    assert len(msg.splitlines()) == 1
    assert msg.startswith(f"{tmp_path / 'run' / 'real.yaml'}: {field}: expected {want} (config.yaml's ")
    assert msg.endswith(f"got {got}")
    # the study refuses it the same way (the file and the field)
    with pytest.raises(ConfigError, match=rf"real\.yaml: {field}: expected {want} .*got {got}$"):
        plan_run(tmp_path / "run", spec)


def test_stored_run_directories_still_read(tmp_path):
    """Every real run directory kept under docs/validation (written before issue 11: real.yaml repeats
    the run facts) reads as a run: its real.yaml agrees with its config.yaml."""
    from pathlib import Path

    from gcsim.real.config import split_legacy_keys, validate_real_config
    from gcsim.scenario import load_scenario

    root = Path(__file__).resolve().parents[1] / "docs" / "validation"
    dirs = sorted(p.parent for p in root.glob("**/real.yaml"))
    if not dirs:
        pytest.skip("no stored run directories in this checkout")
    for d in dirs[:: max(1, len(dirs) // 40)]:  # a spread of them (each load builds the scheme)
        sc = load_scenario(d / "config.yaml")
        raw = yaml.safe_load((d / "real.yaml").read_text())
        spec = validate_real_config(split_legacy_keys(raw, sc), sc, option_names=False)
        assert spec.n_workers == raw.get("n_workers", spec.n_workers) and spec.scheme == raw.get("scheme", spec.scheme)


def test_policy_choices_come_from_one_declaration():
    import typing

    from gcsim.cli.real_cmd import command
    from gcsim.real.config import _RunFactOverrides
    from gcsim.scenario import Scenario
    from gcsim.validation import POLICIES, Policy

    assert POLICIES == typing.get_args(Policy) == ("cancel", "carry-over")
    assert Scenario.model_fields["policy"].annotation == Policy
    option = next(p for p in command.params if p.name == "policy")
    assert tuple(option.type.choices) == POLICIES
    with pytest.raises(ConfigError, match=r"^--policy: expected 'cancel' or 'carry-over', got 'later'$"):
        resolve_config("uncoded", policy="later")
    assert _RunFactOverrides.model_fields["policy"].annotation == Policy


def test_study_options_name_real_and_compare_fields():
    import dataclasses

    from gcsim.compare.pipeline import CompareOptions
    from gcsim.real.config import RealConfig
    from gcsim.study.pipeline import COMPARE_OPTION_FIELDS, REAL_OPTION_FIELDS, StudyOptions

    assert set(REAL_OPTION_FIELDS) <= set(RealConfig.model_fields)
    assert set(COMPARE_OPTION_FIELDS) <= {f.name for f in dataclasses.fields(CompareOptions)}
    assert StudyOptions().compare_options() == CompareOptions()
    assert StudyOptions(replications=2, data_dir="x").compare_options().replications == 2
    assert StudyOptions(data_dir="x", batch_size=8).real_options() == {"data_dir": "x", "batch_size": 8}


def test_gcsim_real_help_states_the_models_defaults_and_choices():
    from gcsim.cli.real_cmd import command
    from gcsim.real.config import RealConfig

    params = {p.name: p for p in command.params}
    for name, field in [("batch_size", "batch_size"), ("lr", "lr"), ("eval_every", "eval_every"),
                        ("checkpoint_every", "checkpoint_every"), ("data_dir", "data_dir"),
                        ("connect_timeout_s", "connect_timeout_s"), ("fetch_timeout_s", "fetch_timeout_s"),
                        ("model", "model"), ("placement", "placement")]:
        default = RealConfig.model_fields[field].default
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        assert f"[{shown}]" in params[name].help, name
        assert params[name].default is None  # not given: the scenario / real.yaml / the model decides
    assert list(params["model"].type.choices) == ["small-cnn", "resnet18"]
    assert list(params["placement"].type.choices) == ["spread", "pack"]


def test_sigterm_before_the_first_checkpoint_removes_the_new_run(tmp_path, monkeypatch):
    """SIGTERM while the run loaded its data (before the stop flag of the iterations) ended the process
    at once: the directory stayed with real.yaml and status 'running', and a rerun with the same --out
    was refused. Like Ctrl-C there, it must stop the run and remove the directory it created."""
    import os
    import signal

    from gcsim.real.runner import run_real

    bdir = tmp_path / "data" / data.BATCHES_DIR
    bdir.mkdir(parents=True)
    for name in (*data.TRAIN_FILES, data.TEST_FILE, data.META_FILE):
        (bdir / name).write_bytes(b"")  # require_prepared only looks for the files

    installed = {}

    def load_and_get_terminated(opts):
        installed["handler"] = handler = signal.getsignal(signal.SIGTERM)
        if handler in (signal.SIG_DFL, None, signal.SIG_IGN):
            raise AssertionError("SIGTERM here would kill the run and leave its directory half-written")
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the run")

    monkeypatch.setattr(data, "load_run_data", load_and_get_terminated)
    spec = resolve_config("gc-fr", iterations=5, data_dir=str(tmp_path / "data"))
    out = tmp_path / "run"
    # a fresh `gcsim real` process: SIGTERM has its default action (an earlier test's Ray driver may have
    # left its own handler in this pytest process, which a SIGTERM to ourselves must not reach)
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_real(spec, out, progress=False)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # given back
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert installed["handler"] is not previous or previous is signal.SIG_DFL
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("edit, field, want, got", [
    (lambda c: c.update(seed=5), "seed", "1", "5"),
    (lambda c: c.update(policy="carry-over"), "policy", "'cancel'", "'carry-over'"),
    (lambda c: c["stragglers"]["delay"].update(p=0.3), "stragglers.delay.p", "0.1", "0.3"),
    (lambda c: c["schemes"][0].update(s=2), "schemes.0.s", "1", "2"),
])
def test_resume_refuses_a_config_yaml_edited_since_the_checkpoint(tmp_path, edit, field, want, got):
    """config.yaml is the run's one record of what it is: an edit between sessions (a seed, the policy,
    the stragglers) made the resumed session a different run under the same directory, silently."""
    from gcsim.real.rundir import RealRunDir
    from gcsim.real.runner import resume_real, run_record

    spec = resolve_config("gc-fr", iterations=5)
    run = RealRunDir(tmp_path)
    run.write_config(spec)
    (tmp_path / "status.json").write_text(json.dumps({"status": "interrupted", "iterations_done": 2}))
    run.save_checkpoint({"next_iteration": 2, "scheme": "gc-fr", "run": run_record(spec.scenario)})
    conf = yaml.safe_load((tmp_path / "config.yaml").read_text())
    edit(conf)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(conf))
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(RunDirError) as e:
        resume_real(tmp_path, iterations=8, progress=False)
    assert str(e.value) == (f"{tmp_path / 'config.yaml'}: {field}: expected {want} (what the run's checkpoint "
                            f"was made with: a resume continues the same run), got {got}")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_real_scenario_errors_name_the_option(tmp_path, capsys):
    """`gcsim real --scenario missing.yaml` said 'scenario: ...': the option is --scenario."""
    from gcsim.cli import main

    assert main(["real", "--scheme", "gc-fr", "--scenario", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"gcsim: error: --scenario: expected an existing YAML file, got '{tmp_path / 'missing.yaml'}'"]
    assert list(tmp_path.iterdir()) == []
