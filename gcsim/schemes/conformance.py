"""Public conformance kit for gradient-coding schemes, in the spirit of scikit-learn's ``check_estimator``.

:func:`check_scheme` runs one battery against a :class:`~gcsim.schemes.base.Scheme` subclass (or any
factory ``f(n=..., s=..., m=..., seed=..., payload_dtype=...) -> Scheme``) for every parameter set the
scheme declares in ``examples`` (or that the caller passes). Everything it expects comes from what the
scheme declares, never from its name:

* ``exact`` (class attribute): exact schemes must decode ``sum_j g_j``; approximate ones follow the
  stated rule of :mod:`gcsim.schemes.verify` (first ``n - s`` arrivals, scale ``n / ((n - s) h)``);
* :meth:`Scheme.declared_loads` ``(n, s, m)``: computation load, partitions held per worker and
  messages per worker; the communication load is ``1/m`` (``m`` only where ``uses_m``);
* :meth:`Scheme.undecodable_arrivals`: an arrival list theory rules out (default: workers ``0..s``
  all straggle, one more than tolerated);
* :meth:`Scheme.quorum`: the count rule the vectorised simulator uses instead of decoding.

Checks, in order (the name is what :class:`ConformanceError` reports):

``build``        the parameters build (and a class declares at least one example);
``shapes``       n assignment lists of partitions in ``0..k-1``; message ids ``0..M-1`` in order,
                 senders in ``0..n-1``, coefficients finite ``(k, m)``, payload fraction ``1/m``, every
                 partition a message uses held by its sender; payloads ``(ceil(l/m),)``; decodings use
                 arrived messages only, weights ``(len(used), m)``, ``exact`` as declared;
``loads``        the declared loads; an exact scheme has every partition held by >= s+1 workers
                 (Tandon et al., ICML 2017, §2, lower bound ``d >= s+1``);
``decode``       :func:`gcsim.schemes.verify.verify_scheme`: every straggler set of size ``0..s``
                 (exhaustive while ``C(n, t) <= max_patterns``, else contiguous, near-contiguous and
                 ``samples`` random sets) decodes random partition gradients to the true sum
                 (exact) or to the stated estimate (approximate, with staleness for pipelined schemes);
``late``         approximate schemes: stragglers arriving after the first ``n - s`` change nothing;
``undecodable``  the declared undecodable arrivals give None, and the raw decoder plus the exactness
                 check (not only the arrival count) does not accept them;
``quorum``       on random arrival orders, no prefix decodes before the quorum is met (it must be
                 necessary), and when the quorum is ``guaranteed`` the prefix that meets it decodes, using the arrivals the quorum's ``pick`` names (decoded
                 with an empty cache: exact decodings are cached by arrived set, whatever the order);
``determinism``  two builds with the same parameters and seed have equal assignment, coefficients and
                 decoding weights.

Example::

    from gcsim.schemes.conformance import check_scheme
    check_scheme(MyScheme)                              # every MyScheme.examples
    check_scheme(MyScheme, [dict(n=6, s=1)])            # given parameter sets
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping

import numpy as np

from gcsim.errors import SchemeError
from gcsim.schemes.base import Refusal, Scheme
from gcsim.schemes.verify import VerifyResult, verify_scheme

#: the checks :func:`check_scheme` runs, in order
CHECKS = ("build", "shapes", "loads", "decode", "late", "undecodable", "quorum", "determinism")


class ConformanceError(AssertionError):
    """A scheme failed a conformance check.

    Attributes:
        check: which check (one of :data:`CHECKS`); params: the parameter set (dict); detail: why.
    """

    def __init__(self, check: str, params: Mapping, detail: str):
        self.check, self.params, self.detail = check, dict(params), detail
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        super().__init__(f"{check} ({args}): {detail}")


def _fail(check: str, params: Mapping, detail: str) -> None:
    raise ConformanceError(check, params, detail)


def check_scheme(scheme: type[Scheme] | Callable[..., Scheme], params: Iterable[Mapping] | None = None, *,
                 max_patterns: int = 100_000, samples: int = 200, seed: int = 0, tolerance: float | None = None,
                 gradient_length: int = 13) -> list[VerifyResult]:
    """Run the conformance battery (module docstring) for every parameter set.

    Args:
        scheme: a :class:`Scheme` subclass, or a factory taking the parameter set as keyword arguments
            and returning a built scheme.
        params: parameter sets (keyword arguments: ``n``, ``s`` and optionally ``m``, ``seed``,
            ``payload_dtype`` or scheme options); default: ``scheme.examples``.
        max_patterns, samples, seed: straggler-set enumeration bound, random sets per larger size and
            the seed of every random draw (gradients, sets, arrival orders), as :func:`verify_scheme`.
        tolerance: pass threshold of the exact decodes' coefficient residual and relative error
            (default: the scheme's ``residual_tolerance`` and payload precision's ``error_tolerance``).
        gradient_length: length of the random partition gradients (not a multiple of m exercises padding).
    Returns:
        one :class:`~gcsim.schemes.verify.VerifyResult` of the ``decode`` check per parameter set.
    Raises:
        ConformanceError: the first failed check, naming it and the parameter set.
    """
    sets = list(getattr(scheme, "examples", ()) if params is None else params)
    if not sets:
        _fail("build", {}, f"{getattr(scheme, '__name__', scheme)!r} declares no examples and none were given")
    results = []
    for p in sets:
        try:
            sch = scheme(**p)
        except SchemeError as e:
            _fail("build", p, f"SchemeError: {e}")
        rng = np.random.default_rng(seed)
        _check_shapes(sch, p, rng, gradient_length)
        _check_loads(sch, p)
        res = verify_scheme(sch, max_patterns=max_patterns, samples=samples, seed=seed, tolerance=tolerance,
                            gradient_length=gradient_length)
        if not res.passed:
            _fail("decode", p, f"stragglers {list(res.failed_pattern)}: {res.failure} "
                               f"({res.patterns_tried} patterns tried)")
        results.append(res)
        if not sch.exact:
            _check_late(sch, p, rng)
        _check_undecodable(sch, p)
        _check_quorum(sch, p, rng)
        _check_determinism(scheme, sch, p)
    return results


def _iterations(sch: Scheme) -> range:
    """Iterations covering warm-up and two periods of a time-varying scheme (just 0 for static ones)."""
    per = sch.assignment_period
    return range(1) if per == 1 else range(sch.s + 2 * per)


def _check_shapes(sch: Scheme, p: Mapping, rng: np.random.Generator, L: int) -> None:
    n, k, m = sch.n, sch.k, sch.m
    for t in _iterations(sch):
        asg = sch.assignment(t)
        if len(asg) != n or any(not 0 <= j < k for a in asg for j in a):
            _fail("shapes", p, f"iteration {t}: assignment must be {n} lists of partitions in 0..{k - 1}, got {asg}")
        msgs = sch.messages(t)
        for mid, msg in enumerate(msgs):
            c = np.asarray(msg.coeffs)
            where = f"iteration {t}, message {mid}"
            if msg.id != mid or not 0 <= msg.worker < n:
                _fail("shapes", p, f"{where}: id {msg.id} (must be {mid}), worker {msg.worker} (must be in 0..{n - 1})")
            if c.shape != (k, m) or not np.all(np.isfinite(c)):
                _fail("shapes", p, f"{where}: coefficients must be finite of shape {(k, m)}, got {c.shape}")
            if not math.isclose(msg.payload_fraction, 1.0 / m, rel_tol=1e-12):
                _fail("shapes", p, f"{where}: payload_fraction {msg.payload_fraction}, expected 1/m = {1.0 / m}")
            if not set(msg.partitions) <= set(sch.held_partitions(msg.worker)):
                _fail("shapes", p, f"{where}: uses partitions {msg.partitions} not all held by worker {msg.worker}")
        g = {j: rng.standard_normal(L) for j in range(k)}
        for mid in range(len(msgs)):
            pl = sch.encode(mid, g, t)
            if pl.shape != (-(-L // m),):
                _fail("shapes", p, f"iteration {t}: payload of message {mid} has shape {pl.shape}, "
                                   f"expected {(-(-L // m),)}")
        arrived = [int(i) for i in rng.permutation(len(msgs))]
        d = sch.decode(arrived, t)
        if d is None:
            why = "" if sch.last_refusal is None else f" (refused: {sch.last_refusal.reason})"
            _fail("shapes", p, f"iteration {t}: every message arrived ({arrived}) and decode returned None{why}")
        if not set(d.used) <= set(arrived) or np.shape(d.weights) != (len(d.used), m) or d.exact != sch.exact:
            _fail("shapes", p, f"iteration {t}: decoding used {d.used}, weights {np.shape(d.weights)} "
                               f"(expected ({len(d.used)}, {m})), exact {d.exact} (declared {sch.exact})")


def _check_loads(sch: Scheme, p: Mapping) -> None:
    want = type(sch).declared_loads(sch.n, sch.s, sch.m)
    got = (sch.computation_load, sch.messages_per_worker)
    if got != (want.computation, want.messages_per_worker):
        _fail("loads", p, f"computation load, messages per worker {got}, declared "
                          f"{(want.computation, want.messages_per_worker)}")
    held = [len(sch.held_partitions(w)) for w in range(sch.n)]
    if any(h != want.held for h in held):
        _fail("loads", p, f"partitions held per worker {held}, declared {want.held}")
    if not math.isclose(sch.communication_load, 1.0 / sch.m, rel_tol=1e-12):
        _fail("loads", p, f"communication load {sch.communication_load}, expected 1/m = {1.0 / sch.m}")
    holders = np.bincount([j for w in range(sch.n) for j in sch.held_partitions(w)], minlength=sch.k)
    need = sch.s + 1 if sch.exact else 1
    if holders.min() < need:
        _fail("loads", p, f"partition {int(holders.argmin())} is held by {int(holders.min())} workers, "
                          f"an {'exact' if sch.exact else 'approximate'} scheme needs >= {need}")


def _check_late(sch: Scheme, p: Mapping, rng: np.random.Generator) -> None:
    n, s = sch.n, sch.s
    for t in _iterations(sch):
        order = [int(i) for i in rng.permutation(len(sch.messages(t)))]
        first, full = sch.decode(order[: n - s], t), sch.decode(order, t)
        if first is None or full is None or first.used != full.used or not np.array_equal(first.weights, full.weights):
            _fail("late", p, f"iteration {t}: arrivals {order}: decoding of the first n-s differs from the "
                             f"decoding with the late ones ({first} vs {full})")


def _check_undecodable(sch: Scheme, p: Mapping) -> None:
    arrived = sch.undecodable_arrivals()
    if arrived is None:
        return
    if sch.decode(arrived) is not None:
        _fail("undecodable", p, f"arrivals {arrived} are declared undecodable but decode")
    try:
        raw = sch._checked(sch._decode_at(tuple(arrived), 0), tuple(arrived), 0) if arrived else None
    except np.linalg.LinAlgError:
        raw = None
    if raw is not None and not isinstance(raw, Refusal) and raw.exact:
        _fail("undecodable", p, f"arrivals {arrived}: the raw decoder gives an accepted exact decoding "
                                f"(residual {raw.residual:.1e}); only the arrival count keeps decode() from using it")


def _check_quorum(sch: Scheme, p: Mapping, rng: np.random.Generator, orders: int = 20) -> None:
    for t in _iterations(sch):
        q = sch.quorum(t)
        group = np.asarray(q.group)
        counts0 = np.bincount(group)
        for _ in range(orders):
            order = [int(i) for i in rng.permutation(len(group))]
            sch.clear_cache()  # exact decodings are cached by arrived *set*: the pick is of the first order seen
            counts = np.zeros_like(counts0)
            for r, mid in enumerate(order, start=1):
                counts[group[mid]] += 1
                met = bool(np.all(counts >= np.minimum(q.need, counts0)))
                d = sch.decode(order[:r], t)
                if not met and d is not None:
                    _fail("quorum", p, f"iteration {t}: arrivals {order[:r]} decode before the quorum "
                                       f"(need {q.need} per group {group.tolist()}) is met")
                if met:
                    if not q.guaranteed:  # only necessary: the engine asks decode() from here on
                        break
                    if d is None:
                        _fail("quorum", p, f"iteration {t}: arrivals {order[:r]} meet the guaranteed quorum "
                                           f"but do not decode")
                    if sorted(d.used) != _picked(q, order[:r]):
                        _fail("quorum", p, f"iteration {t}: arrivals {order[:r]}: decoding used {sorted(d.used)}, "
                                           f"the quorum's pick {q.pick!r} says {_picked(q, order[:r])}")
                    break


def _picked(q, arrived: list[int]) -> list[int]:
    """Sorted message ids a guaranteed quorum says the decode uses: per group the first ``need`` arrivals
    (``pick="first"``) or the ``need`` lowest arrived ids (``"lowest"``)."""
    by_group: dict[int, list[int]] = {}
    for mid in arrived:
        by_group.setdefault(int(q.group[mid]), []).append(mid)
    pick = (lambda ids: ids[: q.need]) if q.pick == "first" else (lambda ids: sorted(ids)[: q.need])
    return sorted(i for ids in by_group.values() for i in pick(ids))


def _check_determinism(factory, sch: Scheme, p: Mapping) -> None:
    other = factory(**p)
    for t in _iterations(sch):
        same = sch.assignment(t) == other.assignment(t) and all(
            np.array_equal(a.coeffs, b.coeffs) for a, b in zip(sch.messages(t), other.messages(t), strict=True))
        order = list(range(len(sch.messages(t))))
        da, db = sch.decode(order, t), other.decode(order, t)
        if not same or da.used != db.used or not np.array_equal(da.weights, db.weights):
            _fail("determinism", p, f"iteration {t}: two builds with the same parameters differ")
