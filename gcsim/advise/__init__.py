"""``gcsim advise``: which scheme, with which s and m, for a scenario (:mod:`gcsim.advise.search`), and
its table and plot (:mod:`gcsim.advise.output`)."""
