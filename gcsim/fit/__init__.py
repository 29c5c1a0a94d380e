"""``gcsim fit``: from measured per-worker, per-iteration times to a scenario.

One responsibility per module:

* :mod:`gcsim.fit.traceio` – read a trace (gcsim run directory or CSV) into a worker × iteration grid;
* :mod:`gcsim.fit.families` – maximum-likelihood fits of candidate delay families, AIC, KS;
* :mod:`gcsim.fit.regime` – the two-state Markov (persistent straggler) regime fit;
* :mod:`gcsim.fit.model` – the decomposition (per-worker base, delay, regime) and the scenario YAML;
* :mod:`gcsim.fit.report` – the fit report (table CSV/markdown, QQ and density plots) in a run directory.
"""
