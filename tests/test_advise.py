"""gcsim advise: the top exact choice on a closed-form scenario is the closed-form best; the verdict when
no coded scheme beats uncoded; the CLI's run directory."""

from __future__ import annotations

import math

import pytest
from factories import CF_DELAY as DELAY, CF_N as N, CF_P as P, closed_form_means
from factories import closed_form_scenario as _scenario, write_bimodal_scenario

from gcsim.advise.search import advise


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
    # the saving weighed against the extra compute is the most any scheme can save: uncoded (all n
    # workers) minus the first arrival (ignore-stragglers s = n - 1), on the objective
    for objective in ("mean", "p95"):
        adv = advise(_scenario({"slowdown": {"dist": "shifted_expon", "shift": 1.0, "scale": 0.2}}, iterations=400),
                     objective=objective, max_m=2)
        t = adv.table.set_index(["scheme", "s", "m"])
        unc, first = t.loc[("uncoded", 0, 1), f"{objective}_s"], t.loc[("ignore-stragglers", N - 1, 1), f"{objective}_s"]
        assert adv.verdict.startswith(f"no coded scheme beats uncoded on the {objective}")
        assert (f"uncoded's {objective} is only {unc - first:.4g} s above the first arrival's ({first:.4g} s, "
                f"ignore-stragglers s={N - 1}): the most coding can save") in adv.verdict
        assert unc - first > unc - t.loc[("uncoded", 0, 1), "p50_s"]  # more than the old mean - median


def test_p99_objective_prints_its_ci():
    from gcsim.advise.output import format_table
    adv = advise(_scenario({"delay": {"dist": "bimodal", "p": P, "delay": DELAY}}, iterations=200), max_s=2,
                 max_m=1, objective="p99")
    text = format_table(adv, top=2)
    r = adv.table.iloc[0]
    assert "p99_s [95% CI]" in text and f"{r['p99_s']:.4g} [{r['p99_lo']:.4g}, {r['p99_hi']:.4g}]" in text


def test_cli_writes_run_directory(tmp_path):
    from gcsim.cli import main
    p = write_bimodal_scenario(tmp_path / "sc.yaml", n=4, iterations=50)
    out = tmp_path / "adv"
    assert main(["advise", str(p), "--iterations", "50", "--max-s", "1", "--out", str(out)]) == 0
    assert sorted(f.name for f in out.iterdir()) == ["advice.csv", "advice.md", "advice_n4.png", "config.yaml",
                                                     "meta.json"]
    assert main(["advise", str(p), "--objective", "p50"]) == 2
    assert main(["advise", str(p), "--n", "x"]) == 2


# ---------------------------------------------------------------- time to target (issue 14)

def _table():
    import pandas as pd
    return pd.DataFrame([
        {"n": 6, "scheme": "gc-fr", "s": 1, "m": 1, "exact": True, "mean_s": 0.5, "mean_lo": 0.4, "mean_hi": 0.6},
        {"n": 6, "scheme": "uncoded", "s": 0, "m": 1, "exact": True, "mean_s": 1.0, "mean_lo": 0.9, "mean_hi": 1.1},
        {"n": 6, "scheme": "pgc-fr", "s": 1, "m": 1, "exact": False, "mean_s": 0.4, "mean_lo": 0.3, "mean_hi": 0.5},
        {"n": 6, "scheme": "gc-cr", "s": 1, "m": 1, "exact": True, "mean_s": 0.6, "mean_lo": 0.5, "mean_hi": 0.7},
    ])


def test_time_to_target_ranks_by_iterations_times_mean():
    from gcsim.advise.target import parse_iterations_to_target, time_to_target

    iters = parse_iterations_to_target("uncoded=150, pgc-fr=600,gc-fr=150,gc-cr=nan")
    assert iters["uncoded"] == 150 and iters["pgc-fr"] == 600 and math.isnan(iters["gc-cr"])
    tt = time_to_target(_table(), iters)
    # gc-fr 150 x 0.5 = 75 s; uncoded 150 x 1.0 = 150 s; pgc-fr 600 x 0.4 = 240 s (fastest per iteration,
    # slowest to the target); gc-cr never reached it
    assert tt["scheme"].tolist() == ["gc-fr", "uncoded", "pgc-fr", "gc-cr"]
    assert tt["rank_to_target"].tolist() == [1, 2, 3, 0]
    assert tt["time_to_target_s"].tolist()[:3] == pytest.approx([75.0, 150.0, 240.0])
    assert tt.loc[2, ["time_to_target_lo", "time_to_target_hi"]].tolist() == pytest.approx([180.0, 300.0])
    assert math.isnan(tt.loc[3, "time_to_target_s"])


