"""The shared verifier (gcsim.schemes.verify) and the ``gcsim schemes`` CLI built on it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gcsim.cli import main
from gcsim.schemes import make_scheme, registry, scheme_names
from gcsim.schemes.base import Decoding
from gcsim.schemes.gc_cr import GcCr
from gcsim.schemes.pgc_cr import PgcCr
from gcsim.schemes.verify import verify_scheme


class WrongWeightCr(GcCr):
    """gc-cr whose decoder is wrong when worker 0 straggles (for testing the verifier)."""

    name = "broken-cr"

    def _decode(self, arrived):
        d = super()._decode(arrived)
        if d is not None and 0 not in arrived:
            return Decoding(used=d.used, weights=d.weights * 1.001, exact=True, cond=d.cond)
        return d


class StaleLiePgc(PgcCr):
    """pgc-cr reporting zero staleness everywhere (wrong)."""

    name = "broken-pgc"

    def _decode_at(self, arrived, iteration):
        d = super()._decode_at(arrived, iteration)
        return Decoding(used=d.used, weights=d.weights, exact=False, staleness=np.maximum(d.staleness, 0) * 0)


def test_verify_counts_patterns_exhaustively_and_reports_worsts():
    r = verify_scheme(make_scheme("gc-cr", 8, 2))
    assert r.passed and r.exhaustive_sizes == [0, 1, 2] and r.sampled_sizes == []
    assert r.patterns_tried == 1 + 8 + 28
    assert 0 <= r.worst_residual < 1e-9 and r.worst_error < 1e-9 and r.worst_cond > 1


def test_verify_samples_beyond_max_patterns_with_a_stated_seed():
    sch = make_scheme("gc-mds", 9, 2)
    r = verify_scheme(sch, max_patterns=10, samples=5, seed=3)
    assert r.passed and r.exhaustive_sizes == [0, 1] and r.sampled_sizes == [2]
    # size 2 over 9 workers: 9 blocks {i, i+1}, 9 {i, i+2} and 9 {i, i+3} (near-contiguous), then 5 random
    assert r.kinds == {"exhaustive": 1 + 9, "contiguous": 9, "near-contiguous": 18, "random": 5}
    assert r.patterns_tried == 1 + 9 + 9 + 18 + 5
    again = verify_scheme(make_scheme("gc-mds", 9, 2), max_patterns=10, samples=5, seed=3)
    assert again.worst_cond == r.worst_cond and again.worst_error == r.worst_error


def test_verify_catches_a_wrong_decoder_and_names_the_pattern():
    r = verify_scheme(WrongWeightCr(6, 1))
    assert not r.passed and 0 in r.failed_pattern and "residual" in r.failure
    r = verify_scheme(StaleLiePgc(5, 1))
    assert not r.passed and "staleness" in r.failure
    assert r.failed_pattern is not None


@pytest.mark.parametrize("name,n,s,m", [("ignore-stragglers", 6, 2, 1), ("pgc-fr", 6, 2, 1), ("cce-cr", 8, 2, 2)])
def test_verify_passes_builtin_schemes(name, n, s, m):
    r = verify_scheme(make_scheme(name, n, s, m))
    assert r.passed, r.failure
    assert math.isnan(r.worst_residual) != r.exact


def test_cli_lists_every_scheme_with_its_properties(capsys):
    assert main(["schemes"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["name", "exact", "uses", "m", "constraints", "reference"]
    rows = {line.split()[0]: line for line in out[2:]}
    assert list(rows) == scheme_names()
    assert rows["cce-fr"].split()[1:3] == ["yes", "yes"] and "(s+m) divides n" in rows["cce-fr"]
    assert rows["pgc-cr"].split()[1:3] == ["no", "no"]
    assert "Tandon" in rows["gc-cr"] and "Raviv" in rows["gc-mds"]


def test_cli_check_pass_prints_worsts(capsys):
    assert main(["schemes", "check", "gc-cr", "--n", "7", "--s", "2", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "patterns tried:  29 (all sets of size 0, 1, 2)" in out
    assert "by kind:         29 exhaustive, 0 contiguous, 0 near-contiguous, 0 random" in out
    assert "worst residual:" in out and "worst cond:" in out and out.strip().endswith("PASS")
    expect = verify_scheme(make_scheme("gc-cr", 7, 2, seed=4), seed=4)
    assert f"worst cond:      {expect.worst_cond:.3e}" in out


def test_cli_check_failure_exits_1_and_prints_the_pattern(capsys, monkeypatch):
    monkeypatch.setitem(registry._REGISTRY, WrongWeightCr.name, WrongWeightCr)
    assert main(["schemes", "check", "broken-cr", "--n", "5", "--s", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAIL: stragglers [0]: coefficient residual" in out


def test_every_cli_command_and_verify_scheme_run_with_one_blas_thread(monkeypatch, capsys):
    """Issue 15 item 6: decodes under multi-threaded BLAS are 5-11x slower on a busy machine."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import gcsim.schemes.verify as verify_mod
    from gcsim.cli import main
    from gcsim.schemes import make_scheme

    if not [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]:
        pytest.skip("no BLAS library loaded")
    seen = []
    real = verify_mod._verify_scheme

    def spy(*args, **kwargs):
        seen.append(max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"))
        return real(*args, **kwargs)

    monkeypatch.setattr(verify_mod, "_verify_scheme", spy)
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):  # as if the machine's default were 2
        assert main(["schemes", "check", "gc-cr", "--n", "6", "--s", "1"]) == 0
        verify_mod.verify_scheme(make_scheme("gc-cr", 6, 1))
    assert seen == [1, 1]
