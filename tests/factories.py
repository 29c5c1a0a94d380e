"""Shared test factories (not a test module: nothing here is collected).

* :func:`make_trace`, :func:`write_run_dir`: synthetic run directories in the :mod:`gcsim.trace`
  format, for the comparator's tests;
* :func:`simulated_run`: a run directory written by the simulator, relabelled as a measured one;
* :func:`make_image_folder`, :func:`zip_folder`: tiny CIFAR-10-shaped image folders (PNG, lossless,
  so pixels can be checked exactly) for ``gcsim data prepare`` and the real executor;
* :data:`SWEEP_BASE`, :data:`SWEEP_GRID`, :func:`sweep_file`, :func:`read_rows`,
  :func:`interrupt_sweep_points`: a tiny ``gcsim sweep`` and its interruption, for the local and the
  Ray executor's tests.
* :func:`closed_form_scenario`, :func:`closed_form_means`: the scenario whose mean iteration time per
  scheme has a closed form (``gcsim advise``'s tests).
* :func:`shared_cpu_scenario`: four workers sharing cores, one three times slower (the CPU model's tests).
* :func:`random_images`, :func:`prepared_data`, :func:`tiny_real_scenario`, :func:`worker_setup`,
  :func:`parameter_server`, :func:`full_batch_gradient`, :class:`FixedDelays`, :data:`GCSIM`,
  :func:`kill_processes_naming`: the real executor's tests (tiny data in memory or on disk, the
  workers' setup, the single-process gradient oracle, ``gcsim`` in a subprocess, cleanup by PID).

Times are in seconds throughout. Test modules import these with ``from factories import ...``
(``tests/`` is on ``sys.path``, see ``conftest.py``); no test module imports another test module.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from gcsim.real.data import CIFAR10_CLASSES
from gcsim.trace import ITERATION_COLUMNS, SUMMARY_COLUMNS, WORKER_COLUMNS, summarize, write_csv, write_meta

# --------------------------------------------------------------------------------------------------
# traces and run directories
# --------------------------------------------------------------------------------------------------


def make_trace(scheme: str = "uncoded", n: int = 4, s: int = 0, m: int = 1, iterations: int = 60, seed: int = 0,
               compute_scale: float = 1.0, partitions: int | None = None, transfer_s: float = 0.002,
               overhead_s: float = 0.004, dispatch_lag_s: float = 0.001, delay_p: float = 0.1,
               delay_s: float = 0.05) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(iterations, workers) DataFrames of a toy synchronous run: each worker computes ``partitions``
    partitions of lognormal time (median 10 ms × compute_scale each), with probability ``delay_p`` an
    additive delay ``delay_s``; the iteration is decodable at the (n−s)-th arrival.

    Shapes: ``iterations`` has one row per iteration (``iterations`` rows, columns
    :data:`gcsim.trace.ITERATION_COLUMNS`), ``workers`` one row per (iteration, worker)
    (``iterations × n`` rows, :data:`gcsim.trace.WORKER_COLUMNS`). All times (``*_s`` arguments and
    columns) are seconds; iterations run back to back from t = 0. ``partitions`` defaults to s + m;
    a worker arriving after the decodable time is ``cancelled`` with NaN ``arrival_s``."""
    rng = np.random.default_rng(seed)
    d = partitions if partitions is not None else s + m
    it_rows, wk_rows, t = [], [], 0.0
    for it in range(iterations):
        start = t
        dispatch = start + dispatch_lag_s
        comp = compute_scale * rng.lognormal(np.log(0.010), 0.2, size=(n, d)).sum(axis=1)
        delay = np.where(rng.random(n) < delay_p, delay_s, 0.0)
        send = dispatch + comp + delay
        arrival = send + transfer_s / m
        order = np.argsort(arrival, kind="stable")
        decodable = float(arrival[order[n - s - 1]])
        used = np.zeros(n, bool)
        used[order[: n - s]] = True
        end = decodable + overhead_s
        it_rows.append(dict(scheme=scheme, iteration=it, start_s=start, decodable_s=decodable, end_s=end,
                            duration_s=end - start, n_arrived=n - s, n_used=n - s))
        for w in range(n):
            late = arrival[w] > decodable
            wk_rows.append(dict(scheme=scheme, iteration=it, worker=w, n_partitions=d, dispatch_s=dispatch,
                                compute_start_s=dispatch, compute_s=comp[w], delay_s=delay[w], slowdown=1.0,
                                send_s=send[w], arrival_s=np.nan if late else arrival[w], used=bool(used[w]),
                                status="cancelled" if late else "arrived"))
        t = end
    return pd.DataFrame(it_rows, columns=ITERATION_COLUMNS), pd.DataFrame(wk_rows, columns=WORKER_COLUMNS)


