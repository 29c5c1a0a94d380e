"""The real executor: ``gcsim real`` trains a CNN on CIFAR-10 with a Ray parameter server and a
gradient-coding scheme, injecting the scenario's stragglers, and measures iteration time in the
trace format of :mod:`gcsim.trace`.

Modules (one responsibility each): :mod:`~gcsim.real.data` (CIFAR-10 on disk),
:mod:`~gcsim.real.model` (models, flat gradients), :mod:`~gcsim.real.sampling` (partition shards and
slices), :mod:`~gcsim.real.config` (a run: its narrowed scenario and its training and Ray options),
:mod:`~gcsim.real.worker` (the Ray actor), :mod:`~gcsim.real.master` (dispatch / collect / decode per
iteration), :mod:`~gcsim.real.rundir` (run directory files), :mod:`~gcsim.real.hostcpu` (host CPU
readings), :mod:`~gcsim.real.runner` (the whole run). Importing this package imports neither torch
nor ray.
"""
