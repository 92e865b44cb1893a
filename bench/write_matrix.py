#!/usr/bin/python3
# The write cache's no-regression matrix, measured side by
# side in one run on a real smbd: one client (smb2-script pump, batch
# oplock) streams sequential writes of each block size with 1, 4 or 16
# requests in flight, then sends SMB2 FLUSH; MB/s count until the FLUSH
# returns, i.e. until the data is on the disk.  Median of --rounds,
# alternating the two sides of each cell.
#
#   pagecache   iotune with its defaults / the same share without iotune
#   odirect     iotune "direct io = writes" with its defaults / the same
#               with "write cache size = 0" (uncached direct writes)
#   control     a second share without iotune / the first (not in the
#               default run): what two identical shares measure on this
#               machine, the noise floor of every other ratio
#   odirect-control  a second share of uncached direct writes / the
#               first: the noise floor of the O_DIRECT column (on this
#               VM's disk a pair of identical direct-write shares keeps
#               a bias of up to about 10% for a whole run)
#   glusterfs   "vfs objects = iotune glusterfs" / "glusterfs" alone, on a
#               single-brick GlusterFS volume (--gluster); and a share on
#               a FUSE mount of the volume, without iotune, with Gluster's
#               write-behind on and off (the anchor)
#
# Both sides of a pair start on new connections (new smbd processes), and
# every smbd runs with glibc's malloc thresholds fixed (MALLOC_ENV): with
# the dynamic ones, a process's speed for large writes depended on what
# it had done before by up to 20%, so that two identical shares measured
# 0.80x and a pass-through cell 0.78x, with tight quartiles, in one run
# and 1.00x in the next.  --glibc-malloc-defaults measures without.
#
# Also the O_DIRECT goals (64 KiB cached writes next to 1 MiB direct
# writes and to what smbd's request path allows), and the CPU time smbd
# spends per MiB written, in all and in its main thread (perf's hardware
# counters are not available in these VMs: `perf stat -e instructions`
# says "not supported"; CPU time is read from /proc; bench/instructions.py
# counts instructions with callgrind).  All figures go to --json.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import json
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import harness  # noqa: E402
import reserve_cost  # noqa: E402
from benchlib import KIB, MIB, busy_since, machine_cpu, \
    median_alternating, quartiles, regression_summary, \
    size_name  # noqa: E402

BLOCKS = [4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 8 * MIB]
DEPTHS = [1, 4, 16]

# iotune's direct writes without its cache
DIO_UNCACHED = {'vfs objects': 'iotune', 'iotune:direct io': 'writes',
                'iotune:write cache size': '0'}

LOCAL_SHARES = {
    'pc_plain': {},
    'pc_plain_b': {},
    'pc_iotune': {'vfs objects': 'iotune'},
    'dio_uncached': DIO_UNCACHED,
    'dio_uncached_b': DIO_UNCACHED,
    'dio_iotune': {'vfs objects': 'iotune', 'iotune:direct io': 'writes'},
    'pc_sync': {'aio write size': '0'},
}

PAIRS = {
    'pagecache': ('pc_iotune', 'pc_plain'),
    'odirect': ('dio_iotune', 'dio_uncached'),
    'control': ('pc_plain_b', 'pc_plain'),
    'odirect-control': ('dio_uncached_b', 'dio_uncached'),
    'glusterfs': ('gl_iotune', 'gl_plain'),
    'glusterfs-control': ('gl_plain_b', 'gl_plain'),
    'fuse-wb-on': ('fuse_iotune', 'fuse_plain'),
    'fuse-wb-off': ('fuse_iotune', 'fuse_plain'),
}


# a share whose writes succeed at once, writing nothing (iotune_fault's
# 'pwrite skip'): the fastest smbd answers an SMB2 WRITE on this machine
NULL_WRITES = 'null_writes'
# each cached share's twin whose reservations cost nothing
FREE_TWIN = {'pagecache': 'pc_free_reservations',
             'odirect': 'dio_free_reservations',
             'glusterfs': 'gl_free_reservations'}
NULL_WRITE = 'pwrite skip\n'
COALESCE_BLOCKS = (16 * KIB, 64 * KIB)
COALESCE_DEPTHS = (4, 8, 16)
FREE_RESERVATION = 'fallocate skip\n'

