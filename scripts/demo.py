#!/usr/bin/python3
# The main job: start a real smbd on a loopback address with a plain share
# and an iotune share, move data through both with real clients, verify
# every byte, and show what happened (smbd's log, its profile counters).
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import os
import random
import shutil
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


def stream(smbd, share, tmp, size):
    src = os.path.join(tmp, 'stream-src.bin')
    back = os.path.join(tmp, 'stream-back.bin')
    with open(src, 'wb') as f:
        f.write(random.Random(1).randbytes(size))
    started = time.monotonic()
    harness.smbclient(smbd, share, 'put %s stream.bin' % src)
    put_s = time.monotonic() - started
    started = time.monotonic()
    harness.smbclient(smbd, share, 'get stream.bin %s' % back)
    get_s = time.monotonic() - started
    want = harness.sha256_file(src)
    ok = (harness.sha256_file(back) == want and harness.sha256_file(
        os.path.join(smbd.share_path(share), 'stream.bin')) == want)
    return ok, size / put_s / 1e6, size / get_s / 1e6


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


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--stream-mib', type=int, default=64)
    ap.add_argument('--small-mib', type=int, default=4)
    ap.add_argument('--keep', action='store_true')
    args = ap.parse_args()

    harness.install_module()
    workdir = harness.scratch_dir('demo-')
    smbd = harness.Smbd(workdir, SHARES,
                        global_params={'smbd profiling level': 'count'})
    tmp = tempfile.mkdtemp(dir=workdir)
    rows = []
    deltas = {}
    all_ok = True
    stat_table = ''
    with smbd:
        print('iotune demo: smbd pid %d on %s (config %s)' %
              (smbd.proc.pid, smbd.address, smbd.conf))
        before = settle(smbd, 0)
        for share in SHARES:
            ok1, put, get = stream(smbd, share, tmp,
                                   args.stream_mib << 20)
            ok2, wps = small_writes(smbd, share, args.small_mib << 20, 4096)
            after = settle(smbd)
            deltas[share] = {k: after.get(k, 0) - before.get(k, 0)
                             for k, _ in COUNTERS}
            before = after
            rows.append((share, put, get, wps, ok1 and ok2))
            all_ok = all_ok and ok1 and ok2
        stat_table = subprocess.run(
            [os.path.join(harness.REPO, 'tools', 'iotune-stat'),
             '--configfile', smbd.conf], capture_output=True,
            text=True).stdout

    print('\nWhat smbd logged about iotune (log level 1 vfs:3):')
    for header, body in log_entries(smbd.log_text()):
        if 'vfs_iotune.c' in header or 'from [iotune]' in body:
            level = header.split(']')[0].split(',')[-1].strip()
            print('  [level %s] %s' % (level, body))
    print('\nWorkload per share: smbclient put/get of %d MiB, then %d MiB '
          'in 4 KiB SMB2 writes\n(python3-samba, batch oplock), every '
          'byte read back and compared with sha256:' %
          (args.stream_mib, args.small_mib))
    print('  %-8s %10s %10s %14s  %s' %
          ('share', 'put MB/s', 'get MB/s', '4K writes/s', 'data'))
    for share, put, get, wps, ok in rows:
        print('  %-8s %10.0f %10.0f %14.0f  %s' %
              (share, put, get, wps, 'identical' if ok else 'MISMATCH'))
    print('\nsmbd profile counters (smbstatus -P) for each share\'s '
          'workload:')
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
