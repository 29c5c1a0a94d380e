"""``gcsim calibrate``: write a scenario file calibrated from one measured run.

The file is an ordinary scenario (:mod:`gcsim.scenario`) that ``gcsim simulate`` runs as is. What
the run *specified* (n, the straggler model, the policy, message sizes) is copied; what the run
*measured* is calibrated by :func:`gcsim.compare.calibrate.calibrate` – per-partition CPU work and
per-call overhead from the workers' own CPU clocks (trace version ≥ 2), the cores other processes
took from the workers (``workload.background``, trace version 3), the model-broadcast lag, the
gradient transfer and the master's decode + update time. Empirical distributions are written as
CSV files beside the YAML (``<stem>.<name>.csv``, one ``seconds`` column), referenced by relative
path, so the YAML stays readable and editable.

The user then edits what the question is about – ``schemes`` (every registered scheme valid for n
is listed), ``stragglers``, ``iterations`` – and runs ``gcsim simulate``. Changing ``n_workers``
keeps the per-partition compute of *this* run's partition size (global batch / n): the comments
say so.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import yaml

from gcsim.compare.calibrate import DEFAULT_BETWEEN_CALLS, Calibration, calibrate, check_between_calls
from gcsim.compare.run_facts import require_same_n
from gcsim.compare.rundir import RunDir, as_runs
from gcsim.compare.scenario_build import scenario_data
from gcsim.errors import ConfigError

#: iterations a calibrated scenario asks for at least: its run's, else this many. A 200-iteration run
#: simulated for 200 iterations leaves the mean's sampling error of a single draw of stragglers
#: (±3-15 % under the committed straggler models, docs/validation/README.md finding 4) in the prediction.
CALIBRATED_MIN_ITERATIONS = 2000

#: empirical distributions of the calibrated scenario written to side files: (path in the scenario, file tag)
_EMPIRICAL_FIELDS = (
    (("workload", "compute"), "compute_s"),
    (("workload", "call_overhead"), "call_overhead_s"),
    (("network", "dispatch"), "dispatch_s"),
    (("master", "decode_s"), "master_decode_s"),
)


def default_schemes(n: int, s: int = 1) -> list[dict]:
    """Every registered scheme that builds with ``n`` workers and ``s`` stragglers (``m = 2`` for the
    CCE schemes, else 1): the list a calibrated scenario starts with."""
    from gcsim.schemes import make_scheme, scheme_names

    out = []
    for name in scheme_names():
        ss = 0 if name == "uncoded" else s
        m = 2 if name.startswith("cce") else 1
        try:
            make_scheme(name, n, ss, m, 0)
        except Exception:  # a scheme whose constraints this n does not meet is left out
            continue
        out.append({"name": name, "s": ss, "m": m})
    return out


def _uses_measured_cpu(run: RunDir) -> bool:
    wk = run.workers
    return "compute_cpu_s" in wk and bool(np.isfinite(wk["compute_cpu_s"].to_numpy(float)).any())


def calibrated_scenario(run: RunDir | Sequence[RunDir], *, warmup: int = 10, name: str | None = None,
                        schemes: list[dict] | None = None, background: str = "fitted",
                        window: str = "steady", between_calls: str = DEFAULT_BETWEEN_CALLS,
                        on_note: Callable[[str], None] | None = None) -> tuple[dict, Calibration]:
    """Scenario data calibrated from ``run`` (every scheme of the run pooled) and the calibration.

    Args:
        run: a complete run directory (real or simulated), or several with the same n, pooled (e.g.
            the same scheme run before and after other work: a drift of the machine averages out);
            the first supplies what is copied (stragglers, policy, message sizes).
        warmup: iterations dropped at the start of each scheme (clipped to leave 2).
        name: scenario name (default: ``calibrated-<run label>``).
        schemes: scheme entries (default :func:`default_schemes` for the run's n).
        background: ``"fitted"`` (default): with the workers' CPU clocks in the trace, the steady
            background while the master waits is fitted to the cores the workers got
            (:func:`gcsim.compare.worker_share.fit_steady_background`, on the run's first scheme);
            ``"measured"``: the other-process CPU as measured.
        window: ``"steady"`` (default): leave out the blocks of iterations during which another load came
            and went (:mod:`gcsim.compare.steady`; the calibration's notes say which); ``"all"``: every
            iteration after the warm-up.
        between_calls: the model of Ray's CPU between calls, one of
            :data:`gcsim.compare.calibrate.BETWEEN_CALLS` (with the workers' CPU clocks).
        on_note: called with each line saying what the steady window left out (also in the
            calibration's notes).
    Returns:
        ``(data, calibration)``; ``data`` validates with :func:`gcsim.scenario.validate_scenario`.
    Raises:
        RunDirError: the run lacks what calibration needs (names the file).
    """
    runs = as_runs(run)
    run = runs[0]
    for other in runs[1:]:
        require_same_n(run, other)
    n_it = min(int(r.iterations_of(s)["iteration"].nunique()) for r in runs for s in r.schemes)
    w = max(0, min(int(warmup), n_it - 2))
    measured = all(_uses_measured_cpu(r) for r in runs)
    from gcsim.compare.steady import calibration_runs

    runs, window_notes = calibration_runs(runs, window, w)
    run = runs[0]
    cal = calibrate(runs, warmup=w, use_measured_cpu=measured, between_calls=between_calls)
    cal = cal.with_window_notes(window_notes)
    for note in window_notes:
        if on_note is not None:
            on_note(note)
    if background == "fitted" and measured:
        from gcsim.compare.worker_share import fit_pooled_background

        cal = fit_pooled_background(runs, cal, warmup=w)
    data = scenario_data(run, run.schemes[0], cal)
    if measured and all(r.executor == "real" for r in runs):  # a simulated run measures no machine
        from gcsim.compare.pipeline import calibration_speed_cv, calibration_speed_dof

        sigma = calibration_speed_cv(runs, w)
        if math.isfinite(sigma) and sigma < 1:  # the machine's drift, for gcsim simulate's prediction range
            dof = calibration_speed_dof(runs, w)
            data["workload"]["speed_drift"] = {"sd": round(sigma, 6),
                                                **({"dof": max(round(dof, 3), 1.0)} if math.isfinite(dof) else {})}
    data["name"] = name or ("calibrated-" + data["name"])[:100]
    data["schemes"] = schemes if schemes is not None else default_schemes(run.n_workers)
    data["iterations"] = max(int(data.get("iterations") or 0), CALIBRATED_MIN_ITERATIONS)
    data.pop("seed", None)
    data["seed"] = fresh_seed(runs)
    return data, cal


#: What a calibrated scenario copies from its first run rather than calibrates (issue 12: pooling runs
#: that differ in these used the first run's silently).
COPIED_FIELDS = ("stragglers", "policy", "cancel_latency_s")


def pooled_differences(runs: Sequence[RunDir]) -> list[str]:
    """One line per copied field (:data:`COPIED_FIELDS`, message sizes) in which a pooled run differs
    from the first, which is the one copied. Compute, transfer and master times are calibrated from
    every run; what the stragglers, policy and message sizes are comes from the first run only.

    Returns:
        e.g. ``["stragglers: copied from run uncoded-a; run gc-fr-b differs (it contributed only the
        calibrated times)"]``; empty when the runs agree or there is one run.
    """
    from gcsim.compare.run_facts import message_bytes

    runs = list(runs)
    first = runs[0]
    out = []
    for r in runs[1:]:
        fields = [f for f in COPIED_FIELDS if getattr(first.scenario, f) != getattr(r.scenario, f)]
        if message_bytes(first) != message_bytes(r):
            fields.append("message sizes")
        for f in fields:
            out.append(f"{f}: copied from run {first.label} ({first.path}); run {r.label} ({r.path}) differs "
                       f"(it contributed only the calibrated times)")
    has = {r.label: _records_between_calls(r) for r in runs}
    if len(set(has.values())) > 1:
        out.append("between_calls_cpu_s: recorded in run(s) " + ", ".join(k for k, v in has.items() if v)
                   + " but not in " + ", ".join(k for k, v in has.items() if not v) + " (trace format < 4): "
                   "--between-calls-cpu in-lags takes Ray's CPU between calls off the per-call CPU of the former "
                   "only, so the pooled per-call CPU mixes both models")
    return out


def _records_between_calls(run: RunDir) -> bool:
    """Whether any worker row of ``run`` recorded ``between_calls_cpu_s`` (trace format 4, a real run)."""
    wk = run.workers
    return "between_calls_cpu_s" in wk and bool(np.isfinite(pd.to_numeric(wk["between_calls_cpu_s"],
                                                                        errors="coerce")).any())


def fresh_seed(runs: Sequence[RunDir]) -> int:
    """The smallest positive straggler seed none of ``runs`` used: a calibrated scenario's draws are
    fresh, not the calibration run's own (the keyed streams would replay them under the same seed)."""
    used = {int(r.scenario.seed) for r in runs if r.scenario.seed is not None}
    seed = 1
    while seed in used:
        seed += 1
    return seed


def _probe_lines(runs: list[RunDir]) -> list[str]:
    """Header lines giving each run's CPU-speed probe (meta.json ``cpu_probe.start``), so a user whose
    machine runs faster or slower later can scale the workers' CPU work (``workload.compute`` and
    ``workload.call_overhead``) by the ratio (issue 9); none when no run has a probe."""
    from gcsim.compare.pipeline import probe_cpu_s

    probes = [(r.label, probe_cpu_s(r)) for r in runs]
    if not any(math.isfinite(v) for _, v in probes):
        return []
    vals = ", ".join(f"{v * 1e3:.2f} ms ({label})" for label, v in probes if math.isfinite(v))
    return [f"    the run's CPU-speed probe before its first iteration (one partition gradient, CPU time): {vals};",
            "    on a machine (or day) whose probe differs, set workload.compute.scale and",
            "    workload.call_overhead.scale to new probe / this one"]


def _speed_lines(cal: Calibration) -> list[str]:
    """The calibrated YAML's comment on ``workload.speed_variation`` (none when not modelled)."""
    sv = cal.speed_variation
    if sv is None or sv.spec() is None:
        return []
    return [f"  workload.speed_variation: the machine's speed, shared by every worker of an iteration: a factor on "
            f"every partition's CPU work with mean 1, stationary sd {sv.sd:.3f} on the log scale (about "
            f"{sv.sd * 100:.0f} %) and lag-1 autocorrelation {sv.lag1:.2f} between iterations",
            f"    ({sv.n_iterations} iterations of the workers' CPU clocks; each worker's own part, sd "
            f"{sv.sd_within:.3f}, stays in workload.compute; set sd: 0 for a machine whose speed holds still)"]


def _drift_lines(data: dict, runs: list[RunDir]) -> list[str]:
    """The calibrated YAML's comment on ``workload.speed_drift`` (none when not measured)."""
    drift = data.get("workload", {}).get("speed_drift")
    if not drift:
        if runs and all(r.executor == "real" for r in runs):  # say why a real run's file has no range
            return ["  workload.speed_drift: not written: the run(s) had too few 20-iteration blocks of CPU",
                    "    clocks after the warm-up to measure the machine's drift (3 or more: about 70 iterations);",
                    "    gcsim simulate --speed-drift SD gives each mean a range with a drift you know (e.g. 0.075)."]
        return []
    how = ("the spread of this run's ~10-s blocks of CPU per partition, x sqrt(2) for a run yet to come"
           if len(runs) == 1 else f"the spread within the {len(runs)} runs, averaged with the spread between "
           f"them where that is larger")
    dof = f"{drift['dof']:g} degrees of freedom; " if "dof" in drift else ""
    if "dof" in drift and drift["dof"] < 3:
        dof += "few (runs that disagree): Student's t makes the range wide; "
    lines = [f"  workload.speed_drift: sd {drift['sd']:.3f}: how far a later run's CPU speed may lie from this one's",
             f"    ({how});",
             f"    {dof}gcsim simulate gives each scheme's expected mean a 95 % range from it (not one run's",
             "    own straggler luck, nor the model's 1-3 % error)."]
    if len(runs) == 1:
        lines += ["    On a shared VM the drift between runs was 1.4 x what one run measures of itself",
                  "    (docs/validation/README.md finding 25): raise sd (e.g. 0.075) or calibrate on two runs of the",
                  "    same scheme, before and after the work you predict."]
    return lines + ["    Remove the key for no range."]


def _header(runs: list[RunDir], cal: Calibration, command: str, data: dict | None = None) -> str:
    d = cal.describe()
    run = runs[0]
    run_iterations = min(int(r.iterations["iteration"].nunique()) for r in runs)
    lines = [
        f"Scenario calibrated by `{command}`",
        (f"from run {run.path} ({run.executor} executor, schemes {', '.join(run.schemes)}, n = {run.n_workers})"
         if len(runs) == 1 else f"from {len(runs)} runs pooled (n = {run.n_workers}): "
         + ", ".join(f"{r.path} ({r.executor}, {', '.join(r.schemes)})" for r in runs)),
        f"on {datetime.now(timezone.utc).isoformat(timespec='seconds')}.",
        "",
        "Copied from the run (what it specified): n_workers, stragglers, policy, cancel_latency_s,",
        "cancel_granularity, workload.gradient_bytes / model_bytes.",
        *(f"WARNING: {w}" for w in pooled_differences(runs)),
        "Calibrated from what the run measured (gcsim/compare/calibrate.py):",
        f"  workload.compute: per-partition CPU work, mean {d['compute_per_partition_mean_s'] * 1e3:.2f} ms"
        f" on an idle core ({d['compute_rows']} worker rows"
        + (", from the workers' CPU clocks)" if _uses_measured_cpu(run) else ", de-contended wall time)"),
        *_probe_lines(runs),
        f"  workload.call_overhead: per-call CPU besides the partitions, mean {d['call_overhead_mean_s'] * 1e3:.2f} ms"
        + (" (Ray's CPU between calls left to the lags: --between-calls-cpu in-lags)"
           if cal.between_calls == "in-lags" else " (Ray's CPU between calls included: --between-calls-cpu on-path)"),
        *_speed_lines(cal),
        *_drift_lines(data or {}, runs),
        f"  workload.cores: {d['cores']} (the cores the workers shared)" if d["cores"] is not None
        else "  workload.cores: unset (every worker had a core of its own)",
        *([f"  workload.scheduler: {d['scheduler']} ("
           + ("one run queue per core: a worker stays on its core" if d["scheduler"] == "per-core"
              else "every computing worker at the same rate")
           + ("; as the simulated run had it" if run.executor != "real" else
              "; per-core is a real run's default, as Linux shares cores: docs/validation/README.md "
              "findings 23-24; the other choice: "
              + ("processor-sharing" if d["scheduler"] == "per-core" else "per-core")) + ")"]
          if d["cores"] is not None else []),
    ]
    if d["background_wait_cores"] is not None:
        fin = d["background_finish_cores"] if d["background_finish_cores"] is not None else d["background_wait_cores"]
        lines.append(f"  workload.background: other processes (the master, Ray, other programs) took "
                     f"{(d['background_per_iteration_cpu_s'] or 0.0) * 1e3:.1f} ms of CPU per iteration plus a "
                     f"steady {d['background_wait_cores']:.3f} cores while the master waited, {fin:.3f} while it "
                     f"decoded and stepped")
        fit = cal.background_fit
        if fit is not None and fit.capped:
            lines.append("    the steady wait value is the MEASURED one: the fit to the workers' CPU clocks hit its cap "
                         "(other processes cannot take more than they used), and a simulation of the calibration run "
                         f"still gives its workers {fit.simulated_worker_cores:.3f} cores where their clocks say "
                         f"{fit.observed_worker_cores:.3f}: CPU-bound schemes may come out too fast by up to that ratio")
        elif any("fitted to the workers' CPU" in n for n in d["notes"]):
            lines.append("    the steady wait value is FITTED, not copied: the one for which a simulation of the "
                         "calibration run(s) gives its workers the cores their CPU clocks say they got (Notes give "
                         "the measured value)")
        if d.get("background_per_payload_byte_cpu_s"):
            lines.append(f"    the per-iteration part as per_payload_byte_cpu_s = "
                         f"{d['background_per_payload_byte_cpu_s'] * 1e9:.2f} ns per byte of the workers' replies "
                         f"(Ray moving them), so each scheme is charged for its own message size")
        lines.append("    (measured on this run's machine: edit it for a busier or quieter machine)")
    lines += [
        f"  network.dispatch: model broadcast lag per worker, mean {d['dispatch_mean_s'] * 1e3:.2f} ms",
        f"  network.latency_s / bandwidth_bytes_per_s: gradient transfer, mean {d['transfer_mean_s'] * 1e3:.2f} ms",
        f"  master.decode_s: decode + optimizer step, mean {d['master_overhead_mean_s'] * 1e3:.2f} ms",
        *(f"Calibration window (gcsim/compare/steady.py): {n}" for n in cal.window_notes),
        "Notes: " + ("; ".join(n for n in d["notes"] if n not in cal.window_notes) or "none"),
        "",
        f"iterations: {max(run_iterations, CALIBRATED_MIN_ITERATIONS)} (the run had {run_iterations}; at least "
        f"{CALIBRATED_MIN_ITERATIONS}, so the predicted mean is not one short draw of stragglers); seed: "
        f"{fresh_seed(runs)} (fresh straggler draws, not the seed of the run{'s' if len(runs) > 1 else ''}: "
        f"{', '.join(str(r.scenario.seed) for r in runs)}).",
        "Edit schemes, stragglers or iterations and run: gcsim simulate <this file>.",
        f"Changing n_workers keeps the per-partition compute of this run (global batch split into "
        f"{run.n_workers} partitions);",
        f"for the same global batch set workload.compute.scale to {run.n_workers} / new n_workers.",
        *([f"workload.background.wait and finish include the {run.n_workers} worker processes' idle-time CPU "
           f"({cal.idle_cores_per_worker:.4f} cores each): add (new n_workers - {run.n_workers}) x "
           f"{cal.idle_cores_per_worker:.4f} to both for another n."]
          if cal.idle_cores_per_worker > 0 and d["background_wait_cores"] is not None else []),
    ]
    return "".join(f"# {ln}\n" if ln else "#\n" for ln in lines)


def write_calibrated_scenario(run: RunDir | Sequence[RunDir], out: str | Path, *, command: str,
                              warmup: int | None = None, force: bool = False,
                              calibration_window: str = "steady", between_calls_cpu: str = DEFAULT_BETWEEN_CALLS,
                              on_note: Callable[[str], None] | None = None) -> tuple[Path, list[Path]]:
    """Write the calibrated scenario YAML ``out`` and its empirical CSV files beside it.

    ``warmup``: iterations dropped at the start of every run; None – the comparator's default,
    :func:`gcsim.compare.pipeline.default_warmup` of the shortest (run, scheme).
    ``calibration_window``: ``"steady"`` or ``"all"`` (:func:`calibrated_scenario`'s ``window``).
    ``between_calls_cpu``: the model of Ray's CPU between calls (:func:`calibrated_scenario`'s
    ``between_calls``).
    ``on_note``: called with each line saying what the steady window left out (e.g. to print it; the
    file's comments hold it too).

    Every file is written to a temporary name and renamed, and the scenario is validated before
    anything is written; the YAML is renamed last, so a failure leaves no half-written scenario.

    Returns:
        ``(yaml_path, csv_paths)``.
    Raises:
        ConfigError: field ``--out`` when it exists (without ``force``), is a directory, or its folder
            is missing or not writable; field ``--between-calls-cpu`` not one of
            :data:`gcsim.compare.calibrate.BETWEEN_CALLS`.
        RunDirError: the run lacks what calibration needs.
    """
    from gcsim.scenario import validate_scenario
    from gcsim.trace import atomic_write_text

    out = Path(out)
    if out.suffix not in (".yaml", ".yml"):
        raise ConfigError("--out", "a file name ending in .yaml or .yml", str(out))
    if out.is_dir():
        raise ConfigError("--out", "a file path (not a directory)", str(out))
    if out.exists() and not force:
        raise ConfigError("--out", "a path that does not exist yet (or --force to replace it)", str(out))
    if not out.parent.is_dir():
        raise ConfigError("--out", "a path in an existing directory", str(out))
    counted = [(r, scheme, int(count)) for r in as_runs(run)
               for scheme, count in r.iterations.groupby(r.iterations["scheme"].astype(str),
                                                         sort=False)["iteration"].nunique().items()]
    if warmup is None:
        from gcsim.compare.pipeline import DEFAULT_WARMUP, default_warmup

        warmup = min((default_warmup(count) for _, _, count in counted), default=DEFAULT_WARMUP)
    for r, scheme, count in counted:  # else the calibration silently kept the last iteration alone
        if count - warmup < 2:  # the limit of gcsim compare's --warmup
            raise ConfigError("--warmup", f"at most {max(count - 2, 0)} (run {r.path}, scheme {scheme} has "
                              f"{count} iterations)", warmup)
    from gcsim.compare.steady import check_window

    check_window(calibration_window)  # before anything is computed or written
    check_between_calls(between_calls_cpu)
    data, cal = calibrated_scenario(run, warmup=warmup, window=calibration_window, between_calls=between_calls_cpu,
                                    on_note=on_note)
    side: dict[Path, str] = {}
    for path, tag in _EMPIRICAL_FIELDS:
        node = data
        for key in path[:-1]:
            node = node.get(key) or {}
        spec = node.get(path[-1]) if isinstance(node, dict) else None
        if isinstance(spec, dict) and spec.get("dist") == "empirical" and "values" in spec:
            csv = out.with_name(f"{out.stem}.{tag}.csv")
            side[csv] = "seconds\n" + "".join(f"{float(v):.9g}\n" for v in spec["values"])
            node[path[-1]] = {"dist": "empirical", "file": csv.name, "column": "seconds"}
            if tag == "compute_s":  # written out, so a user sees where to scale it (the comments say when)
                node[path[-1]]["scale"] = 1.0
    if not force:
        for csv in side:
            if csv.exists():
                raise ConfigError("--out", f"a name whose side files do not exist yet (or --force to replace "
                                  f"them): {csv.name} is there", str(out))
    text = _header(as_runs(run), cal, command, data) + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    for csv, body in side.items():
        atomic_write_text(csv, body)
    validate_scenario(yaml.safe_load(text), base_dir=out.parent)  # what simulate will read
    try:
        atomic_write_text(out, text)
    except OSError as e:
        raise ConfigError("--out", "a writable path", f"{out} ({e.strerror})") from None
    return out, list(side)


__all__ = ["calibrated_scenario", "default_schemes", "pooled_differences", "write_calibrated_scenario"]
