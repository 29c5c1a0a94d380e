"""Benchmark 2 (issue 6): the real executor's per-iteration overhead against a bare Ray loop.

Overhead of an iteration = its end minus the instant the decodable set was complete **according to
the workers' own timestamps** (each reply carries the worker's ``send`` instant; sorting the replies
of the iteration by it and feeding them to ``scheme.decode`` gives the first instant a decodable set
had been sent). Everything after that instant is the master's machinery: Ray delivering the replies,
``ray.wait`` noticing them, the decode attempts, fetching the used payloads, combining them and
the SGD step. It is split into

* ``dispatch`` – ``start_s`` → the last worker's ``dispatch_s`` (``ray.put`` of the weights, n submits);
* ``notify`` – workers' decodable instant → the master's ``decodable_s`` (delivery, ``ray.wait``, decode checks);
* ``finish`` – ``decodable_s`` → ``end_s`` (fetch, combine, optimizer step);
* ``overhead`` = notify + finish = ``end_s`` − workers' decodable instant.

First a real ``gcsim real`` run (in this process, :func:`gcsim.real.runner.run_real`; or an existing
run directory with ``--run-dir``) is measured from its trace. Then, in the same Ray session, a bare
Ray loop with the same n, the same weights size and the same reply size: per iteration ``ray.put``
the weights, n actor calls that each sleep ``--sleep-s`` and return ``(send timestamp, payload)``,
``ray.wait`` for n−s, ``ray.get`` and sum the n−s payloads (float64), and the same quantities are
taken from its own timestamps. The ratio gcsim / bare is the executor's cost over raw Ray. With
``--workers-per-process K`` both loops put K workers in one actor process (gcsim: its
:class:`gcsim.real.worker.WorkerHost`; bare: a threaded actor with one single-thread concurrency group
per worker), so the ratio compares the masters over the same process layout.

    .venv/bin/python benchmarks/real_overhead.py                 # real CIFAR-10 (data/cifar10), gc-fr, 40 iterations
    .venv/bin/python benchmarks/real_overhead.py --tiny          # synthetic CIFAR-layout data, no data set needed
    .venv/bin/python benchmarks/real_overhead.py --scheme cce-fr --iterations 60 --sleep-s 0.1
    .venv/bin/python benchmarks/real_overhead.py --tiny --n 32 --s 1 --batch-size 64   # master cost at larger n
    .venv/bin/python benchmarks/real_overhead.py --tiny --n 64 --s 1 --batch-size 64 --workers-per-process 8
    .venv/bin/python benchmarks/real_overhead.py --run-dir runs/study/gc-fr   # analyse an existing run
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from gcsim.schemes import make_scheme

QUANTITIES = ("dispatch", "notify", "finish", "overhead")


def workers_decodable_s(workers: pd.DataFrame, scheme, iteration: int) -> float:
    """The instant (seconds) the decodable set had been sent, by the workers' own ``send_s``.

    Args:
        workers: workers.csv rows of one iteration (``worker``, ``send_s``; NaN for no reply).
        scheme: the run's scheme (message id == worker index: one message per worker).
        iteration: the iteration (pipelined schemes decode per iteration).
    Returns:
        ``send_s`` of the reply that made the sent set decodable (NaN if none did).
    """
    sent = workers[np.isfinite(workers["send_s"].to_numpy(float))].sort_values("send_s")
    arrived: list[int] = []
    for w, t in zip(sent["worker"].astype(int), sent["send_s"].astype(float)):
        arrived.append(w)
        if scheme.decode(arrived, iteration) is not None:
            return float(t)
    return float("nan")


def trace_overheads(run_dir: Path, warmup: int) -> tuple[pd.DataFrame, dict]:
    """Per-iteration dispatch / notify / finish / overhead seconds of a real run directory.

    Returns:
        ``(table with QUANTITIES columns per iteration, info {"scheme", "n", "s", "m", "n_params"})``.
    """
    import yaml

    scenario = yaml.safe_load((run_dir / "config.yaml").read_text())
    entry = scenario["schemes"][0]  # the run facts live in config.yaml (real.yaml: the options)
    cfg = {**yaml.safe_load((run_dir / "real.yaml").read_text()), "scheme": entry["name"],
           "n_workers": scenario["n_workers"], "s": entry.get("s", 0), "m": entry.get("m", 1)}
    scheme = make_scheme(cfg["scheme"], cfg["n_workers"], cfg["s"], cfg["m"], entry.get("seed", 0))
    its = pd.read_csv(run_dir / "iterations.csv")
    wks = pd.read_csv(run_dir / "workers.csv")
    rows = []
    for _, it in its.iterrows():
        t = int(it["iteration"])
        if t < warmup:
            continue
        wk = wks[wks["iteration"] == t]
        ready = workers_decodable_s(wk, scheme, t)
        rows.append({"iteration": t, "dispatch": float(wk["dispatch_s"].max() - it["start_s"]),
                     "notify": float(it["decodable_s"] - ready), "finish": float(it["end_s"] - it["decodable_s"]),
                     "overhead": float(it["end_s"] - ready), "duration": float(it["duration_s"])})
    item = {"float32": 4, "float64": 8}[cfg.get("payload_dtype", "float32")]
    n_params = int(round(scenario["workload"]["gradient_bytes"] / item))
    return pd.DataFrame(rows), {"scheme": cfg["scheme"], "n": cfg["n_workers"], "s": cfg["s"], "m": cfg["m"],
                                "n_params": n_params, "scheme_obj": scheme}


def bare_ray_loop(n: int, wait_for: int, weights_len: int, payload_len: int, sleep_s: float, iterations: int,
                  warmup: int, num_cpus: float, workers_per_process: int = 1) -> pd.DataFrame:
    """The bare loop (module docstring): per-iteration QUANTITIES in seconds after ``warmup`` iterations.

    Args:
        n: workers; wait_for: replies waited for (n − s); weights_len / payload_len: float32 lengths of
        the weights put per iteration and of each reply; sleep_s: each call's fixed sleep; num_cpus:
        logical CPUs per worker; workers_per_process: K workers per actor process (K > 1: one
        threaded actor per process, a one-thread concurrency group per worker, as gcsim's).
    """
    import ray

    class Bare:
        def __init__(self, payload_len: int):
            self.payload = np.ones(payload_len, dtype=np.float32)

        def ready(self) -> bool:
            return True

        def run(self, weights: np.ndarray, sleep_s: float):
            time.sleep(sleep_s)
            return time.time(), self.payload

    k = max(1, min(int(workers_per_process), n))
    procs = [list(range(p, min(n, p + k))) for p in range(0, n, k)]
    if k == 1:
        actors = [ray.remote(Bare).options(num_cpus=num_cpus).remote(payload_len) for _ in range(n)]
        calls = [a.run.options(num_returns=2) for a in actors]
    else:
        cls = ray.remote(concurrency_groups={f"w{i}": 1 for i in range(k)})(Bare)
        actors = [cls.options(num_cpus=round(len(ws) * num_cpus, 4), allow_out_of_order_execution=False)
                  .remote(payload_len) for ws in procs]
        calls = [actors[p].run.options(num_returns=2, concurrency_group=f"w{i}")
                 for p, ws in enumerate(procs) for i in range(len(ws))]
    ray.get([a.ready.remote() for a in actors])
    weights = np.zeros(weights_len, dtype=np.float32)
    rows = []
    try:
        for t in range(warmup + iterations):
            start = time.time()
            wref = ray.put(weights)
            refs = []
            for c in calls:
                refs.append(c.remote(wref, sleep_s))
            last_dispatch = time.time()
            metas = [r[0] for r in refs]
            ready, _ = ray.wait(metas, num_returns=wait_for)
            decodable = time.time()
            used = [metas.index(r) for r in ready]
            payloads = ray.get([refs[i][1] for i in used])
            total = np.zeros(payload_len, dtype=np.float64)
            for p in payloads:
                total += p
            end = time.time()
            sends = sorted(ray.get(metas))  # every reply's own timestamp (outside the timed span)
            ready_workers = sends[wait_for - 1]
            del wref, refs, payloads
            if t >= warmup:
                rows.append({"iteration": t, "dispatch": last_dispatch - start, "notify": decodable - ready_workers,
                             "finish": end - decodable, "overhead": end - ready_workers, "duration": end - start})
    finally:
        for a in actors:
            ray.kill(a)
    return pd.DataFrame(rows)


def _tiny_data(root: Path) -> Path:
    """A synthetic CIFAR-10-layout data set (20 train, 5 test images per class)."""
    from gcsim.real.data import make_random_image_folder, prepare_from_image_folder

    make_random_image_folder(root / "src", train_per_class=20, test_per_class=5, seed=0)
    prepare_from_image_folder(root / "src", root / "data")
    return root / "data"


def _stats(df: pd.DataFrame) -> dict:
    out = {}
    for q in QUANTITIES:
        v = df[q].to_numpy(float) * 1e3
        v = v[np.isfinite(v)]
        out[q] = (np.median(v), v.mean(), np.quantile(v, 0.95)) if len(v) else (math.nan,) * 3
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheme", default="gc-fr", help="scheme of the real run [gc-fr]")
    ap.add_argument("--scenario", default=None, help="scenario YAML [scenarios/real_default.yaml]")
    ap.add_argument("--n", type=int, default=None, help="workers (default: the scenario's)")
    ap.add_argument("--s", type=int, default=None, help="stragglers tolerated (default: the scenario's)")
    ap.add_argument("--iterations", type=int, default=40, help="measured iterations of each loop [40]")
    ap.add_argument("--warmup", type=int, default=3, help="iterations dropped at the start of each loop [3]")
    ap.add_argument("--data-dir", default=None, help="CIFAR-10 directory [data/cifar10]")
    ap.add_argument("--tiny", action="store_true", help="use a synthetic tiny CIFAR-layout data set")
    ap.add_argument("--batch-size", type=int, default=None, help="global mini-batch [192; 48 with --tiny]")
    ap.add_argument("--run-dir", default=None, help="analyse this finished real run instead of running one")
    ap.add_argument("--sleep-s", type=float, default=0.05, help="fixed sleep of each bare call, seconds [0.05]")
    ap.add_argument("--keep", default=None, help="keep the real run directory here (default: a temp dir, removed)")
    ap.add_argument("--workers-per-process", default="1",
                    help="logical workers per actor process K, in both loops, or auto (gcsim's rule) [1]")
    args = ap.parse_args()

    import ray

    load0 = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="gcsim-overhead-"))
    try:
        if args.run_dir is None:
            from gcsim.real.config import resolve_config
            from gcsim.real.runner import run_real

            data_dir = str(_tiny_data(tmp)) if args.tiny else args.data_dir
            batch = args.batch_size or (48 if args.tiny else None)
            total = args.warmup + args.iterations
            wpp = int(args.workers_per_process) if args.workers_per_process.isdigit() else args.workers_per_process
            cfg = resolve_config(args.scheme, args.scenario, iterations=total, data_dir=data_dir,
                                 batch_size=batch, eval_every=total, checkpoint_every=total,
                                 n_workers=args.n, s=args.s, workers_per_process=wpp)
            run_dir = Path(args.keep) if args.keep else tmp / "run"
            ray.init(num_cpus=cfg.n_workers, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.ERROR)
            t0 = time.monotonic()
            run_real(cfg, run_dir, progress=False)
            print(f"gcsim real --scheme {cfg.scheme}: {total} iterations in {time.monotonic() - t0:.1f} s "
                  f"(n={cfg.n_workers}, s={cfg.s}, m={cfg.m}, {'tiny synthetic' if args.tiny else 'CIFAR-10'} data)")
        else:
            run_dir = Path(args.run_dir)
            ray.init(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        real, info = trace_overheads(run_dir, args.warmup)
        n, s = info["n"], info["s"]
        payload_len = math.ceil(info["n_params"] / info["m"])
        cpus = float(ray.cluster_resources().get("CPU", n))
        meta_path = run_dir / "meta.json"
        k = (json.loads(meta_path.read_text()).get("ray", {}).get("workers_per_process", 1)
             if meta_path.is_file() else 1)
        load_before_bare = os.getloadavg()[0]
        bare = bare_ray_loop(n, n - s, info["n_params"], payload_len, args.sleep_s, args.iterations, args.warmup,
                             min(1.0, cpus / n), workers_per_process=k)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)

    rs, bs = _stats(real), _stats(bare)
    print(f"\nper-iteration overhead, ms (median / mean / p95) after {args.warmup} warm-up iterations; "
          f"n={n}, waiting for n-s={n - s}; weights {info['n_params'] * 4 / 1e6:.2f} MB, replies "
          f"{payload_len * 4 / 1e6:.2f} MB each")
    print(f"{'quantity':<10}{'gcsim ' + info['scheme']:>28}{'bare Ray loop':>28}{'ratio (median)':>16}")
    for q in QUANTITIES:
        r, b = rs[q], bs[q]
        ratio = r[0] / b[0] if b[0] > 0 else math.nan
        print(f"{q:<10}{r[0]:>10.1f} /{r[1]:>7.1f} /{r[2]:>7.1f}{b[0]:>10.1f} /{b[1]:>7.1f} /{b[2]:>7.1f}"
              f"{ratio:>15.2f}x")
    mean_ratio = rs["overhead"][1] / bs["overhead"][1] if bs["overhead"][1] > 0 else math.nan
    print(f"\noverhead ratio gcsim / bare: median {rs['overhead'][0] / bs['overhead'][0]:.2f}x, "
          f"mean {mean_ratio:.2f}x ({len(real)} and {len(bare)} iterations); mean iteration "
          f"{real['duration'].mean() * 1e3:.0f} ms (gcsim) vs {bare['duration'].mean() * 1e3:.0f} ms (bare)")
    print(f"workers per process K = {k} in both loops; load average (1 min) {load0:.2f} at the start, "
          f"{load_before_bare:.2f} before the bare loop, {os.getloadavg()[0]:.2f} at the end")
    print("dispatch: start -> last dispatch; notify: workers' decodable instant -> master's; "
          "finish: master's decodable -> end (gcsim: fetch, combine, SGD step; bare: fetch, sum); "
          "overhead = notify + finish")


if __name__ == "__main__":
    main()
