#!/usr/bin/python3
# Writes docs/benchmarks.md and its charts (docs/benchmarks/*.png) from the
# JSON results of bench/write_matrix.py and bench/readahead.py, with the
# machine and date they were measured on.  bench/run.sh runs the
# benchmarks and then this.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import json
import os
import platform
import subprocess
import sys

from benchlib import MIB, passes_by, regression_summary, \
    size_name
from bounds import exact_reservation_bound, free_plus_reserving, \
    one_trip_at_backend_speed, one_trip_per_depth

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))

BACKENDS = {
    'pagecache': 'page-cache share (ext4, local disk)',
    'control': 'control: a second share without iotune / the first '
               '(the noise floor of this machine)',
    'odirect': 'O_DIRECT share (`iotune:direct io = writes`)',
    'odirect-control': 'O_DIRECT control: a second share of uncached '
                       'direct writes / the first (the noise floor of '
                       'the O_DIRECT column)',
    'glusterfs': 'GlusterFS through `vfs_glusterfs`',
    'glusterfs-control': 'GlusterFS control: a second share through '
                         '`vfs_glusterfs` without iotune / the first (the '
                         'noise floor of the GlusterFS column)',
    'fuse-wb-on': 'GlusterFS FUSE mount, GlusterFS write-behind on',
    'fuse-wb-off': 'GlusterFS FUSE mount, GlusterFS write-behind off',
}


def pyplot():
    """matplotlib's pyplot, loaded for the charts alone: the report's
    text, and the tests that read it (tests/integration/
    test_bench_tools.py, also in the Debian 13 chroot, which has no
    matplotlib), need none"""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


# the pair of identical shares whose spread is printed under a column
CONTROL_OF = {'odirect': 'odirect-control', 'pagecache': 'control',
              'glusterfs': 'glusterfs-control'}


def control_of(cells, backend):
    """the control pair of a column: its own, or (runs before GlusterFS
    had one) the page-cache share's"""
    name = CONTROL_OF.get(backend, 'control')
    if any(c['backend'] == name for c in cells):
        return name
    return 'control'


def control_spread(cells, name, depth=None):
    """the lowest lower and the highest upper quartile of a control
    pair's cells (at one depth, or all), or None"""
    at = [c for c in cells if c['backend'] == name and
          depth in (None, c['depth'])]
    if not at:
        return None
    return (min(c['ratio_q1'] for c in at), max(c['ratio_q3'] for c in at))


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        return out.strip().splitlines()[0] if out.strip() else '?'
    except OSError:
        return '?'


def machine():
    cpu = '?'
    with open('/proc/cpuinfo') as f:
        for line in f:
            if line.startswith('model name'):
                cpu = line.split(':', 1)[1].strip()
                break
    with open('/proc/meminfo') as f:
        mem = int(f.readline().split()[1]) / 1024 / 1024
    debian = open('/etc/debian_version').read().strip()
    samba = first_line(['dpkg-query', '-W', '-f=${Version}\n', 'samba'])
    return [('CPU', '%s, %d cores' % (cpu, os.cpu_count())),
            ('memory', '%.0f GiB' % mem),
            ('system', 'Debian %s, Linux %s' % (debian, platform.release())),
            ('samba', samba),
            ('file system of the local shares',
             first_line(['findmnt', '-n', '-o', 'SOURCE,FSTYPE',
                         '--target', REPO]))]


def write_chart(cells, backend, out):
    mine = [c for c in cells if c['backend'] == backend]
    depths = sorted({c['depth'] for c in mine})
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, depth in enumerate(depths):
        row = sorted((c for c in mine if c['depth'] == depth),
                     key=lambda c: c['block'])
        xs = [c['block'] for c in row]
        color = 'C%d' % i
        ax.plot(xs, [c['iotune_mbs'] for c in row], '-o', color=color,
                label='iotune, %d in flight' % depth)
        ax.plot(xs, [c['base_mbs'] for c in row], '--x', color=color,
                label='without iotune, %d in flight' % depth)
    ax.set_xscale('log', base=2)
    blocks = sorted({c['block'] for c in mine})
    ax.set_xticks(blocks)
    ax.set_xticklabels([size_name(b) for b in blocks])
    ax.set_xlabel('client write size')
    ax.set_ylabel('MB/s until on disk (median)')
    ax.set_title('Writes: ' + BACKENDS.get(backend, backend).replace('`', ''))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def cell(cells, backend, block, depth):
    for c in cells:
        if (c['backend'], c['block'], c['depth']) == (backend, block,
                                                      depth):
            return c
    return None


