"""Finding 22's table: every committed protocol pass, the worst errors over its exact targets as the
protocol files stood at a git revision (before a change of the model) beside the working tree's (after
``recompute_protocols.sh``), for the predictions from ``uncoded-a`` (``from-uncoded``), the diagnostic given
each target's load and speed, and the model check.

    .venv/bin/python docs/validation/before_after.py ba38692      # before = the files of that revision

Columns (percent): worst |mean err| in expectation, worst |p95 err| in expectation (the model check: raw),
before → after; a pass new since the revision has no "before".
"""

import io
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent
COMPARISONS = {"from-uncoded": "from uncoded-a", "given-uncoded-load-and-speed": "given load and speed",
               "check-uncoded-paired": "model check"}


def _old(rev: str, path: Path) -> pd.DataFrame | None:
    rel = path.resolve().relative_to(Path.cwd().resolve())
    try:
        text = subprocess.check_output(["git", "show", f"{rev}:{rel}"], text=True, stderr=subprocess.DEVNULL)
    except subprocess.CalledProcessError:
        return None
    return pd.read_csv(io.StringIO(text))


def _cell(old: pd.Series | None, new: pd.Series, col: str) -> str:
    def pct(x):
        return "–" if pd.isna(x) else f"{100 * x:.1f}"
    return f"{pct(old[col]) if old is not None else '–'} → {pct(new[col])}"


def main(rev: str) -> None:
    print("| pass | model | neighbour | comparison | worst \\|mean err\\| (expectation) | worst \\|p95 err\\| "
          "(expectation) |")
    print("|---|---|---|---|---|---|")
    for path in sorted(ROOT.glob("protocol*/**/protocol_summary.csv")):
        new = pd.read_csv(path)
        old = _old(rev, path)
        noisy = "noisy" in str(path.relative_to(ROOT))
        for model in new["model"].unique():
            for comp, name in COMPARISONS.items():
                n = new[(new["model"] == model) & (new["comparison"] == comp)]
                if n.empty:
                    continue
                o = None if old is None else old[(old["model"] == model) & (old["comparison"] == comp)]
                o = None if o is None or o.empty else o.iloc[0]
                n = n.iloc[0]
                mean_col = "worst_abs_mean_err" if comp.startswith("check") else "worst_abs_mean_err_expectation"
                p95_col = "worst_abs_p95_err" if comp.startswith("check") else "worst_abs_p95_err_expectation"
                print(f"| `{path.parent.relative_to(ROOT)}` | {model} | {'yes' if noisy else 'no'} | {name} "
                      f"| {_cell(o, n, mean_col)} | {_cell(o, n, p95_col)} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "HEAD")
