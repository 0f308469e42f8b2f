#!/usr/bin/env bash
# Two builds of waypoint A/B, runs interleaved (this VM changes speed within
# minutes, so only interleaved pairs compare): the commit path
# (`bench updates`, with the commit/raw-sync ratio) for isolated and
# pipelined commits, and TPC-C with 1 and 2 workers, ROUNDS times.
# Usage: scripts/binary-ab.sh OLD_BINARY NEW_BINARY
# (e.g. an older commit built in a worktree:
#  git worktree add /tmp/wt-old <sha> && (cd /tmp/wt-old &&
#  CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p waypoint-cli))
set -euo pipefail
old=$1 new=$2
db=/tmp/binary-ab-db
for round in $(seq "${ROUNDS:-3}"); do
  for c in "flush-all 1 1" "rfa-group 1 1" "rfa-group 1 64" "rfa-group 2 64 --disjoint"; do
    set -- $c
    for which in old new; do
      bin=$old; [ "$which" = new ] && bin=$new
      rm -rf "$db"
      printf "%s %s updates %s: " "$round" "$which" "$c"
      "$bin" bench updates --records 10000 --duration 5 --commit "$1" --workers "$2" \
        --in-flight "$3" "${@:4}" --dir "$db" 2>&1 |
        awk '/^updates/{printf "%s txn/s p50 %s p99 %s p999 %s ", $5, $8, $9, $10}
             /commit latency/{printf "| %s %s %s %s", $7, $8, $9, $10} END {print ""}'
    done
  done
  for c in "1 1" "1 32" "2 32"; do
    set -- $c
    for which in old new; do
      bin=$old; [ "$which" = new ] && bin=$new
      rm -rf "$db"
      printf "%s %s tpcc %s workers, in flight %s: " "$round" "$which" "$1" "$2"
      "$bin" bench tpcc --warehouses "$1" --workers "$1" --duration 10 --in-flight "$2" \
        --dir "$db" 2>&1 |
        awk '/^total/{printf "%s txn/s p50 %s p99 %s p999 %s ", $3, $5, $6, $7} /CPU steal/{printf "steal %s %s", $(NF-1), $NF} END {print ""}'
    done
  done
done
rm -rf "$db"
