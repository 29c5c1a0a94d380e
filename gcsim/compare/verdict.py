"""Pass / warn / fail of one (run, scheme) comparison against pre-set error bands.

Rule (validation against a pre-set accuracy requirement with confidence intervals, Sargent,
"Verification and validation of simulation models", J. Simulation 7:12–24, 2013, §4.2; Law & Kelton,
*Simulation Modeling and Analysis*, 5th ed., §5.6.2):

* **pass** – for every banded statistic, the whole confidence interval of the relative error
  ``(sim - obs) / obs`` lies inside ``[-band, +band]``;
* **warn** – every point estimate lies inside its band, but some interval sticks out (the data
  cannot confirm the accuracy: more iterations would settle it);
* **fail** – some point estimate lies outside its band.

Which estimate is judged: a prediction (scenario mode, calibrated on another run) also carries the
error *in expectation* for the mean and the p95 (:mod:`gcsim.compare.control_variate`: the target run's
own straggler draws replayed as a control variate, so the luck of its draws is taken out and the CI
shrinks from ±8–13 % to ±2–3 % at 200 iterations). Where it does, the verdict judges that estimate:
the raw one mostly measures the target run's luck (a review, 2026-12-05: a raw p95 error of +11 % with a
CI of −77 … +25 % gave FAIL to a prediction whose mean was 3.9 % off and inside its interval). Elsewhere
(in sample, paired mode, ``--no-control-variate``) it judges the raw error.

Default bands: mean 5 %, p95 10 % (published simulators validate means to 2–9 %).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
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


def judge(comparison: SampleComparison, bands: Bands = Bands(),
          expectation: Mapping[str, tuple[float, float, float]] | None = None) -> Verdict:
    """Apply the pass / warn / fail rule (module docstring) to one comparison.

    Args:
        comparison: from :func:`gcsim.compare.stats.compare_samples`.
        bands: allowed relative errors.
        expectation: statistic name (``mean``, ``p95``) -> ``(value, low, high)`` of its error in
            expectation; judged instead of the raw error where all three are finite.
    Returns:
        :class:`Verdict`; a reason names the estimate it judged (``mean in expectation +5.2% ...``).
    """
    ci_ok, point_ok, reasons = True, True, []
    for name, band in bands.judged().items():
        e = comparison.rel_error[name]
        value, low, high, label = e.value, e.low, e.high, name
        cv = (expectation or {}).get(name)
        if cv is not None and all(math.isfinite(float(v)) for v in cv):
            value, low, high = (float(v) for v in cv)
            label = f"{name} in expectation"
        txt = f"{label} {value:+.1%} (CI {low:+.1%}..{high:+.1%})"
        if abs(value) > band:
            point_ok = ci_ok = False
            reasons.append(f"{txt} outside ±{band * 100:g}%")
        elif not (-band <= low and high <= band):
            ci_ok = False
            reasons.append(f"{txt}: CI not inside ±{band * 100:g}%")
    verdict = "pass" if ci_ok else "warn" if point_ok else "fail"
    return Verdict(verdict, tuple(reasons))


def worst(verdicts) -> str:
    """The worst of several verdict strings (``"fail"`` > ``"warn"`` > ``"pass"``); ``"pass"`` if none."""
    vs = list(verdicts)
    return max(vs, key=VERDICTS.index) if vs else "pass"
