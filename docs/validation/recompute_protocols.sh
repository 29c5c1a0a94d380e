#!/usr/bin/env bash
# Recompute every committed cross-scheme protocol pass from its committed traces with the current code
# (no run is repeated: `gcsim study` finds the complete runs under --runs-root and only re-compares).
# Each pass's protocol.md / protocol.csv / protocol_summary.csv is replaced; line 3 of protocol.md says
# when and why it was recomputed.  Usage, from the repository root:
#     docs/validation/recompute_protocols.sh "<why: which change of the code>"
# About 45-150 s of CPU per pass on a 2-vCPU VM (53 passes, ~80 min). Do not run it beside real runs or timed tests.
# SHARD=k/N recomputes only the passes whose index in the list is k modulo N (two halves on two cores:
# SHARD=0/2 ... & SHARD=1/2 ...). ONLY=<regex> recomputes only the passes whose out dir matches it (e.g.
# ONLY='seed1[4-6]-' for the passes with trace format 4, the only ones a change of the between-call CPU
# model moves).
set -euo pipefail
why=${1:?say why the passes are recomputed}
GCSIM=${GCSIM:-.venv/bin/gcsim}
D=docs/validation
# out dir | scenario (empty: both models from the runs) | runs root | extra options
passes=(
  "$D/protocol||$D/protocol/runs|"
  "$D/protocol-2026-12-02||$D/protocol-2026-12-02/runs|"
  "$D/protocol-2026-12-02b||$D/protocol-2026-12-02b/runs|"
  "$D/protocol-noisy||$D/protocol-noisy/runs|--noisy-neighbour"
  "$D/protocol-noisy-2026-12-02b||$D/protocol-noisy-2026-12-02b/runs|--noisy-neighbour --neighbour-session other"
  "$D/protocol-noisy-other-2026-12-02||$D/protocol-noisy-other-2026-12-02/runs|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed2-2026-12-03/real_default|$D/protocol-seed2-2026-12-03/scenarios/real_default.yaml|$D/protocol-seed2-2026-12-03/runs|"
  "$D/protocol-seed2-2026-12-03/real_expon|$D/protocol-seed2-2026-12-03/scenarios/real_expon.yaml|$D/protocol-seed2-2026-12-03/runs|"
  "$D/protocol-steal-2026-12-03/real_default|$D/protocol-steal-2026-12-03/scenarios/real_default.yaml|$D/protocol-steal-2026-12-03/runs|"
  "$D/protocol-steal-2026-12-03/real_expon|$D/protocol-steal-2026-12-03/scenarios/real_expon.yaml|$D/protocol-steal-2026-12-03/runs|"
  "$D/protocol-steal-2026-12-03/noisy_real_default|$D/protocol-steal-2026-12-03/scenarios/real_default.yaml|$D/protocol-steal-2026-12-03/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-steal-2026-12-03/noisy_real_expon|$D/protocol-steal-2026-12-03/scenarios/real_expon.yaml|$D/protocol-steal-2026-12-03/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-neighbour-2026-12-03/noisy_real_expon|$D/protocol-neighbour-2026-12-03/scenarios/real_expon.yaml|$D/protocol-neighbour-2026-12-03/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-neighbour-2026-12-03/noisy_real_default|$D/protocol-neighbour-2026-12-03/scenarios/real_default.yaml|$D/protocol-neighbour-2026-12-03/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-neighbour-2026-12-03/real_expon|$D/protocol-neighbour-2026-12-03/scenarios/real_expon.yaml|$D/protocol-neighbour-2026-12-03/runs|"
  "$D/protocol-seed3-2026-12-03/real_expon|$D/protocol-seed3-2026-12-03/scenarios/real_expon.yaml|$D/protocol-seed3-2026-12-03/runs|"
  "$D/protocol-seed3-2026-12-03/real_default|$D/protocol-seed3-2026-12-03/scenarios/real_default.yaml|$D/protocol-seed3-2026-12-03/runs|"
  "$D/protocol-seed4-2026-12-04/real_expon|$D/protocol-seed4-2026-12-04/scenarios/real_expon.yaml|$D/protocol-seed4-2026-12-04/runs|"
  "$D/protocol-seed4-2026-12-04/real_default|$D/protocol-seed4-2026-12-04/scenarios/real_default.yaml|$D/protocol-seed4-2026-12-04/runs|"
  "$D/protocol-seed5-2026-12-04/real_expon|$D/protocol-seed5-2026-12-04/scenarios/real_expon.yaml|$D/protocol-seed5-2026-12-04/runs|"
  "$D/protocol-seed5-2026-12-04/real_default|$D/protocol-seed5-2026-12-04/scenarios/real_default.yaml|$D/protocol-seed5-2026-12-04/runs|"
  "$D/protocol-seed6-2026-12-04/real_expon|$D/protocol-seed6-2026-12-04/scenarios/real_expon.yaml|$D/protocol-seed6-2026-12-04/runs|"
  "$D/protocol-seed6-2026-12-04/real_default|$D/protocol-seed6-2026-12-04/scenarios/real_default.yaml|$D/protocol-seed6-2026-12-04/runs|"
  "$D/protocol-seed6-2026-12-04/noisy_real_expon|$D/protocol-seed6-2026-12-04/scenarios/real_expon.yaml|$D/protocol-seed6-2026-12-04/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed6-2026-12-04/noisy_real_default|$D/protocol-seed6-2026-12-04/scenarios/real_default.yaml|$D/protocol-seed6-2026-12-04/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-s2-2026-12-05/real_expon_s2|$D/protocol-s2-2026-12-05/scenarios/real_expon_s2.yaml|$D/protocol-s2-2026-12-05/runs|"
  "$D/protocol-seed8-2026-12-05/real_expon|$D/protocol-seed8-2026-12-05/scenarios/real_expon.yaml|$D/protocol-seed8-2026-12-05/runs|"
  "$D/protocol-seed8-2026-12-05/real_default|$D/protocol-seed8-2026-12-05/scenarios/real_default.yaml|$D/protocol-seed8-2026-12-05/runs|"
  "$D/protocol-s2-2026-12-05/real_default_s2|$D/protocol-s2-2026-12-05/scenarios/real_default_s2.yaml|$D/protocol-s2-2026-12-05/runs|"
  "$D/protocol-seed9-2026-12-05/noisy_real_expon|$D/protocol-seed9-2026-12-05/scenarios/real_expon.yaml|$D/protocol-seed9-2026-12-05/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed9-2026-12-05/noisy_real_default|$D/protocol-seed9-2026-12-05/scenarios/real_default.yaml|$D/protocol-seed9-2026-12-05/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed10-2026-12-05/real_expon|$D/protocol-seed10-2026-12-05/scenarios/real_expon.yaml|$D/protocol-seed10-2026-12-05/runs|"
  "$D/protocol-seed10-2026-12-05/real_default|$D/protocol-seed10-2026-12-05/scenarios/real_default.yaml|$D/protocol-seed10-2026-12-05/runs|"
  "$D/protocol-seed11-2026-12-05/real_default|$D/protocol-seed11-2026-12-05/scenarios/real_default.yaml|$D/protocol-seed11-2026-12-05/runs|"
  "$D/protocol-seed11-2026-12-05/real_expon|$D/protocol-seed11-2026-12-05/scenarios/real_expon.yaml|$D/protocol-seed11-2026-12-05/runs|"
  "$D/protocol-seed11-2026-12-05/noisy_real_expon|$D/protocol-seed11-2026-12-05/scenarios/real_expon.yaml|$D/protocol-seed11-2026-12-05/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed11-2026-12-05/noisy_real_default|$D/protocol-seed11-2026-12-05/scenarios/real_default.yaml|$D/protocol-seed11-2026-12-05/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed12-2026-12-06/real_expon|$D/protocol-seed12-2026-12-06/scenarios/real_expon.yaml|$D/protocol-seed12-2026-12-06/runs|"
  "$D/protocol-seed12-2026-12-06/real_default|$D/protocol-seed12-2026-12-06/scenarios/real_default.yaml|$D/protocol-seed12-2026-12-06/runs|"
  "$D/protocol-seed12-2026-12-06/noisy_real_default|$D/protocol-seed12-2026-12-06/scenarios/real_default.yaml|$D/protocol-seed12-2026-12-06/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed13-2026-12-06/noisy_real_expon|$D/protocol-seed13-2026-12-06/scenarios/real_expon.yaml|$D/protocol-seed13-2026-12-06/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed13-2026-12-06/noisy_real_default|$D/protocol-seed13-2026-12-06/scenarios/real_default.yaml|$D/protocol-seed13-2026-12-06/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed13-2026-12-06/real_default|$D/protocol-seed13-2026-12-06/scenarios/real_default.yaml|$D/protocol-seed13-2026-12-06/runs|"
  "$D/protocol-seed13-2026-12-06/real_expon|$D/protocol-seed13-2026-12-06/scenarios/real_expon.yaml|$D/protocol-seed13-2026-12-06/runs|"
  "$D/protocol-seed14-2026-12-06/noisy_real_expon|$D/protocol-seed14-2026-12-06/scenarios/real_expon.yaml|$D/protocol-seed14-2026-12-06/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed14-2026-12-06/noisy_real_default|$D/protocol-seed14-2026-12-06/scenarios/real_default.yaml|$D/protocol-seed14-2026-12-06/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed14-2026-12-06/real_expon|$D/protocol-seed14-2026-12-06/scenarios/real_expon.yaml|$D/protocol-seed14-2026-12-06/runs|"
  "$D/protocol-seed15-2026-12-06/noisy_real_default|$D/protocol-seed15-2026-12-06/scenarios/real_default.yaml|$D/protocol-seed15-2026-12-06/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed15-2026-12-06/noisy_real_expon|$D/protocol-seed15-2026-12-06/scenarios/real_expon.yaml|$D/protocol-seed15-2026-12-06/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed15-2026-12-06/real_expon|$D/protocol-seed15-2026-12-06/scenarios/real_expon.yaml|$D/protocol-seed15-2026-12-06/runs|"
  "$D/protocol-seed15-2026-12-06/real_default|$D/protocol-seed15-2026-12-06/scenarios/real_default.yaml|$D/protocol-seed15-2026-12-06/runs|"
  "$D/protocol-seed16-2026-12-06/noisy_real_default|$D/protocol-seed16-2026-12-06/scenarios/real_default.yaml|$D/protocol-seed16-2026-12-06/runs-noisy|--noisy-neighbour --neighbour-session other"
  "$D/protocol-seed16-2026-12-06/noisy_real_expon|$D/protocol-seed16-2026-12-06/scenarios/real_expon.yaml|$D/protocol-seed16-2026-12-06/runs-noisy|--noisy-neighbour --neighbour-session other"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shard=${SHARD:-0/1}
[[ $shard =~ ^[0-9]+/[1-9][0-9]*$ ]] || { echo "SHARD: expected k/N with N >= 1, got '$shard'" >&2; exit 2; }
k=${shard%/*} n=${shard#*/}
i=-1
for p in "${passes[@]}"; do
  i=$((i + 1))
  (( i % n == k )) || continue
  IFS='|' read -r out scenario runs extra <<<"$p"
  [[ -z ${ONLY:-} || $out =~ $ONLY ]] || continue
  # a missing traces folder would make `gcsim study` start real runs instead of recomputing
  [[ -d $runs && -f $out/protocol.md ]] || { echo "no committed pass at $out (traces $runs)" >&2; exit 1; }
  echo "== $out" >&2
  # shellcheck disable=SC2086
  $GCSIM study $scenario --out "$tmp/out" --runs-root "$runs" --protocol cross-scheme $extra >"$tmp/log" 2>&1 \
    || { cat "$tmp/log" >&2; exit 1; }
  cmd="gcsim study ${scenario:+$scenario }--out OUT --runs-root $runs --protocol cross-scheme${extra:+ $extra}"
  # line 3 names the command that made the traces: "Traces made by `...`" once recomputed, "Command: `...`" as
  # `gcsim study` first wrote it
  made=$(sed -n 3p "$out/protocol.md" | grep -o 'Traces made by `[^`]*`' \
         || sed -n 3p "$out/protocol.md" | grep -o '^Command: `[^`]*`' | sed 's/^Command:/Traces made by/' || true)
  line="Recomputed $(date -u +%Y-%m-%d) from the committed traces with the code of that day ($why): \`$cmd\`. $made.  "
  awk -v line="$line" 'NR == 3 { print line; next } { print }' "$tmp/out/protocol.md" >"$out/protocol.md"
  cp "$tmp/out/protocol.csv" "$tmp/out/protocol_summary.csv" "$out/"
  rm -rf "$tmp/out"
done
