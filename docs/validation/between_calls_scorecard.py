"""Finding 39: the two models of Ray's between-call CPU side by side on every pass with trace format 4,
through the whole protocol (every comparison as ``gcsim study --protocol cross-scheme`` makes it: fresh
draws, the fitted background, the control variate), not only the paired replay of finding 38.

Per model-pass and comparison: the worst |mean error| in expectation over the exact coded targets
(``err_mean_cv``; the model check: raw ``err_mean``), as in ``pass_counts.py``, for the committed
protocol outputs and for ``between_calls_variant.sh``'s (the other ``--between-calls-cpu``), and how
many model-passes each meets the band with (mean 5 % quiet, 8 % with a neighbour).

    docs/validation/between_calls_variant.sh in-lags     # the variant outputs (~2 min per model-pass)
    .venv/bin/python docs/validation/between_calls_scorecard.py    # between_calls_scorecard.txt
"""

from pathlib import Path

import pandas as pd

from pass_counts import per_pass

ROOT = Path(__file__).resolve().parent
VARIANT = ROOT / "between-calls-variant"
COMPARISONS = ["from-uncoded", "from-uncoded-ab", "from-gc-fr", "calibrate-file-uncoded",
               "given-uncoded-load-and-speed", "check-uncoded-paired"]


def between_model(protocol_md: Path) -> str:
    """The ``--between-calls-cpu`` model a protocol.md says it used (``on-path`` before the option)."""
    text = protocol_md.read_text()
    for model in ("in-lags", "on-path"):
        if f"Ray's CPU between calls: {model}" in text:
            return model
    return "on-path"


def read(path: Path, pass_name: str) -> pd.DataFrame:
    df = pd.read_csv(path / "protocol.csv")
    df["pass"] = pass_name
    df["noisy"] = "noisy" in pass_name
    return df


def main() -> None:
    pairs = []
    for v in sorted(VARIANT.glob("*/*/protocol.csv")):
        name = f"{v.parent.parent.name}/{v.parent.name}"
        committed = ROOT / name
        if (committed / "protocol.csv").exists():
            pairs.append((name, committed, v.parent))
    if not pairs:
        raise SystemExit(f"no variant outputs under {VARIANT} (run between_calls_variant.sh first)")
    models = {between_model(c / "protocol.md") for _, c, _ in pairs}, {between_model(v / "protocol.md") for _, _, v in pairs}
    if len(models[0]) != 1 or len(models[1]) != 1 or models[0] == models[1]:
        raise SystemExit(f"expected one model committed and the other in the variants, got {models}")
    a, b = next(iter(models[0])), next(iter(models[1]))
    by = {m: pd.concat([read(c if m == a else v, name) for name, c, v in pairs], ignore_index=True) for m in (a, b)}
    print(f"worst exact coded target, |mean error| in expectation (model check: raw); committed = {a}, "
          f"variant = {b}\n")
    print(f"| model-pass | comparison | {a} | {b} |")
    print("|---|---|---|---|")
    tables = {(m, c, noisy): per_pass(by[m], c, noisy) for m in (a, b) for c in COMPARISONS for noisy in (False, True)}
    for name, _, _ in pairs:
        noisy = "noisy" in name
        for c in COMPARISONS:
            cells = []
            for m in (a, b):
                t = tables[(m, c, noisy)]
                row = t[t["pass"] == name]
                cells.append(f"{row.worst_mean.iloc[0]:.1%} ({row.worst_scheme.iloc[0]})" if len(row) else "-")
            print(f"| {name} | {c} | " + " | ".join(cells) + " |")
    print("\nmodel-passes within the mean band (5 % quiet, 8 % with a neighbour), median worst:\n")
    print(f"| comparison | machine | {a} | {b} |")
    print("|---|---|---|---|")
    for c in COMPARISONS:
        for noisy in (False, True):
            band = 0.08 if noisy else 0.05
            cells = []
            for m in (a, b):
                t = tables[(m, c, noisy)]
                cells.append(f"{(t.worst_mean <= band).sum()} of {len(t)} (median {t.worst_mean.median():.1%})"
                             if len(t) else "-")
            print(f"| {c} | {'neighbour' if noisy else 'quiet'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
