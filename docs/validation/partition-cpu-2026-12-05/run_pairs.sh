#!/bin/bash
# Interleaved rounds of uncoded / gc-fr (order alternating per round), each run its own `gcsim real` (own Ray),
# in a scratch checkout with an instrumented worker; each worker appends its partitions to $GCSIM_DIAG_DIR.
#   finding 28 (pairs/):  instrument.patch;                                   OUT=runs/partition-cpu-pairs ROUNDS=8 (the defaults)
#   finding 34 (rusage/): instrument_rusage.patch (adds getrusage per partition); OUT=runs/rusage ROUNDS=3
#   finding 34 (malloc/): instrument_rusage.patch + malloc_experiment.patch;   OUT=runs/malloc ROUNDS=2
cd "${CHECKOUT:?set CHECKOUT to the scratch checkout with the patches applied}"
export PYTHONPATH=$CHECKOUT
OUT=${OUT:-runs/partition-cpu-pairs}
ROUNDS=${ROUNDS:-8}
mkdir -p $OUT
for round in $(seq 1 $ROUNDS); do
  if [ $((round % 2)) -eq 1 ]; then order="uncoded gc-fr"; else order="gc-fr uncoded"; fi
  for s in $order; do
    d=$OUT/$s-$round; mkdir -p $d
    GCSIM_DIAG_DIR=$d .venv/bin/gcsim real --scheme $s --scenario scenarios/real_expon.yaml --out $d/run --no-progress > $d/log.txt 2>&1
    echo "$s-$round $(date +%T) rc=$? load=$(cut -d' ' -f1 /proc/loadavg)" >> $OUT/progress.txt
  done
done
