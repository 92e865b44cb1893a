#!/usr/bin/python3
# What the write cache's reservation costs on this file system: every
# cached write that reaches past what the cache reserved last
# makes one fallocate of its own bytes, on smbd's main thread, before it
# is acknowledged.  Measured here without smbd, in microseconds per call
# (median of --rounds, COUNT calls each):
#
#   fallocate     fallocate(fd, 0, off, 4 KiB) past the end of file, as
#                 a stream of 4 KiB cached writes makes them
#   pwrite        a buffered 4 KiB pwrite past the end of file, what a
#                 share without iotune does for the same write (in its
#                 thread pool)
#
# On a "direct io" share the cost that counts is another: a fallocate
# waits for the file's direct write in flight, so the first cached write
# after a window's flush starts waits for the whole flush (strace of smbd,
# 64 MiB of 64 KiB writes: 1088 fallocate calls, median 6 us, but 44 ms
# in all, as long as the 64 flushes' 46 ms).  The write matrix shows that
# cost in its O_DIRECT cells.
#
# write_matrix.py prints these figures next to its matrix, measured in
# the same run.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import os
import statistics
import tempfile
import time

KIB = 1024
MIB = 1024 * KIB


def per_call_us(fn, count):
    started = time.perf_counter()
    for i in range(count):
        fn(i)
    return (time.perf_counter() - started) / count * 1e6


def one_round(directory, count):
    buf = b'r' * (4 * KIB)
    out = {}
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        fd = os.open(os.path.join(tmp, 'pwrite'), os.O_RDWR | os.O_CREAT)
        out['pwrite'] = per_call_us(
            lambda i: os.pwrite(fd, buf, i * 4 * KIB), count)
        os.close(fd)
        fd = os.open(os.path.join(tmp, 'falloc'), os.O_RDWR | os.O_CREAT)
        out['fallocate'] = per_call_us(
            lambda i: os.posix_fallocate(fd, i * 4 * KIB, 4 * KIB), count)
        os.close(fd)
    return out


def measure(directory, rounds=5, count=2000):
    runs = [one_round(directory, count) for _ in range(rounds)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def describe(cost):
    return ('reservation per cached write (us per call on this file '
            'system): fallocate of 4 KiB past the end of file %.1f; a '
            'buffered 4 KiB write past it %.1f' %
            (cost['fallocate'], cost['pwrite']))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--dir', default=os.getcwd())
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--count', type=int, default=2000)
    args = ap.parse_args()
    print(describe(measure(args.dir, args.rounds, args.count)))


if __name__ == '__main__':
    main()
