"""Benchmark (issue 13): how the null-space decoder of gc-cr / gc-mds compares with the dense least squares
it replaced, on the sets where decoding is hard – what ``CyclicMatrixScheme.dense_fallback_residual``
rests on.

For each arrived set it computes the null-space solution (``_null_space_weights``) and the dense one
(``least_squares_decoding``) and their coefficient residuals ``max|a^T B_S - 1|`` (``Scheme.decode_error``).
Sets: gc-mds's contiguous straggler block and the near-contiguous ones with one hole (the construction
guard's sets, shift 0), for every s with n - s odd up to n/3, at n = 15 … 128 (the guard itself is not
run: refused parameters are measured too); random straggler sets of gc-cr at s/n = 1/8 … 1/4 (seeded).
Prints per family: sets, sets the dense solve passes (residual <= 1e-6), of those the ones the null-space
solve fails (rescued by the fallback) and its worst residual there, sets where the null-space solve
passes and the dense one does not, and the residual ratio null-space / dense (median, max) where the
dense one passes. Writes nothing.

    .venv/bin/python benchmarks/decode_fallback.py [--random 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gcsim.schemes.base import Decoding
from gcsim.schemes.cyclic import least_squares_decoding
from gcsim.schemes.gc_cr import GcCr
from gcsim.schemes.gc_mds import GcMds
from gcsim.schemes.patterns import contiguous_sets, near_contiguous_sets
from gcsim.threads import one_blas_thread

TOL = 1e-6


class _Unguarded(GcMds):
    """gc-mds without its construction guard (the refused parameters' sets are measured too)."""

    def _check_construction(self) -> None:
        pass


def _residual(sch, used, a) -> float:
    return sch.decode_error(Decoding(used=used, weights=a[:, None], exact=True))[0]


def _pair(sch, stragglers) -> tuple[float, float]:
    st = set(int(w) for w in stragglers)
    used = tuple(w for w in range(sch.n) if w not in st)
    fast = sch._null_space_weights(used)
    rf = np.inf if fast is None else _residual(sch, used, fast[0])
    a, _, _ = least_squares_decoding(sch.B[list(used)], sch.n - sch.s)
    return rf, _residual(sch, used, a)


def _report(label: str, pairs: list[tuple[float, float]], seconds: float) -> None:
    rf, rd = np.array(pairs).T
    dense_ok = rd <= TOL
    rescued = dense_ok & ~(rf <= TOL)
    ratio = rf[dense_ok] / np.maximum(rd[dense_ok], 1e-300)
    print(f"{label:<34}{len(rf):>6}{dense_ok.sum():>8}{rescued.sum():>9}"
          f"{(rf[rescued].max() if rescued.any() else 0):>12.1e}{(~dense_ok & (rf <= TOL)).sum():>9}"
          f"{np.median(ratio) if ratio.size else 0:>9.1f}{ratio.max() if ratio.size else 0:>10.1e}"
          f"{(rf[~dense_ok].min() if (~dense_ok).any() else np.inf):>12.1e}{seconds:>8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=300, help="random straggler sets per gc-cr (n, s)")
    args = ap.parse_args()
    print(f"{'family':<34}{'sets':>6}{'dense ok':>8}{'rescued':>9}{'worst fast':>12}{'fast ok':>9}"
          f"{'ratio md':>9}{'ratio max':>10}{'min fast':>12}{'s':>8}")
    print(f"{'':<34}{'':>6}{'':>8}{'(fb)':>9}{'(rescued)':>12}{'dense no':>9}{'(dense ok)':>19}"
          f"{'(dense no)':>12}")
    with one_blas_thread():
        for n in (15, 24, 31, 40, 41, 64, 101, 128):
            t0, pairs = time.perf_counter(), []
            for s in range(1, n // 3 + 1):
                if (n - s) % 2 == 0:
                    continue
                sch = _Unguarded(n, s)
                for st in contiguous_sets(n, s)[:1] + near_contiguous_sets(n, s, 1, shifts=[0]):
                    pairs.append(_pair(sch, st))
            _report(f"gc-mds n={n} blocks, s<=n/3", pairs, time.perf_counter() - t0)
        for n, s in ((40, 10), (64, 8), (60, 15), (100, 20), (128, 16), (128, 32), (256, 32)):
            t0, rng = time.perf_counter(), np.random.default_rng(n * 1000 + s)
            sch = GcCr(n, s, seed=3)
            pairs = [_pair(sch, rng.choice(n, s, replace=False)) for _ in range(args.random)]
            _report(f"gc-cr n={n} s={s} random", pairs, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