# glibc's malloc thresholds, fixed for the smbd processes of the run (see
# --glibc-malloc-defaults): by default they move with what a process has
# allocated and freed before, and whether the buffers of large requests
# are faulted in and zeroed again depends on that history.
MALLOC_ENV = {'MALLOC_MMAP_THRESHOLD_': str(64 * MIB),
              'MALLOC_TRIM_THRESHOLD_': str(256 * MIB)}


def total_for(block, scale):
    """bytes per run: enough requests to measure, at most 256 MiB"""
    return int(min(256 * MIB, max(32 * MIB, block * 64)) * scale)


class Pumper:
    """One connection per share, kept open (a GlusterFS tree disconnect
    blocks about 10 s in glfs_fini).  delete: whether each run's file
    is deleted afterwards (on GlusterFS it is not: a file deleted through
    the FUSE mount stayed in gfapi's caches, and the next create failed
    with ACCESS_DENIED; on the FUSE mount, once the write-behind option
    changed, with OBJECT_PATH_NOT_FOUND)."""

    def __init__(self, smbd, delete=True):
        self.smbd = smbd
        self.clients = {}
        self.delete = delete
        self.busy = {}  # share -> the machine's CPU busy share per run
        self.flush_s = 0.0  # the last run's SMB2 FLUSH, seconds

    def client(self, share, key=None):
        """share's connection; key: another connection of its own"""
        key = key or share
        if key not in self.clients:
            self.clients[key] = harness.ScriptClient(self.smbd, share)
        return self.clients[key]

    def fresh(self, *shares):
        """New connections, so new smbd processes, for shares (or other
        connections' keys, which then end): both sides
        of a pair start with the same history.  (How much a process has
        allocated and freed before moves glibc's mmap and trim
        thresholds: a fresh process faults in and zeroes the buffers of
        large requests again, an older one reuses them.  Two identical
        shares measured 0.80x when one process had run a matrix before.)"""
        for share in shares:
            c = self.clients.pop(share, None)
            if c is not None:
                c.quit()

    def run(self, share, total, block, depth):
        """MB/s of writing total bytes in block-sized requests, depth in
        flight, until SMB2 FLUSH returns.  Every run writes a new file,
        which is deleted afterwards and the file systems synced: the
        next run starts with no blocks left to free or write back, so
        neither side of a pair pays for the other's file.  (Without
        delete, the file is truncated before the clock starts.)"""
        c = self.client(share)
        name = 'bench-%s.bin' % share
        c.open(name, 'batch')
        c.truncate(0)
        cpu = machine_cpu()
        started = time.monotonic()
        done, _ = c.pump('write', total, block, depth)
        flushing = time.monotonic()
        c.flush()
        elapsed = time.monotonic() - started
        self.flush_s = time.monotonic() - flushing
        self.busy.setdefault(share, []).append(busy_since(cpu))
        c.close()
        assert done == total, (done, total)
        if self.delete:
            os.unlink(os.path.join(self.smbd.share_path(share), name))
            os.sync()
        return total / elapsed / 1e6

    def run_reserving(self, share, total, block, depth):
        """run(), and the milliseconds smbd's main thread spent in the
        cache's reservation calls during it (iotune's counter
        wc_reserve_us, published by the connection's process once a
        second: read once it counts all of the run's writes)"""
        before = harness.iotune_counters(self.smbd, share)
        mbs = self.run(share, total, block, depth)
        writes = before.get('wc_writes_total', 0) + total // block
        after = harness.iotune_counters_until(
            self.smbd, share,
            lambda c: c.get('wc_writes_total', 0) >= writes)
        spent = after.get('wc_reserve_us', 0) - before.get('wc_reserve_us', 0)
        return mbs, spent / 1000

    def echo_us(self, share, count, depth, key=None):
        """microseconds per SMB2 ECHO, depth in flight, on share's
        connection (key: another of its own): the round trip of a
        request that does nothing"""
        _, seconds = self.client(share, key).pump('echo', count, 1, depth)
        return seconds / count * 1e6

    def median_busy(self, share, last):
        return statistics.median(self.busy[share][-last:])

    def quit(self):
        for c in self.clients.values():
            c.quit()


