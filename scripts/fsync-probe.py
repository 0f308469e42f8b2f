#!/usr/bin/env python3
"""Raw write + fdatasync latency by how the file's blocks were prepared
(docs/BENCHMARKS.md, "2026-11-22: segment preallocation").

For each write size, 2,000 rounds of pwrite + fdatasync into a file that is
  appended   -- grows with every write (each sync commits the new size),
  fallocate  -- posix_fallocate'd first (unwritten extents on ext4),
  zeroed     -- zero-filled and synced first (what a preallocated log
                segment is).
Usage: scripts/fsync-probe.py [DIR]   (default: /tmp)
"""
import os
import sys
import time

ROUNDS = 2000


def probe(path, size, prepare):
    if os.path.exists(path):
        os.remove(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    total = ROUNDS * size + 4096
    if prepare == "zeroed":
        os.pwrite(fd, b"\0" * total, 0)
        os.fsync(fd)
    elif prepare == "fallocate":
        os.posix_fallocate(fd, 0, total)
        os.fsync(fd)
    buf = os.urandom(size)
    times = []
    for i in range(ROUNDS):
        t = time.perf_counter()
        os.pwrite(fd, buf, i * size)
        os.fdatasync(fd)
        times.append(time.perf_counter() - t)
    os.close(fd)
    os.remove(path)
    times.sort()
    return times[ROUNDS // 2] * 1e6, times[ROUNDS * 99 // 100] * 1e6


def main():
    path = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "/tmp", "fsync-probe.bin")
    print("| write size | file | p50 µs | p99 µs |")
    print("|---|---|---|---|")
    for size in (512, 4096, 40960):
        for prepare in ("appended", "fallocate", "zeroed"):
            p50, p99 = probe(path, size, prepare)
            print(f"| {size} B | {prepare} | {p50:.0f} | {p99:.0f} |")


if __name__ == "__main__":
    main()
