#!/bin/bash
# cross-scheme passes with trace format 4 (Ray's between-call CPU recorded apart, findings 37-38),
# straggler seed 15: both models with the noisy neighbour (a process keeping one core busy at normal
# priority, in its own Ray-free session), then both models quiet, on the same draws; these test the
# between-call CPU model of finding 38 on passes it was not found on
cd "$(dirname "$0")/../../.."   # the repository root

D=docs/validation/protocol-seed15-2026-12-06
for m in real_default real_expon; do
  .venv/bin/gcsim study $D/scenarios/$m.yaml --protocol cross-scheme --noisy-neighbour --neighbour-session other \
    --runs-root $D/runs-noisy --out $D/noisy_$m > $D/noisy_$m.log 2>&1
  rc=$?
  echo "noisy_$m $(date +%T) rc=$rc load=$(cut -d' ' -f1 /proc/loadavg)" >> $D/progress.txt
done
for m in real_expon real_default; do
  .venv/bin/gcsim study $D/scenarios/$m.yaml --protocol cross-scheme --runs-root $D/runs --out $D/$m > $D/$m.log 2>&1
  rc=$?
  echo "$m $(date +%T) rc=$rc load=$(cut -d' ' -f1 /proc/loadavg)" >> $D/progress.txt
done
