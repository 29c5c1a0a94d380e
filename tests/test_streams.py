"""The random-stream registry (gcsim.streams): tags differ, stay above every worker index, and the
modules use them."""

import numpy as np
import pytest

from gcsim import streams
from gcsim.errors import ConfigError
from gcsim.scenario import validate_scenario


def test_tags_are_distinct_and_above_every_worker_index():
    tags = list(streams.TAGS.values())
    assert len(set(tags)) == len(tags)
    assert min(tags) >= streams.MAX_WORKERS
    assert max(tags) < 2**32  # one SeedSequence word


def test_modules_draw_from_the_registered_tags():
    from gcsim import replay, stragglers
    from gcsim.real import sampling
    from gcsim.sim import engine

    assert stragglers.MASTER_STREAM == streams.MASTER
    assert replay.REPLAY_STREAM == streams.REPLAY
    assert engine.DISPATCH_STREAM == streams.DISPATCH and engine.BACKGROUND_STREAM == streams.BACKGROUND
    assert sampling.SAMPLER_STREAM == streams.SAMPLER
    # the master stream is the registered layout [seed, MASTER, iteration]
    a = stragglers.master_rng(5, 3).random(4)
    np.testing.assert_array_equal(a, np.random.default_rng([5, streams.MASTER, 3]).random(4))


def test_a_scenario_with_more_workers_than_the_registry_allows_is_refused():
    data = {"name": "big", "n_workers": streams.MAX_WORKERS + 1, "iterations": 2, "seed": 1,
            "schemes": [{"name": "uncoded"}], "workload": {"compute": {"dist": "constant", "value": 0.01}}}
    with pytest.raises(ConfigError, match="n_workers"):
        validate_scenario(data)