def ratio_table(cells, backend):
    mine = [c for c in cells if c['backend'] == backend]
    depths = sorted({c['depth'] for c in mine})
    blocks = sorted({c['block'] for c in mine})
    lines = ['| write size | ' + ' | '.join('x%d' % d for d in depths) +
             ' |', '|---' * (len(depths) + 1) + '|']
    for b in blocks:
        cols = []
        for d in depths:
            c = cell(mine, backend, b, d)
            cols.append('%.2f (%.2f-%.2f)' % (c['ratio'], c['ratio_q1'],
                                              c['ratio_q3']))
        lines.append('| %s | %s |' % (size_name(b), ' | '.join(cols)))
    name = control_of(cells, backend)
    if backend not in CONTROL_OF.values() and control_spread(cells, name):
        spreads = [control_spread(cells, name, d) for d in depths]
        cols = ['%.2f-%.2f' % sp if sp else '-' for sp in spreads]
        lines.append('| %s spread | %s |' % (name, ' | '.join(cols)))
    return lines


def readahead_chart(ra, out):
    runs = [k for k in ('all_ram', 'cgroup') if k in ra['a']]
    labels = {'all_ram': 'all RAM free',
              'cgroup': 'smbd in a %d MiB cgroup' % ra['memory_limit_mib']}
    modes = ['kernel', 'adaptive', 'off']
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8))
    width = 0.8 / len(modes)
    for j, (key, ylabel) in enumerate([('mbs', 'MB/s served'),
                                       ('waste', 'bytes read per byte '
                                        'served')]):
        ax = axes[j]
        for i, mode in enumerate(modes):
            ax.bar([r + i * width for r in range(len(runs))],
                   [ra['a'][run][mode][key] for run in runs], width,
                   label='readahead = ' + mode)
        ax.set_xticks([r + width for r in range(len(runs))])
        ax.set_xticklabels([labels[r] for r in runs], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.grid(True, axis='y', alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle('%d readers of distinct cold %d MiB files' %
                 (ra['readers'], ra['file_mib']))
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def dropbehind_chart(ra, out):
    c = ra['c']
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(7, 3.4))
    names = ['without drop-behind', 'drop behind = yes']
    axes[0].bar(names, [100 * c['kernel']['resident'],
                        100 * c['drop']['resident']], color=['C0', 'C2'])
    axes[0].set_ylabel('% of the file in the page cache after')
    axes[1].bar(names, [c['kernel']['mbs'], c['drop']['mbs']],
                color=['C0', 'C2'])
    axes[1].set_ylabel('MB/s')
    for ax in axes:
        ax.tick_params(axis='x', labelsize=8)
        ax.grid(True, axis='y', alpha=0.3)
    fig.suptitle('Streaming one cold %d MiB file' % ra['stream_mib'])
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def write_section(wm, charts, md):
    cells = wm['cells']
    md += ['## Writes: iotune (defaults) vs the same share without it', '',
           'MB/s until the data is on disk (from the first write until '
           'the SMB2 FLUSH after the last one returns), one client '
           '(tests/clients/smb2-script) holding a batch oplock, x1/x4/x16 '
           'requests in flight, median of alternating rounds; ratio = '
           'iotune / '
           'without, with the quartiles of the per-round ratios.  Writes '
           'of the bypass size or larger pass straight through, so those '
           'cells should read about 1.0; their spread is the noise of '
           'this machine.', '']
    if wm.get('malloc_env'):
        md += ['Both sides run on new connections per backend, with '
               'glibc\'s malloc thresholds fixed for every smbd (%s): '
               'with the dynamic ones, how fast a process takes large '
               'writes depends on what it allocated and freed before, by '
               'up to 20%%, and two identical shares read 0.80x.' %
               ', '.join('`%s=%s`' % kv for kv in
                         sorted(wm['malloc_env'].items())), '']
    for backend in BACKENDS:
        if not any(c['backend'] == backend for c in cells):
            continue
        png = 'write-%s.png' % backend
        write_chart(cells, backend, os.path.join(charts, png))
        md += ['### ' + BACKENDS[backend], '',
               '![%s](benchmarks/%s)' % (backend, png), '']
        md += ratio_table(cells, backend) + ['']
        worst, below, clear, n = regression_summary(cells, backend)
        md += ['Worst median %.2f (%s x%d); medians below 0.97: %d of %d '
               'cells; cells whose upper quartile is below 0.97 (clear '
               'regressions): %d.' %
               (worst['ratio'], size_name(worst['block']), worst['depth'],
                below, n, clear), '']
    if wm.get('cpu'):
        md += ['### CPU per MiB written (all smbd threads; main thread)',
               '', '| share | writes | iotune | without |',
               '|---|---|---|---|']
        for r in wm['cpu']:
            md.append('| %s | %s x%d | %.2f (%.2f) ms | %.2f (%.2f) ms |' %
                      (r['backend'], size_name(r['block']), r['depth'],
                       r['iotune_cpu_ms_per_mib'],
                       r.get('iotune_main_ms_per_mib', float('nan')),
                       r['base_cpu_ms_per_mib'],
                       r.get('base_main_ms_per_mib', float('nan'))))
        md.append('')


def floor_section(wm, md):
    md += ['### One write in flight: the round trip', '',
           'With one request in flight, a write cannot be answered faster '
           'than an SMB2 ECHO, a request that does nothing, to the same '
           'share; nor faster than a WRITE that writes nothing (a '
           'share whose only module, the test module `iotune_fault`, '
           'answers every write at once: smbd\'s own request path).  '
           '"free res." is iotune with `iotune_fault` below it answering '
           'every `fallocate` at once: iotune without the cost of its '
           'reservations.  On the page-cache share, "smbd alone" is a '
           'share with `aio write size = 0`: smbd writes on its main '
           'thread, its cheapest write path.  Microseconds per request '
           'until the SMB2 FLUSH after the last write returns, medians.  '
           'Each side has a connection of its own, and an untimed burst '
           'of ECHOes on another connection opens and ends each round, '
           'so that no side runs right after its own connection was '
           'busy: on this VM that history alone moved an ECHO between '
           'about 25-45 us and 50-65 us (bench/write_matrix.py, '
           'round_trip_floor()).',
           '', '| share | SMB2 ECHO | null WRITE | iotune | free res. | '
           'without | smbd alone | iotune / without | ECHO / iotune |',
           '|---|---|---|---|---|---|---|---|---|']

    def us(r, key):
        return '%.1f' % r[key] if key in r else '-'
    for r in wm['floor']:
        md.append('| %s | %.1f | %s | %.1f | %s | %.1f | %s | %.2f | '
                  '%.2f |' % (r['backend'], r['echo_us'], us(r, 'null_us'),
                              r['iotune_us'], us(r, 'free_us'),
                              r['base_us'], us(r, 'sync_us'), r['ratio'],
                              r['echo_us'] / r['iotune_us']))
    md.append('')
    md += flush_lines(wm)


# the floor rows' shares, as flush_lines() names them
FLUSH_NAMES = (('iotune', 'iotune'), ('free', 'free res.'),
               ('null', 'null WRITE'), ('base', 'without'),
               ('sync', 'smbd alone'))


def flush_lines(wm):
    """what the SMB2 FLUSH after the last write adds to each request of
    the round-trip cells (older runs: nothing)"""
    rows = [r for r in wm.get('floor', []) if 'iotune_flush_us' in r]
    if not rows:
        return []
    parts = ['%s (%d writes): %s' % (r['backend'], r['writes'], ', '.join(
        '%s %.2f' % (name, r[key + '_flush_us'])
        for key, name in FLUSH_NAMES if key + '_flush_us' in r))
        for r in rows]
    return ['Of those microseconds per request, the SMB2 FLUSH after the '
            'last write (it returns once the file is on disk): %s.  The '
            'writes without it: ECHO / (iotune - its FLUSH) %s.' % (
                '; '.join(parts), ', '.join(
                    '%s %.2f' % (r['backend'], writes_alone(r))
                    for r in rows)), '']


def writes_alone(r):
    """ECHO / a cached write with one in flight, the FLUSH after the
    last write left out"""
    return r['echo_us'] / (r['iotune_us'] - r['iotune_flush_us'])


# where a reservation is a round trip (IOTUNE_WC_RESERVE_SLOW_US): the
# share's caches reserve in batches
SLOW_RESERVATION_US = 50


def floor_row(wm, backend):
    """the round-trip floor row of a backend ({} if it has none)"""
    for r in wm.get('floor', []):
        if r['backend'] == backend:
            return r
    return {}


def round_trip_us(wm, backend):
    """what one reservation adds to a cached 4 KiB write with one in
    flight, in this run: the cached write less the same with free
    reservations (the floor rows)"""
    r = floor_row(wm, backend)
    if 'free_us' not in r:
        return 0
    return r['iotune_us'] - r['free_us']


def reservation_alone_us(wm, backend):
    """a reservation measured alone, without smbd (bench/gfapi_cost.py):
    the least a round trip costs, so the stricter estimate"""
    return floor_row(wm, backend).get('fallocate_us', 0)


def coalescing_rows(wm):
    """cached 16K and 64K writes / 1M writes without the cache, same
    depth; the bounds: the same with reservations that cost nothing,
    and where a reservation is a round trip, one per depth's writes"""
    rows = []
    for r in wm.get('coalescing', []):
        trip = round_trip_us(wm, r['backend'])
        for size in ('16K', '64K'):
            got = r['cached ' + size] / r['1M without']
            free = r['free reservations ' + size] / r['1M without']
            detail = 'with reservations that cost nothing: %.2f' % free
            if trip >= SLOW_RESERVATION_US:
                detail += ('; estimates (not bounds), one reservation '
                           'round trip per %d '
                           'writes, as it costs a cached 4K write with one '
                           'in flight (%.0f us): %.2f' % (
                               r['depth'], trip,
                               one_trip_per_depth(r, size, trip)))
                alone = reservation_alone_us(wm, r['backend'])
                if alone:
                    detail += (', as it costs alone (%.0f us): %.2f; '
                               'and with the writes otherwise as fast as '
                               '1M writes without the cache: %.2f' % (
                                   alone, one_trip_per_depth(r, size, alone),
                                   one_trip_at_backend_speed(r, size,
                                                             alone)))
            both = free_plus_reserving(r, size)
            if both is not None:
                detail += ('; smbd\'s main thread in reservation calls '
                           '%.1f of %.1f ms per cached run, free reservations '
                           'plus that time: %.2f' % (
                               r['reserve ms ' + size],
                               r['bytes ' + size] / r['cached ' + size] / 1e3,
                               both))
            if 'null ' + size in r:
                detail += '; writes that write nothing: %.2f' % (
                    r['null ' + size] / r['1M without'])
            rows.append(('%s: %s cached, x%d, >= 0.90 of 1M without the '
                         'cache' % (r['backend'], size, r['depth']),
                         '%.2f' % got, 'met' if got >= 0.9 else 'not met',
                         detail))
    return rows


def local_reservation_bound(r, cost):
    """On a local share every cached 4 KiB write of the x1 cell reaches
    past the range reserved last and waits for its own fallocate: at
    best, smbd's cheapest WRITE (one that writes nothing) plus one
    reservation measured alone (bench/reserve_cost.py, same disk),
    against the ECHO.  '' where the run lacks a figure."""
    if 'null_us' not in r or 'fallocate' not in cost or \
            r['backend'] not in ('pagecache', 'odirect'):
        return ''
    return ('; a reservation alone (fallocate of 4 KiB past the end of '
            'file, without smbd) takes %.1f us, and every write waits for '
            'its own: a WRITE that writes nothing plus one reservation '
            'reaches at most %.2f (a buffered 4 KiB write past the end of '
            'file takes %.1f us alone)' % (
                cost['fallocate'],
                r['echo_us'] / (r['null_us'] + cost['fallocate']),
                cost['pwrite']))


def round_trip_rows(wm):
    """4 KiB writes, one in flight, until on disk: the fraction of the
    round-trip bound (an SMB2 ECHO per write)"""
    rows = []
    for r in wm.get('floor', []):
        got = r['echo_us'] / r['iotune_us']
        detail = 'ECHO %.1f us, cached write %.1f us' % (r['echo_us'],
                                                         r['iotune_us'])
        if 'null_us' in r:
            detail += '; a WRITE that writes nothing reaches %.2f' % (
                r['echo_us'] / r['null_us'])
        if 'free_us' in r:
            detail += ', iotune with free reservations %.2f' % (
                r['echo_us'] / r['free_us'])
        if 'free_us' in r and 'fallocate_us' in r:
            detail += ('; a reservation alone (glfs_fallocate, without '
                       'smbd) takes %.0f us, and every write waits for '
                       'its own: exact reservations allow at most %.2f' % (
                           r['fallocate_us'], exact_reservation_bound(r)))
        detail += local_reservation_bound(r, wm.get('reserve_cost', {}))
        if 'iotune_flush_us' in r:
            detail += ('; of the cached write, the SMB2 FLUSH after the '
                       'last write %.1f us (without the cache %.1f): the '
                       'writes alone reach %.2f' % (
                           r['iotune_flush_us'], r['base_flush_us'],
                           writes_alone(r)))
        rows.append(('%s: 4K x1 until on disk >= 0.95 of the round-trip '
                     'bound' % r['backend'], '%.2f' % got,
                     'met' if got >= 0.95 else 'not met', detail))
    return rows


def regression_detail(cells, backend, worst):
    """the worst cell of one run and its control pair's spread"""
    name = control_of(cells, backend)
    spread = control_spread(cells, name)
    if not spread:
        return 'worst median %.2f (%s x%d)' % (
            worst['ratio'], size_name(worst['block']), worst['depth'])
    _, _, own, n = regression_summary(cells, name)
    return ('worst median %.2f (%s x%d); %s spread %.2f-%.2f, its own '
            'cells with the upper quartile below 0.97: %d of %d' % (
                worst['ratio'], size_name(worst['block']), worst['depth'],
                name, spread[0], spread[1], own, n))


def regression_rows(wm, again=None):
    """the no-regression goal: judged on both runs when there are two
    (again: a second run of the matrices, bench/write_matrix.py
    --matrix-only)"""
    rows = []
    for backend in ('pagecache', 'odirect', 'glusterfs'):
        if not any(c['backend'] == backend for c in wm['cells']):
            continue
        runs = [wm['cells']]
        if again and any(c['backend'] == backend for c in again['cells']):
            runs.append(again['cells'])
        sums = [regression_summary(r, backend) for r in runs]
        clear = [s[2] for s in sums]
        rows.append(('%s: no cell\'s upper quartile below 0.97%s' %
                     (backend, ', in both runs' if len(runs) > 1 else ''),
                     ' / '.join('%d of %d' % (s[2], s[3]) for s in sums),
                     'met' if not any(clear) else 'not met',
                     ' / '.join(regression_detail(r, backend, s[0])
                                for r, s in zip(runs, sums))))
    return rows


def instruction_rows(insn):
    rows = []
    for r in insn.get('cells', []) if insn else []:
        # the page-cache pair is the one against a share without iotune
        # (O_DIRECT's is against iotune without its cache), and there
        # writes of 64 KiB and more, and all reads, pass iotune by
        if not instructions_passes_by(r):
            continue
        rows.append(('%s: %s %s x%d passed through, <= 1.03x the '
                     'instructions' % (r['backend'], r.get('op', 'write') +
                                       's', size_name(r['block']),
                                       r['depth']),
                     insn_ratio_text(r),
                     'met' if insn_ratio(r) <= 1.03 else 'not met',
                     insn_detail(r)))
    return rows


def insn_ratio(r):
    """iotune's instructions per MiB over the share's without, from the
    two medians, unrounded (the JSON's ratio has 3 decimals, and 1.0302
    must not pass as 1.030)"""
    if 'iotune_insn_per_mib' in r and r.get('base_insn_per_mib'):
        return r['iotune_insn_per_mib'] / r['base_insn_per_mib']
    return r['ratio']


def insn_ratio_text(r):
    """3 decimals, 4 where rounding would hide which side of 1.03 it
    is on"""
    got = insn_ratio(r)
    if round(got, 3) <= 1.03 < got:
        return '%.4f' % got
    return '%.3f' % got


def instructions_passes_by(r):
    """benchlib's passes_by() of a cell of bench/instructions.py (older
    runs' cells have no op: writes)"""
    return passes_by(r['backend'], r.get('op', 'write'), r['block'])


def insn_detail(r):
    """what a cell adds per request, what of it runs in iotune's own
    code, and the rounds' lowest and highest ratio (older runs: less)"""
    if 'extra_per_request' not in r:
        return ''
    text = '%+d per request' % r['extra_per_request']
    if 'own_per_request' in r:
        text += ('; %d in iotune\'s own code (%.3fx); rounds %.3f-%.3f' %
                 (r['own_per_request'], 1 + r['own_per_request'] /
                  (r['base_insn_per_mib'] * r['block'] / MIB),
                  r['ratio_low'], r['ratio_high']))
    if 'control_ratio' in r:
        text += ('; the control, a second share without iotune, in the '
                 'same rounds: %.3fx (rounds %.3f-%.3f)' %
                 (r['control_ratio'], r['control_low'],
                  r['control_high']))
    return text


def goals_section(wm, insn, md, again=None):
    md += ['### Goals and their bounds in this run', '',
           'Each figure is a ratio measured side by side in this run '
           '(medians of alternating rounds).  Coalescing: cached 16 KiB '
           'and 64 KiB writes against 1 MiB writes through the same '
           'share without the cache, at the same depth; beside it the '
           'same cached writes on a share where `iotune_fault` answers '
           'every `fallocate` at once, what the cache would reach if the '
           'reservation each cached write makes before it is '
           'acknowledged cost nothing.  Where a reservation is a round '
           'trip (GlusterFS), also estimates of what exact reservations '
           'allow: d writes in flight taking one reservation round trip '
           'more than with free ones (the 4 KiB x1 cells give how long, '
           'and `bench/gfapi_cost.py` how long one takes alone, without '
           'smbd), at the speed of the cached writes with free '
           'reservations and at that of the 1 MiB writes without the '
           'cache.  They are estimates, not bounds: one write waits for '
           'its reservation while others move, so the cache can pass '
           'them, and has in some runs.  Round '
           'trip: with one write in flight a write cannot be answered '
           'faster than an SMB2 ECHO to the same share, so ECHO / '
           'cached write is the fraction of that bound reached; every '
           'such write also waits for its own reservation (each reaches '
           'past the range reserved last), so a WRITE that writes '
           'nothing plus one reservation measured alone (a '
           '`glfs_fallocate` on GlusterFS, a `fallocate` on the local '
           'shares\' disk) bounds the cell too.', '',
           '| goal | measured | | bound or detail, same run |',
           '|---|---|---|---|']
    rows = (coalescing_rows(wm) + round_trip_rows(wm) +
            instruction_rows(insn) + regression_rows(wm, again))
    md += ['| %s | %s | %s | %s |' % r for r in rows]
    md.append('')
    cost = wm.get('reserve_cost', {})
    if 'fallocate_dio_during' in cost:
        md += ['What a reservation costs on the O_DIRECT share, measured '
               'in this run on the shares\' disk: a 64 KiB `fallocate` (a reservation) '
               'of a file written with O_DIRECT takes %.0f us alone and '
               '%.0f us while a 16 MiB direct write of the file is on its '
               'way (that write: %.0f us): it waits for the file\'s direct '
               'writes in flight, on any thread.' % (
                   cost['fallocate_dio_alone'],
                   cost['fallocate_dio_during'], cost['dio_write']), '']
    md += disk_alone_lines(wm, cost)


def disk_alone_lines(wm, cost):
    """whether the disk itself bounds the O_DIRECT coalescing cells:
    1 MiB windows reserved and written one at a time, without smbd,
    against the cells' own 1M writes without the cache"""
    base = [r['1M without'] for r in wm.get('coalescing', [])
            if r['backend'] == 'odirect']
    if 'reserved_windows_mbs' not in cost or not base:
        return []
    mbs = cost['reserved_windows_mbs']
    return ['Whether the disk bounds them: without smbd, it writes a new '
            'file in 1 MiB windows, each reserved with a `fallocate` and '
            'then written with O_DIRECT, one at a time, at %.0f MB/s, '
            '%.2f-%.2f of the 1M writes without the cache of the O_DIRECT '
            'coalescing rows (%.0f-%.0f MB/s through smbd): %s' % (
                mbs, mbs / max(base), mbs / min(base), min(base),
                max(base), 'the disk does not stop them below 0.9.'
                if mbs >= 0.9 * max(base) else 'a bound of the disk.') +
            in_turn_text(wm, mbs), '']


def in_turn_text(wm, disk_mbs):
    """The O_DIRECT 64K cells as the runs with free reservations and
    the disk's windows one after the other, 1 / (1 / free + 1 / disk):
    what the cache's order (a window's flush, then the next writes'
    reservations, which wait for it) leaves when nothing overlaps.  An
    explanation, not a bound: overlap can beat it."""
    rows = [r for r in wm.get('coalescing', []) if r['backend'] == 'odirect'
            and 'free reservations 64K' in r]
    if not rows:
        return ''
    parts = ['x%d %.2f (measured %.2f)' % (
        r['depth'], 1 / (1 / r['free reservations 64K'] + 1 / disk_mbs) /
        r['1M without'], r['cached 64K'] / r['1M without']) for r in rows]
    return ('  What stops them is the cache\'s order: a window is flushed '
            'when it is full and the next writes\' reservations wait for '
            'that flush, so the writes and the flushes follow each other.  '
            'The 64K cells as the runs with free reservations and these '
            'windows one after the other, 1 / (1 / free + 1 / disk): %s.'
            % ', '.join(parts))


def again_section(again, md):
    """the second run of the matrices, cell by cell"""
    md += ['### The matrices again (a second run, for the no-regression '
           'goal)', '',
           'The same matrices measured again after the other benchmarks '
           '(`bench/write_matrix.py --matrix-only`): ratio (quartiles) '
           'per cell.', '']
    for backend in BACKENDS:
        if not any(c['backend'] == backend for c in again['cells']):
            continue
        md += ['#### ' + BACKENDS[backend], '']
        md += ratio_table(again['cells'], backend) + ['']


def larger_cells(insn):
    """how the cells of requests larger than 64 KiB were sized, in
    words (older runs sized every cell alike)"""
    big = [r for r in insn['cells'] if r['block'] > 64 * 1024 and
           'large_mib' in r]
    if not big:
        return ''
    r = max(big, key=lambda r: r['block'])
    return (' (requests larger than 64 KiB: more MiB, at most 8 times, '
            'so %d and %d MiB for %s requests)' %
            (r['large_mib'], r['small_mib'], size_name(r['block'])))


def instructions_section(insn, md):
    md += ['### Instructions per MiB (callgrind)', '',
           'User-space instructions of the smbd process of one connection, '
           'all threads, counted by valgrind\'s callgrind '
           '(bench/instructions.py; perf\'s hardware counters are not '
           'available here): the difference between a connection that '
           'writes (or reads) %d MiB and one that writes %d MiB%s, per MiB, '
           'median of rounds.  The kernel\'s share (system calls, page '
           'cache) is not counted; the CPU time above includes it; '
           'publishing the counters in their store (once a second and at '
           'disconnect) is left out, counting them is not.  On the '
           'page-cache share, writes of 64 KiB and more and every read '
           'pass iotune by (no cache, no shaping), against a share '
           'without iotune; the O_DIRECT pair is iotune with its cache '
           'against iotune without it.  The totals move between rounds '
           '(the rounds\' lowest and highest ratio are shown) with how '
           'often smbd\'s main loop goes around per request; the '
           'instructions in iotune\'s own source files (inlined parts '
           'included, not what they call, publishing left out) do not; '
           'where iotune passes '
           'requests by, a second share without iotune (the control) ran '
           'in the same rounds, against the first: what the ratio of two '
           'alike shares reads.' %
           (insn['large_mib'], insn['small_mib'], larger_cells(insn)), '',
           '| share | requests | iotune | without | ratio | rounds | '
           'per request | in iotune\'s code | control |',
           '|---|---|---|---|---|---|---|---|---|']
    for r in insn['cells']:
        md.append('| %s | %s %s x%d | %.0f | %.0f | %.3f | %s | %s | %s '
                  '| %s |' %
                  (r['backend'], r.get('op', 'write') + 's',
                   size_name(r['block']), r['depth'],
                   r['iotune_insn_per_mib'], r['base_insn_per_mib'],
                   r['ratio'], '%.3f-%.3f' % (r['ratio_low'],
                                             r['ratio_high'])
                   if 'ratio_low' in r else '',
                   '%+d' % r['extra_per_request']
                   if 'extra_per_request' in r else '',
                   r.get('own_per_request', ''),
                   '%.3f (%.3f-%.3f)' % (r['control_ratio'],
                                         r['control_low'],
                                         r['control_high'])
                   if 'control_ratio' in r else ''))
    md.append('')


def readahead_section(ra, charts, md):
    readahead_chart(ra, os.path.join(charts, 'readahead.png'))
    dropbehind_chart(ra, os.path.join(charts, 'dropbehind.png'))
    md += ['## Read-ahead', '',
           '%d readers, one smbd connection each, 1 MiB reads with %d in '
           'flight, files made cold before each round; "bytes read per '
           'byte served" counts the block device reads of smbd '
           '(1.00: nothing read in vain).  The disk\'s read_ahead_kb: %s.'
           % (ra['readers'], ra['depth'], ra.get('read_ahead_kb', '?')),
           '', '![read-ahead](benchmarks/readahead.png)', '',
           '| run | mode | MB/s | bytes read per byte served |',
           '|---|---|---|---|']
    runs = {'all_ram': 'all RAM free',
            'cgroup': 'smbd in a %d MiB memory cgroup' %
            ra['memory_limit_mib']}
    names = {'adaptive_nopsi': 'adaptive, `readahead pressure = 0`',
             'kernel2': 'kernel again (a second, identical share: the '
                        'control)',
             'disk': 'the disk alone (O_DIRECT, no smbd: the bound)'}
    for run, label in runs.items():
        for mode, v in ra['a'].get(run, {}).items():
            md.append('| %s | %s | %.0f | %.2f |' % (
                label, names.get(mode, mode), v['mbs'], v['waste']))
    md += ['', '| goal | measured | |', '|---|---|---|']
    for run, label in runs.items():
        a = ra['a'].get(run)
        if not a:
            continue
        best = max(a['kernel']['mbs'], a['off']['mbs'])
        ratio = a['adaptive']['mbs'] / best
        bound = ''
        if run in ra.get('a_ratio', {}):
            q = ra['a_ratio'][run]
            ratio = q['ratio']
            bound = ' (median of the rounds\' ratios, quartiles ' \
                '%.2f-%.2f)' % (q['q1'], q['q3'])
            if 'control' in q:
                bound += ' (the control, a second kernel share, reaches ' \
                    '%.2f of the better of kernel and off, quartiles ' \
                    '%.2f-%.2f: the criterion\'s spread for a mode that ' \
                    'reads as one of them)' % (q['control']['ratio'],
                                                q['control']['q1'],
                                                q['control']['q3'])
        if 'disk' in a:
            bound += ' (adaptive %.2f, off %.2f, kernel %.2f of the disk ' \
                'alone)' % (a['adaptive']['mbs'] / a['disk']['mbs'],
                            a['off']['mbs'] / a['disk']['mbs'],
                            a['kernel']['mbs'] / a['disk']['mbs'])
        who = ra.get('a_who', {}).get(run, {})
        if who.get('ra_streams_detected') and not (
                who['fadvise_calls'] + who['ra_takeovers'] +
                who['ra_prefetch_calls']):
            bound += '; adaptive ran Linux\'s read-ahead here (its ' \
                'counters), as the kernel share did: the ratio is the ' \
                'spread of alike runs'
        md.append('| %s: adaptive >= the better of kernel and off | %.2f | '
                  '%s%s |' % (label, ratio, 'met' if ratio >= 1.0 else
                              'not met', bound))
        md.append('| %s: adaptive reads <= 1.05 bytes per byte served | '
                  '%.2f | %s |' % (label, a['adaptive']['waste'],
                                   'met' if a['adaptive']['waste'] <= 1.05
                                   else 'not met'))
    for run, label in runs.items():
        who = ra.get('a_who', {}).get(run)
        if who:     # runs since adaptive hands over to Linux's
            md += ['', '%s, the adaptive share\'s counters: %s.' %
                   (label[0].upper() + label[1:], who['text'])]
    c = ra['c']
    speed = c.get('ratio', c['drop']['mbs'] / c['kernel']['mbs'])
    same_file = ''
    if 'ratio_q1' in c:     # runs that read one file and kept each ratio
        same_file = (', median of the rounds\' ratios, quartiles '
                     '%.2f-%.2f.  Both shares read the same file (one '
                     'inode, linked into both), so the same blocks on the '
                     'disk' % (c['ratio_q1'], c['ratio_q3']))
    md += ['', '### Drop-behind', '',
           '![drop-behind](benchmarks/dropbehind.png)', '',
           'One cold %d MiB file streamed (files made cold before every '
           'round).  Residency after streaming: %.1f%% with `iotune:drop '
           'behind = yes` (goal <= 5%%), %.1f%% without; throughput ratio '
           '%.2f (goal >= 0.95)%s.' %
           (ra['stream_mib'], 100 * c['drop']['resident'],
            100 * c['kernel']['resident'], speed, same_file), '']
    if 'b' in ra:
        b = ra['b']
        md += ['### Random readers', '',
               'Bytes read per byte served, 4 KiB random reads: %.2f with '
               'the kernel default, %.2f with `iotune:fadvise = random` '
               '(Linux 6.x reads only the requested pages on a random '
               'miss either way).' % (b['kernel']['waste'],
                                       b['random']['waste']), '']


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--write-matrix',
                    default=os.path.join(REPO, 'build', 'write_matrix.json'))
    ap.add_argument('--instructions',
                    default=os.path.join(REPO, 'build', 'instructions.json'))
    ap.add_argument('--readahead',
                    default=os.path.join(REPO, 'build', 'readahead.json'))
    ap.add_argument('--write-matrix-again',
                    help='a second run of the matrices '
                    '(bench/write_matrix.py --matrix-only) for the '
                    'no-regression goal')
    ap.add_argument('--command', default='bench/run.sh')
    ap.add_argument('--out', default=os.path.join(REPO, 'docs',
                                                  'benchmarks.md'))
    args = ap.parse_args()
    charts = os.path.join(os.path.dirname(args.out), 'benchmarks')
    os.makedirs(charts, exist_ok=True)
    wm = json.load(open(args.write_matrix))
    ra = json.load(open(args.readahead))
    md = ['# iotune benchmarks', '',
          'Written by `%s` (bench/report.py) on %s; every figure is '
          'measured side by side in one run on this machine:' %
          (args.command, wm.get('date', '?')), '']
    md += ['- %s: %s' % kv for kv in machine()]
    md += ['', 'These are one 2-core virtual machine\'s figures, not '
           'promises: rerun the command on your hardware.', '']
    write_section(wm, charts, md)
    if wm.get('floor'):
        floor_section(wm, md)
    insn = (json.load(open(args.instructions))
            if os.path.exists(args.instructions) else None)
    again = (json.load(open(args.write_matrix_again))
             if args.write_matrix_again else None)
    if again:
        again_section(again, md)
    goals_section(wm, insn, md, again)
    if insn:
        instructions_section(insn, md)
    readahead_section(ra, charts, md)
    with open(args.out, 'w') as f:
        f.write('\n'.join(md) + '\n')
    print('wrote %s and %s/*.png' % (args.out, charts))
    return 0


if __name__ == '__main__':
    sys.exit(main())
