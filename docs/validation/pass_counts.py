"""The README's counts over every committed protocol pass: per quiet / neighbour model-pass, the worst
error over its exact targets (the coded schemes; ``uncoded``, the calibration scheme and the noise floor,
is left out), and how many passes meet issue 9's bands.

    .venv/bin/python docs/validation/pass_counts.py            # after recompute_protocols.sh

First a scorecard (the README's "at a glance" table) over the passes made before finding 34's executor
fix (their runs' meta.json has no ``worker_memory_kept``), the passes made with it apart, then the
counts per comparison and the worst errors per model-pass.

A model-pass is one straggler model of one pass (``protocol.csv`` rows of one ``model``); it is a
neighbour pass when its path names ``noisy``. Per comparison: the mean error in expectation
(``err_mean_cv``; the model check: raw ``err_mean``), the raw mean error, the p95 error in expectation
(``err_p95_cv``; the model check: raw), and the measured expectation inside the 95 % prediction interval
(``pi_covers_cv``). Bands: mean 5 % quiet / 8 % with a neighbour, p95 10 %.
"""

from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent
COMPARISONS = ["from-uncoded", "given-uncoded-load-and-speed", "calibrate-file-uncoded", "from-gc-fr",
               "from-uncoded-ab", "check-uncoded-paired"]


def run_memory_kept(run: Path) -> bool:
    """Whether a run was made with freed memory kept in its workers (finding 34, ``meta.json``
    ``worker_memory_kept``; runs before it lack the key)."""
    import json

    meta = run / "meta.json"
    return meta.exists() and bool(json.loads(meta.read_text()).get("worker_memory_kept", False))


def memory_kept(protocol_csv: Path) -> bool:
    """Whether a pass's runs were made with freed memory kept (:func:`run_memory_kept` of its first run
    with a meta.json)."""
    df = pd.read_csv(protocol_csv, usecols=["run_dir"])
    for run in df["run_dir"].dropna().unique():
        path = ROOT.parent.parent / str(run)
        if (path / "meta.json").exists():
            return run_memory_kept(path)
    return False


def load(fixed: bool = False) -> pd.DataFrame:
    """Every committed ``protocol.csv`` made before finding 34's executor fix (``fixed=False``: the
    scorecard's passes) or with it (``fixed=True``), with the columns ``pass`` (its folder) and ``noisy``."""
    frames = []
    for path in sorted(ROOT.glob("protocol*/**/protocol.csv")):
        if memory_kept(path) != fixed:
            continue
        df = pd.read_csv(path)
        df["pass"] = str(path.parent.relative_to(ROOT))
        df["noisy"] = "noisy" in df["pass"].iloc[0]
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _held(g: pd.DataFrame) -> float:
    """How many of ``g``'s targets had the measured expectation inside the prediction interval; NaN when
    the comparison carries no interval (the diagnostics, the model check)."""
    if "pi_covers_cv" not in g:
        return np.nan
    known = g["pi_covers_cv"].dropna()
    return np.nan if known.empty else float(known.astype(str).str.lower().eq("true").sum())


def per_pass(df: pd.DataFrame, comparison: str, noisy: bool) -> pd.DataFrame:
    """One row per model-pass: worst |mean error| (in expectation and raw), worst |p95 error|, PI held."""
    x = df[(df["comparison"] == comparison) & df["exact"].astype(bool) & (df["noisy"] == noisy)
           & (df["scheme"] != "uncoded")]
    check = comparison.startswith("check")
    mean_col, p95_col = ("err_mean", "err_p95") if check else ("err_mean_cv", "err_p95_cv")
    x = x[np.isfinite(x[mean_col])]
    rows = []
    for (pass_, model), g in x.groupby(["pass", "model"], sort=True):
        worst = g.loc[g[mean_col].abs().idxmax()]
        rows.append({"pass": pass_, "model": model, "targets": len(g),
                     "worst_mean": abs(worst[mean_col]), "worst_scheme": worst["target"],
                     "worst_mean_raw": g["err_mean"].abs().max(), "worst_p95": g[p95_col].abs().max(),
                     "worst_p95_raw": g["err_p95"].abs().max(),
                     "pi_held": _held(g)})
    return pd.DataFrame(rows)


