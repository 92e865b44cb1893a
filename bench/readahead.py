#!/usr/bin/python3
# Read-ahead benchmarks on a real smbd, each printed as ratios measured in
# one run (median of --rounds, modes alternating):
#   a) concurrent readers of distinct cold files: adaptive vs kernel vs
#      off: throughput, and bytes read from storage per byte served (the
#      smbd processes' /proc/<pid>/io read_bytes);
#   b) random 4 KiB readers of a cold file: fadvise = random vs kernel:
#      storage bytes per byte served;
#   c) streaming a file with drop-behind vs without: page-cache residency
#      after the read (fincore) and throughput.
# Files are made cold with POSIX_FADV_DONTNEED before every measurement.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import harness  # noqa: E402

MIB = 1024 * 1024

SHARES = {
    'kernel': {'vfs objects': 'iotune', 'iotune:readahead': 'kernel'},
    'adaptive': {'vfs objects': 'iotune', 'iotune:readahead': 'adaptive'},
    'both': {'vfs objects': 'iotune', 'iotune:readahead': 'adaptive',
             'iotune:fadvise': 'normal'},
    'off': {'vfs objects': 'iotune', 'iotune:readahead': 'off'},
    'random': {'vfs objects': 'iotune', 'iotune:fadvise': 'random'},
    'drop': {'vfs objects': 'iotune', 'iotune:drop behind': 'yes'},
}


