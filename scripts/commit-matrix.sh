#!/usr/bin/env bash
# The commit-path matrix of docs/decisions/measurements.md: small update transactions
# (4 updates of 100-byte values on 10,000 records) for every commit protocol,
# 1 and 2 workers, without and with 64 commits in flight per worker, and
# with 2 workers on disjoint key ranges (`--disjoint`).
# Build first: cargo build --release -p waypoint-cli
set -euo pipefail
bin="$(dirname "$0")/../target/release/waypoint"
secs=${SECS:-3}
run() { # commit workers in_flight [extra]
  local out
  out=$("$bin" bench updates --records 10000 --duration "$secs" --commit "$1" \
    --workers "$2" --in-flight "$3" "${@:4}" 2>&1)
  local label="$1"
  case " ${*:4} " in *" --disjoint "*) label="$1, disjoint keys";; esac
  case " ${*:4} " in *" --logging none "*) label="log off (\`--logging none\`)";; esac
  echo "$out" | awk -v c="$label" -v w="$2" -v p="$3" '
    /^raw/ {probe=$0}
    /^updates/ {tps=$5; p50=$8; p99=$9}
    /remote-flush fraction/ {rf=$NF}
    END {printf "| %s | %s | %s | %s | %s | %s | %s |\n", c, w, p, tps, p50, p99, rf; print probe > "/dev/stderr"}'
}
echo "| commit | workers | in flight | txn/s | p50 µs | p99 µs | remote-flush fraction |"
echo "|---|---|---|---|---|---|---|"
for c in flush-all rfa group rfa-group; do
  run "$c" 1 1
  run "$c" 2 1
  run "$c" 2 64
done
run rfa-group 1 64
# Each worker on its own share of the keys: disjoint leaves, so RFA needs
# no remote flush while group commit still syncs both partitions.
for c in flush-all group rfa-group; do
  run "$c" 2 64 --disjoint
done
run async 2 1
run async 2 64
run rfa-group 2 1 --logging none
