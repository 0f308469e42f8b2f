#!/usr/bin/env bash
# Segment preallocation off and on, same binary, runs interleaved
# (docs/decisions/measurements.md, "2026-11-22: segment preallocation"): the commit path
# (`bench updates`) for three configurations and 1-worker TPC-C, ROUNDS times.
# Build first: cargo build --release -p waypoint-cli
set -euo pipefail
bin="$(dirname "$0")/../target/release/waypoint"
for round in $(seq "${ROUNDS:-3}"); do
  for c in "flush-all 1 1" "rfa-group 1 64" "rfa-group 2 64"; do
    set -- $c
    for pre in false true; do
      rm -rf /tmp/preallocate-ab-db
      printf "%s prealloc=%s updates %s: " "$round" "$pre" "$c"
      "$bin" bench updates --records 10000 --duration 5 --commit "$1" --workers "$2" \
        --in-flight "$3" --wal-preallocate "$pre" --dir /tmp/preallocate-ab-db 2>&1 |
        awk '/^updates/{printf "%s txn/s p50 %s p99 %s p999 %s\n", $5, $8, $9, $10}'
    done
  done
  for pre in false true; do
    rm -rf /tmp/preallocate-ab-db
    printf "%s prealloc=%s tpcc 1 worker: " "$round" "$pre"
    "$bin" bench tpcc --warehouses 1 --workers 1 --duration 12 --wal-preallocate "$pre" \
      --dir /tmp/preallocate-ab-db 2>&1 |
      awk '/^total/{printf "%s txn/s p50 %s p99 %s p999 %s ", $3, $5, $6, $7} /CPU steal/{print "steal", $(NF-1), $NF}'
  done
done
rm -rf /tmp/preallocate-ab-db
