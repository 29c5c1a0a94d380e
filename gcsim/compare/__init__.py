"""The comparator: checks simulated against observed iteration times (``gcsim compare``).

Modules (one responsibility each):

* :mod:`~gcsim.compare.rundir` – read/validate run directories, find the newest run per scheme;
* :mod:`~gcsim.compare.calibrate` – the scenario matching a measured run, calibrated from its trace;
* :mod:`~gcsim.compare.pipeline` – simulate each (run, scheme), compare, judge, rank;
* :mod:`~gcsim.compare.stats` – relative errors with bootstrap CIs, W1, KS, Kendall tau, ECDF band;
* :mod:`~gcsim.compare.verdict` – pass / warn / fail against bands;
* :mod:`~gcsim.compare.plots`, :mod:`~gcsim.compare.report`, :mod:`~gcsim.compare.output` – PNGs,
  the verdict table and ``report.md``, the output directory.
"""
