"""Pass / warn / fail of one (run, scheme) comparison against pre-set error bands.

Rule (validation against a pre-set accuracy requirement with confidence intervals, Sargent,
"Verification and validation of simulation models", J. Simulation 7:12–24, 2013, §4.2; Law & Kelton,
*Simulation Modeling and Analysis*, 5th ed., §5.6.2):

* **pass** – for every banded statistic, the whole confidence interval of the relative error
  ``(sim - obs) / obs`` lies inside ``[-band, +band]``;
* **warn** – every point estimate lies inside its band, but some interval sticks out (the data
  cannot confirm the accuracy: more iterations would settle it);
* **fail** – some point estimate lies outside its band.

Default bands: mean 5 %, p95 10 % (published simulators validate means to 2–9 %).
"""

from __future__ import annotations

from dataclasses import dataclass

from gcsim.compare.stats import STATISTICS, SampleComparison
from gcsim.errors import ConfigError

VERDICTS = ("pass", "warn", "fail")


@dataclass(frozen=True)
class Bands:
    """Allowed relative error per statistic (fractions: 0.05 = ±5 %); None = not judged.

    Raises:
        ConfigError: a band that is not a number in (0, 10] (field ``--<stat>-band``), or no band at all.
    """

    mean: float | None = 0.05
    p50: float | None = None
    p95: float | None = 0.10
    p99: float | None = None

    def __post_init__(self):
        for name in STATISTICS:
            b = getattr(self, name)
            if b is None:
                continue
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b <= 10:
                raise ConfigError(f"--{name}-band", "a fraction in (0, 10], e.g. 0.05 for 5%", b)
        if not self.judged():
            raise ConfigError("bands", "at least one of mean, p50, p95, p99", None)

    def judged(self) -> dict[str, float]:
        """Statistic name -> band, for the statistics that are judged."""
        return {k: float(getattr(self, k)) for k in STATISTICS if getattr(self, k) is not None}


@dataclass(frozen=True)
class Verdict:
    """Outcome of :func:`judge`.

    Attributes:
        verdict: ``"pass"``, ``"warn"`` or ``"fail"``.
        reasons: one short phrase per statistic that is not a clean pass, e.g.
            ``"mean +20.0% (CI +15.5..+24.5%) outside ±5%"``; empty on pass.
    """

    verdict: str
    reasons: tuple[str, ...]

    @property
    def reason(self) -> str:
        """The reasons joined by ``"; "`` (``""`` on pass)."""
        return "; ".join(self.reasons)


def judge(comparison: SampleComparison, bands: Bands = Bands()) -> Verdict:
    """Apply the pass / warn / fail rule (module docstring) to one comparison.

    Args:
        comparison: from :func:`gcsim.compare.stats.compare_samples`.
        bands: allowed relative errors.
    Returns:
        :class:`Verdict`.
    """
    ci_ok, point_ok, reasons = True, True, []
    for name, band in bands.judged().items():
        e = comparison.rel_error[name]
        txt = f"{name} {e.value:+.1%} (CI {e.low:+.1%}..{e.high:+.1%})"
        if abs(e.value) > band:
            point_ok = ci_ok = False
            reasons.append(f"{txt} outside ±{band * 100:g}%")
        elif not e.inside(band):
            ci_ok = False
            reasons.append(f"{txt}: CI not inside ±{band * 100:g}%")
    verdict = "pass" if ci_ok else "warn" if point_ok else "fail"
    return Verdict(verdict, tuple(reasons))


def worst(verdicts) -> str:
    """The worst of several verdict strings (``"fail"`` > ``"warn"`` > ``"pass"``); ``"pass"`` if none."""
    vs = list(verdicts)
    return max(vs, key=VERDICTS.index) if vs else "pass"
