#!/usr/bin/python3
# The write cache's memory, measured against its bound.  One client
# connection (one smbd process) holds a batch oplock on 16 files and
# writes 32 KiB pieces round robin, 4 MiB per file (flush timeout 10 s:
# windows are written because they are full), so that every cache fills
# windows and flushes them while the next fills; the same on a
# share without iotune.  Printed per share: the smbd process's peak
# resident memory (VmHWM) over the plain share's, next to the bound
# write cache max files x (1 + windows in flight) x write cache size, and
# the resident memory after the files are closed (caches ended).
#
#   windows in flight: 1 on a local file system, 4 where every write
#   costs a round trip (direct I/O here; GlusterFS, Ceph, network file
#   systems), see `write cache bypass size` in README.md
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import harness  # noqa: E402

KIB = 1024
MIB = 1024 * KIB
FILES = 16
PER_FILE = 4 * MIB
PIECE = 32 * KIB


def status_kib(pid, field):
    with open('/proc/%d/status' % pid) as f:
        return int(re.search(r'%s:\s+(\d+) kB' % field, f.read()).group(1))


def child_of(smbd, before):
    for _ in range(50):
        new = set(smbd.child_pids()) - before
        if new:
            return max(new)
        time.sleep(0.1)
    raise RuntimeError('no smbd process for the client')


def run(smbd, share):
    """(peak KiB, KiB resident before, after the files were closed)"""
    before = set(smbd.child_pids())
    c = harness.ScriptClient(smbd, share)
    pid = child_of(smbd, before)
    for slot in range(FILES):
        c.use(slot)
        c.open('m%02d.bin' % slot, 'batch')
    start = status_kib(pid, 'VmRSS')
    piece = os.urandom(PIECE)
    for off in range(0, PER_FILE, PIECE):
        for slot in range(FILES):
            c.use(slot)
            c.write(off, piece)
    peak = status_kib(pid, 'VmHWM')
    for slot in range(FILES):
        c.use(slot)
        c.close()
    time.sleep(1.5)
    after = status_kib(pid, 'VmRSS')
    c.quit()
    return peak, start, after


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--size', default='1M', help='write cache size')
    ap.add_argument('--max-files', type=int, default=10)
    args = ap.parse_args()
    size = int(args.size[:-1]) * {'K': KIB, 'M': MIB}[args.size[-1]]
    opts = {'write cache size': args.size,
            'write cache max files': str(args.max_files),
            'write cache flush timeout': '10s'}
    shares = {
        'plain': {},
        'iotune': dict({'vfs objects': 'iotune'},
                       **{'iotune:' + k: v for k, v in opts.items()}),
        'direct': dict({'vfs objects': 'iotune', 'iotune:direct io':
                        'both', 'iotune:direct io min size': '0'},
                       **{'iotune:' + k: v for k, v in opts.items()}),
    }
    harness.install_module()
    smbd = harness.Smbd(harness.scratch_dir('memory-'), shares,
                        log_level='1')
    smbd.start()
    try:
        base = run(smbd, 'plain')
        print('memory: %d files, 32 KiB writes, write cache size %s, max '
              'files %d; plain share: peak %.1f MiB' %
              (FILES, args.size, args.max_files, base[0] / 1024))
        for share, windows in (('iotune', 1), ('direct', 4)):
            peak, start, after = run(smbd, share)
            bound = args.max_files * (1 + windows) * size
            extra = (peak - base[0]) * KIB
            print('memory: %-6s peak +%.1f MiB over plain; bound %d x '
                  '(1 + %d) x %s = %.0f MiB (%.2f of it); after close '
                  '%+.1f MiB' %
                  (share, extra / MIB, args.max_files, windows, args.size,
                   bound / MIB, extra / bound, (after - start) / 1024))
    finally:
        smbd.stop()


if __name__ == '__main__':
    main()
