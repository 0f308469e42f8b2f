#!/usr/bin/env python3
"""The log's I/O pattern without the engine: THREADS threads, each with its
own file (zero-filled first, like a preallocated segment, opened O_DIRECT),
write SIZE bytes at the next offset, fdatasync (unless --no-sync), sleep
INTERVAL ms, for SECS seconds; prints the operations per second.

Run it beside `waypoint bench tpcc --logging none` (scripts/io-tax.sh) to
measure what this machine charges the engine's vCPUs for I/O that no
engine code does (docs/BENCHMARKS.md, "2026-11-23: what the
log's I/O costs on this VM").
Usage: scripts/io-sidecar.py DIR SECS [--threads 2] [--size 32768]
       [--interval-ms 2] [--no-sync]
"""
import argparse
import mmap
import os
import threading
import time

FILE_BYTES = 64 << 20


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("secs", type=float)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--size", type=int, default=32768)
    p.add_argument("--interval-ms", type=float, default=2.0)
    p.add_argument("--no-sync", action="store_true")
    a = p.parse_args()
    assert a.size % 4096 == 0 and FILE_BYTES % a.size == 0, "O_DIRECT: whole blocks"
    counts = [0] * a.threads

    def run(i):
        path = os.path.join(a.dir, f"io-sidecar.{i}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_DIRECT)
        zeros = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
        for off in range(0, FILE_BYTES, 1 << 20):
            os.pwrite(fd, zeros, off)
        os.fdatasync(fd)
        buf = mmap.mmap(-1, a.size)
        buf.write(b"x" * a.size)
        off, end = 0, time.time() + a.secs
        while time.time() < end:
            os.pwrite(fd, buf, off)
            off = (off + a.size) % FILE_BYTES
            if not a.no_sync:
                os.fdatasync(fd)
            counts[i] += 1
            time.sleep(a.interval_ms / 1000)
        os.close(fd)
        os.remove(path)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{sum(counts) / a.secs:.0f} writes/s")


if __name__ == "__main__":
    main()
