"""Which training images enter each partition's slice of each iteration's mini-batch.

The training set is split once into ``k`` disjoint shards (seeded permutation, near-equal sizes);
partition ``j`` always draws its slice from shard ``j``, so a worker only needs the data of the
partitions the scheme assigns it (Tandon et al., ICML 2017, §2: "data partitions"). The global
mini-batch of ``B`` images is split into ``k`` slices of near-equal size (``np.array_split`` sizes);
in iteration ``t`` partition ``j`` uses ``b_j`` images of its shard drawn without replacement from
``default_rng([seed, SAMPLER_STREAM, t, j])``. Every holder of partition ``j`` therefore computes on
the same images in the same iteration (so coded sums decode exactly), and no state is carried from
one iteration to the next (so ``--resume`` needs none). Across iterations images are drawn with
replacement (not in epochs).
"""

from __future__ import annotations

import numpy as np

from gcsim import streams
from gcsim.errors import ConfigError

#: Stream tag separating the sampler's generators from the straggler generators of the same seed.
SAMPLER_STREAM = streams.SAMPLER


def shard_indices(n_train: int, k: int, seed: int) -> list[np.ndarray]:
    """Split ``range(n_train)`` into ``k`` disjoint shards of near-equal size (seeded shuffle).

    Returns:
        ``k`` int64 arrays of training-set indices.
    Raises:
        ConfigError: fewer training images than partitions.
    """
    if n_train < k:
        raise ConfigError("training images", f"at least one per partition (k={k})", n_train)
    perm = np.random.default_rng([int(seed), SAMPLER_STREAM]).permutation(n_train)
    return [np.sort(part).astype(np.int64) for part in np.array_split(perm, k)]


def slice_sizes(global_batch: int, k: int) -> np.ndarray:
    """Images per partition slice: ``(k,)`` ints summing to ``global_batch`` (sizes differ by <= 1)."""
    base, extra = divmod(int(global_batch), int(k))
    return np.array([base + (1 if j < extra else 0) for j in range(k)], dtype=np.int64)


def slice_positions(shard_size: int, size: int, seed: int, iteration: int, partition: int) -> np.ndarray:
    """Positions (into shard ``partition``) of the images of that partition's slice in ``iteration``.

    Returns:
        int64 ``(size,)``, distinct, drawn from ``default_rng([seed, SAMPLER_STREAM, iteration, partition])``.
    Raises:
        ConfigError: the slice is larger than the shard.
    """
    if size > shard_size:
        raise ConfigError("batch_size", f"at most {shard_size} images per partition slice (shard size)", size)
    rng = np.random.default_rng([int(seed), SAMPLER_STREAM, int(iteration), int(partition)])
    return np.sort(rng.choice(shard_size, size=size, replace=False)).astype(np.int64)
