#!/usr/bin/env bash
# The multi-core figures in one command, for a machine with more cores than
# the 2-vCPU VM the benchmarks page was taken on: `waypoint compare scaling`
# and `out-of-memory` at 1, 2, 4, ... workers up to every core, and
# `recovery` with every core as a worker and as a redo/undo thread.
#
# Usage: scripts/scale.sh [WAYPOINT_BINARY] [OUT_DIR]
#   WAYPOINT_BINARY  default target/release/waypoint (cargo build --release -p waypoint-cli)
#   OUT_DIR          default scale-<hostname>-<UTC time>; each experiment writes
#                    OUT_DIR/<experiment>/report.md, results.json and PNGs
# Environment: ROUNDS (default 3), WORKERS (a list such as 1,4,16 instead of
# the powers of two), QUICK=1 (tiny data and one-second runs: a check that
# the script works, not a measurement).
set -euo pipefail
bin=${1:-target/release/waypoint}
out=${2:-scale-$(hostname)-$(date -u +%Y%m%dT%H%MZ)}
if [ ! -x "$bin" ]; then
  echo "scale.sh: no waypoint binary at $bin (cargo build --release -p waypoint-cli)" >&2
  exit 1
fi
cores=$(nproc)
if [ -z "${WORKERS:-}" ]; then
  WORKERS=1
  w=2
  while [ "$w" -lt "$cores" ]; do WORKERS="$WORKERS,$w"; w=$((w * 2)); done
  [ "$cores" -gt 1 ] && WORKERS="$WORKERS,$cores"
fi
flags=(--rounds "${ROUNDS:-3}")
[ "${QUICK:-0}" = 1 ] && flags=(--quick)
mkdir -p "$out"
echo "scale.sh: $cores cores, workers $WORKERS, results in $out"
"$bin" compare scaling --workers "$WORKERS" "${flags[@]}" --out "$out/scaling"
"$bin" compare out-of-memory --workers "$WORKERS" "${flags[@]}" --out "$out/out-of-memory"
"$bin" compare recovery --workers "$cores" "${flags[@]}" --out "$out/recovery"
echo "scale.sh: done; open $out/*/report.md"
