#!/usr/bin/env bash
# Interleaved A/B of the commit path: `bench updates` (small update
# transactions, one session) with isolated commits (`--in-flight 1`, each
# commit waits for its sync) for each LABEL=BINARY, ROUNDS times (odd
# rounds in the order given, even rounds reversed), then per label the mean
# and the median of its per-round ratio to the first label.
#   scripts/updates-ab.sh ROUNDS LABEL=BINARY...
#   env: SECS (8), ARGS (extra `bench updates` flags)
set -euo pipefail
rounds=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
specs=("$@")
reversed=()
for ((i = ${#specs[@]} - 1; i >= 0; i--)); do reversed+=("${specs[i]}"); done
for round in $(seq "$rounds"); do
  order=("${specs[@]}")
  ((round % 2 == 0)) && order=("${reversed[@]}")
  for spec in "${order[@]}"; do
    label=${spec%%=*} bin=${spec#*=}
    rm -rf "$work/db"
    # shellcheck disable=SC2086 # ARGS is a list of flags
    "$bin" bench updates --records 10000 --workers 1 --in-flight 1 \
      --duration "${SECS:-8}" ${ARGS:-} --dir "$work/db" --out "$work/out" >/dev/null
    python3 - "$work/out/summary.json" "$label" <<'PY' | tee -a "$work/rows"
import json, sys
s = json.load(open(sys.argv[1]))
run = s["run"]
print(sys.argv[2], round(run["txn_per_sec"]), run["latency_us"]["p50"], run["latency_us"]["p99"])
PY
  done
done
python3 - "$work/rows" "${1%%=*}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
base = sys.argv[2]
by = {}
for label, tps, *_ in rows:
    by.setdefault(label, []).append(int(tps))
print(f"summary over {len(by[base])} rounds (ratios against {base}, round by round):")
for label, runs in by.items():
    line = f"  {label}: mean {statistics.mean(runs):,.0f} txn/s"
    if label != base:
        ratios = [r / b for r, b in zip(runs, by[base])]
        wins = sum(r > 1 for r in ratios)
        line += (f", median ratio {statistics.median(ratios):.3f}"
                 f" ({min(ratios):.3f}..{max(ratios):.3f}), ahead in {wins} of {len(ratios)}"
                 f"; per round {' '.join(f'{r:.3f}' for r in ratios)}")
    print(line)
PY