#: the scorecard's rows: comparison, what the README calls it, whether it is a prediction (out of sample)
SCORECARD = [
    ("from-uncoded", "one `uncoded` run (`uncoded-a`)", True),
    ("from-uncoded-ab", "two `uncoded` runs, before and after the targets, pooled", True),
    ("from-gc-fr", "one `gc-fr` run", True),
    ("calibrate-file-uncoded", "`gcsim calibrate uncoded-a`, then `gcsim simulate` of that file", True),
    ("given-uncoded-load-and-speed", "diagnostic, not a prediction: `uncoded-a`, given each target's own "
                                     "measured load and CPU speed", False),
    ("check-uncoded-paired", "model check, not a prediction: `uncoded-a`, the target's own straggler draws "
                             "replayed (raw errors)", False),
]


def scorecard(df: pd.DataFrame) -> str:
    """The README's "at a glance" table: per comparison (rows) and machine state (columns), in how many
    model-passes the worst exact scheme's |mean error| in expectation is within the band, the median of
    that worst error, the passes whose worst |p95 error| is within 10 %, and the targets whose measured
    expectation lay inside the prediction interval."""
    cols = []
    for noisy in (False, True):
        n = len(per_pass(df, "from-uncoded", noisy))
        cols.append(f"{'with a noisy neighbour' if noisy else 'quiet'}: {n} model-passes, mean band "
                    f"{8 if noisy else 5} %")
    lines = ["| calibrated on | out of sample | " + " | ".join(cols) + " |", "|---|---|---|---|"]
    for comparison, label, predicts in SCORECARD:
        cells = []
        for noisy in (False, True):
            band = 0.08 if noisy else 0.05
            t = per_pass(df, comparison, noisy)
            pi = "" if t["pi_held"].isna().all() else \
                f"; interval held {int(t['pi_held'].sum())} of {int(t['targets'].sum())} targets"
            cells.append(f"mean in band in **{(t.worst_mean <= band).sum()} of {len(t)}** (median worst "
                         f"{100 * t.worst_mean.median():.1f} %); p95 in 10 % in {(t.worst_p95 <= 0.10).sum()}{pi}")
        lines.append(f"| {label} | {'yes' if predicts else '**no**'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def worst_table(t: pd.DataFrame) -> str:
    """:func:`per_pass` rows as a markdown table: worst mean error (expectation, raw), worst p95, PI held."""
    lines = ["| pass | model | worst \\|mean err\\| in expectation (scheme) | raw | worst \\|p95 err\\| in expectation "
             "| PI held |", "|---|---|---|---|---|---|"]
    lines += [f"| `{r['pass']}` | {r.model} | {r.worst_mean:.1%} ({r.worst_scheme}) "
              f"| {r.worst_mean_raw:.1%} | {r.worst_p95:.1%} | {int(r.pi_held)} of {r.targets} |" for _, r in t.iterrows()]
    return "\n".join(lines)


def main() -> None:
    df = load()
    print("## at a glance (passes before finding 34's executor fix)\n")
    print(scorecard(df))
    fixed = load(fixed=True)
    if len(fixed):
        print("\n## passes with the executor fix (freed memory kept in the workers, finding 34)\n")
        print(scorecard(fixed))
        for noisy in (False, True):
            t = per_pass(fixed, "from-uncoded", noisy)
            if not t.empty:
                print(f"\n{'with a neighbour' if noisy else 'quiet'}, from `uncoded-a`:\n\n" + worst_table(t))
    for noisy in (False, True):
        band = 0.08 if noisy else 0.05
        print(f"\n## {'with a neighbour' if noisy else 'quiet'} (mean band {band:.0%}, p95 band 10 %)\n")
        for comparison in COMPARISONS:
            t = per_pass(df, comparison, noisy)
            if t.empty:
                continue
            pi = "" if t["pi_held"].isna().all() else \
                f"; PI held {int(t['pi_held'].sum())} of {int(t['targets'].sum())} targets"
            print(f"- {comparison}: {len(t)} model-passes; worst |mean err| {t.worst_mean.min():.1%} … "
                  f"{t.worst_mean.max():.1%} (median {t.worst_mean.median():.1%}); within the band in "
                  f"{(t.worst_mean <= band).sum()} of {len(t)} (raw {(t.worst_mean_raw <= band).sum()}); "
                  f"p95 within 10 % in {(t.worst_p95 <= 0.10).sum()} (raw {(t.worst_p95_raw <= 0.10).sum()}){pi}")
        print("\n" + worst_table(per_pass(df, "from-uncoded", noisy)))


if __name__ == "__main__":
    main()