def paired(rounds, run_a, run_b):
    """One warm-up run of each (a fresh file system allocates slowly),
    then rounds of a and b next to each other, in alternating order; the
    ratio a/b of each pair cancels the machine's slow drift.  Returns the
    medians of a and b, and the quartiles of the ratios."""
    run_a()
    run_b()
    a, b, ratios = [], [], []
    for r in range(rounds):
        if r % 2 == 0:
            x, y = run_a(), run_b()
        else:
            y, x = run_b(), run_a()
        a.append(x)
        b.append(y)
        ratios.append(x / y)
    q = quartiles(ratios)
    return statistics.median(a), statistics.median(b), q


def matrix(pumper, kind, rounds, scale, blocks, depths):
    tuned, base = PAIRS[kind]
    cells = []
    for block in blocks:
        for depth in depths:
            total = total_for(block, scale)
            a, b, q = paired(
                rounds,
                lambda: pumper.run(tuned, total, block, depth),
                lambda: pumper.run(base, total, block, depth))
            cell = {'backend': kind, 'block': block, 'depth': depth,
                    'iotune_mbs': round(a, 1), 'base_mbs': round(b, 1),
                    'ratio': round(q[1], 3),
                    'ratio_q1': round(q[0], 3), 'ratio_q3': round(q[2], 3),
                    'iotune_busy': round(pumper.median_busy(tuned,
                                                            rounds), 3),
                    'base_busy': round(pumper.median_busy(base, rounds),
                                       3)}
            cells.append(cell)
            print('%-9s %6s x%-2d  iotune %7.0f  base %7.0f MB/s  %5.2fx'
                  '  (quartiles %.2f-%.2f)  CPUs busy %.0f%% / %.0f%%'
                  % (kind, size_name(block), depth, a, b, q[1], q[0],
                     q[2], cell['iotune_busy'] * 100,
                     cell['base_busy'] * 100), flush=True)
    return cells


def cpu_per_mib(pumper, share, block, depth, total):
    """CPU seconds per MiB written of smbd's children, and of their main
    threads alone (what the thread pool does is the difference)"""
    pumper.client(share)
    pids = pumper.smbd.child_pids()
    before = (harness.cpu_seconds(pids),
              harness.cpu_seconds(pids, main_thread_only=True))
    pumper.run(share, total, block, depth)
    after = (harness.cpu_seconds(pids),
             harness.cpu_seconds(pids, main_thread_only=True))
    mib = total / MIB
    return (after[0] - before[0]) / mib, (after[1] - before[1]) / mib


def cpu_table(pumper, rounds, scale):
    rows = []
    for block, depth in [(4 * KIB, 16), (64 * KIB, 8), (MIB, 8)]:
        total = int(256 * MIB * scale)
        for kind in ('pagecache', 'odirect'):
            tuned, base = PAIRS[kind]
            m = median_alternating(rounds, {
                'iotune': lambda: cpu_per_mib(pumper, tuned, block, depth,
                                              total),
                'base': lambda: cpu_per_mib(pumper, base, block, depth,
                                            total),
            })
            row = {'backend': kind, 'block': block, 'depth': depth,
                   'iotune_cpu_ms_per_mib': round(m['iotune'][0] * 1e3, 3),
                   'iotune_main_ms_per_mib': round(m['iotune'][1] * 1e3, 3),
                   'base_cpu_ms_per_mib': round(m['base'][0] * 1e3, 3),
                   'base_main_ms_per_mib': round(m['base'][1] * 1e3, 3)}
            rows.append(row)
            print('cpu %-9s %6s x%-2d  iotune %.2f (main thread %.2f)  '
                  'base %.2f (main thread %.2f) ms/MiB' %
                  (kind, size_name(block), depth,
                   row['iotune_cpu_ms_per_mib'],
                   row['iotune_main_ms_per_mib'],
                   row['base_cpu_ms_per_mib'],
                   row['base_main_ms_per_mib']), flush=True)
    return rows


# ECHOes of the untimed bursts around the sides of a round-trip cell
SPACER_ECHOES = 256


