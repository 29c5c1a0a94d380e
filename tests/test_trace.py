import os
import stat

import pytest

from gcsim.trace import atomic_write_text, make_public


def test_atomic_write_gives_the_umask_mode_not_tempfile_0600(tmp_path):
    old = os.umask(0o022)
    try:
        p = tmp_path / "a.csv"
        atomic_write_text(p, "x\n1\n")
        assert p.read_text() == "x\n1\n"
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
        d = tmp_path / "d"
        d.mkdir(mode=0o700)
        assert stat.S_IMODE(make_public(d).stat().st_mode) == 0o755
    finally:
        os.umask(old)


def test_trace_frame_refuses_a_missing_or_misspelled_column():
    """pd.DataFrame(rows, columns=...) would fill a misspelled key with NaN and drop it silently:
    the executors build their tables through trace_frame, which names both (issue 11)."""
    from gcsim.trace import WORKER_COLUMNS, trace_frame

    row = {c: 1.0 for c in WORKER_COLUMNS}
    df = trace_frame([row, dict(row)], WORKER_COLUMNS, "workers.csv")
    assert list(df.columns) == WORKER_COLUMNS and len(df) == 2 and not df.isna().any().any()
    bad = dict(row)
    bad["arival_s"] = bad.pop("arrival_s")
    with pytest.raises(ValueError, match=r"workers.csv: expected exactly its columns .* missing \['arrival_s'\], "
                                         r"unknown \['arival_s'\]"):
        trace_frame([row, bad], WORKER_COLUMNS, "workers.csv")
    with pytest.raises(ValueError, match=r"missing \['status'\], unknown \[\]"):
        trace_frame({c: [1.0] for c in WORKER_COLUMNS if c != "status"}, WORKER_COLUMNS, "workers.csv")
    assert list(trace_frame([], WORKER_COLUMNS, "workers.csv").columns) == WORKER_COLUMNS