def write_run_dir(run_dir: Path, traces: dict[str, tuple[pd.DataFrame, pd.DataFrame]], *, n: int = 4,
                  executor: str = "real", created_utc: str | None = None, config: dict | None = None,
                  params: dict[str, tuple[int, int]] | None = None, meta: bool = True) -> Path:
    """Write a complete run directory (config.yaml, iterations.csv, workers.csv, summary.csv, then
    meta.json last) from ``traces``: scheme -> (iterations, workers) DataFrames as
    :func:`make_trace` returns them (times in seconds). ``params``: scheme -> (s, m) for the summary
    (default (0, 1)); ``config``: config.yaml's content, a scenario mapping (default: derived from the traces, with a
    1 MB gradient and 10 ms per partition);
    ``meta=False`` leaves meta.json out (an unfinished directory); ``created_utc`` overrides
    meta.json's date. Returns ``run_dir``."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    its = pd.concat([t[0] for t in traces.values()], ignore_index=True)
    wks = pd.concat([t[1] for t in traces.values()], ignore_index=True)
    params = params or {}
    loads = {}
    for sch in traces:
        s, m = params.get(sch, (0, 1))
        loads[sch] = dict(n=n, s=s, m=m, computation_load=s + m, communication_load=1.0 / m)
    cfg = config if config is not None else {
        "name": run_dir.name, "n_workers": n, "iterations": int(its["iteration"].max()) + 1, "seed": 0,
        "schemes": [{"name": sch, "s": loads[sch]["s"], "m": loads[sch]["m"], "seed": 0} for sch in traces],
        "workload": {"gradient_bytes": 1e6, "compute": {"dist": "constant", "value": 0.01}},
        "policy": "cancel",
    }
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    write_csv(run_dir / "iterations.csv", its, ITERATION_COLUMNS)
    write_csv(run_dir / "workers.csv", wks, WORKER_COLUMNS)
    write_csv(run_dir / "summary.csv", summarize(its, loads), SUMMARY_COLUMNS)
    if meta:
        write_meta(run_dir, executor)
        if created_utc is not None:
            p = run_dir / "meta.json"
            data = json.loads(p.read_text())
            data["created_utc"] = created_utc
            p.write_text(json.dumps(data))
    return run_dir


def simulated_run(run_dir: Path, schemes: list[dict], *, n: int = 6, iterations: int = 150, seed: int = 7,
                  created_utc: str | None = None, executor: str = "real", compute_scale_s: float = 0.01) -> Path:
    """A run directory written by the simulator (same trace format as a real run), relabelled as
    ``executor`` and dated ``created_utc``: a stand-in for a measured run with a known model.

    ``schemes``: the scenario's scheme entries (e.g. ``[{"name": "uncoded"}]``); ``n`` workers,
    ``iterations`` per scheme; compute time is lognormal (s 0.3, scale ``compute_scale_s`` seconds;
    the workload section's ``compute``), a 0.05 s delay with probability 0.1, 0.5 ms latency,
    2e9 bytes/s, 2 ms decode, policy ``cancel``.
    Returns the run directory written (``run_dir``)."""
    from gcsim.scenario import validate_scenario
    from gcsim.sim.engine import simulate
    from gcsim.sim.output import write_sim_run

    sc = validate_scenario({
        "name": Path(run_dir).name.split("-")[0] or "run", "n_workers": n, "iterations": iterations, "seed": seed,
        "schemes": schemes,
        "workload": {"gradient_bytes": 4e6, "model_bytes": 4e6, "compute": {"dist": "lognorm", "s": 0.3, "scale": compute_scale_s}},
        "network": {"latency_s": 0.0005, "bandwidth_bytes_per_s": 2e9},
        "stragglers": {"delay": {"dist": "bimodal", "p": 0.1, "delay": 0.05}},
        "policy": "cancel", "cancel_latency_s": 0.001, "master": {"decode_s": {"dist": "constant", "value": 0.002}},
    })
    out = write_sim_run(simulate(sc), sc, run_dir)
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["executor"] = executor
    if created_utc is not None:
        meta["created_utc"] = created_utc
    meta_path.write_text(json.dumps(meta))
    return out


# --------------------------------------------------------------------------------------------------
# image folders (gcsim data prepare's input)
# --------------------------------------------------------------------------------------------------

#: images per class that :func:`make_image_folder` writes by default, in ``train/`` and ``test/``.
TRAIN_PER_CLASS, TEST_PER_CLASS = 3, 2


def write_bimodal_scenario(path: Path, *, n: int, iterations: int) -> Path:
    """A closed-form advise scenario: constant 0.05 s per partition, no communication cost, a 1 s
    delay with probability 0.2 (``uncoded`` listed; advise searches every scheme). Returns ``path``."""
    path.write_text(yaml.safe_dump({
        "name": "cf", "n_workers": n, "iterations": iterations, "schemes": [{"name": "uncoded"}],
        "workload": {"gradient_bytes": 0.0, "compute": {"dist": "constant", "value": 0.05}},
        "stragglers": {"delay": {"dist": "bimodal", "p": 0.2, "delay": 1.0}}}))
    return path


def image_pixels(split: str, label: int, i: int) -> np.ndarray:
    """Deterministic content of image ``i`` of class ``label`` in ``split`` ("train" or "test"):
    a (32, 32, 3) uint8 RGB array, distinct per split/class/index."""
    rng = np.random.default_rng([0 if split == "train" else 1, label, i])
    return rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)


def make_image_folder(root: Path, *, train_per_class=TRAIN_PER_CLASS, test_per_class=TEST_PER_CLASS,
                      classes=CIFAR10_CLASSES, size=(32, 32)) -> Path:
    """Write ``root/{train,test}/<class>/<i:04d>.png``: ``train_per_class`` (``test_per_class``) PNGs
    per class name in ``classes``, image ``i`` of class index ``label`` being
    :func:`image_pixels` (split, label, i), resized to ``size`` (width, height) when not (32, 32).
    Returns ``root``."""
    from PIL import Image

    for split, per_class in (("train", train_per_class), ("test", test_per_class)):
        for label, name in enumerate(classes):
            d = root / split / name
            d.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                px = image_pixels(split, label, i)
                img = Image.fromarray(px) if size == (32, 32) else Image.fromarray(px).resize(size)
                img.save(d / f"{i:04d}.png")
    return root


def zip_folder(folder: Path, zip_path: Path, prefix: str = "cifar10/") -> Path:
    """Zip every file under ``folder`` (stored, sorted) as ``prefix + <path relative to folder>``;
    returns ``zip_path``."""
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_STORED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, prefix + p.relative_to(folder).as_posix())
    return zip_path


# --------------------------------------------------------------------------------------------------
# the real executor: tiny data, worker setup, the single-process oracle, subprocesses
# --------------------------------------------------------------------------------------------------
#: ``gcsim`` in a fresh interpreter of this environment (argv prefix for :mod:`subprocess`).
GCSIM = [sys.executable, "-c", "from gcsim.cli import entry; entry()"]


def random_images(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(images, labels) for the workers without files: ``count`` random (32, 32, 3) uint8 RGB images,
    then ``count`` int64 labels in 0..9, both drawn from ``numpy.random.default_rng(seed)`` in that order.

    Shapes: images (count, 32, 32, 3), labels (count,)."""
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(count, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, size=count).astype(np.int64)
    return images, labels


def prepared_data(root: Path, *, train_per_class: int = 8, test_per_class: int = 3, seed: int = 1) -> Path:
    """A prepared tiny CIFAR-10-layout data set for ``gcsim real`` (``--data-dir``): random PNGs written
    to ``root/src`` (:func:`gcsim.real.data.make_random_image_folder`, per class and split, from
    ``seed``), prepared into ``root/data``. Returns ``root/data``. Raises what ``gcsim data prepare``
    raises (:class:`gcsim.errors.DataError`); needs Pillow."""
    from gcsim.real.data import make_random_image_folder, prepare_from_image_folder

    root = Path(root)
    make_random_image_folder(root / "src", train_per_class=train_per_class, test_per_class=test_per_class, seed=seed)
    prepare_from_image_folder(root / "src", root / "data")
    return root / "data"


def tiny_real_scenario(path: Path, *, n: int, iterations: int, seed: int, schemes: list[dict], stragglers: dict,
                       policy: str = "cancel") -> Path:
    """Write the scenario of the tiny real runs to ``path`` (YAML): ``n`` workers, ``iterations``, the
    scenario ``seed``, its ``schemes`` entries and ``stragglers`` section, ``policy``; a workload of
    1000-byte gradients and a constant 0.01 s per partition (the simulator's side; a real run measures
    its own). Returns ``path``."""
    Path(path).write_text(yaml.safe_dump({
        "name": "tiny", "n_workers": n, "iterations": iterations, "seed": seed, "schemes": schemes,
        "workload": {"gradient_bytes": 1000, "compute": {"dist": "constant", "value": 0.01}},
        "stragglers": stragglers, "policy": policy}))
    return Path(path)


def worker_setup(scheme, *, batch_size: int, seed: int, dtype: str = "float64") -> dict:
    """The options :meth:`gcsim.real.master.WorkerPool.setup` sends every worker for ``scheme`` (a
    :class:`gcsim.schemes.Scheme`): the small CNN of ``seed`` in ``dtype`` (payloads too), mini-batches
    of ``batch_size`` images sampled from ``seed``, cancels polled every 5 ms."""
    return dict(scheme=scheme.name, n=scheme.n, s=scheme.s, m=scheme.m, scheme_seed=scheme.seed,
                model="small-cnn", model_seed=seed, dtype=dtype, payload_dtype=dtype, batch_size=batch_size,
                sampler_seed=seed, cancel_poll_s=0.005)


def parameter_server(pool, scheme, stragglers, *, batch_size: int, policy: str = "cancel", server_class=None, **kw):
    """A :class:`gcsim.real.master.ParameterServer` (or ``server_class``, a subclass) over ``pool`` for
    ``scheme`` with the ``stragglers`` stub (e.g. :class:`FixedDelays`), mini-batches of ``batch_size``
    split into the scheme's k slices, the small CNN's parameter count, t0 = now; ``kw`` goes to the
    constructor (``after_dispatch``, ``on_death``, a subclass's own)."""
    from gcsim.real.master import ParameterServer
    from gcsim.real.model import build_model, num_parameters
    from gcsim.real.sampling import slice_sizes

    cls = server_class or ParameterServer
    return cls(pool, scheme, stragglers, policy=policy, scheme_label=scheme.name, t0=time.time(),
               slice_sizes=slice_sizes(batch_size, scheme.k), n_params=num_parameters(build_model("small-cnn")), **kw)


def full_batch_gradient(model, images: np.ndarray, labels: np.ndarray, shards, iteration: int, *, batch_size: int,
                        seed: int) -> np.ndarray:
    """The oracle: gradient of the mean loss over iteration ``iteration``'s whole mini-batch, computed
    in this process. ``shards[j]`` holds partition j's sample indices (k = len(shards)); each
    partition's slice is sampled as the workers sample it (``seed``), ``batch_size`` samples in all.
    Returns the flat gradient, shape (number of parameters,), in the model's dtype."""
    from gcsim.real.model import slice_gradient
    from gcsim.real.sampling import slice_positions, slice_sizes

    sizes = slice_sizes(batch_size, len(shards))
    idx = np.concatenate([shards[j][slice_positions(len(shards[j]), int(sizes[j]), seed, iteration, j)]
                          for j in range(len(shards))])
    assert len(idx) == batch_size
    grad, _ = slice_gradient(model, images[idx], labels[idx], batch_size)
    return grad


def kill_processes_naming(text: str) -> None:
    """SIGKILL, by PID, every process of this machine (but this one) whose command line contains
    ``text`` (a test's own temp dir: what is left of the Ray nodes it started). Processes that are gone
    or not ours are skipped."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)


class FixedDelays:
    """Straggler stub for the real executor's tests: ``delays[iteration]`` maps worker -> delay seconds
    (others 0), slowdown 1, for ``n_workers`` workers (the :class:`gcsim.stragglers.Stragglers` interface)."""

    def __init__(self, n_workers: int, delays: dict[int, dict[int, float]]):
        self.n_workers = n_workers
        self.delays = delays

    def draw(self, iteration):
        from gcsim.stragglers import StragglerDraw

        d = np.zeros(self.n_workers)
        for w, v in self.delays.get(iteration, {}).items():
            d[w] = v
        return StragglerDraw(delay_s=d, slowdown=np.ones(self.n_workers), slow=np.zeros(self.n_workers, dtype=bool))


# --------------------------------------------------------------------------------------------------
# sweeps (gcsim sweep)
# --------------------------------------------------------------------------------------------------
#: the base scenario of the tiny sweeps: n = 6, 30 iterations, 10 ms per partition, bimodal delays
SWEEP_BASE = {
    "name": "tinybase", "n_workers": 6, "iterations": 30, "seed": 1,
    "schemes": [{"name": "uncoded"}],
    "workload": {"gradient_bytes": 1.0e6, "compute": {"dist": "constant", "value": 0.01}},
    "stragglers": {"delay": {"dist": "bimodal", "p": 0.1, "delay": 0.5, "base": {"dist": "expon", "scale": 0.005}}},
}

#: a grid over n, schemes (one a group of two), s and the straggler probability: 48 points
SWEEP_GRID = {"n": [4, 6], "schemes": ["uncoded", "gc-fr", ["gc-cr", "ignore-stragglers"]], "s": [0, 1],
              "stragglers.delay.p": [0.05, 0.2]}


def sweep_file(tmp_path: Path, grid: dict, name: str = "tiny", **more) -> Path:
    """Write ``<tmp_path>/<name>.yaml``: a sweep of :data:`SWEEP_BASE` over ``grid`` (``more``: other
    top-level sweep fields, e.g. ``engine``). Returns its path."""
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"name": name, "base": SWEEP_BASE, "grid": grid, **more}, sort_keys=False))
    return p


def read_rows(path: Path) -> list[dict]:
    """The rows of a CSV file (sweep.csv) as dicts of strings."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def interrupt_sweep_points(monkeypatch, at_call: int):
    """Make :func:`gcsim.sweep.run.evaluate_point` raise KeyboardInterrupt at its ``at_call``-th call
    (the earlier ones evaluate as usual), as a Ctrl-C in the middle of a sweep would.

    Returns:
        a function of no arguments that puts the real ``evaluate_point`` back.
    """
    import gcsim.sweep.run as sweep_run

    real, calls = sweep_run.evaluate_point, []

    def interrupted(plan, k, memo=None):
        calls.append(k)
        if len(calls) == at_call:
            raise KeyboardInterrupt
        return real(plan, k, memo)

    monkeypatch.setattr(sweep_run, "evaluate_point", interrupted)
    return lambda: monkeypatch.setattr(sweep_run, "evaluate_point", real)


# --------------------------------------------------------------------------------------------------
# a scenario with closed-form means (gcsim advise)
# --------------------------------------------------------------------------------------------------
#: workers, delay probability, delay seconds, compute seconds per partition of :func:`closed_form_scenario`
CF_N, CF_P, CF_DELAY, CF_C = 6, 0.1, 1.0, 0.05


def closed_form_scenario(stragglers: dict, iterations: int = 1500):
    """A validated scenario of :data:`CF_N` workers computing :data:`CF_C` seconds per partition, no
    communication, with ``stragglers`` (e.g. ``{"delay": {"dist": "bimodal", "p": CF_P, "delay":
    CF_DELAY}}``, the case :func:`closed_form_means` solves)."""
    from gcsim.scenario import validate_scenario

    return validate_scenario({"name": "cf", "n_workers": CF_N, "iterations": iterations, "seed": 1,
                              "schemes": [{"name": "uncoded"}],
                              "workload": {"gradient_bytes": 0.0, "compute": {"dist": "constant", "value": CF_C}},
                              "stragglers": stragglers})


def closed_form_means() -> dict:
    """Mean iteration time (seconds) per ``(scheme, s, m)`` of :func:`closed_form_scenario` with additive
    Bernoulli delays (prob P add DELAY), compute C per partition, no communication, decode 0, cancel
    policy (iterations i.i.d.):
    any-(n-s) schemes (gc-cr, gc-mds, cce-cr with d = s+m): d·C + DELAY·P(Bin(n, P) > s);
    groups of g = s+m workers needing m arrivals each (gc-fr: m = 1; cce-fr):
    d·C + DELAY·(1 - (1 - P(Bin(g, P) > g - m))^(n/g)); uncoded: C + DELAY·(1 - (1-P)^n)."""
    from scipy.stats import binom

    N, P, DELAY, C = CF_N, CF_P, CF_DELAY, CF_C
    out = {("uncoded", 0, 1): C + DELAY * (1 - (1 - P) ** N)}
    for s in range(1, N):
        out[("gc-cr", s, 1)] = (s + 1) * C + DELAY * binom.sf(s, N, P)
        for m in range(1, 5):
            g = s + m
            if g <= N and N % g == 0:
                fail = binom.sf(g - m, g, P)
                out[("cce-fr" if m > 1 else "gc-fr", s, m)] = g * C + DELAY * (1 - (1 - fail) ** (N // g))
    return out


# --------------------------------------------------------------------------------------------------
# workers sharing cores (workload.cores)
# --------------------------------------------------------------------------------------------------
def shared_cpu_scenario(iterations: int, **workload) -> dict:
    """Scenario mapping: 4 workers, ``uncoded`` and ``ignore-stragglers`` s = 1, one partition of 0.1
    CPU-seconds each, no messages, worker 3 three times slower (``worker_scale``), seed 3; ``workload``
    adds to the workload section (e.g. ``cores=2``, ``call_overhead={...}``)."""
    return {
        "name": "cpu", "n_workers": 4, "iterations": iterations, "seed": 3,
        "schemes": [{"name": "uncoded"}, {"name": "ignore-stragglers", "s": 1}],
        "workload": {"gradient_bytes": 0, "compute": {"dist": "constant", "value": 0.1}, **workload},
        "stragglers": {"worker_scale": [1, 1, 1, 3]},
    }
