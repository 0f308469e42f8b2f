#!/usr/bin/env python3
"""Summary of an interleaved A/B (scripts/tpcc-ab.sh, scripts/updates-ab.sh):
ROWS has one line per run, "LABEL TXN_PER_SEC ...", in round order; per
label the mean, and against BASE the median, range and list of per-round
ratios (the i-th run of a label against the i-th run of BASE).

    scripts/ab-summary.py ROWS BASE
"""
import statistics
import sys

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
