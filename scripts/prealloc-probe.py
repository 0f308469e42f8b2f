#!/usr/bin/env python3
"""Log-segment-like syncs by how the file's blocks were prepared, with the
block requests each sync costs (docs/BENCHMARKS.md,
"2026-11-23: what the log's I/O costs on this VM").

For 3 s each: 32 KiB O_DIRECT write at the next offset, fdatasync, 2-ms
sleep, into a file that is
  zerofilled  -- 64 MiB of zeros written and synced first (a spare segment),
  fallocate   -- posix_fallocate'd (unwritten extents on ext4),
  growing     -- empty (every sync commits a new size).
Prints fdatasync p50/p90 and block requests per sync (writes and flushes
counted from /sys/block/DEVICE/stat, so run it on an otherwise idle disk).
Usage: scripts/prealloc-probe.py DIR DEVICE   (e.g. /tmp vda, or a loop-
mounted ext4 with a journal: /mnt/jfs loop0)
"""
import mmap
import os
import sys
import time

FILE_BYTES = 64 << 20


def requests(device):
    f = open(f"/sys/block/{device}/stat").read().split()
    return int(f[4]), int(f[15])  # write requests, flush requests


def probe(directory, device, mode):
    path = os.path.join(directory, f"prealloc-probe-{mode}")
    if os.path.exists(path):
        os.unlink(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT)
    if mode == "zerofilled":
        zeros = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
        for off in range(0, FILE_BYTES, 1 << 20):
            os.pwrite(fd, zeros, off)
    elif mode == "fallocate":
        os.posix_fallocate(fd, 0, FILE_BYTES)
    os.fsync(fd)
    time.sleep(0.3)
    buf = mmap.mmap(-1, 32768)
    buf.write(b"y" * 32768)
    before, n, off, lat = requests(device), 0, 0, []
    start = time.time()
    while time.time() - start < 3 and off < FILE_BYTES:
        os.pwrite(fd, buf, off)
        off += 32768
        t = time.perf_counter()
        os.fdatasync(fd)
        lat.append(time.perf_counter() - t)
        n += 1
        time.sleep(0.002)
    after = requests(device)
    os.close(fd)
    os.unlink(path)
    lat.sort()
    print(f"{mode:11} syncs {n:5}  fdatasync p50 {lat[n // 2] * 1e6:5.0f} µs"
          f"  p90 {lat[n * 9 // 10] * 1e6:5.0f} µs  block requests/sync"
          f" {(after[0] - before[0]) / n:.2f} (flushes {(after[1] - before[1]) / n:.2f})")


def main():
    directory, device = sys.argv[1], sys.argv[2]
    for mode in ["zerofilled", "fallocate", "growing", "zerofilled", "growing"]:
        probe(directory, device, mode)


if __name__ == "__main__":
    main()
