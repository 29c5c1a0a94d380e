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


def _batch(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, n).astype(np.int64)


@pytest.mark.parametrize("name, n_params", [("small-cnn", 188810), ("resnet18", 11173962)])
def test_slice_gradients_sum_to_the_batch_gradient(name, n_params):
    """No batch statistics (small CNN has no norm layer, resnet18 uses GroupNorm): the gradients of
    the slices of a mini-batch sum exactly to the mini-batch gradient."""
    model = build_model(name, seed=1, dtype="float64")
    assert num_parameters(model) == n_params
    x, y = _batch(6 if name == "small-cnn" else 3)
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
    cfg, scenario = resolve_config("cce-fr")  # scenarios/real_default.yaml
    assert (cfg.n_workers, cfg.s, cfg.m, cfg.iterations, cfg.policy) == (6, 1, 2, 200, "cancel")
    assert [s.name for s in scenario.schemes] == ["cce-fr"] and scenario.seed == cfg.seed
    cfg, scenario = resolve_config("gc-fr", n_workers=4, s=1, iterations=7, policy="carry-over")
    assert (cfg.n_workers, cfg.s, cfg.m, cfg.iterations) == (4, 1, 1, 7)
    assert scenario.n_workers == 4 and scenario.iterations == 7 and scenario.policy == "carry-over"


@pytest.mark.parametrize("kwargs, match", [
    (dict(scheme="nope"), r"--scheme: expected one of .*got 'nope'"),
    (dict(scheme="cce-fr", m=3), r"--scheme/--workers/--s/--m: expected parameters the scheme accepts"),
    (dict(scheme="gc-fr", n_workers=0), r"--workers: expected greater than or equal to 1, got 0"),
    (dict(scheme="gc-fr", batch_size=-3), r"--batch-size: expected greater than or equal to 1, got -3"),
    # fewer images than partitions: an empty slice trained on NaN losses before
    (dict(scheme="uncoded", batch_size=5), r"--batch-size: expected an integer >= the number of workers n=6 .*got 5"),
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
    cfg, scenario = resolve_config("gc-fr", iterations=5)
    (tmp_path / "real.yaml").write_text(yaml.safe_dump({**cfg.model_dump(mode="json"), **edit}))
    (tmp_path / "config.yaml").write_text(scenario.to_yaml())
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
    cfg, scenario = resolve_config("gc-fr", iterations=5, data_dir=str(tmp_path / "data"))
    out = tmp_path / "run"
    out.mkdir()
    (out / "real.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    (out / "status.json").write_text(json.dumps(status))
    if checkpoint:
        (out / "checkpoint.pt").write_bytes(b"x")
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(RunDirError, match=match):
        run_real(cfg, scenario, out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == before
