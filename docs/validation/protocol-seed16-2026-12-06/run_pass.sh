#!/bin/bash
# cross-scheme passes with trace format 4 (Ray's between-call CPU recorded apart, findings 37-38),
# straggler seed 16: both models with the noisy neighbour (a process keeping one core busy at normal
# priority, in its own Ray-free session), scored with --between-calls-cpu in-lags (the default since
# finding 39): a test of that model on a pass made after it was chosen
cd "$(dirname "$0")/../../.."   # the repository root

D=docs/validation/protocol-seed16-2026-12-06
for m in real_default real_expon; do
  .venv/bin/gcsim study $D/scenarios/$m.yaml --protocol cross-scheme --noisy-neighbour --neighbour-session other \
    --runs-root $D/runs-noisy --out $D/noisy_$m > $D/noisy_$m.log 2>&1
  rc=$?
  echo "noisy_$m $(date +%T) rc=$rc load=$(cut -d' ' -f1 /proc/loadavg)" >> $D/progress.txt
done
