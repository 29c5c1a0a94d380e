"""The one trace format both executors write and the comparator reads (version ``TRACE_FORMAT_VERSION``).

A run directory holds:

* ``meta.json`` – ``{"trace_format_version": 4, "executor": "sim"|"real", "created_utc": ...}``
  plus executor-specific fields; written last, so a directory without it is half-written;
* ``config.yaml`` – the resolved configuration (scenario with every default filled in);
* ``iterations.csv`` – one row per (scheme, iteration): :data:`ITERATION_COLUMNS`;
* ``workers.csv`` – one row per (scheme, iteration, worker): :data:`WORKER_COLUMNS`;
* ``summary.csv`` – one row per scheme: :data:`SUMMARY_COLUMNS`.

All times are seconds. ``*_s`` columns that are instants are measured from the start of the run
(simulation time 0, or the real run's first dispatch); durations are differences of instants.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from gcsim.errors import RunDirError
from gcsim.rundir import atomic_write_text, make_public  # noqa: F401  (re-exported: older imports)

TRACE_FORMAT_VERSION = 4

#: Versions :func:`read_meta` accepts. Version 1 lacks :data:`CPU_COLUMNS`, versions 1 and 2 lack
#: :data:`OTHER_CPU_COLUMNS`, versions 1-3 lack :data:`BETWEEN_CALLS_COLUMNS`; :func:`read_table` fills
#: them with NaN there (not measured: calibration then infers CPU from wall time, or assumes no other load).
READABLE_TRACE_FORMAT_VERSIONS = (1, 2, 3, 4)

#: iterations.csv – instants in seconds from run start; ``decodable_s`` is when the arrived set first
#: became decodable; ``end_s`` adds the master's decode/update time; ``duration_s = end_s - start_s``.
#: ``other_cpu_wait_s`` / ``other_cpu_finish_s`` (version 3): CPU-seconds taken on the workers' host by
#: every process but the workers (the master, Ray's daemons, other programs) during ``[start_s,
#: decodable_s]`` / ``[decodable_s, end_s]`` – what the niced workers could not use (a real run:
#: :mod:`gcsim.real.hostcpu`; the simulator: its ``workload.background`` draw × the phase's length;
#: NaN when not measured or not modelled).
ITERATION_COLUMNS = [
    "scheme", "iteration", "start_s", "decodable_s", "end_s", "duration_s", "n_arrived", "n_used",
    "other_cpu_wait_s", "other_cpu_finish_s",
]

#: workers.csv – per worker and iteration. ``dispatch_s``: the worker has the model and may start;
#: ``compute_start_s``: it starts this iteration's work (later than dispatch under carry-over);
#: ``compute_s``: pure compute seconds of its partitions (after slowdown); ``delay_s``: injected
#: additive straggler delay; ``slowdown``: multiplicative factor applied to compute;
#: ``send_s``: its message leaves; ``arrival_s``: it reaches the master (NaN if it never did);
#: ``used``: it enters the decoding; ``status``: arrived | late | cancelled | dead;
#: ``cpu_s`` (version 2): CPU-seconds the worker process spent on this worker-iteration – its
#: partitions plus its per-call work (a real worker: ``time.process_time()``, all threads, from the end
#: of its previous call to this call's send, so Ray's between-call work – argument deserialisation,
#: result serialisation, bookkeeping – counts for the call that follows it; the simulator: the CPU work
#: it drew, partitions + ``workload.call_overhead``); ``compute_cpu_s`` (version 2): the part of
#: ``cpu_s`` spent inside the partitions' window. NaN when not observed (dead, cancelled without history).
#: ``between_calls_cpu_s`` (version 4): the part of ``cpu_s`` the worker process used between the end of
#: its previous call and the start of this one (Ray's work between calls: the previous reply's
#: serialisation, this call's argument deserialisation, its threads while idle; a real worker's
#: ``cpu_before``, :mod:`gcsim.real.worker`), so ``cpu_s - compute_cpu_s - between_calls_cpu_s`` is the CPU
#: of the call itself outside its partitions (the delay's sleep, loading the weights, encoding). NaN
#: where not measured apart: the simulator (its ``workload.call_overhead`` is one job), the all-reduce
#: executor, older traces (finding 37 of docs/validation/README.md).
WORKER_COLUMNS = [
    "scheme", "iteration", "worker", "n_partitions", "dispatch_s", "compute_start_s", "compute_s",
    "delay_s", "slowdown", "send_s", "arrival_s", "used", "status", "cpu_s", "compute_cpu_s",
    "between_calls_cpu_s",
]

#: Worker columns added in trace format version 2 (NaN-filled when reading version 1).
CPU_COLUMNS = ["cpu_s", "compute_cpu_s"]

#: Iteration columns added in trace format version 3 (NaN-filled when reading versions 1 and 2).
OTHER_CPU_COLUMNS = ["other_cpu_wait_s", "other_cpu_finish_s"]

#: Worker columns added in trace format version 4 (NaN-filled when reading versions 1-3).
BETWEEN_CALLS_COLUMNS = ["between_calls_cpu_s"]

#: summary.csv – one row per scheme. ``refusals``: iterations in which the scheme refused to decode an
#: arrived set it could solve for but not exactly enough in the payload precision, so the master waited
#: for more arrivals (:class:`gcsim.schemes.base.Refusal`); NaN when the writer did not count them
#: (older traces). ``dead_workers``: workers the real executor lost during the run (dead actor, node
#: or lost payload; all sessions); NaN where not counted (the simulator, older traces).
SUMMARY_COLUMNS = [
    "scheme", "n", "s", "m", "iterations", "mean_s", "p50_s", "p95_s", "p99_s", "std_s",
    "speedup_vs_uncoded", "computation_load", "communication_load", "refusals", "dead_workers",
]


def summarize(iterations: pd.DataFrame, loads: dict[str, dict], refusals: dict[str, int] | None = None) -> pd.DataFrame:
    """Summary rows from an iterations table.

    Args:
        iterations: rows with :data:`ITERATION_COLUMNS`.
        loads: scheme -> ``{"n", "s", "m", "computation_load", "communication_load"}``
            (e.g. ``Scheme.describe()``).
        refusals: scheme -> iterations with a refused decode (column ``refusals``; default: the
            table's ``attrs["refusals"]`` as the real executor's frame carries it; NaN where absent).
            ``dead_workers`` comes from ``attrs["dead_workers"]`` (scheme -> count) the same way.
    Returns:
        DataFrame with :data:`SUMMARY_COLUMNS`; ``speedup_vs_uncoded`` = mean(uncoded)/mean(scheme),
        NaN when no ``uncoded`` row is present.
    """
    if refusals is None:
        refusals = iterations.attrs.get("refusals")
    rows = []
    for scheme, grp in iterations.groupby("scheme", sort=False):
        d = grp["duration_s"].to_numpy(dtype=float)
        info = loads[scheme]
        rows.append({
            "scheme": scheme, "n": info["n"], "s": info["s"], "m": info["m"], "iterations": len(d),
            "mean_s": d.mean(), "p50_s": np.quantile(d, 0.5), "p95_s": np.quantile(d, 0.95),
            "p99_s": np.quantile(d, 0.99), "std_s": d.std(ddof=1) if len(d) > 1 else 0.0,
            "speedup_vs_uncoded": np.nan,
            "computation_load": info["computation_load"], "communication_load": info["communication_load"],
            "refusals": (refusals or {}).get(scheme, np.nan),
            "dead_workers": (iterations.attrs.get("dead_workers") or {}).get(scheme, np.nan),
        })
    out = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    if "uncoded" in set(out["scheme"]):
        base = float(out.loc[out["scheme"] == "uncoded", "mean_s"].iloc[0])
        out["speedup_vs_uncoded"] = base / out["mean_s"]
    return out


def trace_frame(data, columns: list[str], table: str) -> pd.DataFrame:
    """A trace table from exactly its columns: ``pd.DataFrame(data, columns=columns)`` fills a missing
    or misspelled key with NaN and drops an unknown one without a word (issue 11); this refuses both.

    Args:
        data: a mapping column -> values (scalars broadcast), or a sequence of row mappings.
        columns: the table's columns, in order (e.g. :data:`WORKER_COLUMNS`).
        table: the file it becomes, for the message (e.g. ``"workers.csv"``).
    Returns:
        DataFrame with ``columns`` in that order (empty rows: an empty frame with those columns).
    Raises:
        ValueError: ``"workers.csv: expected exactly its columns [...], missing [...], unknown [...]"``.
    """
    want = set(columns)

    def check(keys) -> None:
        got = set(keys)
        if got != want:
            raise ValueError(f"{table}: expected exactly its columns {list(columns)}, missing "
                             f"{sorted(want - got)}, unknown {sorted(got - want)}")

    if isinstance(data, dict):
        check(data)
    else:
        data = list(data)
        for row in data:
            check(row)
    return pd.DataFrame(data, columns=columns)


def write_csv(path: Path, df: pd.DataFrame, columns: list[str]) -> None:
    """Atomically write ``df[columns]`` as CSV (raises KeyError if a column is missing)."""
    atomic_write_text(path, df[columns].to_csv(index=False, float_format="%.9g"))


def write_meta(run_dir: Path, executor: str, **extra) -> None:
    """Write ``meta.json`` (last file of a complete run directory)."""
    meta = {"trace_format_version": TRACE_FORMAT_VERSION, "executor": executor,
            "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), **extra}
    atomic_write_text(Path(run_dir) / "meta.json", json.dumps(meta, indent=2, sort_keys=True, default=str))


def read_meta(run_dir: Path) -> dict:
    """Read and check ``meta.json``. Raises RunDirError when missing, unreadable or of another version."""
    p = Path(run_dir) / "meta.json"
    if not p.is_file():
        raise RunDirError(f"{p}: missing (run directory is incomplete or not a gcsim run)")
    try:
        meta = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise RunDirError(f"{p}: unreadable JSON ({e})") from None
    v = meta.get("trace_format_version")
    if v not in READABLE_TRACE_FORMAT_VERSIONS:
        raise RunDirError(f"{p}: trace_format_version: expected one of {list(READABLE_TRACE_FORMAT_VERSIONS)}, got {v!r}")
    return meta


def read_table(run_dir: Path, name: str, columns: list[str]) -> pd.DataFrame:
    """Read ``<run_dir>/<name>`` and check it has ``columns``. Raises RunDirError naming the file.

    :data:`CPU_COLUMNS`, :data:`OTHER_CPU_COLUMNS`, :data:`BETWEEN_CALLS_COLUMNS` and summary's ``refusals`` /
    ``dead_workers`` absent (older traces) are added as NaN rather than refused."""
    p = Path(run_dir) / name
    if not p.is_file():
        raise RunDirError(f"{p}: missing")
    try:
        df = pd.read_csv(p)
    except Exception as e:  # pandas raises several types for malformed CSV
        raise RunDirError(f"{p}: unreadable CSV ({type(e).__name__}: {e})") from None
    for c in CPU_COLUMNS + OTHER_CPU_COLUMNS + BETWEEN_CALLS_COLUMNS + ["refusals", "dead_workers"]:
        if c in columns and c not in df.columns:
            df[c] = np.nan
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise RunDirError(f"{p}: missing columns {missing}")
    return df
