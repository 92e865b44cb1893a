#!/usr/bin/python3
# The main job: start a real smbd on a loopback address with a plain share
# and an iotune share, move data through both with real clients, verify
# every byte, and show what happened (smbd's log, its profile counters).
#
# The figures are measured the way the benchmarks measure them: the two
# shares take turns, round by round (the first share alternates), and the
# table shows every round, the medians and the ratio iotune / plain with
# the spread of the per-round ratios.  One run of one share on a shared
# machine can be 20% off either way; the spread says how far to trust a
# ratio.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import harness  # noqa: E402

SHARES = {
    'plain': {},
    'iotune': {'vfs objects': 'iotune'},
}

# smbd profile counters that show what reached the backend
COUNTERS = [
    ('smb2_write_count', 'SMB2 WRITE requests'),
    ('smb2_read_count', 'SMB2 READ requests'),
    ('syscall_asys_pwrite_count', 'backend async pwrite calls'),
    ('syscall_pwrite_count', 'backend sync pwrite calls'),
    ('syscall_asys_pwrite_bytes', 'backend bytes written'),
    ('syscall_asys_pread_count', 'backend async pread calls'),
    ('syscall_asys_fsync_count', 'backend fsync calls'),
]


def log_entries(text):
    """(header, body) pairs of a Samba log file"""
    header = None
    for line in text.splitlines():
        if line.startswith('['):
            header = line
        elif header is not None:
            yield header, line.strip()


def settle(smbd, pause=1.2):
    """smbd processes dump their profile counters about once a second."""
    time.sleep(pause)
    return harness.profile_counters(smbd)


def transfer_mbs(result):
    """MB/s of smbclient's put or get, from its own report ('... (average
    N kb/s)', KiB/s): the transfer alone, without starting smbclient and
    connecting, which take about as long as 32 MiB do here"""
    text = result.stdout + result.stderr
    m = re.search(r'\(average ([0-9.]+) (kb/s|KiloBytes/sec)\)', text)
    if m is None:
        raise RuntimeError('no rate in smbclient\'s output: %r' % text)
    return float(m.group(1)) * 1024 / 1e6


def stream(smbd, share, tmp, size):
    src = os.path.join(tmp, 'stream-src.bin')
    back = os.path.join(tmp, 'stream-back.bin')
    with open(src, 'wb') as f:
        f.write(random.Random(1).randbytes(size))
    os.sync()   # no writeback of an earlier run in this run's time
    put = transfer_mbs(harness.smbclient(
        smbd, share, 'put %s stream.bin' % src))
    os.sync()
    get = transfer_mbs(harness.smbclient(
        smbd, share, 'get stream.bin %s' % back))
    want = harness.sha256_file(src)
    ok = (harness.sha256_file(back) == want and harness.sha256_file(
        os.path.join(smbd.share_path(share), 'stream.bin')) == want)
    return ok, put, get


def small_writes(smbd, share, size, block):
    rnd = random.Random(2)
    data = rnd.randbytes(size)
    client = harness.PyClient(smbd, share)
    fnum = client.open('small.bin', harness.PyClient.FILE_OVERWRITE_IF,
                       oplock=harness.PyClient.REQUEST_BATCH_OPLOCK)
    started = time.monotonic()
    for off in range(0, size, block):
        client.write(fnum, data[off:off + block], off)
    elapsed = time.monotonic() - started
    same_handle = client.read(fnum, 0, size) == data
    client.close(fnum)
    with open(os.path.join(smbd.share_path(share), 'small.bin'), 'rb') as f:
        on_disk = f.read() == data
    return same_handle and on_disk, size // block / elapsed


def quartiles(values):
    """(lower quartile, median, upper quartile)"""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method='inclusive')
    return q[0], q[1], q[2]


