import os
import stat

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
