#!/bin/bash
# 2 interleaved uncoded/gc-fr pairs as run_rusage.sh, with malloc_experiment.patch on top: every worker process keeps freed memory (mallopt M_MMAP_MAX 0, M_TRIM_THRESHOLD 1 GiB; what gcsim/real/allocator.py now does)
cd <scratch checkout with the patches applied>
export PYTHONPATH=<that checkout>
OUT=runs/malloc
for round in 1 2; do
  if [ $((round % 2)) -eq 1 ]; then order="uncoded gc-fr"; else order="gc-fr uncoded"; fi
  for s in $order; do
    d=$OUT/$s-$round; mkdir -p $d
    GCSIM_DIAG_DIR=$d .venv/bin/gcsim real --scheme $s --scenario scenarios/real_expon.yaml --out $d/run --no-progress > $d/log.txt 2>&1
    echo "$s-$round $(date +%T) rc=$? load=$(cut -d' ' -f1 /proc/loadavg)" >> $OUT/progress.txt
  done
done
