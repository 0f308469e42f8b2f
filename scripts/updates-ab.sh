#!/usr/bin/env bash
# Interleaved A/B of the commit path: `bench updates` (small update
# transactions, one session) with isolated commits (`--in-flight 1`, each
# commit waits for its sync) for each LABEL=BINARY, ROUNDS times (odd
# rounds in the order given, even rounds reversed), then per label the mean
# and the median of its per-round ratio to the first label.
#   scripts/updates-ab.sh ROUNDS LABEL=BINARY...
#   env: SECS (8), ARGS (extra `bench updates` flags)
set -euo pipefail
rounds=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
specs=("$@")
reversed=()
for ((i = ${#specs[@]} - 1; i >= 0; i--)); do reversed+=("${specs[i]}"); done
for round in $(seq "$rounds"); do
  order=("${specs[@]}")
  ((round % 2 == 0)) && order=("${reversed[@]}")
  for spec in "${order[@]}"; do
    label=${spec%%=*} bin=${spec#*=}
    rm -rf "$work/db"
    # shellcheck disable=SC2086 # ARGS is a list of flags
    "$bin" bench updates --records 10000 --workers 1 --in-flight 1 \
      --duration "${SECS:-8}" ${ARGS:-} --dir "$work/db" --out "$work/out" >/dev/null
    python3 - "$work/out/summary.json" "$label" <<'PY' | tee -a "$work/rows"
import json, sys
s = json.load(open(sys.argv[1]))
run = s["run"]
print(sys.argv[2], round(run["txn_per_sec"]), run["latency_us"]["p50"], run["latency_us"]["p99"])
PY
  done
done
"$(dirname "$0")/ab-summary.py" "$work/rows" "${1%%=*}"
