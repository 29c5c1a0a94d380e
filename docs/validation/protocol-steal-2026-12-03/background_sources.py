"""Which steady background transfers from one `uncoded` run to the other schemes: fitted to the
workers' clocks (the default since finding 11) or as measured? Every committed protocol pass, both
straggler models, calibrated on `uncoded-a` (steady part), measured CPU, fresh draws, 5 replications.

    .venv/bin/python docs/validation/protocol-steal-2026-12-03/background_sources.py > docs/validation/protocol-steal-2026-12-03/background_sources.txt

The committed output was made at commit 003c3bf, before finding 18 capped the fit at the measured
background; with the current code the "fitted" rows are the smaller of the two.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from gcsim.compare.pipeline import CompareOptions, compare_runs  # noqa: E402
from gcsim.compare.rundir import read_run_dir  # noqa: E402

EXACT = {"gc-fr", "gc-cr", "gc-mds", "cce-fr", "cce-cr"}
PASSES = ["protocol", "protocol-noisy", "protocol-2026-12-02", "protocol-noisy-other-2026-12-02",
          "protocol-2026-12-02b", "protocol-noisy-2026-12-02b", "protocol-seed2-2026-12-03",
          "protocol-steal-2026-12-03", "protocol-steal-2026-12-03/runs-noisy"]


def runs_of(pass_dir: Path, model: str) -> dict:
    root = pass_dir / model if (pass_dir / model / "uncoded-a").is_dir() else pass_dir / "runs" / model
    return {d.name: read_run_dir(d) for d in sorted(root.iterdir()) if (d / "meta.json").is_file()}


def main() -> None:
    print(f"{'pass':42s} {'model':13s} {'background':10s} worst|err| mean|err|  errors of the exact schemes")
    for name in PASSES:
        p = ROOT / "docs/validation" / name
        for model in ("real_default", "real_expon"):
            try:
                runs = runs_of(p, model)
            except FileNotFoundError:
                continue
            if "uncoded-a" not in runs:
                continue
            targets = [(r, r.schemes) for label, r in runs.items() if label != "uncoded-a"]
            for bg in ("fitted", "measured"):
                res = compare_runs(targets, calibrate_from=[runs["uncoded-a"]],
                                   options=CompareOptions(replications=5, cpu_source="measured", background=bg))
                errs = {it.run.label: it.comparison.rel_error["mean"].value for it in res.items if it.run.label.split("-")[0] != "uncoded"}
                exact = [v for k, v in errs.items() if k in EXACT]
                print(f"{name:42s} {model:13s} {bg:10s} {max(map(abs, exact)):8.1%} {np.mean(np.abs(exact)):8.1%}  "
                      + " ".join(f"{k} {v:+.1%}" for k, v in errs.items() if k in EXACT), flush=True)


if __name__ == "__main__":
    main()
