#!/bin/bash
# How the runs here were made (finding 28): a checkout with instrument.patch applied (each worker appends,
# per call, every partition's process CPU, thread CPU, wall time and time slices to
# $GCSIM_DIAG_DIR/diag-<pid>.jsonl; partitions.jsonl.gz is their concatenation), then two interleaved
# rounds of four schemes under scenarios/real_expon.yaml (200 iterations each, ~75 s per run), machine quiet.
#   git apply docs/validation/partition-cpu-2026-12-05/instrument.patch   # in a scratch checkout
set -e
OUT=${OUT:-runs/partition-cpu}
for round in a b; do
  for s in uncoded gc-fr cce-fr gc-cr; do
    mkdir -p "$OUT/$s-$round"
    GCSIM_DIAG_DIR="$OUT/$s-$round" gcsim real --scheme $s --scenario scenarios/real_expon.yaml \
      --out "$OUT/$s-$round/run" --no-progress > "$OUT/$s-$round/log.txt" 2>&1
  done
done
