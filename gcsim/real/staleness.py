"""Staleness actually used by a real run, beside what the scheme declares (``staleness.csv``).

Pipelined schemes (:mod:`gcsim.schemes.pipelined`) send the sum of a worker's latest gradient of
each held partition; the scheme declares how old each one is (``Decoding.staleness``, by the
round-robin schedule). In the real executor a worker only knows what it actually computed: a call
cancelled before (or while) computing leaves an older gradient in place. Every reply carries
``computed_at`` (held partition -> iteration its gradient was computed, -1 never;
:class:`gcsim.real.worker.GradientWorker`), and the master records, for every message the decoding
used, one row per partition of the message (:data:`STALENESS_COLUMNS`):

* ``computed_at`` – iteration at which the encoded gradient was computed (-1: never, zeros sent);
* ``staleness`` – ``iteration - computed_at`` (-1 when never computed);
* ``declared`` – the scheme's staleness for that entry (0 for exact schemes, whose messages are all
  computed in the iteration; -1 where the scheme declares the partition absent/zero).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Columns of ``staleness.csv`` (one row per used message and partition of it).
STALENESS_COLUMNS = ["iteration", "message", "worker", "partition", "computed_at", "staleness", "declared"]


def staleness_rows(iteration: int, scheme, decoding, computed_at: dict[int, dict]) -> list[dict]:
    """Rows of ``staleness.csv`` for one decoded iteration.

    Args:
        iteration: ``t``.
        scheme: the :class:`gcsim.schemes.base.Scheme` of the run.
        decoding: its :class:`gcsim.schemes.base.Decoding` of ``t`` (``used`` message ids; ``staleness``
            ``(len(used), k)`` ints or None for exact schemes).
        computed_at: worker -> {partition: iteration computed, -1 never} from the replies' metadata
            (keys may be strings after serialisation; a missing partition counts as -1).
    Returns:
        list of dicts with :data:`STALENESS_COLUMNS`.
    """
    msgs = scheme.messages(iteration)
    rows = []
    for u, mid in enumerate(decoding.used):
        msg = msgs[int(mid)]
        held = {int(j): int(v) for j, v in (computed_at.get(msg.worker) or {}).items()}
        for j in msg.partitions:
            c = held.get(int(j), -1)
            declared = 0 if decoding.staleness is None else int(decoding.staleness[u, j])
            rows.append({"iteration": int(iteration), "message": int(mid), "worker": int(msg.worker),
                         "partition": int(j), "computed_at": c, "staleness": (int(iteration) - c) if c >= 0 else -1,
                         "declared": declared})
    return rows


def summarize_staleness(df: pd.DataFrame) -> dict:
    """Summary of a ``staleness.csv`` frame: how often the used staleness exceeds the declared one.

    Args:
        df: rows with :data:`STALENESS_COLUMNS`.
    Returns:
        ``{"entries", "older_than_declared" (count), "fraction_older", "max_staleness",
        "max_declared", "iterations_affected" (iterations with at least one older entry),
        "mean_excess" (mean of staleness - declared over the older entries; NaN if none)}``.
    """
    fresh_known = df["staleness"] >= 0
    older = fresh_known & (df["staleness"] > df["declared"])
    excess = (df["staleness"] - df["declared"])[older]
    return {"entries": int(len(df)), "older_than_declared": int(older.sum()),
            "fraction_older": float(older.mean()) if len(df) else float("nan"),
            "max_staleness": int(df["staleness"].max()) if len(df) else -1,
            "max_declared": int(df["declared"].max()) if len(df) else -1,
            "iterations_affected": int(df.loc[older, "iteration"].nunique()),
            "mean_excess": float(excess.mean()) if len(excess) else float("nan")}


def empty_frame() -> pd.DataFrame:
    """An empty ``staleness.csv`` frame (:data:`STALENESS_COLUMNS`)."""
    return pd.DataFrame(columns=STALENESS_COLUMNS).astype(np.int64)


__all__ = ["STALENESS_COLUMNS", "staleness_rows", "summarize_staleness", "empty_frame"]
