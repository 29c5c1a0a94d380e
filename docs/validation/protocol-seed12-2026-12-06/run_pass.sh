#!/bin/bash
# a quiet cross-scheme pass with the fixed executor (freed memory kept), straggler seed 12, both models
cd "$(dirname "$0")/../../.."   # the repository root

D=docs/validation/protocol-seed12-2026-12-06
for m in real_expon real_default; do
  .venv/bin/gcsim study $D/scenarios/$m.yaml --protocol cross-scheme --runs-root $D/runs --out $D/$m > $D/$m.log 2>&1
  echo "$m $(date +%T) rc=$? load=$(cut -d' ' -f1 /proc/loadavg)" >> $D/progress.txt
done
