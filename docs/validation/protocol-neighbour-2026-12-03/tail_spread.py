"""Finding 19 (docs/validation/README.md): does the per-iteration spread of the CPU other processes took
explain why CCE's tail is too short in the model beside a neighbour?

    .venv/bin/python docs/validation/protocol-neighbour-2026-12-03/tail_spread.py \
        docs/validation/protocol-neighbour-2026-12-03/runs-noisy/real_expon cce-cr,cce-fr,gc-fr

Diagnostic, not a prediction: each target is simulated given its own measured load and CPU speed
(`gcsim compare --load-from target --speed-from target`, fresh draws, 5 replications), once with the
steady wait background constant (as gcsim models it) and once drawn per iteration, independently, from
the target's own per-iteration wait-phase rates scaled to the same mean (an empirical distribution).
"""
import sys

import numpy as np

from gcsim.compare.rundir import read_run_dir
from gcsim.compare.pipeline import compare_runs, CompareOptions
from gcsim.sim.engine import simulate as sim0
root = sys.argv[1]; targets = sys.argv[2].split(",")
cal = read_run_dir(f"{root}/uncoded-a")
SPREAD = {}
def simulate(scenario, **kw):
    bg = scenario.workload.background
    if SPREAD.get("on") and bg is not None and bg.wait is not None and getattr(bg.wait, "value", None) is not None:
        c = float(bg.wait.value); vals = list(np.clip(c * SPREAD["ratio"], 0, None))
        data = scenario.model_dump(mode="json", exclude_none=True)
        data["workload"]["background"]["wait"] = {"dist": "empirical", "values": vals}
        from gcsim.scenario import validate_scenario
        scenario = validate_scenario(data)
    return sim0(scenario, **kw)
opts = CompareOptions(cpu_source="measured", load_from="target", speed_from="target", replications=5,
                      speed_drift="none", n_resamples=500)
for t in targets:
    run = read_run_dir(f"{root}/{t}")
    its = run.iterations_of(run.schemes[0]).iloc[10:]
    r = (its.other_cpu_wait_s / (its.decodable_s - its.start_s)).to_numpy()
    SPREAD["ratio"] = r / r.mean()
    out = []
    for on in (False, True):
        SPREAD["on"] = on
        res = compare_runs([(run, run.schemes)], calibrate_from=cal, options=opts, simulate=simulate)
        row = res.table().iloc[0]
        out.append(f"{'spread' if on else 'constant'}: mean {row.err_mean:+.1%} p95 {row.err_p95:+.1%}")
    print(f"{t:18s} ratio sd {SPREAD['ratio'].std():.3f} | " + " | ".join(out), flush=True)
