#!/usr/bin/python3
# Read-ahead benchmarks on a real smbd, each printed as ratios measured in
# one run (median of --rounds, modes alternating):
#   a) concurrent readers of distinct cold files: adaptive vs kernel vs
#      off: throughput, and bytes read from storage per byte served (the
#      block device's read bytes); once with all of the RAM, once with smbd
#      in a memory cgroup smaller than the files (seed 004's situation),
#      where adaptive with memory pressure ignored (readahead pressure =
#      0) runs beside them; the goal: adaptive at least as fast as the
#      better of kernel and off (median of the rounds' ratios; every mode
#      reads the same files, linked into every share), reading at most
#      1.05 bytes per byte served; a second kernel share, the control,
#      gets the same ratio: what a mode that reads as one of them reaches;
#   b) random 4 KiB readers of a cold file: fadvise = random vs kernel:
#      storage bytes per byte served;
#   c) streaming a file with drop-behind vs without: page-cache residency
#      after the read (fincore) and throughput (the same file, linked into
#      both shares; the median of each round's ratio).
# Files are made cold with POSIX_FADV_DONTNEED before every measurement.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import json
import mmap
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import harness  # noqa: E402
from memlimit import MemoryLimit  # noqa: E402
from benchlib import alternating, busy_since, machine_cpu, \
    median_alternating, median_of_results, quartiles  # noqa: E402

MIB = 1024 * 1024

