#!/usr/bin/env bash
# Issue 28's matrix: TPC-C (4 warehouses) and YCSB-A (1M records x 100 B,
# zipf 0.99, one operation per transaction), in memory (4 GiB pool), under
# the per-worker WAL, the central logs (aries, aether) and no logging, at
# 1, 2, 4 and 8 workers, in interleaved rounds (reverse order every other
# round). Prints a markdown table per workload: txn/s per round and median,
# the ratio to per-worker, CPU µs and log-latch wait µs per transaction,
# Aether's mean consolidation group, commit p99 and syncs per second.
#
# Usage: scripts/central-matrix.sh [WAYPOINT_BINARY] [OUT_DIR]
# Environment: ROUNDS (default 2), SECS (default 10), WORKERS (default "1 2 4 8").
set -euo pipefail
bin=${1:-target/release/waypoint}
out=${2:-central-matrix-$(date -u +%Y%m%dT%H%MZ)}
rounds=${ROUNDS:-2}
secs=${SECS:-10}
workers=${WORKERS:-1 2 4 8}
[ -x "$bin" ] || { echo "central-matrix.sh: no waypoint binary at $bin" >&2; exit 1; }
mkdir -p "$out"
runs=()
for wl in tpcc ycsb; do for s in per-worker aries aether none; do for w in $workers; do runs+=("$wl:$s:$w"); done; done; done
for r in $(seq 1 "$rounds"); do
  order=("${runs[@]}")
  if (( r % 2 == 0 )); then mapfile -t order < <(printf '%s\n' "${runs[@]}" | tac); fi
  for x in "${order[@]}"; do
    IFS=: read -r wl s w <<<"$x"
    d=$out/r$r-$wl-$s-$w
    if [ "$wl" = tpcc ]; then args=(tpcc --warehouses 4); else args=(ycsb --preset a --records 1000000); fi
    "$bin" bench "${args[@]}" --workers "$w" --duration "$secs" --warmup 2 --buffer 4GiB --scheme "$s" --out "$d" >"$d.log" 2>&1
    rm -f "$d"/*.png
    echo "$(date -u +%T) round $r $x done" >&2
  done
done
python3 - "$out" <<'PY'
import glob, json, statistics as st, sys, collections
out = sys.argv[1]
rows = collections.defaultdict(list)
for f in sorted(glob.glob(f"{out}/r*/summary.json")):
    r, wl, rest = f.split("/")[-2].split("-", 2)
    s, w = rest.rsplit("-", 1)
    rows[(wl, s, int(w))].append(json.load(open(f)))
ws = sorted({k[2] for k in rows})
for wl in ["tpcc", "ycsb"]:
    print(f"\n{wl}\n")
    print("| scheme | workers | txn/s per round | median | vs per-worker | CPU µs/txn | log-latch wait µs/txn | mean group | commit p99 µs | syncs/s |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in ["per-worker", "aries", "aether", "none"]:
        for w in ws:
            ds = rows[(wl, s, w)]
            if not ds:
                continue
            med = lambda f: st.median(f(d) for d in ds)
            t = med(lambda d: d["txn_per_sec"])
            per_round = " / ".join(format(d["txn_per_sec"], ",.0f") for d in ds)
            base = st.median(d["txn_per_sec"] for d in rows[(wl, "per-worker", w)])
            group = f"{med(lambda d: d.get('log_group_size') or 0):.3f}" if s == "aether" else ""
            print(f"| {s} | {w} | {per_round} | **{t:,.0f}** | {t / base:.2f}x "
                  f"| {med(lambda d: d['cpu_us_per_txn']):.1f} | {med(lambda d: d.get('log_latch_wait_us_per_txn') or 0):.1f} "
                  f"| {group} | {med(lambda d: d['latency_us']['overall']['p99']):,.0f} | {med(lambda d: d['wal_syncs_per_sec']):,.0f} |")
PY
