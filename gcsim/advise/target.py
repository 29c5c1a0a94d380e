"""Predicted time to a target accuracy (issue 14): ``gcsim advise --iterations-to-target``.

An approximate scheme can be the fastest per iteration and still the slowest to a useful model. Given,
per scheme, how many iterations it needs to reach a target test accuracy (measured once: a short real
run or the study's ``time_to_accuracy.csv``, :mod:`gcsim.study.accuracy`), the predicted time to the
target of every advised candidate is

    time_to_target_s = iterations_to_target × predicted mean iteration time (``mean_s``),

with the mean's 95 % CI scaled the same way (the iterations figure is taken as exact: its own
uncertainty, e.g. the evaluation interval of the run it came from, is not in the CI). Exact and
approximate schemes are ranked together by it. A figure is per scheme name and applies to every
(s, m) of that scheme: for approximate schemes the iterations to target depend on s (and on the
optimiser settings), so measure it at the s you will run. Schemes without a figure are left out;
a scheme that never reached the target (NaN in the CSV) is listed last as not reached.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from gcsim.errors import ConfigError

#: columns of ``time_to_target.csv`` (one row per candidate with an iterations figure)
TARGET_COLUMNS = ["n", "rank_to_target", "scheme", "s", "m", "exact", "iterations_to_target", "mean_s",
                  "time_to_target_s", "time_to_target_lo", "time_to_target_hi"]

_FIELD = "--iterations-to-target"
_FORM = "SCHEME=ITERATIONS[,SCHEME=ITERATIONS...] (iterations > 0) or a CSV with columns scheme, iterations"


def _iterations(value, given) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(_FIELD, _FORM, given) from None
    if not (math.isnan(x) or x > 0):
        raise ConfigError(_FIELD, _FORM, given)
    return x


def parse_iterations_to_target(spec: str, target: float | None = None) -> dict[str, float]:
    """Per-scheme iterations to the target accuracy, from a CLI value.

    Args:
        spec: ``"uncoded=150,pgc-fr=600"``, or the path of a CSV with columns ``scheme`` and
            ``iterations`` and optionally ``target`` (``time_to_accuracy.csv`` of ``gcsim study``); an
            empty or NaN ``iterations`` means the target was not reached.
        target: accuracy target (fraction) to select from a CSV with a ``target`` column; required when
            the CSV holds more than one target.
    Returns:
        scheme name -> iterations (float; NaN = not reached).
    Raises:
        ConfigError: malformed value or CSV, unknown scheme name, several targets and none chosen, the
            chosen target absent, a scheme listed twice.
    """
    from gcsim.schemes import scheme_names

    path = Path(spec)
    if "=" not in spec and path.is_file():
        try:
            df = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
            raise ConfigError(_FIELD, message=f"{_FIELD}: {spec}: not a readable CSV ({type(e).__name__})") from None
        if not {"scheme", "iterations"} <= set(df.columns):
            raise ConfigError(_FIELD, _FORM, spec)
        if "target" in df.columns:
            targets = sorted(set(df["target"].astype(float)))
            if target is None and len(targets) > 1:
                raise ConfigError("--accuracy-target", f"one of {targets} (the CSV holds several)", None)
            if target is not None:
                if not any(abs(t - target) < 1e-9 for t in targets):
                    raise ConfigError("--accuracy-target", f"one of {targets}", target)
                df = df[np.isclose(df["target"].astype(float), target)]
        pairs = [(str(s), _iterations(v, spec)) for s, v in zip(df["scheme"], df["iterations"])]
    else:
        pairs = []
        for item in (x.strip() for x in spec.split(",")):
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise ConfigError(_FIELD, _FORM, spec)
            pairs.append((name.strip(), _iterations(value, spec)))
    known = set(scheme_names())
    out: dict[str, float] = {}
    for name, it in pairs:
        if name not in known:
            raise ConfigError(_FIELD, f"scheme names from `gcsim schemes` ({', '.join(sorted(known))})", name)
        if name in out:
            raise ConfigError(_FIELD, "each scheme once", name)
        out[name] = it
    if not out:
        raise ConfigError(_FIELD, _FORM, spec)
    return out


def time_to_target(table: pd.DataFrame, iterations: Mapping[str, float]) -> pd.DataFrame:
    """Predicted time to target of every candidate whose scheme has an iterations figure.

    Args:
        table: an advice table (:data:`gcsim.advise.search.COLUMNS`: ``n``, ``scheme``, ``s``, ``m``,
            ``exact``, ``mean_s``, ``mean_lo``, ``mean_hi`` in seconds).
        iterations: scheme -> iterations to the target (NaN = not reached).
    Returns:
        DataFrame with :data:`TARGET_COLUMNS` (seconds), sorted per ``n`` by ``time_to_target_s``
        (ties: fewer iterations, then the advice table's order); not reached (NaN) last, unranked
        (``rank_to_target`` 0).
    """
    t = table[table["scheme"].isin(list(iterations))].copy()
    t["_order"] = np.arange(len(t))
    t["iterations_to_target"] = t["scheme"].map(iterations).astype(float)
    t["time_to_target_s"] = t["iterations_to_target"] * t["mean_s"]
    t["time_to_target_lo"] = t["iterations_to_target"] * t["mean_lo"]
    t["time_to_target_hi"] = t["iterations_to_target"] * t["mean_hi"]
    t["_missing"] = t["time_to_target_s"].isna()
    t = t.sort_values(["n", "_missing", "time_to_target_s", "iterations_to_target", "_order"], kind="mergesort")
    t["rank_to_target"] = np.where(t["_missing"], 0, t.groupby(["n", "_missing"]).cumcount() + 1)
    return t[TARGET_COLUMNS].reset_index(drop=True)


def format_time_to_target(tt: pd.DataFrame, n: int, top: int | None = None) -> str:
    """Text table of :func:`time_to_target` rows of ``n`` workers (ranked; not reached last)."""
    d = tt[tt["n"] == n]
    reached, missed = d[d["rank_to_target"] > 0], d[d["rank_to_target"] == 0]
    if top is not None:
        reached = reached.head(top)
    out = pd.DataFrame({
        "rank": reached["rank_to_target"], "scheme": reached["scheme"] + np.where(reached["exact"], "", " (approx.)"),
        "s": reached["s"], "m": reached["m"], "iterations": [f"{v:g}" for v in reached["iterations_to_target"]],
        "mean_s": [f"{v:.4g}" for v in reached["mean_s"]],
        "time_to_target_s [95% CI]": [f"{a:.4g} [{b:.4g}, {c:.4g}]" for a, b, c in
                                      zip(reached["time_to_target_s"], reached["time_to_target_lo"],
                                          reached["time_to_target_hi"])],
    })
    lines = [f"n={n}: ranked by predicted time to target (iterations to target x predicted mean iteration time)"]
    lines.append(out.to_string(index=False) if len(out) else "  (no scheme with an iterations figure reached it)")
    if len(missed):
        lines.append("  target not reached: " + ", ".join(sorted(set(missed["scheme"]))))
    return "\n".join(lines)


__all__ = ["TARGET_COLUMNS", "format_time_to_target", "parse_iterations_to_target", "time_to_target"]
