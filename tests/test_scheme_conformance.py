"""The public conformance kit (gcsim/schemes/conformance.py) on every registered scheme, on the README's
example scheme, and on broken schemes it must reject.

Every registered scheme passes ``check_scheme`` on each of its declared examples with tolerance 1e-8
(exact schemes: every straggler set of size <= s decodes random float64 partition gradients to the
true sum, residual <= 1e-8; approximate schemes: the first n-s arrivals, scale n/((n-s)h), staleness
from a replay of the round-robin history; loads as declared; declared undecodable arrivals give None).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gcsim.schemes import make_scheme, scheme_class, scheme_names
from gcsim.schemes.base import Decoding, Loads, Refusal
from gcsim.schemes.conformance import CHECKS, ConformanceError, check_scheme
from gcsim.schemes.gc_fr import GcFr
from gcsim.schemes.ignore_stragglers import IgnoreStragglers
from gcsim.schemes.uncoded import Uncoded

EXAMPLES = [pytest.param(name, p, id=f"{name}-" + "-".join(f"{k}{v}" for k, v in p.items()))
            for name in scheme_names() for p in scheme_class(name).examples]


def test_every_registered_scheme_declares_examples():
    assert all(scheme_class(name).examples for name in scheme_names())
    # the battery covers several s per scheme, and m > 1 where the scheme uses m
    for name in scheme_names():
        ex = scheme_class(name).examples
        assert len({p["s"] for p in ex}) >= (1 if name == "uncoded" else 2), name
        if scheme_class(name).uses_m:
            assert any(p.get("m", 1) > 1 for p in ex), name


@pytest.mark.parametrize("name,params", EXAMPLES)
def test_registered_scheme_conforms(name, params):
    (res,) = check_scheme(scheme_class(name), [params], tolerance=1e-8)
    assert res.passed and res.patterns_tried >= 1
    assert res.exhaustive_sizes == list(range(params["s"] + 1))  # small examples: every straggler set
    if res.exact:
        assert res.worst_residual <= 1e-8 and res.worst_error <= 1e-8


@pytest.mark.parametrize("name", ["uncoded", "ignore-stragglers", "gc-fr", "gc-cr", "pgc-fr"])
def test_declared_loads_are_the_papers(name):
    # Tandon et al. 2017 §2 (d = s+1), Ye & Abbe 2018 (d = s+m), baselines and pipelining compute 1
    want = {"uncoded": (1, 1), "ignore-stragglers": (1, 1), "gc-fr": (3, 3), "gc-cr": (3, 3), "pgc-fr": (1, 3)}
    assert scheme_class(name).declared_loads(6, 2, 1)[:2] == want[name]
    assert scheme_class("cce-cr").declared_loads(8, 2, 2) == Loads(4, 4, 1)


@pytest.mark.parametrize("name", ["gc-cr", "gc-mds", "cce-cr"])
def test_linear_algebra_itself_refuses_the_undecodable_arrivals(name):
    # not only the arrival count: the residual check of Scheme.decode turns the least-squares answer
    # into a Refusal
    for params in scheme_class(name).examples:
        sch = scheme_class(name)(**params)
        arrived = tuple(sch.undecodable_arrivals())
        assert sch.decode(arrived) is None and not sch.is_decodable(arrived)
        checked = sch._checked(sch._decode(arrived), arrived, 0)
        assert isinstance(checked, Refusal) and "coefficient residual" in checked.reason, (params, arrived)


@pytest.mark.parametrize("name,params", [p for p in EXAMPLES if p.values[0].startswith("pgc-")])
def test_pipelined_round_robin_and_warm_up(name, params):
    sch = scheme_class(name)(**params)
    n, s = sch.n, sch.s
    for w in range(n):  # a worker computes each held partition once per s+1 iterations
        assert sorted(sch.assignment(t)[w][0] for t in range(3, 3 + s + 1)) == sch.held_partitions(w)
    for t in range(2 * (s + 1) + 1):
        assert sorted(p[0] for p in sch.assignment(t)) == list(range(n))  # each partition fresh once
        d = sch.decode(list(range(n)), t)
        assert d.staleness.max() == min(t, s)  # at most s iterations stale, less during warm-up (zeros)
        computed = [{j for tt in range(t + 1) for j in sch.assignment(tt)[w]} for w in range(n)]
        for w, msg in enumerate(sch.messages(t)):  # messages carry exactly the partitions computed so far
            assert set(msg.partitions) == computed[w], (t, w)


def _readme_example() -> str:
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("### Adding a scheme", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_adding_a_scheme_example_runs_and_conforms():
    code = _readme_example().replace("register(Mirrored)", "")  # keep the global registry unchanged
    ns: dict = {}
    exec(compile(code, "README.md#adding-a-scheme", "exec"), ns)  # runs check_scheme(Mirrored)
    Mirrored = ns["Mirrored"]
    (a, b) = check_scheme(Mirrored, tolerance=1e-8)
    assert (a.n, a.patterns_tried, b.n, b.patterns_tried) == (2, 3, 6, 7)  # 1 + n straggler sets of size <= 1
    # it is gc-fr at s = 1: same assignment, same decodings
    m, g = Mirrored(n=6, s=1), GcFr(n=6, s=1)
    assert m.assignment() == g.assignment()
    assert m.decode([5, 0, 3]).used == g.decode([5, 0, 3]).used == (0, 3, 5)
    assert "register(Mirrored)" in _readme_example()


# --------------------------------------------------------------------------- broken schemes are rejected
class _WrongWeight(GcFr):
    def _decode(self, arrived):
        d = super()._decode(arrived)
        return None if d is None else Decoding(used=d.used, weights=d.weights * 1.001, exact=True)


class _WrongScale(IgnoreStragglers):
    def _decode(self, arrived):
        d = super()._decode(arrived)
        return Decoding(used=d.used, weights=d.weights * (self.n - self.s) / self.n, exact=False)


class _WrongLoads(GcFr):
    @classmethod
    def declared_loads(cls, n, s, m):
        return Loads(computation=s + 2, held=s + 2)


class _WrongUndecodable(GcFr):
    def undecodable_arrivals(self, iteration=0):
        return list(range(self.n))


class _EarlyDecode(Uncoded):
    """Decodes from n-1 arrivals although the quorum says n."""

    exact = False

    def undecodable_arrivals(self, iteration=0):
        return None

    @property
    def min_arrivals(self):
        return self.n - 1

    def quorum(self, iteration=0):
        return super().quorum(iteration).__class__(group=np.zeros(self.n, dtype=int), need=self.n)

    def _decode(self, arrived):
        return Decoding(used=tuple(sorted(arrived)), weights=np.ones((len(arrived), 1)), exact=False)


class _Nondeterministic(GcFr):
    calls = 0

    def _build(self):
        asg, msgs = super()._build()
        type(self).calls += 1
        return (asg[::-1] if type(self).calls % 2 == 0 else asg), msgs


class _NoExamples(GcFr):
    examples = ()


@pytest.mark.parametrize("cls,params,check,detail", [
    (_WrongWeight, dict(n=6, s=1), "shapes", "refused: coefficient residual 1.0e-03 > 1e-06"),
    (_WrongScale, dict(n=6, s=2), "decode", "expected all 1.5"),
    (_WrongLoads, dict(n=6, s=1), "loads", "declared (3, 1)"),
    (_WrongUndecodable, dict(n=6, s=1), "undecodable", "declared undecodable but decode"),
    (_EarlyDecode, dict(n=4, s=0), "quorum", "decode before the quorum (need 4 per group [0, 0, 0, 0]) is met"),
    (_Nondeterministic, dict(n=6, s=1), "determinism", "differ"),
    (GcFr, dict(n=6, s=4), "build", "s+1 dividing n=6"),
])
def test_broken_scheme_fails_the_named_check(cls, params, check, detail):
    with pytest.raises(ConformanceError) as ei:
        check_scheme(cls, [params])
    e = ei.value
    assert (e.check, e.params) == (check, params) and check in CHECKS
    assert detail in e.detail and str(e).startswith(f"{check} (n={params['n']}, s={params['s']}")
    assert isinstance(e, AssertionError)


def test_no_examples_and_no_params_is_a_build_failure():
    with pytest.raises(ConformanceError, match="declares no examples"):
        check_scheme(_NoExamples)


def test_a_factory_works_like_a_class():
    res = check_scheme(lambda **p: make_scheme("cce-fr", **p), [dict(n=6, s=1, m=2)], tolerance=1e-8)
    assert res[0].scheme == "cce-fr" and res[0].exhaustive_sizes == [0, 1]
