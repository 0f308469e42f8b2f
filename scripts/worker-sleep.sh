#!/usr/bin/env bash
# Why TPC-C workers sleep: run a 2-worker, 2-warehouse in-memory TPC-C on a
# copy of a loaded database, record 3 s of scheduler switches with call
# stacks (perf, sched:sched_switch + sched_wakeup, DWARF unwinding), and
# print the share of worker time spent asleep (off CPU, voluntarily), split
# by the engine function that went to sleep (Backoff and sleep frames
# skipped, so a latch wait shows as the latch operation).
#   scripts/worker-sleep.sh BINARY LOADED_DB [extra `bench tpcc` flags]
# LOADED_DB: made once by `waypoint bench tpcc --warehouses 2 --workers 2
# --duration 1 --warmup 0 --dir LOADED_DB`. Needs `perf` (linux-perf) and
# permission to trace (root, or kernel.perf_event_paranoid <= 1).
set -euo pipefail
bin=$1 loaded=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$loaded" "$work/db"
"$bin" bench tpcc --warehouses 2 --workers 2 --duration 14 --buffer 4GiB \
  --dir "$work/db" --out "$work/out" "$@" >"$work/bench.out" 2>&1 &
bench=$!
sleep 6
perf record -e sched:sched_switch -e sched:sched_wakeup \
  --call-graph dwarf,8192 -p "$bench" -o "$work/perf.data" -- sleep 3 \
  >/dev/null 2>&1
wait "$bench"
perf script -i "$work/perf.data" -F comm,tid,time,event,trace,ip,sym \
  2>/dev/null >"$work/perf.txt"
python3 - "$work/perf.txt" <<'PY'
import collections, re, sys

lines = open(sys.argv[1]).read().split("\n")
events = []  # (header line, [frames])
i = 0
while i < len(lines):
    if lines[i] and not lines[i][0].isspace():
        header, frames = lines[i], []
        i += 1
        while i < len(lines) and lines[i].strip():
            parts = lines[i].split()
            frames.append(parts[1] if len(parts) > 1 else "")
            i += 1
        events.append((header, frames))
    i += 1

def reason(frames):
    engine = [f for f in frames
              if "waypoint" in f and "sync::sleep" not in f and "Backoff" not in f]
    return " < ".join(re.sub(r"\+0x[0-9a-f]+$", "", f) for f in engine[:2])

# Worker threads are the ones whose stacks pass through the worker loop.
workers = set()
for header, frames in events:
    m = re.search(r"\s(\d+)\s+\d+\.\d+:", header)
    if m and any("worker_loop" in f for f in frames):
        workers.add(int(m.group(1)))
asleep_since, why = {}, {}
total, count = collections.Counter(), collections.Counter()
first = last = None
for header, frames in events:
    m = re.search(r"\s(\d+)\s+(\d+\.\d+):\s+sched:(\w+):", header)
    if not m:
        continue
    t = float(m.group(2))
    first = first if first is not None else t
    last = t
    if m.group(3) != "sched_switch":
        continue
    s = re.search(r"prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)", header)
    if not s:
        continue
    prev, state, nxt = int(s.group(1)), s.group(2), int(s.group(3))
    if prev in workers and state.startswith("S"):
        asleep_since[prev], why[prev] = t, reason(frames)
    if nxt in asleep_since:
        r = why[nxt]
        total[r] += t - asleep_since.pop(nxt)
        count[r] += 1
if not workers or first is None or last == first:
    sys.exit("no worker switches recorded (is perf allowed to trace?)")
span = (last - first) * len(workers)
print(f"{len(workers)} workers; asleep {sum(total.values()) / span * 100:.1f}% "
      f"of worker time over {last - first:.1f} s")
for r, v in total.most_common(8):
    print(f"  {v / span * 100:5.1f}%  {count[r]:4d} sleeps  {r[:120]}")
PY
grep "per second" "$work/bench.out" || true
