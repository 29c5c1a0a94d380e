"""Every random stream of gcsim in one place: the words that key it and what it drives.

Each stream is ``numpy.random.default_rng(words)`` (a ``SeedSequence`` of the words; :mod:`gcsim.keyed_rng`
computes the same uniforms for many keys at once). Two streams are the same stream exactly when their
words are, so every layout below must differ from every other for any seed, worker, iteration and
partition. Layouts (``seed`` is the scenario's or run's seed):

=================  ============================================  ===========================================
stream             words                                         drives
=================  ============================================  ===========================================
straggler          ``[seed, worker, iteration]``                 delay, slowdown, compute draws
                                                                 (:mod:`gcsim.stragglers`)
straggler overlay  ``[seed, worker, iteration, 1]``              persistent-straggler / extra draws
master             ``[seed, MASTER, iteration]``                 ``master.decode_s``
dispatch           ``[seed, DISPATCH, iteration]``               ``network.dispatch`` (:mod:`gcsim.sim.engine`)
background         ``[seed, BACKGROUND, iteration]``             ``workload.background`` draws
speed              ``[seed, SPEED, iteration]``                  ``workload.speed_variation``: the machine's
                                                                 speed factor (:mod:`gcsim.stragglers`)
replay             ``[seed, REPLAY, 0, worker]`` /               trace replay column / block starts
                   ``[seed, REPLAY, 1, block]``                  (:mod:`gcsim.replay`)
sampler            ``[seed, SAMPLER]`` /                         the real run's training-set permutation /
                   ``[seed, SAMPLER, iteration, partition]``     mini-batch of a partition (:mod:`gcsim.real.sampling`)
=================  ============================================  ===========================================

The straggler streams carry a worker index where the others carry a tag, so they stay apart as long
as every tag is at least :data:`MAX_WORKERS`, the largest ``n_workers`` a scenario accepts
(``tests/test_streams.py`` checks it, and that the tags differ). A new stream gets a new tag here.
"""

from __future__ import annotations

#: largest ``n_workers`` a scenario accepts: worker indices stay below every stream tag
MAX_WORKERS = 2**14

MASTER = 2**32 - 1
REPLAY = 2**32 - 2
DISPATCH = 0xD15FA7C4
BACKGROUND = 0xB6C0C0E5
SAMPLER = 0x5A4D
SPEED = 0x5BEEDF00

#: name -> tag of every tagged stream
TAGS = {"master": MASTER, "replay": REPLAY, "dispatch": DISPATCH, "background": BACKGROUND, "sampler": SAMPLER, "speed": SPEED}

__all__ = ["BACKGROUND", "DISPATCH", "MASTER", "MAX_WORKERS", "REPLAY", "SAMPLER", "SPEED", "TAGS"]
