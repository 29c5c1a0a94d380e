"""gcsim advise's fast path (issue 12, deliverable 3: n = 256 in under a minute) gives the answer of the
reference search: the SimPy engine on every candidate, every scheme built, every decode checked.

* vector engine + timing classes vs SimPy (``engine="simpy"``) on a small scenario with heavy-tailed
  delays, random compute, a network and cancel latency: same rows, same order, times within 1e-9;
* fast vs ``thorough`` on the closed-form scenario (test_advise.py): identical tables, same top choice;
* the stand-ins of the lazy schemes (gc-cr, pgc-cr) and the frozen plans of the pipelined ones equal the
  built schemes' loads, plans and quorums; the guard screens refuse exactly what the guards refuse;
* ``decode_check="top"`` with refusals forced: the top rows, their order and values are those of
  ``decode_check="all"``; every other row is a lower bound.

Speed itself is measured by ``benchmarks/advise_speed.py``, not here.
"""

from __future__ import annotations

import numpy as np
import pytest

from gcsim.advise.candidates import PATTERN_BUDGET, Timing, build_candidates, guard_patterns, timing_key
from gcsim.advise.search import VERIFY_TOP, advise
from gcsim.scenario import validate_scenario

from factories import closed_form_means, closed_form_scenario, write_bimodal_scenario

KEYS = ["scheme", "s", "m"]


def _rich(n=8, iterations=200):
    return validate_scenario({
        "name": "rich", "n_workers": n, "iterations": iterations, "seed": 7, "schemes": [{"name": "uncoded"}],
        "workload": {"gradient_bytes": 4.0e6, "model_bytes": 4.0e6,
                     "compute": {"dist": "lognorm", "s": 0.3, "scale": 0.02}},
        "network": {"latency_s": 0.001, "bandwidth_bytes_per_s": 1.0e9},
        "stragglers": {"delay": {"dist": "pareto", "b": 1.8, "scale": 0.02}},
        "policy": "cancel", "cancel_latency_s": 0.0005,
        "master": {"decode_s": {"dist": "constant", "value": 0.001}}})


def _same(a, b, rel=0.0):
    ta, tb = a.table, b.table
    assert ta[KEYS + ["rank", "exact"]].values.tolist() == tb[KEYS + ["rank", "exact"]].values.tolist()
    for col in ("mean_s", "mean_lo", "mean_hi", "p50_s", "p95_s", "p99_s", "speedup"):
        np.testing.assert_allclose(ta[col].to_numpy(), tb[col].to_numpy(), rtol=rel, atol=0, err_msg=col)


def test_vector_fast_path_equals_simpy():
    sc = _rich()
    fast = advise(sc, max_s=3, max_m=2, decode_check="all")
    ref = advise(sc, max_s=3, max_m=2, engine="simpy")
    assert fast.engine == "vector" and ref.engine == "simpy"
    assert fast.timing_classes < len(fast.table)  # classes shared (e.g. ignore-stragglers / pgc-* at one s)
    assert fast.table["decode_checked"].all()
    _same(fast, ref, rel=1e-9)  # the engines agree up to float rounding (tests/test_sim_vector.py)
    assert fast.verdict == ref.verdict
    top = advise(sc, max_s=3, max_m=2)  # default: decodes of the top rows checked
    _same(top, fast)  # no refusal at n = 8 in float64: the quorum's times are the decoder's


def test_overlapping_candidates_fall_back_to_simpy():
    # cancelled mid-partition (cancel_granularity: partition), a worker of a high-load scheme is still busy
    # when the next iteration reaches it: those candidates alone go to SimPy
    sc = validate_scenario({"name": "ov", "n_workers": 4, "iterations": 100, "seed": 3, "schemes": [{"name": "uncoded"}],
                            "workload": {"gradient_bytes": 0.0, "compute": {"dist": "constant", "value": 0.1}},
                            "stragglers": {"delay": {"dist": "bimodal", "p": 0.3, "delay": 0.25}},
                            "policy": "cancel", "cancel_granularity": "partition"})
    fast = advise(sc, decode_check="all")
    assert fast.engine == "vector+simpy" and "by SimPy: worker" in fast.engine_note
    _same(fast, advise(sc, engine="simpy"), rel=1e-9)


def test_fast_equals_thorough_on_the_closed_form_scenario():
    sc = closed_form_scenario({"delay": {"dist": "bimodal", "p": 0.1, "delay": 1.0}})
    fast = advise(sc)
    ref = advise(sc, thorough=True)
    assert ref.decode_check == "all" and ref.table["decode_checked"].all()
    _same(fast, ref)
    cf = closed_form_means()
    assert (fast.best["scheme"], fast.best["s"], fast.best["m"]) == min(cf, key=cf.get) == ("gc-fr", 1, 1)
    assert fast.verdict == ref.verdict


