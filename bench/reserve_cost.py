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
#   fallocate_dio_alone, fallocate_dio_during, dio_write
#                 a 64 KiB fallocate past the end of a file written with
#                 O_DIRECT, alone and while a 16 MiB direct write of the
#                 file is on its way (from another thread), and that
#                 write: whether a reservation waits for the file's direct
#                 writes, wherever it runs (a thread pool cannot help)
#   reserved_windows_mbs
#                 MB/s of 1 MiB windows of a new file, each reserved then
#                 written with O_DIRECT, one at a time: whether the disk
#                 itself bounds an O_DIRECT share's cached writes
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
import ctypes
import mmap
import os
import statistics
import tempfile
import threading
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


def fallocate_64k(fd, off):
    """microseconds of fallocate(fd, 0, off, 64 KiB) (os has only
    posix_fallocate, which glibc may emulate: called through libc)"""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                               ctypes.c_long]
    started = time.perf_counter()
    if libc.fallocate(fd, 0, off, 64 * KIB) != 0:
        raise OSError(ctypes.get_errno(), 'fallocate')
    return (time.perf_counter() - started) * 1e6


def direct_write_wait(directory, rounds):
    """(fallocate alone, fallocate during a 16 MiB direct write, that
    write), us, medians of rounds"""
    size = 16 * MIB
    buf = mmap.mmap(-1, size)
    buf.write(os.urandom(size))
    alone, during, write = [], [], []
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = os.path.join(tmp, 'dio')
        dio = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT)
        fd = os.open(path, os.O_RDWR)
        far = 1 << 40   # past anything written
        for i in range(rounds):
            alone.append(fallocate_64k(fd, far + 2 * i * 64 * KIB))
            took = []
            writer = threading.Thread(target=lambda: took.append(
                per_call_us(lambda _: os.pwrite(dio, buf, i * size), 1)))
            writer.start()
            time.sleep(0.002)   # the write is on its way
            during.append(fallocate_64k(fd, far + (2 * i + 1) * 64 * KIB))
            writer.join()
            write.append(took[0])
        os.close(fd)
        os.close(dio)
    return (statistics.median(alone), statistics.median(during),
            statistics.median(write))


def reserved_windows_mbs(directory, rounds, windows=32):
    """MB/s of the disk alone writing a new file in 1 MiB windows, each
    reserved with a fallocate and then written with O_DIRECT, one at a
    time (median of rounds): whether the disk itself bounds the cached
    writes of an O_DIRECT share, which it receives in this shape"""
    buf = mmap.mmap(-1, MIB)
    buf.write(os.urandom(MIB))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                               ctypes.c_long]
    speeds = []
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        for i in range(rounds):
            path = os.path.join(tmp, 'windows%d' % i)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT)
            started = time.perf_counter()
            for w in range(windows):
                if libc.fallocate(fd, 0, w * MIB, MIB) != 0:
                    raise OSError(ctypes.get_errno(), 'fallocate')
                os.pwrite(fd, buf, w * MIB)
            speeds.append(windows * MIB / (time.perf_counter() - started)
                          / 1e6)
            os.close(fd)
            os.unlink(path)
            os.sync()
    return statistics.median(speeds)


def measure(directory, rounds=5, count=2000):
    runs = [one_round(directory, count) for _ in range(rounds)]
    out = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    (out['fallocate_dio_alone'], out['fallocate_dio_during'],
     out['dio_write']) = direct_write_wait(directory, max(rounds, 7))
    out['reserved_windows_mbs'] = reserved_windows_mbs(directory,
                                                       max(rounds, 7))
    return out


def describe(cost):
    text = ('reservation per cached write (us per call on this file '
            'system): fallocate of 4 KiB past the end of file %.1f; a '
            'buffered 4 KiB write past it %.1f' %
            (cost['fallocate'], cost['pwrite']))
    if 'fallocate_dio_during' in cost:
        text += ('; a 64 KiB fallocate of a file written with O_DIRECT '
                 '%.0f alone, %.0f while a 16 MiB direct write of it is '
                 'on its way (%.0f)' % (cost['fallocate_dio_alone'],
                                        cost['fallocate_dio_during'],
                                        cost['dio_write']))
    if 'reserved_windows_mbs' in cost:
        text += ('; 1 MiB windows, each reserved then written with '
                 'O_DIRECT, one at a time: %.0f MB/s' %
                 cost['reserved_windows_mbs'])
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--dir', default=os.getcwd())
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--count', type=int, default=2000)
    args = ap.parse_args()
    print(describe(measure(args.dir, args.rounds, args.count)))


if __name__ == '__main__':
    main()
