#!/bin/bash
# 8 interleaved rounds of uncoded / gc-fr inside ONE long-lived Ray (ray start, 127.0.0.1:46295), as a
# study's runs share one Ray session; instrumented worker (<scratch checkout with instrument.patch>); the workers write to the Ray's
# GCSIM_DIAG_DIR, moved into each run's folder after it
cd <scratch checkout with instrument.patch>
export PYTHONPATH=<scratch checkout with instrument.patch> RAY_AUTH_MODE=token
OUT=runs/partition-cpu-one-ray
for round in 1 2 3 4 5 6 7 8; do
  if [ $((round % 2)) -eq 1 ]; then order="uncoded gc-fr"; else order="gc-fr uncoded"; fi
  for s in $order; do
    d=$OUT/$s-$round; mkdir -p $d
    .venv/bin/gcsim real --scheme $s --scenario scenarios/real_expon.yaml --address 127.0.0.1:46295 --out $d/run --no-progress > $d/log.txt 2>&1
    rc=$?
    sleep 2; mv $OUT/diag-*.jsonl $d/ 2>/dev/null
    echo "$s-$round $(date +%T) rc=$rc load=$(cut -d' ' -f1 /proc/loadavg)" >> $OUT/progress.txt
  done
done