def round_trip_floor(pumper, kind, rounds, scale):
    """The goals for 4 KiB writes with one in flight, next to the floor of
    that cell: an SMB2 ECHO to the cached share.  With one request in
    flight a write cannot be answered faster than a request that does
    nothing, so base_us / echo_us is the most any cache in smbd could
    reach in that cell on this machine.  On the page-cache share also
    smbd's own cheapest write: a share with "aio write size = 0" writes
    on the main thread with no thread pool.

    Every side has a connection of its own that nothing else uses, and
    an untimed burst of ECHOes on yet another connection opens and ends
    each round: so no side ever runs right after its own connection was
    busy.  On this 2-vCPU VM that history alone moved an ECHO between
    24-45 us (the connection idle before) and 49-65 us (right after its
    own requests), and a cached write by some 15 us; the cell used to
    time the ECHO on the cached writes' connection, right after them or
    right before them, which put the ECHO and half the cached rounds in
    the slow state and the other sides in the fast one."""
    tuned, base = PAIRS[kind]
    block = 4 * KIB
    total = total_for(block, scale)
    count = total // block

    def writes(share):
        return lambda: flush_split(pumper, share, total, block)

    def spacer():
        pumper.echo_us(tuned, SPACER_ECHOES, 1, key='spacer-' + tuned)
        return (0.0, 0.0)

    fns = {
        'spacer_a': spacer,
        'echo': lambda: (pumper.echo_us(tuned, count, 1,
                                        key='echo-' + tuned), 0.0),
        'iotune': writes(tuned),
        'base': writes(base),
    }
    if kind == 'pagecache':
        fns['sync'] = writes('pc_sync')
    free = FREE_TWIN[kind]
    if free in pumper.smbd.shares:
        fns['free'] = writes(free)
    if NULL_WRITES in pumper.smbd.shares:
        fns['null'] = writes(NULL_WRITES)
    fns['spacer_b'] = spacer
    for fn in fns.values():
        fn()
    both = median_alternating(rounds, fns)
    # the cell's own connections end with it: their idle smbd processes
    # would stay up through the later cells of this smbd
    pumper.fresh('echo-' + tuned, 'spacer-' + tuned)
    for key in ('spacer_a', 'spacer_b'):
        del both[key]
    m = {k: v[0] for k, v in both.items()}
    row = {'backend': kind, 'block': block, 'depth': 1, 'writes': count}
    row.update({k + '_us': round(v, 1) for k, v in m.items()})
    row.update({k + '_flush_us': round(v[1], 2) for k, v in both.items()
                if k != 'echo'})
    row['ratio'] = round(m['base'] / m['iotune'], 3)
    row['ceiling'] = round(m['base'] / m['echo'], 3)
    extra = ''
    for key, what in (('sync', 'smbd writing on its main thread'),
                      ('null', 'a write that writes nothing'),
                      ('free', 'iotune with reservations that cost '
                               'nothing')):
        if key in m:
            extra += ', %s %.1f' % (what, m[key])
    print('%s 4K x1, us per request: SMB2 ECHO %.1f, iotune %.1f, without '
          '%.1f%s: iotune / without %.2f; the most any cache could reach, '
          'without / ECHO, %.2f; ECHO / iotune %.2f (goal >= 0.95)' %
          (kind, m['echo'], m['iotune'], m['base'], extra, row['ratio'],
           row['ceiling'], m['echo'] / m['iotune']), flush=True)
    print('%s 4K x1, of which the SMB2 FLUSH after the last write, us per '
          'request: %s' % (kind, ', '.join(
              '%s %.2f' % (k, v[1]) for k, v in both.items()
              if k != 'echo')), flush=True)
    return row


def count_us(mbs, block):
    """microseconds per request of block bytes at mbs MB/s"""
    return block / mbs


