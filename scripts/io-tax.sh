#!/usr/bin/env bash
# What this machine charges for log-like I/O that no engine code does:
# rounds of 2-worker in-memory TPC-C with `--logging none`, alone and beside
# scripts/io-sidecar.py (two threads writing 32 KiB O_DIRECT blocks and
# syncing every 2 ms, about the durable runs' sync rate), alternating.
# Prints per run "label txn/s CPU-µs-per-txn steal-jiffies", then the
# median ratio of the runs beside the sidecar to the runs alone.
#   scripts/io-tax.sh ROUNDS [extra io-sidecar.py flags, e.g. --no-sync]
#   env: SECS (12)
# Build first: cargo build --release -p waypoint-cli
set -euo pipefail
rounds=$1
shift
here=$(dirname "$0")
bin="$here/../target/release/waypoint"
secs=${SECS:-12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" bench tpcc --warehouses 2 --workers 2 --duration 1 --warmup 0 \
  --dir "$work/loaded" --out "$work/load" >/dev/null
steal() { awk '/^cpu / {print $9}' /proc/stat; }
for round in $(seq "$rounds"); do
  for label in alone sidecar; do
    rm -rf "$work/run" && cp -r "$work/loaded" "$work/run"
    side=
    if [ "$label" = sidecar ]; then
      python3 "$here/io-sidecar.py" "$work" $((secs + 5)) "$@" >/dev/null &
      side=$!
      sleep 1
    fi
    before=$(steal)
    "$bin" bench tpcc --warehouses 2 --workers 2 --duration "$secs" \
      --buffer 4GiB --logging none --dir "$work/run" --out "$work/out" >/dev/null
    after=$(steal)
    [ -n "$side" ] && wait "$side"
    python3 - "$work/out/summary.json" "$label" $((after - before)) <<'PY' | tee -a "$work/rows"
import json, sys
s = json.load(open(sys.argv[1]))
print(sys.argv[2], round(s["txn_per_sec"]), round(s["cpu_us_per_txn"], 1), sys.argv[3])
PY
  done
done
python3 - "$work/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
alone = [int(r[1]) for r in rows if r[0] == "alone"]
side = [int(r[1]) for r in rows if r[0] == "sidecar"]
ratios = [s / a for s, a in zip(side, alone)]
print(f"beside the sidecar / alone: median {statistics.median(ratios):.3f}"
      f" ({min(ratios):.3f}..{max(ratios):.3f}) over {len(ratios)} rounds")
PY
