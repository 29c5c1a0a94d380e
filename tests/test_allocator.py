"""gcsim/real/allocator.py: with freed memory kept, repeated large allocations stop faulting pages in.

Each case runs in a fresh subprocess (mallopt changes the whole process; pytest's own stays as it is).
40-MB arrays are above glibc's largest dynamic mmap threshold (32 MB), so by default every one is a
fresh mmap whose pages fault in on first touch (numpy asks for huge pages, so ~570 faults per array on
this VM rather than 9,766); kept, only the first array's do."""

import subprocess
import sys

import pytest

SCRIPT = """
import resource, sys
import numpy as np
from gcsim.real.allocator import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
np.ones(5_000_000)  # the first 40 MB: faults in either way
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    a = np.ones(5_000_000)  # 40 MB, touched
    del a
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True).stdout
    kept, faults = out.split()
    return kept, int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_kept_memory_stops_the_page_faults_of_repeated_allocations():
    default_kept, default_faults = _faults("default")
    kept, kept_faults = _faults("keep")
    assert default_kept == "None" and kept == "True"
    assert default_faults > 20 * 100  # every 40-MB array faulted in anew (at least 100 huge pages' worth each)
    assert kept_faults < 100  # reused: at most a few pages of bookkeeping