def flush_split(pumper, share, total, block):
    """(microseconds per request until the SMB2 FLUSH after the last
    write returns, the part of them that FLUSH took): where the time
    goes that the writes' own round trips do not explain"""
    us = count_us(pumper.run(share, total, block, 1), block)
    return us, pumper.flush_s * 1e6 / (total // block)


def coalescing_goal(pumper, kind, shares, rounds, scale):
    """The goal: cached 16 KiB and 64 KiB writes reach >= 0.9 of what
    1 MiB writes reach through the share without the cache, at the same
    depth (4, 8, 16 in flight).  shares: (cached, without the cache, the
    bound).  The bound is the cached share with iotune_fault below iotune
    answering every fallocate at once ('fallocate skip'): what the cache
    reaches when the reservation each cached write makes before it is
    acknowledged costs nothing; and, where the run has the share, the
    same writes answered at once writing nothing (the request path).
    Each cached run also gives the time smbd's main thread spent in the
    cache's reservation calls ('reserve ms'; inline calls block it: a
    round trip on GlusterFS, a wait for the file's direct writes in
    flight on O_DIRECT), and 'bytes' how much each run wrote."""
    tuned, base, free = shares
    rows = []
    for depth in COALESCE_DEPTHS:
        fns = {'1M without': lambda: pumper.run(
            base, total_for(MIB, scale), MIB, depth)}
        for block in COALESCE_BLOCKS:
            total = total_for(block, scale)
            fns['cached %s' % size_name(block)] = (
                lambda b=block, t=total: pumper.run_reserving(tuned, t, b,
                                                              depth))
            fns['free reservations %s' % size_name(block)] = (
                lambda b=block, t=total: pumper.run(free, t, b, depth))
            if NULL_WRITES in pumper.smbd.shares:
                fns['null %s' % size_name(block)] = (
                    lambda b=block, t=total: pumper.run(NULL_WRITES, t, b,
                                                        depth))
        for fn in fns.values():
            fn()        # a warm-up run of each
        m = median_alternating(rounds, fns)
        row = {'backend': kind, 'depth': depth}
        for b in COALESCE_BLOCKS:
            name = size_name(b)
            m['cached ' + name], m['reserve ms ' + name] = (
                m['cached ' + name])
            row['bytes ' + name] = total_for(b, scale)
        row.update({k: round(v, 1) for k, v in m.items()})
        rows.append(row)
        for b in COALESCE_BLOCKS:
            name = size_name(b)
            print('%s x%d: 1M without the cache %.0f MB/s; %s cached %.0f '
                  '(%.2f of it, goal >= 0.90), with free reservations %.0f '
                  '(%.2f)%s; main thread in reservations %.1f ms of %.1f '
                  'per cached run' % (
                      kind, depth, m['1M without'], name,
                      m['cached ' + name],
                      m['cached ' + name] / m['1M without'],
                      m['free reservations ' + name],
                      m['free reservations ' + name] / m['1M without'],
                      ', writing nothing %.0f (%.2f)' % (
                          m['null ' + name],
                          m['null ' + name] / m['1M without'])
                      if 'null ' + name in m else '',
                      m['reserve ms ' + name],
                      row['bytes ' + name] / m['cached ' + name] / 1e3),
                  flush=True)
    return rows


def summary(cells):
    print('\nno-regression goal (iotune >= 0.97x in every cell); a cell is '
          'a clear regression when even its upper quartile is below 0.97:')
    for kind in sorted({c['backend'] for c in cells}):
        worst, below, clear, n = regression_summary(cells, kind)
        print('  %-9s worst median %.2fx (%s x%d); medians below 0.97: %d, '
              'clear regressions: %d, of %d cells' %
              (kind, worst['ratio'], size_name(worst['block']),
               worst['depth'], below, clear, n))


def parse_sizes(text):
    out = []
    for word in text.split(','):
        mult = MIB if word.upper().endswith('M') else KIB
        out.append(int(word[:-1]) * mult)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--scale', type=float, default=1.0,
                    help='multiplies the bytes written per run')
    ap.add_argument('--blocks', default=','.join(size_name(b)
                                                   for b in BLOCKS))
    ap.add_argument('--depths', default=','.join(str(d) for d in DEPTHS))
    ap.add_argument('--backends', default='pagecache,odirect',
                    help='local shares to measure (pagecache, odirect, '
                    'control, odirect-control); "" for none (with '
                    '--gluster: GlusterFS only)')
    ap.add_argument('--gluster', action='store_true',
                    help='also GlusterFS (installs and starts it)')
    ap.add_argument('--no-cpu', action='store_true')
    ap.add_argument('--matrix-only', action='store_true',
                    help='the matrices alone (a second run for the '
                    'no-regression goal): no round-trip floor, coalescing '
                    'goal, CPU table, reservation cost or FUSE mount')
    ap.add_argument('--glibc-malloc-defaults', action='store_true',
                    help='run smbd with glibc\'s dynamic malloc thresholds '
                    '(by default the run fixes them for both sides, '
                    'see MALLOC_ENV)')
    ap.add_argument('--path', help='a directory for the local shares '
                    '(default: the work dir, on the repository\'s disk)')
    ap.add_argument('--json', default=os.path.join(
        harness.REPO, 'build', 'write_matrix.json'))
    args = ap.parse_args()
    blocks = parse_sizes(args.blocks)
    depths = [int(d) for d in args.depths.split(',')]
    result = {'date': time.strftime('%Y-%m-%d'), 'cells': [], 'cpu': [],
              'floor': []}

    harness.install_module()
    if not args.glibc_malloc_defaults:
        os.environ.update(MALLOC_ENV)  # inherited by smbd
    result['malloc_env'] = ({} if args.glibc_malloc_defaults else
                            MALLOC_ENV)
    if args.backends:
        local_matrix(args, blocks, depths, result)
    if args.gluster:
        import gluster_bench
        gl = gluster_bench.run(args, blocks, depths, sys.modules[__name__])
        result['cells'] += gl['cells']
        result['floor'] += gl['floor']
        result['coalescing'] = (result.get('coalescing', []) +
                                gl['coalescing'])
    summary(result['cells'])
    with open(args.json, 'w') as f:
        json.dump(result, f, indent=1)
    print('\nwrote %s' % args.json)
    return 0


