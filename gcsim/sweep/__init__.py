"""``gcsim sweep``: a grid of simulations over n, s, m, schemes and straggler parameters.

* :mod:`gcsim.sweep.config` – the SWEEP.yaml file (a base scenario plus ``grid:``), its validation and
  the expansion of the grid into points (one point = one scenario, simulated as ``gcsim simulate``
  would: :func:`gcsim.sim.vector.simulate_with`, the same engine and keyed draws);
* :mod:`gcsim.sweep.run` – evaluating points (in-process or as Ray tasks), the run directory
  (``runs/sweep/<name>-<UTC timestamp>/``), the durable per-point log and ``--resume``;
* :mod:`gcsim.sweep.output` – the tidy ``sweep.csv`` and the plots.
"""
