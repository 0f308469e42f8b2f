#!/usr/bin/env bash
# Interleaved recovery A/B: each round recovers a fresh copy of one crashed
# database directory with every LABEL=BINARY, the log read into the page
# cache first, and prints "label analysis-s redo-s GB/s".
#   scripts/recover-ab.sh ROUNDS CRASHED_DIR LABEL=BINARY...
# Make CRASHED_DIR by killing a load, e.g.:
#   waypoint bench engine --dir D --records 3000000 --duration 30 &
#   sleep 25; pkill -9 -f "bench engine --dir D"
set -euo pipefail
rounds=$1 src=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for _ in $(seq "$rounds"); do
  for spec in "$@"; do
    label=${spec%%=*} bin=${spec#*=}
    rm -rf "$work/db" && cp -a "$src" "$work/db" && sync
    cat "$work"/db/wal/*/* >/dev/null
    "$bin" recover "$work/db" --json >"$work/report.json"
    python3 - "$work/report.json" "$label" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(sys.argv[2], f"{r['analysis_seconds']:.3f}", f"{r['redo_seconds']:.3f}",
      f"{r['gb_per_sec']:.3f}")
PY
  done
done
