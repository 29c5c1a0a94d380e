"""Run-directory plots: the CDF figure must stay readable when one scheme has a heavy tail."""

import numpy as np
import pandas as pd

from gcsim.sim.plots import cdf_figure, plot_cdf


def _iterations(durations: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.concat([pd.DataFrame({"scheme": k, "iteration": np.arange(len(v)), "duration_s": v})
                      for k, v in durations.items()], ignore_index=True)


def _heavy():
    rng = np.random.default_rng(0)
    body = 0.2 + 0.05 * rng.random(1000)
    return {"uncoded": 0.12 + 0.04 * (1 - rng.random(1000)) ** (-1 / 1.2),  # Pareto tail, max ~ seconds
            "gc-fr": body, "ignore-stragglers": body.copy(), "pgc-cr": body.copy()}


def test_body_panel_is_zoomed_to_the_p99s_and_tail_panel_is_log_log():
    d = _heavy()
    fig = cdf_figure(_iterations(d), title="t")
    body, tail = fig.axes[:2]
    p99s = [np.quantile(v, 0.99) for v in d.values()]
    lo, hi = body.get_xlim()
    # zoomed to twice the median p99 (uncoded's p99 is far beyond): the coded schemes fill the panel
    assert body.get_xscale() == "linear" and max(p99s[1:]) < hi <= 1.1 * 2 * np.median(p99s) < p99s[0]
    assert lo <= min(v.min() for v in d.values())
    assert tail.get_xscale() == "log" and tail.get_yscale() == "log"
    assert tail.get_xlim()[1] >= d["uncoded"].max()  # the whole tail is visible
    for ax in (body, tail):
        assert [ln.get_label() for ln in ax.get_lines()] == [
            "uncoded", "gc-fr", "ignore-stragglers (same as gc-fr)", "pgc-cr (same as gc-fr)"]
    # tail panel: empirical P(T >= x) at the sorted durations, from 1 down to 1/n
    x, y = tail.get_lines()[0].get_data()
    np.testing.assert_array_equal(x, np.sort(d["uncoded"]))
    np.testing.assert_allclose(y, (1000 - np.arange(1000)) / 1000)
    # identical curves (same n - s first arrivals) stay distinguishable by line style
    styles = [ln.get_linestyle() for ln in body.get_lines()[1:]]
    assert len(set(styles)) == 3


def test_body_panel_reaches_the_slowest_p99_when_no_scheme_is_an_outlier():
    rng = np.random.default_rng(1)
    d = {"a": 0.1 + 0.1 * rng.random(500), "b": 0.15 + 0.1 * rng.random(500)}
    hi = cdf_figure(_iterations(d)).axes[0].get_xlim()[1]
    assert np.quantile(d["b"], 0.99) <= hi <= 1.1 * np.quantile(d["b"], 0.99)


def test_constant_durations_do_not_collapse_the_axis(tmp_path):
    fig = cdf_figure(_iterations({"uncoded": np.full(50, 0.1245), "gc-fr": np.full(50, 0.2245)}))
    lo, hi = fig.axes[0].get_xlim()
    assert lo < 0.1245 and hi > 0.2245
    plot_cdf(_iterations({"uncoded": np.full(5, 0.1)}), tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_all_zero_durations_still_plot(tmp_path):
    # zero compute, zero bytes, no stragglers: every iteration takes 0 s (nothing to put on a log axis)
    plot_cdf(_iterations({"uncoded": np.zeros(3), "gc-cr": np.zeros(3)}), tmp_path / "z.png")
    assert (tmp_path / "z.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
