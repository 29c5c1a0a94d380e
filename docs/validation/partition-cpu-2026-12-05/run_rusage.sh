#!/bin/bash
# 3 interleaved uncoded/gc-fr pairs, each its own gcsim real (own Ray), worker instrumented with instrument_rusage.patch (instrument.patch plus getrusage(RUSAGE_THREAD) per partition: user, system, minor/major faults, context switches)
cd <scratch checkout with the patches applied>
export PYTHONPATH=<that checkout>
OUT=runs/rusage
for round in 1 2 3; do
  if [ $((round % 2)) -eq 1 ]; then order="uncoded gc-fr"; else order="gc-fr uncoded"; fi
  for s in $order; do
    d=$OUT/$s-$round; mkdir -p $d
    GCSIM_DIAG_DIR=$d .venv/bin/gcsim real --scheme $s --scenario scenarios/real_expon.yaml --out $d/run --no-progress > $d/log.txt 2>&1
    echo "$s-$round $(date +%T) rc=$? load=$(cut -d' ' -f1 /proc/loadavg)" >> $OUT/progress.txt
  done
done
