"""The Ray parameter-server loop on tiny synthetic data (one Ray start, one pool of 6 actors reused).

* every exact scheme's decoded gradient equals the full mini-batch gradient computed in one process
  (float64), for several straggler patterns injected as delays;
* injected delays are honoured: an s-tolerant scheme does not wait for the delayed workers, uncoded does;
* carry-over lets late work finish (the actor starts the next iteration late); cancel interrupts it.

No assertion assumes how fast the machine is: a worker that must not be waited for is delayed by
``HOLD_S`` (10 minutes; cancelled as soon as the others decode), so "not waited for" only assumes the
other workers finish within 10 minutes, and waited-for delays are checked as lower bounds.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("torch")  # gcsim.real.model

from gcsim.real.master import ParameterServer, WorkerPool  # noqa: E402
from gcsim.real.model import build_model, get_flat_weights  # noqa: E402
from gcsim.real.sampling import shard_indices  # noqa: E402
from gcsim.schemes import make_scheme, scheme_class, scheme_names  # noqa: E402
from factories import FixedDelays, full_batch_gradient, parameter_server, random_images, worker_setup  # noqa: E402

N = 6
BATCH = 26  # uneven slices: 5, 5, 4, 4, 4, 4
SEED = 3
DELAY_S = 1.5
#: Delay of workers that must not be waited for: they are cancelled long before it ends on any machine.
HOLD_S = 600.0
#: drain() timeout: it returns as soon as nothing is outstanding, so a generous bound costs nothing.
DRAIN_S = 120.0


@pytest.fixture(scope="module")
def cluster(module_ray):
    images, labels = random_images(N * 12)
    pool = WorkerPool(N, num_cpus=2 / N)
    yield pool, images, labels
    pool.shutdown()


def _setup(pool, images, labels, scheme, *, dtype="float64"):
    shards = shard_indices(len(labels), scheme.k, SEED)
    pool.setup(worker_setup(scheme, batch_size=BATCH, seed=SEED, dtype=dtype), images, labels, shards)
    return shards


def _server(pool, scheme, stragglers, policy="cancel", **kw):
    return parameter_server(pool, scheme, stragglers, batch_size=BATCH, policy=policy, **kw)


def _full_batch_gradient(model, images, labels, shards, iteration):
    """Gradient of the mean loss over the whole mini-batch, in one process (the oracle)."""
    return full_batch_gradient(model, images, labels, shards, iteration, batch_size=BATCH, seed=SEED)


def _exact_params():
    """(name, s, m) for every registered exact scheme, with n = N."""
    out = []
    for name in scheme_names():
        cls = scheme_class(name)
        if not cls.exact:
            continue
        for s, m in ([(1, 2), (2, 1), (1, 1)] if cls.uses_m else [(1, 1), (2, 1), (0, 1)]):
            try:
                make_scheme(name, N, s, m)
            except Exception:
                continue
            out.append((name, s, m))
            break
    return out


EXACT = _exact_params()


def test_every_exact_scheme_is_covered():
    names = {p[0] for p in EXACT}
    assert {"uncoded", "gc-fr", "gc-cr", "gc-mds", "cce-fr", "cce-cr"} <= names


@pytest.mark.parametrize("name, s, m", EXACT, ids=[f"{n}-s{s}-m{m}" for n, s, m in EXACT])
def test_decoded_gradient_equals_full_batch_gradient(cluster, name, s, m):
    pool, images, labels = cluster
    scheme = make_scheme(name, N, s, m)
    shards = _setup(pool, images, labels, scheme)
    # straggler patterns (one per iteration): none, then s delayed workers at several positions
    patterns = [set()] + [set((first + 2 * i) % N for i in range(s)) for first in (0, 3, 5)] if s else [set()]
    ps = _server(pool, scheme, FixedDelays(N, {t: {w: HOLD_S for w in pat} for t, pat in enumerate(patterns)}))
    model = build_model("small-cnn", seed=SEED, dtype="float64")
    weights = get_flat_weights(model)
    for t, pat in enumerate(patterns):
        res = ps.step(t, weights)
        ps.end_iteration()
        assert not set(res.used_workers) & pat, f"pattern {pat}: a delayed worker was waited for"
        expected = _full_batch_gradient(model, images, labels, shards, t)
        scale = np.max(np.abs(expected))
        assert scale > 0
        assert np.max(np.abs(res.gradient - expected)) <= 1e-10 * scale, (name, t, pat)
        assert res.exact
    ps.drain(timeout_s=DRAIN_S)
    wk = ps.workers_frame()
    for t, pat in enumerate(patterns):
        rows = wk[wk.iteration == t]
        assert set(rows[rows.status == "cancelled"].worker) >= pat
        assert np.allclose(rows.delay_s, [HOLD_S if w in pat else 0.0 for w in range(N)])


def test_injected_delay_tolerated_vs_uncoded(cluster):
    """Constant delay on s=1 worker: cce-fr does not wait for it (HOLD_S, cancelled), uncoded waits
    DELAY_S out (a lower bound: true however loaded the machine is)."""
    pool, images, labels = cluster
    durations = {}
    for name, s, m, delay in (("cce-fr", 1, 2, HOLD_S), ("uncoded", 0, 1, DELAY_S)):
        delays = FixedDelays(N, {t: {1: delay} for t in range(2)})
        scheme = make_scheme(name, N, s, m)
        _setup(pool, images, labels, scheme, dtype="float32")
        ps = _server(pool, scheme, delays)
        weights = get_flat_weights(build_model("small-cnn", seed=SEED))
        for t in range(2):
            ps.step(t, weights)
            ps.end_iteration()
        ps.drain(timeout_s=DRAIN_S)
        it, wk = ps.iterations_frame(), ps.workers_frame()
        durations[name] = it.duration_s.to_numpy()
        w1 = wk[wk.worker == 1]
        if name == "uncoded":
            # the worker really slept: its reply was sent >= DELAY_S after it started
            assert np.all(w1.send_s - w1.compute_start_s >= DELAY_S)
            assert np.all(w1.used) and np.all(w1.status == "arrived")
        else:
            assert not np.any(w1.used) and np.all(w1.status == "cancelled")
    assert np.all(durations["uncoded"] >= DELAY_S)
    assert np.all(durations["cce-fr"] < HOLD_S), durations  # it did not wait for worker 1


def test_carry_over_starts_next_iteration_late(cluster):
    """carry-over: the delayed worker's stale call finishes (status late, arrival recorded) and its
    next call starts only then; with cancel the next call starts right away.

    Not timing-sensitive by construction: worker 3 (worker 2's gc-fr group partner) is late in
    iteration 1, so iteration 1 needs worker 2's reply under both policies (with cancel it is never
    cancelled before it is seen, so its start is always recorded), and drain() may wait as long as
    a loaded machine needs (it returns as soon as nothing is out). The delays are 1 s under
    carry-over (checked as lower bounds) and HOLD_S under cancel (the next call starts long before
    such a delay could end, on any machine)."""
    pool, images, labels = cluster
    scheme = make_scheme("gc-fr", N, 1, 1)
    _setup(pool, images, labels, scheme, dtype="float32")
    weights = get_flat_weights(build_model("small-cnn", seed=SEED))
    starts = {}
    for policy in ("carry-over", "cancel"):
        delay = 1.0 if policy == "carry-over" else HOLD_S
        ps = _server(pool, scheme, FixedDelays(N, {0: {2: delay}, 1: {3: delay}}), policy=policy)
        for t in range(2):
            ps.step(t, weights)
            ps.end_iteration()
        ps.drain(timeout_s=DRAIN_S)
        wk = ps.workers_frame().set_index(["iteration", "worker"])
        first, second = wk.loc[(0, 2)], wk.loc[(1, 2)]
        starts[policy] = second.compute_start_s - second.dispatch_s
        if policy == "carry-over":
            assert first.status == "late" and not first.used
            assert first.arrival_s >= first.send_s >= first.compute_start_s + 1.0
            assert second.compute_start_s >= first.send_s  # queued behind the late call
        else:
            assert first.status == "cancelled" and np.isnan(first.arrival_s)
    assert starts["carry-over"] > 0  # queued behind the late call (lower bound: first.send_s above)
    assert starts["cancel"] < HOLD_S  # the cancelled call did not hold the next one back


@ray.remote(num_cpus=0)
class _Owner:
    """Owns an object the driver holds a reference to; killing it makes that reference lost."""

    def make(self):
        # nested: owned by this actor; never finished when the actor is killed
        return [ray.get_runtime_context().current_actor.value.remote()]

    def value(self):
        time.sleep(HOLD_S)  # killed long before: the reference is never produced
        return np.zeros(3)


def _lost_ref():
    """A reference whose producer and owner died before producing it (``ray.get`` raises
    ``ActorDiedError`` or ``OwnerDiedError``, depending on which Ray notices first, as for a payload
    of a worker on a node that went away)."""
    owner = _Owner.remote()
    (ref,) = ray.get(owner.make.remote())
    ray.kill(owner, no_restart=True)
    # wait until the owner is dead (ray.kill is asynchronous; under load it took longer than one call)
    deadline = time.monotonic() + 60.0
    while True:
        try:
            ray.get(owner.make.remote(), timeout=1.0)
        except ray.exceptions.RayActorError:
            return ref
        except ray.exceptions.GetTimeoutError:
            pass
        assert time.monotonic() < deadline, "the owner actor was not dead 60 s after ray.kill"


class _LosePayloads(ParameterServer):
    """Replaces the payload reference of the first used worker of iteration t (``lose[t]`` times) by a
    lost one just before it is fetched: a real Ray error at fetch time, as when the node holding the
    payload died."""

    def __init__(self, *a, lose: dict[int, int], **k):
        super().__init__(*a, **k)
        self.lose, self.freed = lose, []

    def _fetch(self, workers, refs):
        it = self._open["iteration"]
        if self.lose.get(it, 0) > 0:
            self.lose[it] -= 1
            w = workers[0]
            refs = {**refs, w: _lost_ref()}
            self.freed.append((it, w))
        return super()._fetch(workers, refs)


def test_lost_payload_is_decoded_from_a_survivor_that_arrived_in_the_same_batch(cluster):
    """gc-fr n=6 s=1, every reply harvested in one batch (the master sleeps after dispatch) and
    workers 0, 2, 4 sending first: the arrived set decodes at worker 4, then worker 0's payload is
    lost; the retry must see worker 1, which arrived in the same batch after the decodable instant
    (it was dropped from the arrived set, and the run failed with "every live worker replied", CI
    2026-12-02)."""
    pool, images, labels = cluster
    scheme = make_scheme("gc-fr", N, 1, 1)
    shards = _setup(pool, images, labels, scheme)
    late = {w: 0.4 for w in (1, 3, 5)}
    ps = _server(pool, scheme, FixedDelays(N, {0: late}), server_class=_LosePayloads, lose={0: 1},
                 after_dispatch=lambda it, pool: time.sleep(3.0))
    model = build_model("small-cnn", seed=SEED, dtype="float64")
    weights = get_flat_weights(model)
    res = ps.step(0, weights)
    ps.end_iteration()
    assert ps.freed == [(0, 0)] and ps.dead == {0}
    assert 1 in res.used_workers and 0 not in res.used_workers and len(res.used_workers) == N // 2
    expected = _full_batch_gradient(model, images, labels, shards, 0)
    assert np.max(np.abs(res.gradient - expected)) <= 1e-10 * np.max(np.abs(expected))
    ps.drain(timeout_s=DRAIN_S)


def test_lost_payload_within_s_is_decoded_from_survivors_beyond_s_fails(cluster):
    """gc-fr n=6 s=1: a used worker's payload lost at fetch time counts as never arrived; the
    iteration decodes from the other member of its group, exactly; the worker is dead from then on
    (deaths records iteration and cause); a second loss in another group is more than s."""
    from gcsim.errors import RunFailedError

    pool, images, labels = cluster
    scheme = make_scheme("gc-fr", N, 1, 1)
    shards = _setup(pool, images, labels, scheme)
    deaths = []
    ps = _server(pool, scheme, FixedDelays(N, {}), server_class=_LosePayloads, lose={1: 1, 2: 1},
                 on_death=lambda w, t, c: deaths.append((w, t, c)))
    model = build_model("small-cnn", seed=SEED, dtype="float64")
    weights = get_flat_weights(model)
    ps.step(0, weights)
    ps.end_iteration()
    res = ps.step(1, weights)
    ps.end_iteration()
    (it, lost_w), = ps.freed
    assert it == 1 and lost_w not in res.used_workers and len(res.used_workers) == N // 2
    expected = _full_batch_gradient(model, images, labels, shards, 1)
    assert np.max(np.abs(res.gradient - expected)) <= 1e-10 * np.max(np.abs(expected))
    assert ps.dead == {lost_w} and ps.deaths[lost_w]["iteration"] == 1
    assert ps.deaths[lost_w]["cause"].split(":")[0] in {"ActorDiedError", "OwnerDiedError"}
    assert [(w, t) for w, t, _ in deaths] == [(lost_w, 1)]
    wk = ps.workers_frame()
    row = wk[(wk.iteration == 1) & (wk.worker == lost_w)].iloc[0]
    assert row.status == "dead" and not row.used
    with pytest.raises(RunFailedError, match=r"iteration 2: 2 workers lost"):
        ps.step(2, weights)
    assert len(ps.dead) == 2 and ps.freed[1][0] == 2
    ps.abandon_iteration()
    ps.drain(timeout_s=DRAIN_S)
