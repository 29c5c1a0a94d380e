"""Progress reporting of the simulation engines: a tqdm bar on stderr or the caller's own counter."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator


@contextlib.contextmanager
def iteration_ticker(progress: bool | Callable[[int], None], total: int, desc: str
                     ) -> Iterator[Callable[[int], None] | None]:
    """The function an engine calls with the number of simulated iterations it just finished.

    Args:
        progress: True – a tqdm bar on stderr (``total`` iterations, closed when the block ends);
            a callable – called with each count (e.g. ``gcsim advise``'s own bar); anything else –
            no reporting.
        total: iterations the bar counts to (iterations × schemes).
        desc: the bar's label.
    Yields:
        ``tick(count)``, or None when nothing reports.
    """
    if progress is True:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="it", desc=desc, leave=False)
        try:
            yield bar.update
        finally:
            bar.close()
    elif callable(progress):
        yield progress
    else:
        yield None
