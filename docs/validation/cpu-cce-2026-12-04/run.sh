#!/usr/bin/env bash
# Interleaved repeats of uncoded, gc-fr, cce-fr and cce-cr (docs/validation/README.md, finding 21):
# does CCE's computation load ((s+m)/n = 3 partitions per worker here, GC 2, uncoded 1) cost CPU per
# partition that an uncoded run cannot show? Four rounds, each in its own shuffled order (seeded), the
# same scenario and straggler draws (seed 1) in every run. Run from the repository root:
#     docs/validation/cpu-cce-2026-12-04/run.sh [DATA_DIR]
set -euo pipefail
HERE=docs/validation/cpu-cce-2026-12-04
DATA=${1:-data/cifar10}
LOG=$HERE/log.txt
mkdir -p $HERE/runs
order=$(python3 - <<'PY'
import random
rng = random.Random(20261204)
for r in range(1, 5):
    s = ["uncoded", "gc-fr", "cce-fr", "cce-cr"]
    rng.shuffle(s)
    for x in s:
        print(f"{r}:{x}")
PY
)
for item in $order; do
  r=${item%%:*}; s=${item#*:}
  echo "$(date -u +%H:%M:%S) $(cat /proc/loadavg) start $s $r" >> $LOG
  .venv/bin/gcsim real --scheme "$s" --scenario scenarios/real_expon.yaml --iterations 100 --eval-every 1000 \
      --data-dir "$DATA" --out "$HERE/runs/r$r-$s" --no-progress > "$HERE/runs/r$r-$s.out" 2>&1 \
    && rc=0 || rc=$?
  echo "$(date -u +%H:%M:%S) $(cat /proc/loadavg) end $s $r rc=$rc" >> $LOG
done
