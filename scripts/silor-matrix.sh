#!/usr/bin/env bash
# Issue 29's benchmarks in one run: (A) TPC-C and YCSB-A throughput and
# commit latency of `silor` beside `none` and `per-worker`, 1 and 2
# workers (order none/silor/per-worker, reversed for 2 workers);
# (B) log volume on disk over a TPC-C run under silor with continuous
# checkpoints, with log-limit checkpoints, without checkpoints, and under
# per-worker with continuous checkpoints (seed 000 Fig. 9 a/b);
# (C) silor recovery (checkpoint load and log replay apart) at 1 and 2
# threads of a killed TPC-C run.
# `silor` acknowledges a commit once its epoch is persistent (about 40 ms),
# so with the driver's default window (128 commits in flight per worker)
# Little's law caps it near 3,200 txn/s per worker; SiloR's workers never
# wait for their acknowledgements, so silor runs with SILOR_IN_FLIGHT
# (default 65536) commits in flight.
#   [SILOR_IN_FLIGHT=N] scripts/silor-matrix.sh BINARY OUTDIR [SECONDS] [VOLUME_SECONDS]
set -euo pipefail
bin=$1; out=$2; secs=${3:-12}; vol=${4:-60}
window() { if [ "$1" = silor ]; then echo "--in-flight ${SILOR_IN_FLIGHT:-65536}"; fi; }
mkdir -p "$out"
summ() { python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/summary.json"))
l = d["latency_us"]["overall"]
print(f'{d["txn_per_sec"]:.0f} txn/s p50 {l["p50"]} us p99 {l["p99"]} us '
      f'log {d["wal_bytes_per_txn"]:.0f} B/txn disk max {d["wal_disk_max_bytes"]/2**20:.1f} MiB')
PY
}
for w in 1 2; do
  order="none silor per-worker"; [ "$w" = 2 ] && order="per-worker silor none"
  for wl in tpcc ycsb; do
    for s in $order; do
      o="$out/A-$wl-$s-w$w"; rm -rf "$o"
      extra=(); [ "$wl" = ycsb ] && extra=(--preset a --records 300000)
      "$bin" bench "$wl" --scheme "$s" $(window "$s") --workers "$w" --duration "$secs" --buffer 4GiB "${extra[@]}" --out "$o" > "$o.log" 2>&1
      echo "A $wl workers=$w scheme=$s $(summ "$o")" | tee -a "$out/results.txt"
    done
  done
done
for v in "silor continuous" "silor log-limit=256MiB" "silor off" "per-worker continuous"; do
  set -- $v; s=$1; c=$2
  o="$out/B-$s-$c"; rm -rf "$o"
  "$bin" bench tpcc --scheme "$s" $(window "$s") --checkpoint "$c" --workers 2 --duration "$vol" --buffer 8GiB --out "$o" > "$o.log" 2>&1
  echo "B scheme=$s checkpoint=$c $(summ "$o") final disk $(tail -1 "$o/series.csv" | cut -d, -f7) B" | tee -a "$out/results.txt"
done
db="$out/C-killed"; rm -rf "$db"
"$bin" bench tpcc --scheme silor $(window silor) --workers 2 --duration 60 --buffer 8GiB --dir "$db" > "$out/C.log" 2>&1 &
pid=$!; sleep 30; kill -9 "$pid"; wait "$pid" || true
for t in 1 2 1 2; do
  rm -rf "$out/C-copy"; cp -a "$db" "$out/C-copy"; sync
  echo "C threads=$t $("$bin" recover --threads "$t" --buffer 8GiB "$out/C-copy" 2>&1 | tr '\n' ' ')" | tee -a "$out/results.txt"
done
rm -rf "$out/C-copy"
