"""Keep freed memory in a worker process (glibc malloc), so a gradient does not page memory back in.

With glibc's defaults every gradient of the small CNN took ~3,000 minor page faults: ~6 ms of kernel
CPU out of ~27 ms per partition. Each call's activation buffers come from fresh ``mmap``s, or from heap
that ``free`` gave back to the kernel, and the kernel zeroes every page again on first touch. How many
faults a partition takes depends on the scheme's call pattern. `gc-fr`'s partitions were ~4 % cheaper
than `uncoded`'s (docs/validation/README.md, findings 27, 28, 31 and 34). That is an artefact of the
executor, not of the scheme, and a calibration on one scheme cannot see it.

:func:`keep_freed_memory` sets two of glibc's malloc parameters in the calling process (glibc manual,
"Malloc Tunable Parameters"; ``mallopt(3)``):

* ``M_MMAP_MAX = 0``: no allocation is served by its own ``mmap``, every one comes from the heap;
* ``M_TRIM_THRESHOLD`` of :data:`TRIM_THRESHOLD_BYTES`: the heap's free top is not returned to the
  kernel below that size.

After its first calls a worker then reuses memory it already touched. In finding 34, 2 interleaved
`uncoded` / `gc-fr` pairs took 0.2–0.3 ms of system CPU and ~0 page faults per partition (was 5–6 ms
and ~3,000). The CPU per partition fell from ~27 to ~21 ms, and `gc-fr` over `uncoded` went from 0.97
to 1.00. The price is a resident heap that stays at its peak, tens of MB per worker here.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: mallopt parameter numbers (glibc <malloc.h>)
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
#: free heap top kept before it is returned to the kernel, bytes
TRIM_THRESHOLD_BYTES = 1 << 30


def keep_freed_memory() -> bool:
    """Set ``M_MMAP_MAX = 0`` and ``M_TRIM_THRESHOLD =`` :data:`TRIM_THRESHOLD_BYTES` for this process
    (module docstring). Call it once, in a worker process, before its first gradient.

    Returns:
        True when glibc's ``mallopt`` accepted both settings; False without glibc (another C library:
        the process keeps its allocator's defaults). Never raises.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(M_MMAP_MAX, 0) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1


__all__ = ["M_MMAP_MAX", "M_TRIM_THRESHOLD", "TRIM_THRESHOLD_BYTES", "keep_freed_memory"]
