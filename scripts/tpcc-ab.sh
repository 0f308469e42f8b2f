#!/usr/bin/env bash
# Interleaved TPC-C A/B: each round runs every LABEL=BINARY once on a fresh
# copy of one loaded database (2 warehouses, all in memory) and prints
# "label txn/s p50-µs p99-µs CPU-µs-per-txn". Machine speed drifts by tens of percent on a
# shared VM, so only rounds that alternate the binaries compare.
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
for _ in $(seq "$rounds"); do
  for spec in "$@"; do
    label=${spec%%=*} bin=${spec#*=}
    rm -rf "$work/run" && cp -r "$work/loaded" "$work/run"
    # shellcheck disable=SC2086 # ARGS is a list of flags
    "$bin" bench tpcc --warehouses 2 --workers "${WORKERS:-2}" \
      --duration "${SECS:-12}" --buffer 4GiB ${ARGS:-} \
      --dir "$work/run" --out "$work/out" >/dev/null
    python3 - "$work/out/summary.json" "$label" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
l = s["latency_us"]["overall"]
print(sys.argv[2], round(s["txn_per_sec"]), l["p50"], l["p99"],
      round(s.get("cpu_us_per_txn", 0), 1))
PY
  done
done