def test_iterations_to_target_from_a_study_csv(tmp_path):
    import pandas as pd

    from gcsim.advise.target import parse_iterations_to_target
    from gcsim.errors import ConfigError

    p = tmp_path / "time_to_accuracy.csv"
    pd.DataFrame({"scheme": ["uncoded", "uncoded", "pgc-fr", "pgc-fr"], "target": [0.4, 0.5, 0.4, 0.5],
                  "iterations": [60, 150, 120, float("nan")], "wall_s": [1, 2, 3, float("nan")]}).to_csv(p, index=False)
    got = parse_iterations_to_target(str(p), 0.4)
    assert got == {"uncoded": 60.0, "pgc-fr": 120.0}
    got = parse_iterations_to_target(str(p), 0.5)
    assert got["uncoded"] == 150.0 and math.isnan(got["pgc-fr"])
    with pytest.raises(ConfigError, match="accuracy-target"):
        parse_iterations_to_target(str(p))  # two targets, none chosen
    with pytest.raises(ConfigError, match="accuracy-target"):
        parse_iterations_to_target(str(p), 0.7)
    for bad in ("uncoded", "uncoded=0", "uncoded=-3", "uncoded=x", "nosuch=10", "uncoded=1,uncoded=2", "=5"):
        with pytest.raises(ConfigError, match="iterations-to-target"):
            parse_iterations_to_target(bad)


def test_cli_time_to_target(tmp_path, capsys):
    import pandas as pd

    from gcsim.cli import main
    p = write_bimodal_scenario(tmp_path / "sc.yaml", n=4, iterations=50)
    out = tmp_path / "adv"
    assert main(["advise", str(p), "--iterations", "50", "--max-s", "1", "--out", str(out),
                 "--iterations-to-target", "uncoded=100,pgc-cr=300"]) == 0
    text = capsys.readouterr().out
    assert "ranked by predicted time to target" in text
    adv = pd.read_csv(out / "advice.csv")
    tt = pd.read_csv(out / "time_to_target.csv")
    assert set(tt["scheme"]) == {"uncoded", "pgc-cr"}
    for _, r in tt.iterrows():
        mean = adv[(adv.scheme == r["scheme"]) & (adv.s == r["s"]) & (adv.m == r["m"])]["mean_s"].iloc[0]
        assert r["time_to_target_s"] == pytest.approx(r["iterations_to_target"] * mean, rel=1e-6)
    assert tt["time_to_target_s"].is_monotonic_increasing and tt["rank_to_target"].tolist() == list(range(1, len(tt) + 1))
    assert "Predicted time to target" in (out / "advice.md").read_text()
    assert main(["advise", str(p), "--iterations", "50", "--iterations-to-target", "bogus=3"]) == 2
    assert main(["advise", str(p), "--iterations", "50", "--accuracy-target", "0.5"]) == 2


def test_verdict_says_why_when_no_coded_scheme_is_a_candidate():
    adv = advise(_scenario({"delay": {"dist": "bimodal", "p": P, "delay": DELAY}}, iterations=50), n=1)
    assert adv.table["scheme"].tolist() == ["uncoded"]
    assert "no exact coded scheme was a candidate at n=1" in adv.verdict
    adv = advise(_scenario({"delay": {"dist": "bimodal", "p": P, "delay": DELAY}}, iterations=50), max_s=0, max_m=1)
    assert "no exact coded scheme was a candidate at n=6" in adv.verdict


def test_plot_lines_are_told_apart(monkeypatch):
    # every line of the plot (scheme, m) has its own colour and marker, so the legend reads alone
    import gcsim.compare.plots as plots
    from gcsim.advise.output import plot_advice
    figs = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: figs.append(fig) or path)
    adv = advise(_scenario({"delay": {"dist": "bimodal", "p": P, "delay": DELAY}}, iterations=50), max_m=4)
    plot_advice(adv, "unused.png")
    ax = figs[0].axes[0]
    lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_") and ln.get_label() != "uncoded"
             and not ln.get_label().startswith("best")]
    assert len(lines) > 10  # more than one colour cycle
    styles = [(ln.get_color(), ln.get_marker()) for ln in lines]
    assert len(set(styles)) == len(styles), styles
    assert len({ln.get_color() for ln in lines}) == len(lines)