SHARES = {
    'kernel': {'vfs objects': 'iotune', 'iotune:readahead': 'kernel'},
    # the control: a second share like kernel, whose ratio to the better
    # of kernel and off is what a mode that reads as they do reaches
    'kernel2': {'vfs objects': 'iotune', 'iotune:readahead': 'kernel'},
    'adaptive': {'vfs objects': 'iotune', 'iotune:readahead': 'adaptive'},
    'adaptive_nopsi': {'vfs objects': 'iotune',
                       'iotune:readahead': 'adaptive',
                       'iotune:readahead pressure': '0'},
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


def pump_readers(smbd, share, names, file_bytes, depth):
    """Concurrent readers of distinct files, one connection (smbd process)
    each, streaming 1 MiB reads with depth of them in flight as Windows
    clients do (smb2-script pump): (MB/s, bytes read from the block device
    per byte served)"""
    paths = [os.path.join(smbd.share_path(share), n) for n in names]
    for p in paths:
        make_cold(p)
    clients = [harness.ScriptClient(smbd, share) for _ in names]
    for c, n in zip(clients, names):
        c.open(n)
    got = [0] * len(names)

    def read(i):
        got[i] = clients[i].pump('read', file_bytes, MIB, depth)[0]
    threads = [threading.Thread(target=read, args=(i,))
               for i in range(len(names))]
    storage0 = device_read_bytes(paths[0])
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    storage = device_read_bytes(paths[0]) - storage0
    for c in clients:
        c.close()
        c.quit()
    served = sum(got)
    if served != file_bytes * len(names):
        raise RuntimeError('readers got %d of %d bytes' %
                           (served, file_bytes * len(names)))
    return served / wall / 1e6, storage / served


def disk_alone(paths, file_bytes, depth):
    """The bound of a): the same files read straight from the disk, no
    smbd and no page cache (O_DIRECT), 1 MiB reads, depth in flight per
    file (a thread each): MB/s"""
    def read(path, first):
        buf = mmap.mmap(-1, MIB)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            for off in range(first * MIB, file_bytes, depth * MIB):
                os.preadv(fd, [buf], off)
        finally:
            os.close(fd)
            buf.close()
    threads = [threading.Thread(target=read, args=(p, i))
               for p in paths for i in range(depth)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return file_bytes * len(paths) / (time.monotonic() - t0) / 1e6, 1.0


def adaptive_counters(smbd):
    """the adaptive share's read-ahead counters (iotune-stat --json)"""
    time.sleep(1.6)         # the last processes published
    run = subprocess.run([os.path.join(harness.REPO, 'tools', 'iotune-stat'),
                          '--configfile', smbd.conf, '--json'],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return {}
    return json.loads(run.stdout)['shares'].get('adaptive', {}).get(
        'counters', {})


def who_read_ahead(before, after):
    """Between two adaptive_counters(): whose read-ahead served the
    adaptive share's files.  Without memory pressure adaptive leaves
    reads to Linux's read-ahead: it then runs what the kernel share runs,
    and its ratio to the better of kernel and off is the spread of two
    alike runs, not a difference of the modes."""
    d = {k: after.get(k, 0) - before.get(k, 0) for k in (
        'fadvise_calls', 'ra_takeovers', 'ra_handbacks', 'ra_prefetch_calls',
        'ra_streams_detected')}
    if d['ra_streams_detected'] == 0:
        d['text'] = 'no counters'
    elif d['fadvise_calls'] + d['ra_takeovers'] + \
            d['ra_prefetch_calls'] == 0:
        d['text'] = ('all read with Linux\'s read-ahead (no takeover, no '
                     'prefetch of its own: %d streams)' %
                     d['ra_streams_detected'])
    else:
        # fadvise_calls counts the handovers' advice too
        opens = d['fadvise_calls'] - d['ra_takeovers'] - d['ra_handbacks']
        d['text'] = ('iotune\'s windows: switched Linux\'s off at %d '
                     'opens and %d reads, %d back, %d prefetches of its own'
                     % (opens, d['ra_takeovers'],
                        d['ra_handbacks'], d['ra_prefetch_calls']))
    return d


def memory_pressure_avg10():
    """Linux's share of the last 10 s in which some tasks stalled for
    memory, in percent (None without PSI)"""
    try:
        with open('/proc/pressure/memory') as f:
            return float(f.read().split()[1].split('=')[1])
    except (OSError, IndexError, ValueError):
        return None


def wait_memory_calm(timeout=60):
    """The whole-RAM run is the case without memory pressure, where
    adaptive leaves Linux's read-ahead on: wait until the pressure of an
    earlier run (the cgroup run of a benchmark just before) has decayed
    out of Linux's 10 s average; the average when it starts"""
    deadline = time.monotonic() + timeout
    avg = memory_pressure_avg10()
    while avg is not None and avg >= 1.0 and time.monotonic() < deadline:
        time.sleep(1)
        avg = memory_pressure_avg10()
    print('   memory pressure (PSI, some, avg10) at the start: %s' %
          ('%.2f%%' % avg if avg is not None else 'no PSI'))
    return avg


def read_ahead_kb(path):
    st = os.stat(path)
    try:
        with open('/sys/dev/block/%d:%d/queue/read_ahead_kb' %
                  (os.major(st.st_dev), os.minor(st.st_dev))) as f:
            return f.read().strip()
    except OSError:
        return '?'


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


def write_random_file(path, mib):
    with open(path, 'wb') as f:
        for _ in range(mib):
            f.write(os.urandom(MIB))


def part_a(args, smbd, result):
    names = ['r%02d.bin' % i for i in range(args.readers)]
    blob = os.urandom(args.file_mib * MIB)
    # the same files, linked into every share: every mode reads the same
    # blocks of the disk (as in part c)
    for n in names:
        with open(os.path.join(smbd.share_path('off'), n), 'wb') as f:
            f.write(blob)
    for share in ('kernel', 'kernel2', 'adaptive', 'adaptive_nopsi'):
        for n in names:
            os.link(os.path.join(smbd.share_path('off'), n),
                    os.path.join(smbd.share_path(share), n))

    def compare(label, key, modes):
        fns = {m: lambda m=m: pump_readers(smbd, m, names,
                                           args.file_mib * MIB, args.depth)
               for m in modes}
        before = adaptive_counters(smbd)
        fns['disk'] = lambda: disk_alone(
            [os.path.join(smbd.share_path('off'), n) for n in names],
            args.file_mib * MIB, args.depth)
        runs = alternating(args.rounds, fns)
        med = {m: median_of_results(v) for m, v in runs.items()}
        # each round's adaptive over the better of kernel and off
        def over_best(mode):
            return quartiles([m[0] / max(k[0], o[0]) for m, k, o in
                              zip(runs[mode], runs['kernel'], runs['off'])])
        q = over_best('adaptive')
        qc = over_best('kernel2')
        print('   %s:' % label)
        for mode in fns:
            print('     %-14s %6.0f MB/s   storage/served %.2f' %
                  (mode, med[mode][0], med[mode][1]))
        print('     adaptive / the better of kernel and off: %.2f (median '
              'of the rounds, quartiles %.2f-%.2f; goal '
              '>= 1.0); adaptive reads %.2f bytes per byte served (goal '
              '<= 1.05); of the disk alone (O_DIRECT, no smbd): adaptive '
              '%.2f, off %.2f, kernel %.2f' % (
                  q[1], q[0], q[2], med['adaptive'][1],
                  med['adaptive'][0] / med['disk'][0],
                  med['off'][0] / med['disk'][0],
                  med['kernel'][0] / med['disk'][0]), flush=True)
        print('     the control (kernel2, a share like kernel) / the '
              'better of kernel and off: %.2f (quartiles %.2f-%.2f)' %
              (qc[1], qc[0], qc[2]), flush=True)
        who = who_read_ahead(before, adaptive_counters(smbd))
        print('     adaptive\'s files: %s' % who['text'], flush=True)
        result['a'][key] = {m: {'mbs': med[m][0], 'waste': med[m][1]}
                            for m in fns}
        result.setdefault('a_who', {})[key] = who
        result.setdefault('a_ratio', {})[key] = {
            'ratio': q[1], 'q1': q[0], 'q3': q[2],
            'control': {'ratio': qc[1], 'q1': qc[0], 'q3': qc[2]}}

    result['read_ahead_kb'] = read_ahead_kb(smbd.share_path('kernel'))
    print('a) %d readers of distinct cold %d MiB files, 1 MiB reads, '
          '%d in flight each, median of %d (storage: the block '
          'device\'s read bytes; this disk\'s read_ahead_kb: %s)' %
          (args.readers, args.file_mib, args.depth, args.rounds,
           result['read_ahead_kb']))
    result['all_ram_psi_avg10'] = wait_memory_calm()
    compare('the whole RAM for the page cache', 'all_ram',
            ['kernel', 'adaptive', 'off', 'kernel2'])
    limit = MemoryLimit(args.memory_limit_mib * MIB)
    if limit.path is None:
        print('   memory-limited run skipped: no memory cgroup')
        return
    try:
        limit.add(smbd.proc.pid)
        compare('smbd in a memory cgroup of %d MiB (%.0f%% of the files), '
                'as when many clients share the RAM' %
                (args.memory_limit_mib, 100.0 * args.memory_limit_mib /
                 (args.readers * args.file_mib)), 'cgroup',
                ['kernel', 'adaptive', 'off', 'adaptive_nopsi', 'kernel2'])
    finally:
        limit.remove()


def part_b(args, smbd, result):
    print('b) 4 random 4 KiB readers of one cold 256 MiB file, median '
          'of %d' % args.rounds)
    for share in ('kernel', 'random'):
        write_random_file(os.path.join(smbd.share_path(share), 'big.bin'),
                          256)

    def random_readers(share):
        make_cold(os.path.join(smbd.share_path(share), 'big.bin'))
        return run_readers(smbd, share, ['big.bin'] * 4, 4096, 'rand',
                           count=1500)
    b = median_alternating(args.rounds, {
        m: lambda m=m: random_readers(m) for m in ('kernel', 'random')})
    for mode in ('kernel', 'random'):
        print('   %-9s %8.1f MB/s   storage/served %.2f' %
              (mode, b[mode][0], b[mode][1]))
    print('   storage per byte served, kernel / fadvise random: %.1fx '
          '(target >= 4)' % (b['kernel'][1] / max(b['random'][1], 1e-9)))
    result['b'] = {m: {'mbs': b[m][0], 'waste': b[m][1]}
                   for m in ('kernel', 'random')}


def part_c(args, smbd, result):
    """drop-behind; pump_readers makes the file cold before every round,
    so neither side reads it from the page cache"""
    print('c) streaming one cold %d MiB file (1 MiB reads, %d in flight) '
          'with and without drop-behind, made cold before every round, '
          'median of %d' % (args.stream_mib, args.depth, args.rounds))
    stream_bytes = args.stream_mib * MIB
    # one file, linked into both shares: the same blocks on the disk (two
    # files written one after the other lie on different blocks, and a
    # stream near the disk's speed may read one faster than the other)
    first = os.path.join(smbd.share_path('kernel'), 'stream.bin')
    write_random_file(first, args.stream_mib)
    os.link(first, os.path.join(smbd.share_path('drop'), 'stream.bin'))

    def stream(share):
        path = os.path.join(smbd.share_path(share), 'stream.bin')
        cpu = machine_cpu()
        mbs, _ = pump_readers(smbd, share, ['stream.bin'], stream_bytes,
                              args.depth)
        busy = busy_since(cpu)
        time.sleep(0.3)     # the drop at close runs in the pool
        return mbs, resident_fraction(path), busy
    # the ratio of each round's pair (this disk's speed drifts between
    # rounds by up to 2x: a ratio of the medians would mostly show that)
    runs = alternating(args.rounds, {
        m: lambda m=m: stream(m) for m in ('kernel', 'drop')})
    c = {m: median_of_results(v) for m, v in runs.items()}
    q = quartiles([d[0] / k[0] for d, k in zip(runs['drop'],
                                                 runs['kernel'])])
    for mode in ('kernel', 'drop'):
        print('   %-9s %8.0f MB/s   resident after the read %5.1f%%   CPUs '
              'busy %.0f%%' % (mode, c[mode][0], 100 * c[mode][1],
                               100 * c[mode][2]))
    print('   drop-behind: residency %.1f%% (goal <= 5%%), throughput ratio '
          '%.2f (quartiles %.2f-%.2f of the rounds\' ratios; goal >= 0.95)'
          % (100 * c['drop'][1], q[1], q[0], q[2]))
    result['c'] = {m: {'mbs': c[m][0], 'resident': c[m][1],
                       'busy': c[m][2]}
                   for m in ('kernel', 'drop')}
    result['c'].update({'ratio': q[1], 'ratio_q1': q[0], 'ratio_q3': q[2]})


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--readers', type=int, default=16)
    ap.add_argument('--file-mib', type=int, default=48)
    ap.add_argument('--stream-mib', type=int, default=512)
    ap.add_argument('--depth', type=int, default=4,
                    help='reads in flight per reader in a)')
    ap.add_argument('--memory-limit-mib', type=int, default=192,
                    help='memory cgroup of the second run of a)')
    ap.add_argument('--parts', default='a,b,c')
    ap.add_argument('--json', default=os.path.join(
        harness.REPO, 'build', 'readahead.json'))
    args = ap.parse_args()
    result = {'date': time.strftime('%Y-%m-%d'), 'readers': args.readers,
              'file_mib': args.file_mib, 'stream_mib': args.stream_mib,
              'depth': args.depth, 'rounds': args.rounds,
              'memory_limit_mib': args.memory_limit_mib, 'a': {}}
    parts = {'a': part_a, 'b': part_b, 'c': part_c}
    harness.install_module()
    workdir = harness.scratch_dir('bench-ra-')
    with harness.Smbd(workdir, SHARES, log_level='0') as smbd:
        for name in args.parts.split(','):
            parts[name](args, smbd, result)
    shutil.rmtree(workdir, ignore_errors=True)
    with open(args.json, 'w') as f:
        json.dump(result, f, indent=1)
    print('\nwrote %s' % args.json)
    return 0


if __name__ == '__main__':
    sys.exit(main())
