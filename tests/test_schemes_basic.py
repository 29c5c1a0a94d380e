import numpy as np
import pytest

from gcsim.errors import SchemeError
from gcsim.schemes import make_scheme


def test_registry_unknown_name_lists_allowed():
    with pytest.raises(SchemeError, match="scheme: expected one of .*uncoded.*got 'nope'"):
        make_scheme("nope", n=4, s=1)


def test_fr_decodes_more_than_s_stragglers_when_every_group_arrives():
    sch = make_scheme("gc-fr", n=6, s=1)
    # groups {0,1},{2,3},{4,5}: workers 0,3,4 arrive -> 3 stragglers but decodable
    d = sch.decode([0, 3, 4])
    assert d is not None and d.used == (0, 3, 4)
    assert sch.decode([0, 1, 2, 3]) is None  # group {4,5} missing
    rng = np.random.default_rng(1)
    g = {j: rng.standard_normal(5) for j in range(6)}
    payloads = {i: sch.encode(i, g) for i in d.used}
    np.testing.assert_allclose(sch.combine(d, payloads, 5), sum(g.values()), rtol=1e-12)


def test_first_lookups_from_many_threads_see_every_builtin(tmp_path):
    """The registry loads the built-in schemes on the first lookup; threads of one process (several
    logical workers per Ray actor) that look up at once must all find them (a fresh interpreter, so
    the first lookups race)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import threading
        from gcsim.schemes.registry import scheme_class
        barrier = threading.Barrier(16)
        errors = []
        def look():
            barrier.wait()
            try:
                scheme_class("gc-fr")
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=look) for _ in range(16)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(len(errors), errors[:1])
    """)
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.startswith("0 "), out
