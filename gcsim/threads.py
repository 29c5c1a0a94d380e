"""BLAS threads: decoding solves many small least-squares systems, which multi-threaded BLAS makes
5-11x slower on a busy machine (threads spin and fight the other processes for the cores).

:func:`one_blas_thread` pins numpy's BLAS (OpenBLAS / MKL / BLIS, through ``threadpoolctl``) to one
thread for a block; :func:`gcsim.cli.main` runs every command inside it and
:func:`gcsim.schemes.verify.verify_scheme` does too when called as a library. torch's own intra-op
threads (``torch.set_num_threads``) are not touched.
"""

from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Limit the BLAS libraries loaded in this process to one thread while the block runs (restored
    afterwards; nested use is harmless). A no-op when ``threadpoolctl`` finds no BLAS."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


__all__ = ["one_blas_thread"]
