"""Maximum-likelihood fits of candidate delay families, ranked by AIC, with a KS goodness-of-fit test.

The sample is a vector of positive delays (seconds; :mod:`gcsim.fit.model` passes the excess of each
time over its worker's base). Candidates (``k`` = number of fitted parameters):

============== ========================================== ===== =============================================
family         density                                    k     MLE
============== ========================================== ===== =============================================
shifted_expon  ``shift + Exp(mean=scale)``                2     ``shift = min x``, ``scale = mean x - min x``
gamma          ``Gamma(a, scale)``                        2     ``scipy.stats.gamma.fit(x, floc=0)``
lognorm        ``LogNormal(s, scale=e^mu)``               2     ``mu, s`` = mean and std (ddof 0) of ``log x``
weibull        ``Weibull(c, scale)``                      2     ``scipy.stats.weibull_min.fit(x, floc=0)``
pareto         Pareto II / Lomax ``(c, scale)`` from 0    2     ``scipy.stats.lomax.fit(x, floc=0)``
mixture        two-component lognormal mixture            5     EM on ``log x`` (Dempster, Laird, Rubin 1977)
============== ========================================== ===== =============================================

AIC = 2k − 2 log L (Akaike, IEEE Trans. Autom. Control 19, 1974); the smallest wins. KS: the
one-sample Kolmogorov–Smirnov statistic ``D`` against the fitted CDF and its p-value
(``scipy.stats.kstest``; the p-value is optimistic because the parameters were estimated from the same
sample, Lilliefors 1967, so read ``D`` as an effect size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FAMILIES = ("shifted_expon", "gamma", "lognorm", "weibull", "pareto", "mixture")

#: fewest positive values a fit accepts
MIN_SAMPLE = 10


@dataclass(frozen=True)
class FamilyFit:
    """One fitted family.

    Attributes:
        family: one of :data:`FAMILIES`.
        params: fitted parameters (seconds for ``shift``/``scale``; mixture: ``w1, mu1, s1, mu2, s2`` of
            ``log x``).
        k: number of fitted parameters.
        loglik: maximised log-likelihood.
        aic: ``2k − 2 loglik``.
        ks_d, ks_p: KS statistic and p-value against the fitted CDF.
        spec: the fitted distribution as a :mod:`gcsim.latency` spec mapping (seconds).
    """

    family: str
    params: dict
    k: int
    loglik: float
    aic: float
    ks_d: float
    ks_p: float
    spec: dict


class _Mixture:
    """CDF / log-pdf / quantiles of a two-component lognormal mixture (for KS and QQ)."""

    def __init__(self, w1: float, mu1: float, s1: float, mu2: float, s2: float):
        import scipy.stats as st
        self.w = (w1, 1.0 - w1)
        self.parts = (st.lognorm(s1, scale=math.exp(mu1)), st.lognorm(s2, scale=math.exp(mu2)))

    def cdf(self, x):
        return self.w[0] * self.parts[0].cdf(x) + self.w[1] * self.parts[1].cdf(x)

    def logpdf(self, x):
        return np.logaddexp(math.log(self.w[0]) + self.parts[0].logpdf(x),
                            math.log(max(self.w[1], 1e-300)) + self.parts[1].logpdf(x))

    def ppf(self, q):
        """Quantiles by bisection on the CDF (vectorised, 60 halvings)."""
        q = np.asarray(q, dtype=np.float64)
        lo = np.zeros_like(q)
        hi = np.full_like(q, max(p.ppf(0.999999) for p in self.parts))
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            below = self.cdf(mid) < q
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return 0.5 * (lo + hi)


def _em_lognormal_mixture(x: np.ndarray, iters: int = 300) -> tuple[float, float, float, float, float]:
    """EM for a two-component normal mixture of ``log x``; returns ``(w1, mu1, s1, mu2, s2)`` with
    ``mu1 <= mu2``. Variances are floored at ``1e-4 ×`` the sample variance (ties in held values)."""
    y = np.log(x)
    var_floor = max(1e-4 * float(y.var()), 1e-12)
    med = np.median(y)
    lo, hi = y[y <= med], y[y > med]
    if len(hi) == 0:
        hi = lo
    w = 0.5
    mu = np.array([lo.mean(), hi.mean()])
    var = np.array([max(lo.var(), var_floor), max(hi.var(), var_floor)])
    prev = -np.inf
    for _ in range(iters):
        logp = (np.log([w, 1 - w])[None, :] - 0.5 * np.log(2 * np.pi * var)[None, :]
                - 0.5 * (y[:, None] - mu[None, :]) ** 2 / var[None, :])
        norm = np.logaddexp(logp[:, 0], logp[:, 1])
        r = np.exp(logp - norm[:, None])
        nk = r.sum(axis=0)
        if np.any(nk < 1e-9):
            break
        w = float(np.clip(nk[0] / len(y), 1e-6, 1 - 1e-6))
        mu = (r * y[:, None]).sum(axis=0) / nk
        var = np.maximum((r * (y[:, None] - mu[None, :]) ** 2).sum(axis=0) / nk, var_floor)
        ll = float(norm.sum())
        if ll - prev < 1e-10 * max(1.0, abs(ll)):
            break
        prev = ll
    if mu[0] > mu[1]:
        mu, var, w = mu[::-1], var[::-1], 1 - w
    return w, float(mu[0]), float(math.sqrt(var[0])), float(mu[1]), float(math.sqrt(var[1]))


def frozen(fit_or_family, params: dict | None = None):
    """The fitted distribution as an object with ``cdf``, ``logpdf`` and ``ppf`` (scipy frozen, or the
    mixture). Accepts a :class:`FamilyFit` or ``(family, params)``."""
    import scipy.stats as st
    if isinstance(fit_or_family, FamilyFit):
        family, params = fit_or_family.family, fit_or_family.params
    else:
        family = fit_or_family
    p = params or {}
    if family == "shifted_expon":
        return st.expon(loc=p["shift"], scale=p["scale"])
    if family == "gamma":
        return st.gamma(p["a"], scale=p["scale"])
    if family == "lognorm":
        return st.lognorm(p["s"], scale=p["scale"])
    if family == "weibull":
        return st.weibull_min(p["c"], scale=p["scale"])
    if family == "pareto":
        return st.lomax(p["c"], scale=p["scale"])
    if family == "mixture":
        return _Mixture(p["w1"], p["mu1"], p["s1"], p["mu2"], p["s2"])
    raise ValueError(f"family: expected one of {', '.join(FAMILIES)}, got {family!r}")


def _spec(family: str, p: dict) -> dict:
    """The :mod:`gcsim.latency` spec of a fitted family (seconds)."""
    if family == "shifted_expon":
        return {"dist": "shifted_expon", "shift": p["shift"], "scale": p["scale"]}
    if family == "gamma":
        return {"dist": "gamma", "a": p["a"], "scale": p["scale"]}
    if family == "lognorm":
        return {"dist": "lognorm", "s": p["s"], "scale": p["scale"]}
    if family == "weibull":
        return {"dist": "weibull_min", "c": p["c"], "scale": p["scale"]}
    if family == "pareto":
        return {"dist": "lomax", "c": p["c"], "scale": p["scale"]}
    r6 = lambda v: float(f"{v:.6g}")  # noqa: E731
    return {"dist": "mixture", "components": [
        {"weight": r6(p["w1"]), "spec": {"dist": "lognorm", "s": r6(p["s1"]), "scale": r6(math.exp(p["mu1"]))}},
        {"weight": r6(1.0 - p["w1"]), "spec": {"dist": "lognorm", "s": r6(p["s2"]), "scale": r6(math.exp(p["mu2"]))}}]}


def fit_family(family: str, x) -> FamilyFit:
    """Fit one family to ``x`` by maximum likelihood (see the module table).

    Args:
        family: one of :data:`FAMILIES`.
        x: 1-D sample of delays, all finite and > 0 (seconds), at least :data:`MIN_SAMPLE` values.
    Returns:
        :class:`FamilyFit` (parameters rounded to 6 significant digits in ``spec``).
    Raises:
        ValueError: unknown family, or a sample that is too small or not all finite and positive.
    """
    import scipy.stats as st
    x = np.asarray(x, dtype=np.float64).ravel()
    if len(x) < MIN_SAMPLE or not np.all(np.isfinite(x) & (x > 0)):
        raise ValueError(f"x: expected at least {MIN_SAMPLE} finite values > 0, got {len(x)} values "
                         f"(min {np.min(x) if len(x) else 'n/a'})")
    if family == "shifted_expon":
        shift = float(x.min())
        params, k = {"shift": shift, "scale": max(float(x.mean()) - shift, 1e-12)}, 2
    elif family == "gamma":
        a, _, scale = st.gamma.fit(x, floc=0)
        params, k = {"a": float(a), "scale": float(scale)}, 2
    elif family == "lognorm":
        y = np.log(x)
        params, k = {"s": max(float(y.std()), 1e-12), "scale": float(math.exp(y.mean()))}, 2
    elif family == "weibull":
        c, _, scale = st.weibull_min.fit(x, floc=0)
        params, k = {"c": float(c), "scale": float(scale)}, 2
    elif family == "pareto":
        c, _, scale = st.lomax.fit(x, floc=0)
        params, k = {"c": float(c), "scale": float(scale)}, 2
    elif family == "mixture":
        w1, mu1, s1, mu2, s2 = _em_lognormal_mixture(x)
        params, k = {"w1": w1, "mu1": mu1, "s1": s1, "mu2": mu2, "s2": s2}, 5
    else:
        raise ValueError(f"family: expected one of {', '.join(FAMILIES)}, got {family!r}")
    dist = frozen(family, params)
    ll = float(np.sum(dist.logpdf(x)))
    if not math.isfinite(ll):
        ll = -math.inf
    ks = st.kstest(x, dist.cdf)
    rounded = {key: float(f"{v:.6g}") for key, v in params.items()}
    return FamilyFit(family=family, params=params, k=k, loglik=ll, aic=2 * k - 2 * ll,
                     ks_d=float(ks.statistic), ks_p=float(ks.pvalue), spec=_spec(family, rounded))


def fit_all(x, families=FAMILIES) -> list[FamilyFit]:
    """Fit every family in ``families`` to ``x``; returns the fits sorted by AIC (best first).

    Raises:
        ValueError: as :func:`fit_family`.
    """
    fits = [fit_family(f, x) for f in families]
    return sorted(fits, key=lambda f: f.aic)
