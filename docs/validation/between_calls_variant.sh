#!/usr/bin/env bash
# Finding 39: every committed pass with trace format 4 (Ray's between-call CPU recorded apart) compared
# again from its committed traces with the other model of that CPU (`--between-calls-cpu`), written under
# docs/validation/between-calls-variant/<pass>/<model>/ so the committed protocol outputs stay as they are.
#     docs/validation/between_calls_variant.sh in-lags      # or on-path; ~1-2 min of CPU per model-pass
# Then docs/validation/between_calls_scorecard.py sets both side by side. Do not run it beside real runs.
set -euo pipefail
model=${1:?the --between-calls-cpu model to compare with: in-lags or on-path}
GCSIM=${GCSIM:-.venv/bin/gcsim}
D=docs/validation
V=$D/between-calls-variant
passes=()
for p in $D/protocol-seed1[4-9]-*/ $D/protocol-seed[2-9][0-9]-*/; do
  [[ -d $p ]] || continue
  p=${p%/}
  for runs in runs runs-noisy; do
    for m in real_default real_expon; do
      [[ -d $p/$runs/$m && -f $p/$([[ $runs == runs-noisy ]] && echo noisy_)$m/protocol.md ]] || continue
      passes+=("$p|$runs|$m")
    done
  done
done
for entry in "${passes[@]}"; do
  IFS='|' read -r p runs m <<<"$entry"
  extra=""
  name=$m
  if [[ $runs == runs-noisy ]]; then extra="--noisy-neighbour --neighbour-session other"; name=noisy_$m; fi
  out=$V/$(basename "$p")/$name
  echo "== $out" >&2
  rm -rf "$out"
  mkdir -p "$(dirname "$out")"
  # shellcheck disable=SC2086
  $GCSIM study "$p/scenarios/$m.yaml" --out "$out" --runs-root "$p/$runs" --protocol cross-scheme $extra \
    --between-calls-cpu "$model" > "$out.log" 2>&1 || { cat "$out.log" >&2; exit 1; }
  rm -f "$out.log"
done