def run_rounds(smbd, tmp, args):
    """rounds[share] = [(put MB/s, get MB/s, 4K writes/s)], the shares
    taking turns; deltas[share] = profile counter deltas; all data ok"""
    rounds = {share: [] for share in SHARES}
    deltas = {share: {k: 0 for k, _ in COUNTERS} for share in SHARES}
    all_ok = True
    before = settle(smbd, 0)
    for r in range(args.rounds):
        order = list(SHARES) if r % 2 == 0 else list(SHARES)[::-1]
        for share in order:
            ok1, put, get = stream(smbd, share, tmp,
                                   args.stream_mib << 20)
            ok2, wps = small_writes(smbd, share, args.small_mib << 20, 4096)
            after = settle(smbd)
            for k, _ in COUNTERS:
                deltas[share][k] += after.get(k, 0) - before.get(k, 0)
            before = after
            rounds[share].append((put, get, wps))
            all_ok = all_ok and ok1 and ok2
            print('  round %d %-7s put %6.0f MB/s  get %6.0f MB/s  '
                  '4K writes %6.0f/s  %s' %
                  (r + 1, share, put, get, wps,
                   'identical' if ok1 and ok2 else 'MISMATCH'), flush=True)
    return rounds, deltas, all_ok


def print_figures(rounds, args):
    columns = [('put MB/s', 0), ('get MB/s', 1), ('4K writes/s', 2)]
    print('\nWorkload per share and round: smbclient put/get of %d MiB '
          '(the rate smbclient\nreports), then %d MiB in 4 KiB SMB2 writes '
          '(python3-samba, batch oplock),\nevery byte read back and '
          'compared with sha256; %d rounds, the shares taking\nturns:' %
          (args.stream_mib, args.small_mib, args.rounds))
    print('  %-24s %12s %12s %12s' % ('', 'put MB/s', 'get MB/s',
                                       '4K writes/s'))
    for share in SHARES:
        print('  %-24s %12.0f %12.0f %12.0f' % (
            'median, ' + share, *(statistics.median(
                row[i] for row in rounds[share]) for _, i in columns)))
    cells = []
    for _, i in columns:
        ratios = [a[i] / b[i] for a, b in zip(rounds['iotune'],
                                              rounds['plain'])]
        q1, med, q3 = quartiles(ratios)
        cells.append('%.2f (%.2f-%.2f)' % (med, q1, q3))
    print('  %-24s %12s %12s %12s' % ('iotune / plain', *cells))
    print('  (ratio: median of the per-round ratios, with their '
          'quartiles; put and get\n  use large requests, which iotune '
          'passes through: their ratio is about 1,\n  and its spread is '
          'the noise of this machine)')


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--stream-mib', type=int, default=32)
    ap.add_argument('--small-mib', type=int, default=4)
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--keep', action='store_true')
    args = ap.parse_args()

    harness.install_module()
    workdir = harness.scratch_dir('demo-')
    smbd = harness.Smbd(workdir, SHARES,
                        global_params={'smbd profiling level': 'count'})
    tmp = tempfile.mkdtemp(dir=workdir)
    stat_table = ''
    with smbd:
        print('iotune demo: smbd pid %d on %s (config %s)' %
              (smbd.proc.pid, smbd.address, smbd.conf))
        rounds, deltas, all_ok = run_rounds(smbd, tmp, args)
        stat_table = subprocess.run(
            [os.path.join(harness.REPO, 'tools', 'iotune-stat'),
             '--configfile', smbd.conf], capture_output=True,
            text=True).stdout

    print('\nWhat smbd logged about iotune (log level 1 vfs:3; each line '
          'once, with how often):')
    seen = {}
    for header, body in log_entries(smbd.log_text()):
        if 'vfs_iotune.c' in header or 'from [iotune]' in body:
            level = header.split(']')[0].split(',')[-1].strip()
            key = '[level %s] %s' % (level, body)
            seen[key] = seen.get(key, 0) + 1
    for line, count in seen.items():
        print('  %s%s' % (line, ' (x%d)' % count if count > 1 else ''))
    print_figures(rounds, args)
    print('\nsmbd profile counters (smbstatus -P) for each share\'s '
          'workload, all rounds:')
    print('  %-30s %12s %12s' % ('counter', 'plain', 'iotune'))
    for key, label in COUNTERS:
        print('  %-30s %12d %12d' % (label, deltas['plain'][key],
                                     deltas['iotune'][key]))
    print('\niotune\'s own counters (tools/iotune-stat --configfile %s):' %
          smbd.conf)
    print(''.join('  ' + line + '\n' for line in stat_table.splitlines()),
          end='')
    if all_ok and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print('\nwork dir kept: %s' % workdir)
    print('\niotune demo: %s' % ('all data verified' if all_ok
                                 else 'DATA MISMATCH'))
    return 0 if all_ok else 1


if __name__ == '__main__':
    sys.exit(main())