def test_another_n_beside_per_worker_factors_says_what_to_do(tmp_path, capsys):
    # a fitted scenario lists one worker_scale factor per worker: --n 6 on a 4-worker file is refused with
    # the two ways out (review 2026-12-05: the error said only "expected 4")
    import yaml

    from gcsim.cli import main
    p = write_bimodal_scenario(tmp_path / "sc.yaml", n=4, iterations=50)
    data = yaml.safe_load(p.read_text())
    data["stragglers"]["worker_scale"] = [1.0, 1.1, 1.2, 1.3]
    p.write_text(yaml.safe_dump(data))
    assert main(["advise", str(p), "--n", "6", "--iterations", "50"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gcsim: error: --n: expected 4 (the scenario's stragglers.worker_scale has one factor "
                          "per worker; for another n, list that many factors there, or delete the line")
    assert err.endswith("got 6")
    del data["stragglers"]["worker_scale"]
    p.write_text(yaml.safe_dump(data))
    assert main(["advise", str(p), "--n", "6", "--iterations", "50", "--max-s", "1", "--out",
                 str(tmp_path / "adv6")]) == 0


def test_an_approximate_pick_says_how_many_workers_it_keeps(tmp_path):
    # 1 s stragglers with p 0.2 over 0.05 s of compute: waiting for the first of 4 workers
    # (ignore-stragglers s=3) beats every exact scheme, and the verdict says the gradient then comes from
    # 1 of the 4 workers' partitions (review 2026-12-05: "faster" without saying what it keeps)
    from gcsim.scenario import load_scenario

    sc = load_scenario(write_bimodal_scenario(tmp_path / "sc.yaml", n=4, iterations=400))
    adv = advise(sc, iterations=400)
    tail = adv.verdict.split("Faster but approximate: ", 1)[1]
    assert tail.startswith("ignore-stragglers s=3 (")
    assert "comes from 1 of 4 workers' partitions, so its accuracy per iteration needs checking" in tail


def _drift_scenario(sd: float, iterations: int = 1500):
    # 0.2 s stragglers with p 0.1 over 0.05 s of compute: gc-fr s=1 (2 partitions) is best at the measured
    # speed (closed form 0.106 s against uncoded's 0.144 s), while on a machine 1.8x slower the extra partition
    # costs more (0.18 s) than the tail it saves (0.2 x (0.469 - 0.030) = 0.088 s): uncoded is best there
    from gcsim.scenario import SpeedDrift

    sc = _scenario({"delay": {"dist": "bimodal", "p": P, "delay": 0.2}}, iterations=iterations)
    return sc.model_copy(update={"workload": sc.workload.model_copy(update={"speed_drift": SpeedDrift(sd=sd)})})


def test_speed_drift_rows_are_the_scenario_at_the_drifted_speeds():
    # the drifted columns are the same search on a machine (1 +- sd) times slower, on the same draws
    from gcsim.sim.drift import scale_cpu_work

    sc = _drift_scenario(0.8)
    adv = advise(sc, max_m=1)
    assert adv.drift_sd == 0.8
    t = adv.table.set_index("label")
    filled = t[t["drift_slow_s"].notna()]
    # one row per distinct timing among the top 3: gc-fr s=1 and cce-fr s=1 m=1 are one timing, drifted once
    exact = adv.table[adv.table["exact"]]
    distinct = exact.drop_duplicates(["mean_s", "p95_s", "p99_s"])
    assert len(distinct) < len(exact) and distinct["label"].iloc[0] == "gc-fr.s1.m1"
    assert set(filled.index) == (set(distinct["label"].head(3)) | {"uncoded"}
                                 | {adv.table[~adv.table["exact"]]["label"].iloc[0]})
    assert "cce-fr.s1.m1" not in filled.index
    for column, factor in (("drift_slow_s", 1.8), ("drift_fast_s", 0.2)):
        other = advise(scale_cpu_work(sc, factor), max_m=1).table.set_index("label")
        for label in filled.index:
            assert filled.loc[label, column] == pytest.approx(other.loc[label, "mean_s"], rel=1e-12)
    # closed form at 1.8 x 0.05 s per partition: uncoded 0.09 + 0.2 (1 - 0.9^6), gc-fr s=1 0.18 + 0.2 (1 - 0.99^3)
    assert t.loc["uncoded", "drift_slow_s"] == pytest.approx(0.09 + 0.2 * (1 - 0.9 ** 6), rel=0.05)
    assert (adv.best["scheme"], adv.best["s"]) == ("gc-fr", 1)
    assert "changes (slower: uncoded instead" in adv.verdict
    assert "faster: still gc-fr s=1 m=1" in adv.verdict


def test_no_speed_drift_no_drift_rows(tmp_path):
    from gcsim.advise.output import advice_markdown, format_table

    adv = advise(_drift_scenario(0.05), max_m=1, iterations=400)
    assert "stays the same (slower: still gc-fr s=1 m=1" in adv.verdict
    assert "mean_s slower/faster" in format_table(adv)
    sc = _scenario({"delay": {"dist": "bimodal", "p": P, "delay": 0.2}}, iterations=400)
    plain = advise(sc, max_m=1)
    assert plain.drift_sd is None and plain.table["drift_slow_s"].isna().all()
    assert "slower" not in plain.verdict and "slower/faster" not in format_table(plain)
    assert "drift_slow_s" not in advice_markdown([plain], "gcsim advise x")
    assert "drift_slow_s" in advice_markdown([adv], "gcsim advise x")


def test_speed_drift_says_nothing_with_one_exact_option():
    # n = 1: uncoded is the only exact candidate; comparing it with itself would read "stays the same"
    adv = advise(_drift_scenario(0.5, iterations=200), n=1)
    assert adv.drift_sd == 0.5 and "slower or faster" not in adv.verdict