@pytest.mark.parametrize("n", [6, 9, 12, 24])
def test_candidates_fast_equal_built(n):
    fast, refused, unsearched = build_candidates(n, n - 1, 4)
    ref, ref_refused, ref_unsearched = build_candidates(n, n - 1, 4, thorough=True)
    assert unsearched == [] and ref_unsearched == []
    lab = lambda cs: [c.label for c in cs]  # noqa: E731
    assert lab(fast) == lab(ref)
    by = {c.label: c for c in ref}
    for c in fast:
        r = by[c.label]
        assert (c.info, c.key, c.guaranteed) == (r.info, r.key, r.guaranteed), c.label
    assert {(a, s, m) for a, s, m, _ in refused} == {(a, s, m) for a, s, m, _ in ref_refused}
    if n == 24:  # the guard screens did refuse some (cce-cr, gc-mds on their first straggler set)
        assert any("screened by advise" in why for *_, why in refused)


def test_pipelined_plans_repeat_the_first_phase():
    from gcsim.schemes import make_scheme
    from gcsim.sim.vector import _plan, _plans
    sc = _rich(n=12)
    for name, s in (("pgc-cr", 3), ("pgc-fr", 2), ("pgc-cr", 11)):
        sch = make_scheme(name, 12, s)
        frozen = Timing.frozen(sch)
        keys = {p.key for p in _plans(sch, 3 * (s + 1), sc)}
        assert keys == {_plan(frozen, 0, sc).key}
        assert {timing_key(Timing.frozen(sch))} == {timing_key(make_scheme("ignore-stragglers", 12, s))}


def test_guard_pattern_count_bounds_the_enumeration():
    from gcsim.schemes.cce_cr import default_theta, guard_sets
    for n, s in ((20, 5), (32, 25), (16, 14), (12, 3)):
        count = len(guard_sets(default_theta(n), n, s))  # worker-order and point-order blocks, random sets
        est = guard_patterns("cce-cr", n, s, 1)
        assert count <= est <= count * 1.5 + 100  # counted before de-duplication
    fast, _, unsearched = build_candidates(64, 63, 4)
    assert unsearched and all(guard_patterns(nm, 64, s, m) > PATTERN_BUDGET for nm, s, m, _ in unsearched)
    assert not any(c.spec.name in ("cce-cr", "cce-fr")
                   and guard_patterns(c.spec.name, 64, c.spec.s, c.spec.m) > PATTERN_BUDGET for c in fast)


def test_top_decode_check_with_refusals(monkeypatch):
    """gc-cr made to refuse every set without worker 0 (so a master often waits for it): the checked top
    rows are those of checking every row; every unchecked row is below its checked time."""
    from gcsim.schemes.gc_cr import GcCr
    original = GcCr._decode

    def picky(self, arrived):
        dec = original(self, arrived)
        if 0 not in arrived:
            return type(dec)(used=dec.used, weights=dec.weights * np.nan, exact=True, cond=np.inf)
        return dec

    monkeypatch.setattr(GcCr, "_decode", picky)
    sc = closed_form_scenario({"delay": {"dist": "bimodal", "p": 0.1, "delay": 1.0}}, iterations=600)
    top = advise(sc, max_s=3)
    full = advise(sc, max_s=3, decode_check="all")
    assert full.table["decode_checked"].all() and not top.table["decode_checked"].all()
    head = lambda a: a.table[a.table["exact"]].head(VERIFY_TOP)  # noqa: E731
    assert head(top)[KEYS + ["mean_s", "p95_s"]].values.tolist() == head(full)[KEYS + ["mean_s", "p95_s"]].values.tolist()
    assert head(top)["decode_checked"].all()
    assert top.best.equals(full.best) and top.verdict == full.verdict
    m = top.table.merge(full.table, on=KEYS, suffixes=("_t", "_f"))
    assert len(m) == len(full.table)
    assert (m["mean_s_t"] <= m["mean_s_f"]).all() and (m["p95_s_t"] <= m["p95_s_f"]).all()
    chk = m[m["decode_checked_t"]]
    assert (chk["mean_s_t"] == chk["mean_s_f"]).all()
    cr = m[m["scheme"] == "gc-cr"]
    assert (cr["mean_s_f"] > cr["mean_s_t"]).any()  # the refusals cost time; the bounds below it stay unchecked


def test_cli_decode_check_and_meta(tmp_path, capsys):
    import json

    from gcsim.cli import main
    p = write_bimodal_scenario(tmp_path / "sc.yaml", n=6, iterations=60)
    out = tmp_path / "adv"
    assert main(["advise", str(p), "--iterations", "60", "--decode-check", "all", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "vector engine" in text and "decodes checked: every row" in text
    meta = json.loads((out / "meta.json").read_text())
    assert meta["engine"] == "vector" and meta["search"]["6"]["decode_check"] == "all"
    assert meta["search"]["6"]["rows_lower_bound"] == 0
    assert main(["advise", str(p), "--iterations", "60", "--decode-check", "some"]) == 2