def make_cold(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def device_read_bytes(path):
    """bytes read from the block device that holds path, so far"""
    st = os.stat(path)
    stat = '/sys/dev/block/%d:%d/stat' % (os.major(st.st_dev),
                                          os.minor(st.st_dev))
    with open(stat) as f:
        return int(f.read().split()[2]) * 512


def smbclient_readers(smbd, share, names):
    """Concurrent smbclient gets of distinct files, one connection each:
    (MB/s, bytes read from the device per byte served)"""
    paths = [os.path.join(smbd.share_path(share), n) for n in names]
    served = sum(os.path.getsize(p) for p in paths)
    storage0 = device_read_bytes(paths[0])
    t0 = time.monotonic()
    procs = [subprocess.Popen(
        ['smbclient', smbd.unc(share), '-U', '%s%%%s' % (harness.USER,
                                                          harness.PASSWORD),
         '--configfile=%s' % smbd.conf, '-c', 'get %s /dev/null' % n],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for n in names]
    for p in procs:
        if p.wait() != 0:
            raise RuntimeError('smbclient get failed')
    wall = time.monotonic() - t0
    storage = device_read_bytes(paths[0]) - storage0
    return served / wall / 1e6, storage / served


def io_read_bytes(pid):
    try:
        with open('/proc/%d/io' % pid) as f:
            for line in f:
                if line.startswith('read_bytes:'):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reader(conf_path, address, share, name, block, pattern, count, ready,
           go, done, results):
    smbd = harness.Smbd.__new__(harness.Smbd)
    smbd.conf, smbd.address = conf_path, address
    client = harness.PyClient(smbd, share)
    fnum = client.open(name, harness.PyClient.FILE_OPEN)
    size = os.path.getsize(os.path.join(os.path.dirname(conf_path),
                                        'shares', share, name))
    rnd = random.Random(os.getpid())
    ready.release()
    go.wait()
    started = time.monotonic()
    served = 0
    if pattern == 'seq':
        for off in range(0, size, block):
            served += len(client.read(fnum, off, block))
    else:
        for _ in range(count):
            off = rnd.randrange(0, size // block) * block
            served += len(client.read(fnum, off, block))
    results.put((served, time.monotonic() - started))
    done.wait()
    client.close(fnum)


def run_readers(smbd, share, names, block, pattern, count=0):
    """Concurrent readers, one connection (smbd process) each: returns
    (MB/s, storage bytes per byte served)."""
    ctx = multiprocessing.get_context('fork')
    ready = ctx.Semaphore(0)
    go, done = ctx.Event(), ctx.Event()
    results = ctx.Queue()
    before = set(smbd.child_pids())
    procs = [ctx.Process(target=reader, args=(
        smbd.conf, smbd.address, share, n, block, pattern, count, ready,
        go, done, results)) for n in names]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire()
    children = set(smbd.child_pids()) - before
    storage0 = sum(io_read_bytes(pid) for pid in children)
    t0 = time.monotonic()
    go.set()
    got = [results.get() for _ in procs]
    wall = time.monotonic() - t0
    storage = sum(io_read_bytes(pid) for pid in children) - storage0
    done.set()
    for p in procs:
        p.join()
    served = sum(g[0] for g in got)
    return served / wall / 1e6, storage / max(served, 1)


def resident_fraction(path):
    out = subprocess.run(['fincore', '--bytes', '--noheadings', '--raw',
                          '--output', 'RES', path], capture_output=True,
                         text=True, check=True).stdout
    return int(out.split()[0]) / os.path.getsize(path)


def median_of(rounds, fn):
    values = [fn() for _ in range(rounds)]
    return tuple(statistics.median(v[i] for v in values)
                 for i in range(len(values[0])))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--readers', type=int, default=16)
    ap.add_argument('--file-mib', type=int, default=48)
    args = ap.parse_args()

    harness.install_module()
    workdir = harness.scratch_dir('bench-ra-')
    smbd = harness.Smbd(workdir, SHARES, log_level='0')
    with smbd:
        names = ['r%02d.bin' % i for i in range(args.readers)]
        blob = os.urandom(args.file_mib * MIB)
        for share in SHARES:
            for n in names[:args.readers if share in
                           ('kernel', 'adaptive', 'off', 'both') else 1]:
                with open(os.path.join(smbd.share_path(share), n),
                          'wb') as f:
                    f.write(blob)

        def cold_readers(share):
            def run():
                for n in names:
                    make_cold(os.path.join(smbd.share_path(share), n))
                return smbclient_readers(smbd, share, names)
            return run

        print('a) %d smbclient readers of distinct cold %d MiB files, '
              'median of %d (storage: the block device\'s read bytes)' %
              (args.readers, args.file_mib, args.rounds))
        a = {}
        for r in range(args.rounds):
            for mode in (['kernel', 'adaptive', 'off', 'both'] if r % 2 == 0
                         else ['both', 'off', 'adaptive', 'kernel']):
                a.setdefault(mode, []).append(cold_readers(mode)())
        med = {m: (statistics.median(x[0] for x in v),
                   statistics.median(x[1] for x in v))
               for m, v in a.items()}
        for mode in ('kernel', 'adaptive', 'off', 'both'):
            print('   %-9s %8.0f MB/s   storage/served %.3f' %
                  (mode, med[mode][0], med[mode][1]))
        print('   adaptive/kernel throughput %.2f (target >= 1.0), '
              'adaptive waste %.3f (target <= 1.1)' %
              (med['adaptive'][0] / med['kernel'][0], med['adaptive'][1]))

        print('b) 4 random 4 KiB readers of one cold 256 MiB file, median '
              'of %d' % args.rounds)
        for share in ('kernel', 'random'):
            with open(os.path.join(smbd.share_path(share), 'big.bin'),
                      'wb') as f:
                for _ in range(256):
                    f.write(os.urandom(MIB))

        def random_readers(share):
            make_cold(os.path.join(smbd.share_path(share), 'big.bin'))
            return run_readers(smbd, share, ['big.bin'] * 4, 4096, 'rand',
                               count=1500)
        b = {m: median_of(args.rounds, lambda m=m: random_readers(m))
             for m in ('kernel', 'random')}
        for mode in ('kernel', 'random'):
            print('   %-9s %8.1f MB/s   storage/served %.2f' %
                  (mode, b[mode][0], b[mode][1]))
        print('   storage per byte served, kernel / fadvise random: %.1fx '
              '(target >= 4)' % (b['kernel'][1] / max(b['random'][1],
                                                      1e-9)))

        print('c) streaming one cold file with and without drop-behind, '
              'median of %d' % args.rounds)

        def stream(share):
            path = os.path.join(smbd.share_path(share), names[0])
            make_cold(path)
            mbs, _ = run_readers(smbd, share, [names[0]], MIB, 'seq')
            time.sleep(0.3)     # the drop at close runs in the pool
            return mbs, resident_fraction(path)
        c = {m: median_of(args.rounds, lambda m=m: stream(m))
             for m in ('kernel', 'drop')}
        for mode in ('kernel', 'drop'):
            print('   %-9s %8.0f MB/s   resident after the read %5.1f%%' %
                  (mode, c[mode][0], 100 * c[mode][1]))
        print('   drop-behind: residency %.1f%% (target <= 5%%), '
              'throughput ratio %.2f (target >= 0.95)' %
              (100 * c['drop'][1], c['drop'][0] / c['kernel'][0]))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
