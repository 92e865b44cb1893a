#!/usr/bin/python3
# What iotune's counters cost: the same workloads on two shares of one
# real smbd that differ only in iotune:stats, alternating, median of
# several rounds, printed as ratios; plus the measured CPU cost of
# counting one I/O against the time one SMB2 request takes.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import os
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
    'counted': {'vfs objects': 'iotune', 'iotune:stats': 'yes'},
    'uncounted': {'vfs objects': 'iotune', 'iotune:stats': 'no'},
}


def small_ops(smbd, share, ops):
    """4 KiB writes then 4 KiB reads, one outstanding: ops per second"""
    client = harness.PyClient(smbd, share)
    fnum = client.open('small.bin', harness.PyClient.FILE_OVERWRITE_IF)
    block = os.urandom(4096)
    started = time.monotonic()
    for i in range(ops):
        client.write(fnum, block, (i % 256) * 4096)
    for i in range(ops):
        client.read(fnum, (i % 256) * 4096, 4096)
    elapsed = time.monotonic() - started
    client.close(fnum)
    return 2 * ops / elapsed


def streaming(smbd, share, src, tmp):
    started = time.monotonic()
    harness.smbclient(smbd, share, 'put %s big.bin; get big.bin %s' %
                      (src, os.path.join(tmp, 'back.bin')))
    return 2 * os.path.getsize(src) / (time.monotonic() - started) / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--ops', type=int, default=3000)
    ap.add_argument('--stream-mib', type=int, default=128)
    args = ap.parse_args()

    harness.install_module()
    workdir = harness.scratch_dir('bench-stats-')
    tmp = tempfile.mkdtemp(dir=workdir)
    src = os.path.join(tmp, 'src.bin')
    with open(src, 'wb') as f:
        f.write(os.urandom(args.stream_mib << 20))
    results = {s: {'ops': [], 'mbs': []} for s in SHARES}
    with harness.Smbd(workdir, SHARES) as smbd:
        for r in range(args.rounds):
            order = list(SHARES) if r % 2 == 0 else list(SHARES)[::-1]
            for share in order:
                results[share]['ops'].append(
                    small_ops(smbd, share, args.ops))
                results[share]['mbs'].append(
                    streaming(smbd, share, src, tmp))
    shutil.rmtree(workdir, ignore_errors=True)

    micro = os.path.join(harness.REPO, 'build', 'bench', 'stats-micro')
    ns = float(subprocess.run([micro], capture_output=True, text=True,
                              check=True).stdout)
    med = {s: {k: statistics.median(v) for k, v in r.items()}
           for s, r in results.items()}
    ops_ratio = med['counted']['ops'] / med['uncounted']['ops']
    mbs_ratio = med['counted']['mbs'] / med['uncounted']['mbs']
    per_request_ns = 1e9 / med['counted']['ops']
    print('iotune counters, stats = yes vs no, median of %d rounds:' %
          args.rounds)
    print('  4 KiB write+read ops/s   %9.0f vs %9.0f   ratio %.3f' %
          (med['counted']['ops'], med['uncounted']['ops'], ops_ratio))
    print('  streaming MB/s           %9.0f vs %9.0f   ratio %.3f' %
          (med['counted']['mbs'], med['uncounted']['mbs'], mbs_ratio))
    print('  counting one I/O: %.0f ns of CPU = %.3f%% of one 4 KiB '
          'request (%.0f us)' % (ns, 100 * ns / per_request_ns,
                                 per_request_ns / 1000))
    return 0


if __name__ == '__main__':
    sys.exit(main())
