"""Staleness actually used vs declared (gcsim.real.staleness) and the worker keeping a finished
gradient when its call is cancelled (issue 14). No Ray: the worker class is plain Python and its
interruptible sleep is replaced by a scripted one."""

import numpy as np
import pandas as pd
import pytest

from gcsim.real.staleness import STALENESS_COLUMNS, staleness_rows, summarize_staleness
from gcsim.real.worker import GradientWorker
from gcsim.schemes import make_scheme
from factories import random_images


def _worker(scheme="pgc-fr", n=4, s=1, worker=0):
    pytest.importorskip("torch")  # the worker builds and runs a model
    images, labels = random_images(64)
    shards = {j: np.arange(j * 16, (j + 1) * 16) for j in range(n)}
    w = GradientWorker(worker)
    held = make_scheme(scheme, n, s, 1, 0).held_partitions(worker)
    w.setup({j: (images[shards[j]], labels[shards[j]]) for j in held}, scheme=scheme, n=n, s=s, m=1, scheme_seed=0, model="small-cnn", model_seed=0,
            dtype="float32", payload_dtype="float32", batch_size=16, sampler_seed=0, cancel_poll_s=0.01)
    from gcsim.real.model import build_model, get_flat_weights

    return w, get_flat_weights(build_model("small-cnn", seed=0))


def _script(w, answers):
    """Replace the worker's sleep: returns the next scripted 'cancelled?' answer per call."""
    calls = list(answers)
    w._sleep = lambda seconds: calls.pop(0)


def test_cancel_after_a_finished_partition_keeps_its_gradient():
    w, weights = _worker()
    _script(w, [False, True])  # delay not cancelled; cancel noticed right after the partition
    meta, payloads = w.run(0, weights, 0.0, 1.0)
    assert (meta, payloads) == (None, None)  # the master sees a cancelled call
    j = w.scheme.assignment(0)[0][0]
    assert w.computed_at[j] == 0 and np.any(w.latest[j] != 0)
    _script(w, [False, False])
    meta, _ = w.run(1, weights, 0.0, 1.0)
    j1 = w.scheme.assignment(1)[0][0]
    assert meta["computed_at"] == {j: 0, j1: 1}  # both held partitions, as declared (staleness 1 and 0)


def test_cancel_during_the_delay_or_the_slowdown_keeps_the_older_gradient():
    w, weights = _worker()
    _script(w, [True])  # cancelled while sleeping its injected delay
    assert w.run(0, weights, 1.0, 1.0) == (None, None)
    assert set(w.computed_at.values()) == {-1}
    _script(w, [False, True])  # cut short in the emulated slowdown (factor 2): not finished
    assert w.run(1, weights, 0.0, 2.0) == (None, None)
    assert set(w.computed_at.values()) == {-1}


def test_rows_compare_used_with_declared_staleness():
    scheme = make_scheme("pgc-fr", 4, 1, 1, 0)
    it = 5
    dec = scheme.decode([0, 1, 2], it)
    # worker 0 held partition q's gradient from 2 iterations earlier than the schedule says
    declared = {w: {j: it - int(dec.staleness[u, j]) for j in scheme.messages(it)[w].partitions}
                for u, w in enumerate(dec.used)}
    used = {w: dict(v) for w, v in declared.items()}
    stale_j = [j for j, c in used[0].items() if c < it][0]
    used[0][stale_j] -= 2
    rows = pd.DataFrame(staleness_rows(it, scheme, dec, {w: {str(j): c for j, c in v.items()} for w, v in used.items()}))
    assert rows.columns.tolist() == STALENESS_COLUMNS
    assert len(rows) == 6  # 3 used messages x 2 partitions
    assert sorted(rows["declared"].tolist()) == [0, 0, 0, 1, 1, 1]
    older = rows[rows["staleness"] > rows["declared"]]
    assert older[["worker", "partition", "staleness", "declared"]].values.tolist() == [[0, stale_j, 3, 1]]
    summary = summarize_staleness(rows)
    assert summary["older_than_declared"] == 1 and summary["max_staleness"] == 3 and summary["mean_excess"] == 2.0


def test_exact_scheme_declares_zero():
    scheme = make_scheme("gc-fr", 4, 1, 1, 0)
    dec = scheme.decode([0, 2], 0)
    computed = {m.worker: {j: 0 for j in m.partitions} for m in scheme.messages(0)}
    rows = pd.DataFrame(staleness_rows(0, scheme, dec, computed))
    assert set(rows["declared"]) == {0} and set(rows["staleness"]) == {0}
    assert summarize_staleness(rows)["older_than_declared"] == 0


def test_worker_setup_takes_exactly_its_own_partitions_data():
    """A worker receives only the shards of the partitions it holds (issue 10): data for another
    partition, or a missing one, is refused by name."""
    pytest.importorskip("torch")
    images = np.zeros((16, 32, 32, 3), dtype=np.uint8)
    labels = np.zeros(16, dtype=np.int64)
    opts = dict(scheme="gc-fr", n=4, s=1, m=1, scheme_seed=0, model="small-cnn", model_seed=0, dtype="float32",
                payload_dtype="float32", batch_size=8, sampler_seed=0, cancel_poll_s=0.01)
    held = make_scheme("gc-fr", 4, 1, 1, 0).held_partitions(2)
    assert held == [2, 3]
    with pytest.raises(ValueError, match=r"shard_data: expected the partitions worker 2 holds, \[2, 3\], got \[0, 2\]"):
        GradientWorker(2).setup({0: (images, labels), 2: (images, labels)}, **opts)
    info = GradientWorker(2).setup({j: (images, labels) for j in held}, **opts)
    assert info["held"] == [2, 3]
