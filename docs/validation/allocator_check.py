"""Finding 34: the CPU of a partition split into user and system time, with glibc's default allocator
and with freed memory kept (gcsim/real/allocator.py), from instrumented runs.

``partition-cpu-2026-12-05/rusage/``: 3 interleaved `uncoded`/`gc-fr` pairs, default allocator.
``partition-cpu-2026-12-05/malloc/``: 2 pairs, every worker with ``M_MMAP_MAX = 0`` and a 1-GiB
``M_TRIM_THRESHOLD``. Each partition's thread CPU, its user and system parts and its minor page faults
come from ``getrusage(RUSAGE_THREAD)`` around it (``instrument_rusage.patch``). Printed: the means per
scheme and position of the partition in its call, and `gc-fr` over `uncoded` per round.

    .venv/bin/python docs/validation/allocator_check.py      # a second; output in allocator_check.txt
"""

import gzip
import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent / "partition-cpu-2026-12-05"
WARMUP = 10
FIELDS = ["j", "proc", "thread", "wall", "slices", "user", "system", "minflt", "majflt", "nvcsw", "nivcsw"]


def partitions(root: Path) -> pd.DataFrame:
    rows = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        scheme, rnd = d.name.rsplit("-", 1)
        with gzip.open(d / "partitions.jsonl.gz", "rt") as f:
            for line in f:
                r = json.loads(line)
                if r["it"] < WARMUP:
                    continue
                for pos, p in enumerate(r["parts"]):
                    v = dict(zip(FIELDS, p))
                    rows.append({"scheme": scheme, "round": int(rnd), "position": pos + 1,
                                 "thread_ms": 1e3 * v["thread"], "user_ms": 1e3 * v["user"],
                                 "system_ms": 1e3 * v["system"], "minor_faults": v["minflt"]})
    return pd.DataFrame(rows)


def main() -> None:
    pd.set_option("display.width", 200)
    for name, title in (("rusage", "glibc's default allocator (3 pairs)"),
                        ("malloc", "freed memory kept, gcsim/real/allocator.py (2 pairs)")):
        df = partitions(ROOT / name)
        print(f"\n{title}: means per partition")
        cols = ["thread_ms", "user_ms", "system_ms", "minor_faults"]
        print(df.groupby(["scheme", "position"])[cols].mean().round(2).to_string())
        per = df.groupby(["round", "scheme"])[cols].mean().unstack()
        for c in cols[:3]:
            r = per[c]["gc-fr"] / per[c]["uncoded"]
            print(f"   {c}: gc-fr over uncoded per round " + ", ".join(f"{v:.3f}" for v in r)
                  + f"; all partitions {df[df.scheme == 'gc-fr'][c].mean() / df[df.scheme == 'uncoded'][c].mean():.3f}")
        walls = {}
        for d in sorted((ROOT / name).iterdir()):
            if d.is_dir():
                s = pd.read_csv(d / "summary.csv").iloc[0]
                walls.setdefault(str(s["scheme"]), []).append(float(s["mean_s"]))
        print("   mean iteration time per run (s): " + "; ".join(f"{k} " + ", ".join(f"{v:.3f}" for v in vs)
                                                          for k, vs in walls.items()))


if __name__ == "__main__":
    main()
