"""Iteration times of ``gcsim advise``'s candidates: the vectorised engine on shared draws, one run per
timing class, decode checks where the ranking needs them, SimPy where the vector engine cannot model.

The loop over blocks of iterations is :func:`gcsim.sim.vector.simulate_vector`'s (same draws: straggler
process, master decode draws, ``network.dispatch``, finite-draw checks; the block's cumulative work is
computed once and shared by every run), with per-run results kept as arrays instead of DataFrames and a
:class:`~gcsim.sim.vector.NeedsSimPy` of one run dropping that run only.

Decode checks: a run with ``decode_check="quorum"`` ends each iteration when the quorum is met; with
``"exact"`` it asks the scheme's decoder from there on, one more arrival at a time while it refuses (the
SimPy master's rule). A refused set can only make the master wait longer, and iterations of the vector
engine do not overlap, so per iteration the quorum's duration is <= the checked one: a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gcsim.scenario import Scenario

#: draws kept in memory between the screening pass and the decode checks (else drawn again)
KEEP_DRAWS_BYTES = 1 << 30


@dataclass
class Runs:
    """Durations (seconds, ``(iterations,)``) by run key, and the runs the vector engine gave up on."""

    durations: dict = field(default_factory=dict)
    refusals: dict = field(default_factory=dict)
    needs_simpy: dict = field(default_factory=dict)  # key -> reason


class Draws:
    """The vector engine's per-block inputs for scenario ``sc`` (partitions drawn up to ``max_load``),
    kept for later passes while they fit :data:`KEEP_DRAWS_BYTES`."""

    def __init__(self, sc: Scenario, max_load: int):
        from gcsim.latency import build_distribution
        from gcsim.sim.vector import BLOCK_WORKER_ITERATIONS
        from gcsim.stragglers import StragglerProcess, master_uniforms
        self.sc, self.max_load = sc, max_load
        n, I = sc.n_workers, sc.iterations
        overhead = sc.workload.call_overhead
        self.process = StragglerProcess(sc.stragglers, n, sc.seed, compute=build_distribution(sc.workload.compute),
                                        call_overhead=build_distribution(overhead) if overhead is not None else None,
                                        speed_variation=sc.workload.speed_variation)
        dd = build_distribution(sc.master.decode_s)
        self.decode_all = np.asarray(dd.from_uniform(master_uniforms(sc.seed, np.arange(I), dd.n_uniforms)),
                                     dtype=np.float64).reshape(I)
        net = sc.network
        self.model_s = net.latency_s + sc.workload.model_bytes / net.bandwidth_bytes_per_s
        self.step = max(1, BLOCK_WORKER_ITERATIONS // max(1, n))
        self._kept: list | None = None

    def blocks(self):
        """Yield ``(its, block, decode_s, extra, cum)`` per block, as simulate_vector prepares them (the
        block's ``compute_s`` dropped: ``cum`` holds it)."""
        from dataclasses import replace

        from gcsim.sim.vector import _check_block, _dispatch_block, cumulative_work
        if self._kept is not None:
            yield from self._kept
            return
        sc, I = self.sc, self.sc.iterations
        kept, size = [], 0
        for a in range(0, I, self.step):
            its = np.arange(a, min(I, a + self.step))
            block = self.process.draw_block(its, self.max_load)
            decode_s = self.decode_all[its]
            _check_block(sc, block, decode_s, its)
            extra = _dispatch_block(sc, its)
            cum = cumulative_work(block)
            block = replace(block, compute_s=np.zeros(block.compute_s.shape[:2] + (0,)))
            item = (its, block, decode_s, extra, cum)
            size += cum.nbytes + 4 * block.delay_s.nbytes
            if kept is not None:
                kept = kept if size <= KEEP_DRAWS_BYTES else None
                if kept is not None:
                    kept.append(item)
            yield item
        self._kept = kept

    def run(self, timings: dict, decode_check: str) -> Runs:
        """Simulate ``{key: (label, scheme or stand-in)}`` over every block (``decode_check`` as the module
        docstring; ``label`` names the run in errors); per key the durations ``end - start`` (the
        iterations table's ``duration_s``)."""
        from gcsim.sim.engine import MAX_RUN_S, _check_run_length
        from gcsim.sim.vector import NeedsSimPy, _SchemeRun
        sc, I = self.sc, self.sc.iterations
        runs = {k: _SchemeRun(label, t, sc, I, "none", decode_check) for k, (label, t) in timings.items()}
        out = Runs()
        for its, block, decode_s, extra, cum in self.blocks():
            def next_ready(rows_its, rows_ends, extra=extra):
                # the next iteration starts at this one's end and reaches the workers model_s later
                return rows_ends + (0.0 if extra is not None else self.model_s)
            for k in list(runs):
                try:
                    runs[k].run_block(its, block, decode_s, extra, next_ready, cum=cum)
                except NeedsSimPy as e:
                    out.needs_simpy[k] = e.reason
                    del runs[k]
        for k, r in runs.items():
            start = np.concatenate(r.iter_cols["start_s"])
            end = np.concatenate(r.iter_cols["end_s"])
            if end.size and float(end.max()) > MAX_RUN_S:
                full = self.process.draw_block(range(min(I, 1)), self.max_load)
                _check_run_length(sc, full, self.decode_all[:1], float(end.max()))
            out.durations[k] = end - start
            out.refusals[k] = r.refusals
        return out


def simpy_durations(sc: Scenario, specs: list) -> dict:
    """``{label: durations}`` of the SimPy engine for ``specs`` (a subset sees the same keyed draws)."""
    from gcsim.sim.engine import simulate
    res = simulate(sc.model_copy(update={"schemes": list(specs)}))
    its = res.iterations
    out = {}
    for label, g in its.groupby("scheme", sort=False):
        out[label] = g.sort_values("iteration")["duration_s"].to_numpy(dtype=np.float64)
    return out


__all__ = ["Draws", "KEEP_DRAWS_BYTES", "Runs", "simpy_durations"]
