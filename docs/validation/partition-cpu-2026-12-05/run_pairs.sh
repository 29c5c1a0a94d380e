#!/bin/bash
# 8 interleaved rounds of uncoded / gc-fr (order alternating per round), instrumented worker (<scratch checkout with instrument.patch>)
cd <scratch checkout with instrument.patch>
export PYTHONPATH=<scratch checkout with instrument.patch>
OUT=runs/partition-cpu-pairs
mkdir -p $OUT
for round in 1 2 3 4 5 6 7 8; do
  if [ $((round % 2)) -eq 1 ]; then order="uncoded gc-fr"; else order="gc-fr uncoded"; fi
  for s in $order; do
    d=$OUT/$s-$round; mkdir -p $d
    GCSIM_DIAG_DIR=$d .venv/bin/gcsim real --scheme $s --scenario scenarios/real_expon.yaml --out $d/run --no-progress > $d/log.txt 2>&1
    echo "$s-$round $(date +%T) rc=$? load=$(cut -d' ' -f1 /proc/loadavg)" >> $OUT/progress.txt
  done
done
