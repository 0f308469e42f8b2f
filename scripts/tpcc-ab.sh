#!/usr/bin/env bash
# Interleaved TPC-C A/B: each round runs every LABEL=BINARY once on a fresh
# copy of one loaded database (2 warehouses, all in memory) and prints
# "label txn/s p50-µs p99-µs CPU-µs-per-txn abort-%" (odd rounds in the order
# given, even rounds reversed), then per label the mean and
# the median of its per-round ratio to the first label. Machine speed drifts
# by tens of percent on a shared VM, so only rounds that alternate the
# binaries compare.
#   scripts/tpcc-ab.sh ROUNDS LABEL=BINARY...
#   env: WORKERS (2), SECS (12), ARGS (extra `bench tpcc` flags, e.g.
#        "--logging none" or "--sync-interval 2000")
set -euo pipefail
rounds=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
first=${1#*=}
"$first" bench tpcc --warehouses 2 --workers 2 --duration 1 --warmup 0 \
  --dir "$work/loaded" --out "$work/load" >/dev/null
specs=("$@")
reversed=()
for ((i = ${#specs[@]} - 1; i >= 0; i--)); do reversed+=("${specs[i]}"); done
for round in $(seq "$rounds"); do
  # Odd rounds run the labels in the order given, even rounds in reverse,
  # so that a machine slowing down or speeding up over a round does not
  # always favour the same position.
  order=("${specs[@]}")
  ((round % 2 == 0)) && order=("${reversed[@]}")
  for spec in "${order[@]}"; do
    label=${spec%%=*} bin=${spec#*=}
    rm -rf "$work/run" && cp -r "$work/loaded" "$work/run"
    # shellcheck disable=SC2086 # ARGS is a list of flags
    "$bin" bench tpcc --warehouses 2 --workers "${WORKERS:-2}" \
      --duration "${SECS:-12}" --buffer 4GiB ${ARGS:-} \
      --dir "$work/run" --out "$work/out" >/dev/null
    python3 - "$work/out/summary.json" "$label" <<'PY' | tee -a "$work/rows"
import json, sys
s = json.load(open(sys.argv[1]))
l = s["latency_us"]["overall"]
aborts = s["aborts"] / max(1, s["aborts"] + s["committed"])
print(sys.argv[2], round(s["txn_per_sec"]), l["p50"], l["p99"],
      round(s.get("cpu_us_per_txn", 0), 1), f"{100 * aborts:.2f}%")
PY
  done
done
"$(dirname "$0")/ab-summary.py" "$work/rows" "${1%%=*}"
