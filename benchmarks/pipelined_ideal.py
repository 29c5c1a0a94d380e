"""Issue 14: a pipelined scheme's training with an *ideal* executor – no Ray, no stragglers, no cancels.

One process replays what ``gcsim real`` computes – same model, data shards, per-iteration slices
(:mod:`gcsim.real.sampling`), scheme encode/decode/combine, SGD with momentum – but every worker
computes its round-robin partition every iteration, so every used message carries exactly the
staleness the scheme declares (``--no-staleness``: every held partition fresh every iteration, the
messages and decode unchanged). The n - s used messages are the first of a random arrival order
(seeded). This separates what the optimiser does with the declared staleness (a property of the
scheme with these settings) from what the executor adds (cancelled calls leaving older gradients).

Prints and writes (``--out`` CSV) test accuracy and mean training loss every ``--eval-every``
iterations, and the os.getloadavg() at the start and the end (timings are not the point here).

    .venv/bin/python benchmarks/pipelined_ideal.py --scheme pgc-fr --lr 0.05 --out /tmp/ideal_pgcfr.csv
    .venv/bin/python benchmarks/pipelined_ideal.py --scheme uncoded --lr 0.05 --out /tmp/ideal_uncoded.csv
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd
import torch

from gcsim.real.data import load_split
from gcsim.real.model import build_model, evaluate, get_flat_weights, set_flat_grad, set_flat_weights, slice_gradient
from gcsim.real.sampling import shard_indices, slice_positions, slice_sizes
from gcsim.schemes import make_scheme


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheme", default="pgc-fr")
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--s", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=192)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data-dir", default="data/cifar10")
    ap.add_argument("--no-staleness", action="store_true",
                    help="every worker computes every held partition every iteration (computation load s+1), so "
                         "the messages and decode are the scheme's but no gradient is stale: isolates staleness")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    load0 = os.getloadavg()
    torch.set_num_threads(1)
    tx, ty = load_split(a.data_dir, train=True)
    vx, vy = load_split(a.data_dir, train=False)
    s = 0 if a.scheme == "uncoded" else a.s
    scheme = make_scheme(a.scheme, a.n, s, 1, 0, payload_dtype="float32")
    shards = shard_indices(len(ty), scheme.k, a.seed)
    sizes = slice_sizes(a.batch_size, scheme.k)
    model = build_model("small-cnn", seed=a.seed)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    l = len(get_flat_weights(model))
    worker_model = build_model("small-cnn", seed=a.seed)
    latest = [{j: np.zeros(l) for j in scheme.held_partitions(w)} for w in range(a.n)]
    rng = np.random.default_rng(a.seed)
    rows, window = [], []
    for t in range(a.iterations):
        set_flat_weights(worker_model, get_flat_weights(model))
        losses = []
        for w in range(a.n):
            for j in (scheme.held_partitions(w) if a.no_staleness else scheme.assignment(t)[w]):
                x, y = tx[shards[j]], ty[shards[j]]
                pos = slice_positions(len(y), int(sizes[j]), a.seed, t, j)
                g, loss = slice_gradient(worker_model, x[pos], y[pos], a.batch_size)
                latest[w][j] = g.astype(np.float64)
                losses.append(loss)
        msgs = scheme.messages(t)
        payloads = {m.id: scheme.encode(m.id, {j: latest[m.worker][j] for j in m.partitions}, t).astype(np.float32)
                    for m in msgs}
        order = list(rng.permutation(len(msgs)))
        arrived, dec = [], None
        while dec is None:
            arrived.append(int(order[len(arrived)]))
            dec = scheme.decode(arrived, t)
        grad = scheme.combine(dec, {i: payloads[i] for i in dec.used}, l)
        set_flat_grad(model, grad)
        opt.step()
        window.append(float(np.mean(losses)))
        if (t + 1) % a.eval_every == 0:
            test_loss, acc = evaluate(model, vx, vy)
            rows.append({"iteration": t, "loss": float(np.mean(window)), "test_loss": test_loss, "test_accuracy": acc})
            window = []
            print(f"{a.scheme} lr={a.lr} it={t + 1} loss={rows[-1]['loss']:.3f} acc={acc:.4f}", flush=True)
    pd.DataFrame(rows).to_csv(a.out, index=False)
    print("load_before", load0, "load_after", os.getloadavg())


if __name__ == "__main__":
    main()
