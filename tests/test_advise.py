"""gcsim advise: the top exact choice on a closed-form scenario is the closed-form best; the verdict when
no coded scheme beats uncoded; the CLI's run directory."""

from __future__ import annotations

import math

import pytest
import yaml
from scipy.stats import binom

from gcsim.advise.search import advise
from gcsim.scenario import validate_scenario

N, P, DELAY, C = 6, 0.1, 1.0, 0.05


def _scenario(stragglers, iterations=1500):
    return validate_scenario({"name": "cf", "n_workers": N, "iterations": iterations, "seed": 1,
                              "schemes": [{"name": "uncoded"}],
                              "workload": {"gradient_bytes": 0.0, "compute": {"dist": "constant", "value": C}},
                              "stragglers": stragglers})


def closed_form_means() -> dict:
    """Mean iteration time with additive Bernoulli delays (prob P add DELAY), compute C per partition, no
    communication, decode 0, cancel policy (iterations i.i.d.):
    any-(n-s) schemes (gc-cr, gc-mds, cce-cr with d = s+m): d·C + DELAY·P(Bin(n, P) > s);
    groups of g = s+m workers needing m arrivals each (gc-fr: m = 1; cce-fr):
    d·C + DELAY·(1 - (1 - P(Bin(g, P) > g - m))^(n/g)); uncoded: C + DELAY·(1 - (1-P)^n)."""
    out = {("uncoded", 0, 1): C + DELAY * (1 - (1 - P) ** N)}
    for s in range(1, N):
        out[("gc-cr", s, 1)] = (s + 1) * C + DELAY * binom.sf(s, N, P)
        for m in range(1, 5):
            g = s + m
            if g <= N and N % g == 0:
                fail = binom.sf(g - m, g, P)
                out[("cce-fr" if m > 1 else "gc-fr", s, m)] = g * C + DELAY * (1 - (1 - fail) ** (N // g))
    return out


def test_top_choice_is_the_closed_form_best():
    cf = closed_form_means()
    best = min(cf, key=cf.get)
    assert best == ("gc-fr", 1, 1)  # 0.1297 s; the runner-up gc-fr s=2 is 0.1520 s (17 % slower)
    adv = advise(_scenario({"delay": {"dist": "bimodal", "p": P, "delay": DELAY}}))
    top = adv.best
    assert (top["scheme"], top["s"], top["m"]) == best
    assert top["mean_s"] == pytest.approx(cf[best], rel=0.06)
    unc = adv.table[adv.table["scheme"] == "uncoded"].iloc[0]
    assert unc["mean_s"] == pytest.approx(cf[("uncoded", 0, 1)], rel=0.08)
    row = adv.table[(adv.table["scheme"] == "gc-cr") & (adv.table["s"] == 2)].iloc[0]
    assert row["mean_s"] == pytest.approx(cf[("gc-cr", 2, 1)], rel=0.05)
    assert "best exact choice: gc-fr s=1" in adv.verdict
    approx = adv.table[~adv.table["exact"]]
    assert set(approx["scheme"]) == {"ignore-stragglers", "pgc-fr", "pgc-cr"} and (approx["rank"].iloc[0] == 1)


def test_says_why_no_coded_scheme_beats_uncoded():
    # stragglers that multiply the computation (exponential slowdown): more load costs more than it saves
    adv = advise(_scenario({"slowdown": {"dist": "shifted_expon", "shift": 1.0, "scale": 0.2}}, iterations=400),
                 max_s=2, max_m=2)
    assert adv.best["scheme"] == "uncoded"
    assert adv.verdict.startswith("no coded scheme beats uncoded on the mean")
    assert "grows with the computation load" in adv.verdict


def test_cli_writes_run_directory(tmp_path):
    from gcsim.cli import main
    p = tmp_path / "sc.yaml"
    p.write_text(yaml.safe_dump({"name": "cf", "n_workers": 4, "iterations": 50, "schemes": [{"name": "uncoded"}],
                                 "workload": {"gradient_bytes": 0.0, "compute": {"dist": "constant", "value": 0.05}},
                                 "stragglers": {"delay": {"dist": "bimodal", "p": 0.2, "delay": 1.0}}}))
    out = tmp_path / "adv"
    assert main(["advise", str(p), "--iterations", "50", "--max-s", "1", "--out", str(out)]) == 0
    assert sorted(f.name for f in out.iterdir()) == ["advice.csv", "advice.md", "advice_n4.png", "config.yaml",
                                                     "meta.json"]
    assert main(["advise", str(p), "--objective", "p50"]) == 2
    assert main(["advise", str(p), "--n", "x"]) == 2
