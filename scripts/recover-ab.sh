#!/usr/bin/env bash
# Interleaved recovery A/B: each round recovers a fresh copy of one crashed
# database directory with every LABEL=BINARY (and, with THREADS="1 2",
# every recovery thread count), the log read into the page cache first
# (COLD=1: the page cache dropped instead, as root, so the log is read
# from disk), and prints "label threads analysis-s redo-s GB/s".
#   [THREADS="1 2"] [COLD=1] scripts/recover-ab.sh ROUNDS CRASHED_DIR LABEL=BINARY...
# Make CRASHED_DIR by killing a load, e.g.:
#   waypoint bench engine --dir D --records 3000000 --duration 30 &
#   sleep 25; pkill -9 -f "bench engine --dir D"
set -euo pipefail
rounds=$1 src=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for _ in $(seq "$rounds"); do
  for t in ${THREADS:-default}; do
    for spec in "$@"; do
      label=${spec%%=*} bin=${spec#*=}
      rm -rf "$work/db" && cp -a "$src" "$work/db" && sync
      if [ "${COLD:-0}" = 1 ]; then
        echo 3 >/proc/sys/vm/drop_caches
      else
        cat "$work"/db/wal/*/* >/dev/null
      fi
      threads=()
      [ "$t" = default ] || threads=(--threads "$t")
      "$bin" recover "$work/db" --json "${threads[@]}" >"$work/report.json"
      python3 - "$work/report.json" "$label" "$t" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(sys.argv[2], sys.argv[3], f"{r['analysis_seconds']:.3f}", f"{r['redo_seconds']:.3f}",
      f"{r['gb_per_sec']:.3f}")
PY
    done
  done
done
