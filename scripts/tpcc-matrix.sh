#!/usr/bin/env bash
# The TPC-C table of docs/decisions/measurements.md (issue 5's targets): txn/s with 1
# and 2 workers, `--logging none` against full durability (per-worker logs,
# rfa-group, continuous checkpoints), with all data in memory and with a
# buffer pool of 40% of the data, all from one loaded copy.
#   scripts/tpcc-matrix.sh [WAREHOUSES]     (SECS=20 per run by default)
# Build first: cargo build --release -p waypoint-cli
set -euo pipefail
bin="$(dirname "$0")/../target/release/waypoint"
warehouses=${1:-2}
secs=${SECS:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One load, closed cleanly; every run starts from a copy of it.
"$bin" bench tpcc --warehouses "$warehouses" --workers 2 --duration 1 \
  --warmup 0 --dir "$work/loaded" --out "$work/load" >/dev/null
data=$(du -sb "$work/loaded" | cut -f1)
buffer40=$((data * 40 / 100))
echo "loaded $warehouses warehouses: $((data / 1048576)) MiB on disk; 40% buffer = $((buffer40 / 1048576)) MiB"
echo
echo "| logging | buffer | workers | txn/s | new-order/s | p50 µs | p99 µs | log B/txn | remote-flush fraction | MiB read |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for buffer in 4GiB "$buffer40"; do
  for workers in 1 2; do
    for logging in none per-worker; do
      rm -rf "$work/run" && cp -r "$work/loaded" "$work/run"
      "$bin" bench tpcc --warehouses "$warehouses" --workers "$workers" \
        --duration "$secs" --buffer "$buffer" --logging "$logging" \
        --dir "$work/run" --out "$work/out" >/dev/null
      python3 - "$work/out/summary.json" "$logging" "$buffer" "$workers" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
no = next(t for t in s["types"] if t["name"] == "new_order")
lat = s["latency_us"]["overall"]
buf = sys.argv[3]
buf = buf if not buf.isdigit() else f"{int(buf) // 1048576} MiB (40%)"
print(f"| {sys.argv[2]} | {buf} | {sys.argv[4]} | {s['txn_per_sec']:,.0f} | {no['txn_per_sec']:,.0f} "
      f"| {lat['p50']:,} | {lat['p99']:,} | {s['wal_bytes_per_txn']:,.0f} "
      f"| {s['remote_flush_fraction']:.3f} | {s['read_bytes'] / 1048576:,.0f} |")
EOF
    done
  done
done
