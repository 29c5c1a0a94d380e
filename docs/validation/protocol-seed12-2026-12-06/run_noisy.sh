#!/bin/bash
# the seed-12 bimodal pass again with the noisy neighbour (a process keeping one core busy at normal
# priority, in its own Ray-free session), on the same straggler draws, with the fixed executor
cd "$(dirname "$0")/../../.."   # the repository root

D=docs/validation/protocol-seed12-2026-12-06
m=real_default
.venv/bin/gcsim study $D/scenarios/$m.yaml --protocol cross-scheme --noisy-neighbour --neighbour-session other \
  --runs-root $D/runs-noisy --out $D/noisy_$m > $D/noisy_$m.log 2>&1
echo "noisy_$m $(date +%T) rc=$? load=$(cut -d' ' -f1 /proc/loadavg)" >> $D/progress.txt
