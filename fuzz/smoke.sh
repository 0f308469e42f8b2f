#!/usr/bin/env bash
# Fuzz smoke run: build every cargo-fuzz target (`cargo fuzz list`:
# checkpoint_meta, log_record, log_segment, page, recovery) and run each for
# a few seconds (FUZZ_SECONDS, default 5), then replay every saved
# regression input in fuzz/regressions/<target>/. Fails on the first crash, hang
# (-timeout) or out-of-memory (-rss_limit_mb) libFuzzer reports.
#
# Works on the stable toolchain: `-s none` builds libFuzzer with coverage
# instrumentation but without AddressSanitizer (which needs nightly's
# -Zsanitizer). Installs cargo-fuzz (pinned, --locked) if it is missing.
#
#   bash fuzz/smoke.sh                 # 5 s per target
#   FUZZ_SECONDS=120 bash fuzz/smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
SECONDS_PER_TARGET="${FUZZ_SECONDS:-5}"

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

targets=$(cargo fuzz list)
cargo fuzz build -s none

for t in $targets; do
  extra=()
  # Recovery runs about a hundred inputs a second: let it try long inputs
  # at once instead of growing the length limit slowly.
  [ "$t" = recovery ] && extra+=(-len_control=0)
  if [ -d "fuzz/regressions/$t" ] && [ -n "$(ls -A "fuzz/regressions/$t")" ]; then
    echo "== $t: replaying fuzz/regressions/$t"
    if ! cargo fuzz run -s none "$t" fuzz/regressions/"$t"/*; then
      echo "fuzz smoke: a saved input in fuzz/regressions/$t still fails" >&2
      exit 1
    fi
  fi
  echo "== $t: ${SECONDS_PER_TARGET}s"
  corpus=$(mktemp -d)
  log=$(mktemp)
  if ! cargo fuzz run -s none "$t" "$corpus" -- \
    -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "${extra[@]}" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz smoke: $t failed (crash input saved under fuzz/artifacts/$t/)" >&2
    exit 1
  fi
  grep -E '^(Done |stat::average_exec_per_sec|stat::new_units_added)' "$log" || true
  grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true
  rm -rf "$corpus" "$log"
done
echo "fuzz smoke: every target ran without a crash"