def local_matrix(args, blocks, depths, result):
    """the page-cache and O_DIRECT shares on this machine's disk"""
    workdir = harness.scratch_dir('bench-matrix-')
    shares = {name: dict(params) for name, params in LOCAL_SHARES.items()}
    control = os.path.join(workdir, 'free-reservations.ctl')
    with open(control, 'w') as f:
        f.write(FREE_RESERVATION)
    null_control = os.path.join(workdir, 'null-writes.ctl')
    with open(null_control, 'w') as f:
        f.write(NULL_WRITE)
    shares[NULL_WRITES] = {'vfs objects': 'iotune_fault',
                           'iotune_fault:control': null_control}
    for twin, cached in (('dio_free_reservations', 'dio_iotune'),
                         ('pc_free_reservations', 'pc_iotune')):
        shares[twin] = dict(shares[cached],
                            **{'vfs objects': 'iotune iotune_fault',
                               'iotune_fault:control': control})
    if args.path:
        for name, params in shares.items():
            params['path'] = os.path.join(args.path, name)
            os.makedirs(params['path'], exist_ok=True)
    result['path'] = args.path or workdir
    with harness.Smbd(workdir, shares, log_level='0') as smbd:
        pumper = Pumper(smbd)
        kinds = args.backends.split(',')
        for kind in kinds:
            pumper.fresh(*PAIRS[kind])
            result['cells'] += matrix(pumper, kind, args.rounds,
                                      args.scale, blocks, depths)
        if not args.matrix_only:
            local_goals(args, pumper, kinds, result)
        pumper.quit()
    if not args.matrix_only:
        cost = reserve_cost.measure(smbd.share_path(PAIRS[kinds[0]][0]),
                                    args.rounds)
        print(reserve_cost.describe(cost))
        result['reserve_cost'] = cost
    shutil.rmtree(workdir, ignore_errors=True)


def local_goals(args, pumper, kinds, result):
    """the round-trip floors, the coalescing goal on O_DIRECT, CPU"""
    for kind in ('pagecache', 'odirect'):
        if kind in kinds:
            result['floor'].append(round_trip_floor(
                pumper, kind, args.rounds, args.scale))
    if 'odirect' in kinds:
        result['coalescing'] = coalescing_goal(
            pumper, 'odirect', ('dio_iotune', 'dio_uncached',
                                'dio_free_reservations'),
            args.rounds, args.scale)
    if not args.no_cpu:
        result['cpu'] = cpu_table(pumper, args.rounds, args.scale)


if __name__ == '__main__':
    sys.exit(main())
