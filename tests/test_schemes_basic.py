import numpy as np
import pytest

from gcsim.errors import SchemeError
from gcsim.schemes import make_scheme, scheme_names


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
