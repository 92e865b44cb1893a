#!/usr/bin/python3
# O_DIRECT benchmarks on a real smbd on the repository's disk, ratios
# measured side by side in one run (median of --rounds, alternating):
#   a) 64 KiB sequential client writes (batch oplock) on a
#      "direct io = writes" share, write cache on vs off;
#   b) 1 MiB streaming writes and reads, direct vs buffered.
# Buffered runs end with an fsync of the file (SMB2 FLUSH) so that both
# sides have the data on the disk.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import harness  # noqa: E402

MIB = 1024 * 1024

SHARES = {
    'direct_cached': {'vfs objects': 'iotune', 'iotune:direct io': 'writes'},
    'direct_uncached': {'vfs objects': 'iotune',
                        'iotune:direct io': 'writes',
                        'iotune:write cache size': '0'},
    'direct_both': {'vfs objects': 'iotune', 'iotune:direct io': 'both',
                    'iotune:write cache size': '0'},
    'buffered': {'vfs objects': 'iotune', 'iotune:write cache size': '0'},
}


def write_file(smbd, share, total, block):
    client = harness.PyClient(smbd, share)
    fnum = client.open('bench.bin', harness.PyClient.FILE_OVERWRITE_IF,
                       oplock=harness.PyClient.REQUEST_BATCH_OPLOCK)
    data = os.urandom(block)
    started = time.monotonic()
    for off in range(0, total, block):
        client.write(fnum, data, off)
    client.close(fnum)
    path = os.path.join(smbd.share_path(share), 'bench.bin')
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return total / (time.monotonic() - started) / 1e6


def read_file(smbd, share, total, block):
    path = os.path.join(smbd.share_path(share), 'bench.bin')
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    client = harness.PyClient(smbd, share)
    fnum = client.open('bench.bin', harness.PyClient.FILE_OPEN)
    started = time.monotonic()
    for off in range(0, total, block):
        client.read(fnum, off, block)
    client.close(fnum)
    return total / (time.monotonic() - started) / 1e6


def median_alternating(rounds, fns):
    results = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            results[name].append(fns[name]())
    return {name: statistics.median(v) for name, v in results.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--mib', type=int, default=64)
    args = ap.parse_args()
    total = args.mib * MIB

    harness.install_module()
    workdir = harness.scratch_dir('bench-dio-')
    with harness.Smbd(workdir, SHARES, log_level='0') as smbd:
        a = median_alternating(args.rounds, {
            'cache on': lambda: write_file(smbd, 'direct_cached', total,
                                           64 * 1024),
            'cache off': lambda: write_file(smbd, 'direct_uncached', total,
                                            64 * 1024),
        })
        print('a) %d MiB in 64 KiB writes, direct io = writes, median of %d'
              % (args.mib, args.rounds))
        for name, mbs in a.items():
            print('   write cache %-9s %8.0f MB/s' % (name[6:], mbs))
        print('   cache on / off: %.2fx (target >= 3)' %
              (a['cache on'] / a['cache off']))

        b = median_alternating(args.rounds, {
            'direct write': lambda: write_file(smbd, 'direct_both', total,
                                               MIB),
            'buffered write': lambda: write_file(smbd, 'buffered', total,
                                                 MIB),
        })
        c = median_alternating(args.rounds, {
            'direct read': lambda: read_file(smbd, 'direct_both', total,
                                             MIB),
            'buffered read': lambda: read_file(smbd, 'buffered', total,
                                               MIB),
        })
        print('b) %d MiB in 1 MiB requests, median of %d' %
              (args.mib, args.rounds))
        for name, mbs in list(b.items()) + list(c.items()):
            print('   %-15s %8.0f MB/s' % (name, mbs))
        print('   direct / buffered: writes %.2f (target >= 0.90), '
              'reads %.2f' % (b['direct write'] / b['buffered write'],
                              c['direct read'] / c['buffered read']))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
