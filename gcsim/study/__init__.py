"""``gcsim study``: the end-to-end study. Every scheme measured with the real executor (one resumable
run per scheme), predicted by the simulator and compared, with a headline table and plots.

Modules (one responsibility each): :mod:`~gcsim.study.plan` (start / skip / resume / restart a run
directory), :mod:`~gcsim.study.pipeline` (the whole study, :func:`run_study`),
:mod:`~gcsim.study.headline` (headline table and ``headline.md``), :mod:`~gcsim.study.accuracy`
(``accuracy.png``), :mod:`~gcsim.study.machine` (the machine it ran on), :mod:`~gcsim.study.output`
(writing into a long-lived output directory). Importing this package imports neither torch nor ray.
"""

from gcsim.study.pipeline import StudyOptions, StudyResult, run_study

__all__ = ["StudyOptions", "StudyResult", "run_study"]
