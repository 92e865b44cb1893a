#!/usr/bin/python3
# O_DIRECT benchmarks on a real smbd on the repository's disk, ratios
# measured side by side in one run (median of --rounds, alternating):
#   a) 64 KiB sequential client writes (batch oplock) on a
#      "direct io = writes" share, write cache on vs off;
#      next to the disk's own O_DIRECT 64 KiB vs 1 MiB ratio and a share
#      without iotune (what one client gets through smbd at all);
#   b) 1 MiB streaming writes and reads, direct vs buffered, several
#      requests in flight as real clients keep (smb2-script "pump").
# Write runs end with an fsync of the file so that both sides have the
# data on the disk; read runs start cold.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import mmap
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import harness  # noqa: E402
from benchlib import median_alternating  # noqa: E402

KIB = 1024
MIB = 1024 * KIB

SHARES = {
    'direct_cached': {'vfs objects': 'iotune', 'iotune:direct io': 'writes'},
    'direct_uncached': {'vfs objects': 'iotune',
                        'iotune:direct io': 'writes',
                        'iotune:write cache size': '0'},
    'direct_both': {'vfs objects': 'iotune', 'iotune:direct io': 'both',
                    'iotune:write cache size': '0'},
    'buffered': {'vfs objects': 'iotune', 'iotune:write cache size': '0'},
    'no_module': {},
}


def sync_and_drop(smbd, share):
    """fsync the file (the time a buffered write needs to reach the disk)
    and drop it from the page cache"""
    path = os.path.join(smbd.share_path(share), 'bench.bin')
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def pump(smbd, share, kind, total, block, depth, oplock='none'):
    """MB/s of one client streaming total bytes, depth requests in
    flight; writes count until the data is on the disk"""
    client = harness.ScriptClient(smbd, share)
    client.open('bench.bin', oplock)
    started = time.monotonic()
    done, _ = client.pump(kind, total, block, depth)
    client.close()
    if kind == 'write':
        sync_and_drop(smbd, share)
    elapsed = time.monotonic() - started
    client.quit()
    assert done == total, (done, total)
    return total / elapsed / 1e6


def disk_direct_writes(directory, total, block):
    """MB/s of O_DIRECT pwrite()s of block bytes, one at a time"""
    path = os.path.join(directory, 'disk.bin')
    buf = mmap.mmap(-1, block)
    buf.write(os.urandom(block))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT)
    started = time.monotonic()
    for off in range(0, total, block):
        os.pwrite(fd, buf, off)
    os.fsync(fd)
    elapsed = time.monotonic() - started
    os.close(fd)
    os.unlink(path)
    return total / elapsed / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--mib', type=int, default=256)
    ap.add_argument('--depth', type=int, default=8,
                    help='requests in flight for b)')
    args = ap.parse_args()
    total = args.mib * MIB

    harness.install_module()
    workdir = harness.scratch_dir('bench-dio-')
    with harness.Smbd(workdir, SHARES, log_level='0') as smbd:
        a = median_alternating(args.rounds, {
            'cache on': lambda: pump(smbd, 'direct_cached', 'write', total,
                                     64 * KIB, 1, 'batch'),
            'cache off': lambda: pump(smbd, 'direct_uncached', 'write',
                                      total, 64 * KIB, 1, 'batch'),
            'no module': lambda: pump(smbd, 'no_module', 'write', total,
                                      64 * KIB, 1, 'batch'),
            'disk 64K': lambda: disk_direct_writes(workdir, total, 64 * KIB),
            'disk 1M': lambda: disk_direct_writes(workdir, total, MIB),
        })
        print('a) %d MiB in 64 KiB writes, one at a time, direct io = '
              'writes, median of %d' % (args.mib, args.rounds))
        for name, mbs in a.items():
            print('   %-10s %8.0f MB/s' % (name, mbs))
        print('   write cache on / off: %.2fx (target >= 3); the disk\'s '
              'own 1 MiB / 64 KiB O_DIRECT ratio: %.2fx' %
              (a['cache on'] / a['cache off'],
               a['disk 1M'] / a['disk 64K']))
        print('   write cache on / a share without iotune (page cache, '
              'fsync at the end): %.2f' %
              (a['cache on'] / a['no module']))

        print('b) %d MiB in 1 MiB requests, %d in flight, median of %d; '
              'buffered writes count until fsync returns' %
              (args.mib, args.depth, args.rounds))
        for kind in ('write', 'read'):
            b = median_alternating(args.rounds, {
                'direct': lambda: pump(smbd, 'direct_both', kind, total,
                                       MIB, args.depth),
                'buffered': lambda: pump(smbd, 'buffered', kind, total,
                                         MIB, args.depth),
            })
            print('   %-5s direct %6.0f MB/s, buffered %6.0f MB/s: '
                  'direct / buffered %.2f%s' %
                  (kind, b['direct'], b['buffered'],
                   b['direct'] / b['buffered'],
                   ' (target >= 0.90)' if kind == 'write' else ''))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
