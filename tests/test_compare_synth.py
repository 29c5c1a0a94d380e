"""Synthetic run directories in the gcsim/trace.py format, for the comparator's tests (and tests of the
builder itself). Import the helpers with ``from test_compare_synth import make_trace, write_run_dir``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from gcsim.trace import ITERATION_COLUMNS, SUMMARY_COLUMNS, WORKER_COLUMNS, summarize, write_csv, write_meta


def make_trace(scheme: str = "uncoded", n: int = 4, s: int = 0, m: int = 1, iterations: int = 60, seed: int = 0,
               compute_scale: float = 1.0, partitions: int | None = None, transfer_s: float = 0.002,
               overhead_s: float = 0.004, dispatch_lag_s: float = 0.001, delay_p: float = 0.1,
               delay_s: float = 0.05) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(iterations, workers) DataFrames of a toy synchronous run: each worker computes ``partitions``
    partitions of lognormal time (median 10 ms × compute_scale each), with probability ``delay_p`` an
    additive delay ``delay_s``; the iteration is decodable at the (n−s)-th arrival."""
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
    """Write a complete run directory (config.yaml, the three CSVs, meta.json last) from
    scheme -> (iterations, workers). ``params``: scheme -> (s, m) for the summary (default (0, 1))."""
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


def test_synthetic_trace_is_decodable_at_the_n_minus_s_th_arrival():
    its, wks = make_trace("gc-fr", n=6, s=1, iterations=5, seed=3)
    for it, grp in wks.groupby("iteration"):
        arrivals = np.sort((grp["send_s"] + 0.002).to_numpy())
        assert its.loc[it, "decodable_s"] == arrivals[4]
        assert grp["used"].sum() == 5
    np.testing.assert_allclose(its["duration_s"], its["end_s"] - its["start_s"])
    assert np.all(its["start_s"].to_numpy()[1:] == its["end_s"].to_numpy()[:-1])


def simulated_run(run_dir: Path, schemes: list[dict], *, n: int = 6, iterations: int = 150, seed: int = 7,
                  created_utc: str | None = None, executor: str = "real", compute_scale_s: float = 0.01) -> Path:
    """A run directory written by the simulator (same trace format as a real run), relabelled as
    ``executor`` and dated ``created_utc``: a stand-in for a measured run with a known model."""
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
