#!/usr/bin/env bash
# Per-thread CPU of a command: start it, wait DELAY seconds, then report each
# thread's CPU, running and run-queue-wait share over SPAN seconds, and the
# machine's user/sys/idle/iowait/steal jiffies over the same span.
# Usage: scripts/thread-cpu.sh DELAY SPAN command...   (its output: /tmp/thread-cpu.out)
set -euo pipefail
delay=$1 span=$2
shift 2
"$@" >/tmp/thread-cpu.out 2>&1 &
pid=$!
sleep "$delay"
snap() {
  for t in /proc/$pid/task/*; do
    echo "$(tr ' ' _ <"$t/comm")_$(basename "$t") $(awk '{print $14+$15}' "$t/stat") $(awk '{print $1, $2}' "$t/schedstat")"
  done 2>/dev/null | sort
}
snap >/tmp/thread-cpu.1
head -1 /proc/stat >/tmp/thread-cpu.stat1
sleep "$span"
snap >/tmp/thread-cpu.2
head -1 /proc/stat >/tmp/thread-cpu.stat2
join /tmp/thread-cpu.1 /tmp/thread-cpu.2 | awk -v s="$span" '{c=($5-$2)/s; if (c>0.5) printf "%-28s cpu %3.0f%%  run %3.0f%%  runq-wait %3.0f%%\n", $1, c, ($6-$3)/s/1e7, ($7-$4)/s/1e7}'
paste /tmp/thread-cpu.stat1 /tmp/thread-cpu.stat2 | awk '{print "machine jiffies: user",$13-$2," sys",$15-$4," idle",$16-$5," iowait",$17-$6," irq+soft",$18-$7+$19-$8," steal",$20-$9}'
wait $pid
