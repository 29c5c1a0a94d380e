"""The scenario that simulates a measured run: the run's own fields (:mod:`gcsim.compare.run_facts`)
joined with what :func:`gcsim.compare.calibrate.calibrate` estimated, as a raw mapping
(:func:`scenario_data`) or a validated :class:`gcsim.scenario.Scenario` (:func:`build_scenario`).

``Calibration`` is not imported here: :mod:`gcsim.compare.calibrate` re-exports this module's names,
so an import back would close a cycle; the annotations name it as a string."""

from __future__ import annotations

import re

import numpy as np

from gcsim.compare.rundir import RunDir
from gcsim.compare.run_facts import message_bytes, scheme_spec
from gcsim.errors import ConfigError, RunDirError

_COPIED = ("n_workers", "iterations", "seed", "stragglers", "policy", "cancel_latency_s")


def scenario_data(run: RunDir, scheme: str, calibration: "Calibration", *, seed: int | None = None,
                  permutation_seed: int | None = None) -> dict:
    """Raw scenario mapping for simulating ``scheme`` as it ran in ``run`` (what is copied and what
    calibrated: :mod:`gcsim.compare.calibrate`).

    Args:
        run: the measured run (its scenario supplies the copied fields; ``iterations`` is the trace's
            count where its config.yaml does not give it).
        scheme: scheme label in the run.
        calibration: :class:`gcsim.compare.calibrate.Calibration` from
            :func:`gcsim.compare.calibrate.calibrate` (this run or another with the same n).
        seed: scenario seed (default: the run's own, which reproduces its straggler draws).
        permutation_seed: shuffle the empirical compute/master values (paired replications) and give the
            machine's speed factor (``workload.speed_variation``) a path of its own.
    Returns:
        dict for :func:`gcsim.scenario.validate_scenario`.
    """
    sc = run.scenario
    resolved = sc.resolved()
    data = {k: resolved[k] for k in _COPIED if k in sc.model_fields_set and resolved[k] is not None}
    data.setdefault("n_workers", run.n_workers)
    data.setdefault("iterations", int(run.iterations_of(scheme)["iteration"].nunique()))
    if seed is not None:
        data["seed"] = int(seed)
    g_bytes, m_bytes = message_bytes(run)
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", f"{run.label}-{scheme}").lstrip("-_.") or "compare"
    workload = {"gradient_bytes": g_bytes, "model_bytes": m_bytes, "compute": calibration.compute_spec(permutation_seed)}
    if calibration.cores is not None:
        workload["cores"] = calibration.cores
        workload["scheduler"] = calibration.scheduler
        workload["call_overhead"] = calibration.overhead_spec(permutation_seed)
        if calibration.background_spec() is not None:
            workload["background"] = calibration.background_spec()
    if calibration.speed_spec() is not None:
        workload["speed_variation"] = dict(calibration.speed_spec())
        if permutation_seed is not None:  # a paired replication: its own path of the machine's speed
            workload["speed_variation"]["seed"] = int(np.random.SeedSequence(
                [int(data.get("seed", sc.seed)), int(permutation_seed), 0x5BEED]).generate_state(1)[0])
    data.update(
        name=name,
        schemes=[scheme_spec(run, scheme)],
        workload=workload,
        network=calibration.network_spec(permutation_seed),
        master={"decode_s": calibration.master_spec(permutation_seed)},
        cancel_granularity=calibration.cancel_granularity,
    )
    return data


def build_scenario(run: RunDir, scheme: str, calibration: "Calibration", **kw):
    """:func:`scenario_data` validated into a :class:`gcsim.scenario.Scenario`.

    Raises:
        RunDirError: the run's config.yaml holds a value the scenario refuses (names the file and field).
    """
    from gcsim.scenario import validate_scenario

    data = scenario_data(run, scheme, calibration, **kw)
    try:
        return validate_scenario(data)
    except ConfigError as e:
        raise RunDirError(f"{run.path / 'config.yaml'}: {e}") from None



__all__ = ["build_scenario", "scenario_data"]
