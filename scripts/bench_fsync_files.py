#!/usr/bin/env python3
"""What a partition costs in `fsync` mode (BENCHMARKS §32): rounds of one small append to each
of P files, then all P made durable before the next round, as a round of group commit does for
the P partitions a vector of writes touched.

    scripts/bench_fsync_files.py [--dir D] [--rounds N] [--files 1,4] [--modes falloc,zeroed,sfr]
                                 [--round-bytes 2048]

Modes: `falloc` (blocks fallocated, as the log does: the first write to each converts an
unwritten extent), `zeroed` (blocks written with zeros and synced first: no metadata to
commit), `sfr` (zeroed; each file's data sent with sync_file_range, then one fdatasync that
flushes the device cache). The P fdatasyncs of a round run at once, on P threads. Prints the
mean, p50 and p99 time of a round."""
import argparse
import ctypes
import os
import threading
import time

SEGMENT_BYTES = 1 << 30
PREPARED_BYTES = 16 << 20
ROUND_BYTES = 2048  # split between the files (--round-bytes)
SYNC_FILE_RANGE_ALL = 1 | 2 | 4  # WAIT_BEFORE | WRITE | WAIT_AFTER


def prepare(fd, mode):
    os.ftruncate(fd, SEGMENT_BYTES)
    if mode == "falloc":
        os.posix_fallocate(fd, 0, PREPARED_BYTES)
        return
    zeros = b"\0" * (1 << 20)
    for at in range(0, PREPARED_BYTES, len(zeros)):
        os.pwrite(fd, zeros, at)
    os.fdatasync(fd)


def run(directory, mode, files, rounds, round_bytes):
    paths = [os.path.join(directory, f"bench-fsync-{i}") for i in range(files)]
    fds = [os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) for p in paths]
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    record = b"x" * (round_bytes // files)
    start, done = threading.Barrier(files + 1), threading.Barrier(files + 1)
    stop = False

    def syncer(fd):
        while True:
            start.wait()
            if stop:
                return
            os.fdatasync(fd)
            done.wait()

    try:
        for fd in fds:
            prepare(fd, mode)
        threads = [threading.Thread(target=syncer, args=(fd,)) for fd in fds]
        if mode != "sfr":
            for t in threads:
                t.start()
        times, at = [], 0
        for _ in range(rounds):
            for fd in fds:
                os.pwrite(fd, record, at)
            t0 = time.perf_counter()
            if mode == "sfr":
                for fd in fds:
                    n = ctypes.c_longlong
                    if libc.sync_file_range(fd, n(at), n(len(record)), SYNC_FILE_RANGE_ALL):
                        raise OSError(ctypes.get_errno(), "sync_file_range")
                os.fdatasync(fds[0])
            else:
                start.wait()
                done.wait()
            times.append(time.perf_counter() - t0)
            at += len(record)
        stop = True
        if mode != "sfr":
            start.wait()
            for t in threads:
                t.join()
    finally:
        for fd, p in zip(fds, paths):
            os.close(fd)
            os.unlink(p)
    times.sort()
    us = lambda x: round(x * 1e6)
    print(f"{mode:7s} files {files}: round mean {us(sum(times) / rounds)} us, "
          f"p50 {us(times[rounds // 2])}, p99 {us(times[rounds * 99 // 100])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=".")
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--files", default="1,4")
    ap.add_argument("--modes", default="falloc,zeroed,sfr")
    ap.add_argument("--round-bytes", type=int, default=ROUND_BYTES)
    a = ap.parse_args()
    for mode in a.modes.split(","):
        for files in map(int, a.files.split(",")):
            run(a.dir, mode, files, a.rounds, a.round_bytes)


if __name__ == "__main__":
    main()
