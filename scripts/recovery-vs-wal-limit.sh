#!/usr/bin/env bash
# Recovery time after a kill -9 at steady state, for one WAL limit:
#   scripts/recovery-vs-wal-limit.sh LIMIT KILL_AFTER_SECS
# Runs YCSB-A (200,000 records, continuous checkpoints, WAL limit LIMIT) on
# a fresh directory, kills it with SIGKILL after KILL_AFTER_SECS, prints the
# bytes of log on disk and `waypoint recover --json` (per-phase times).
# Build first: cargo build --release -p waypoint-cli
set -euo pipefail
limit=$1
after=$2
bin="$(dirname "$0")/../target/release/waypoint"
dir=$(mktemp -d)/db
"$bin" bench ycsb --preset a --records 200000 --duration 3600 \
  --wal-limit "$limit" --checkpoint continuous --dir "$dir" >/dev/null 2>&1 &
pid=$!
sleep "$after"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
echo "log on disk: $(du -sb "$dir/wal" | cut -f1) bytes"
"$bin" recover "$dir" --json
rm -rf "$(dirname "$dir")"
