"""host.csv's rows (:class:`gcsim.real.hostcpu.HostStealLog`), shared by the parameter-server and the
all-reduce executors: one row per iteration with the wall seconds since the previous reading and the
hypervisor's steal over them, an ``end_s`` filled in later, earlier rows kept on resume. No Ray."""

import math
import time

import numpy as np
import pandas as pd

from gcsim.real.hostcpu import HOST_COLUMNS, HostStealLog, host_steal_cpu_s


def test_rows_count_from_the_previous_reading(tmp_path):
    log = HostStealLog()
    time.sleep(0.02)
    first = log.record("gc-fr", 0, 1.5)
    time.sleep(0.02)
    log.record("gc-fr", 1)  # end_s not known yet
    assert first["reading_wall_s"] >= 0.015 and log.rows[1]["reading_wall_s"] >= 0.015
    assert log.rows[1]["reading_wall_s"] < 5  # from the previous row's reading, not the first one
    if math.isfinite(host_steal_cpu_s()):
        assert all(r["host_steal_cpu_s"] >= 0 for r in log.rows)
    df = log.frame({0: 9.0, 1: 2.5})  # only a missing end_s is filled
    assert list(df.columns) == HOST_COLUMNS and df.end_s.tolist() == [1.5, 2.5]
    assert math.isnan(log.frame().end_s.iloc[1])
    log.write(tmp_path / "host.csv", {1: 2.5})
    back = pd.read_csv(tmp_path / "host.csv")
    assert list(back.columns) == HOST_COLUMNS and back.iteration.tolist() == [0, 1]
    np.testing.assert_allclose(back.end_s, [1.5, 2.5])


def test_resume_keeps_earlier_rows(tmp_path):
    assert HostStealLog.read_prior(tmp_path / "host.csv", 5) == []
    old = HostStealLog()
    for i in range(4):
        old.record("uncoded", i, float(i))
    old.write(tmp_path / "host.csv")
    prior = HostStealLog.read_prior(tmp_path / "host.csv", 2)  # the checkpoint was at iteration 2
    log = HostStealLog(prior)
    log.record("uncoded", 2, 2.0)
    assert [r["iteration"] for r in log.rows] == [0, 1, 2]
