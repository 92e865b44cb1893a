#!/usr/bin/python3
# The open/write/close cycle of a small file, side by side in
# one run on a real smbd: one client (smb2-script "cycles": CREATE with a
# batch oplock, WRITE of --size bytes at offset 0, CLOSE, COUNT times)
# against a share with iotune (defaults) and the same share without it,
# alone and with a local process appending 8-byte records to the same
# file with O_APPEND (a log written on the server).  Prints microseconds
# per cycle, the ratio iotune / without (the goal: at most 1.10), and the
# appender's records missing at the end (the goal: 0).  Median of
# --rounds, alternating the two sides.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import harness  # noqa: E402
from benchlib import median_alternating  # noqa: E402

class Cycler:
    def __init__(self, smbd, count, size):
        self.smbd = smbd
        self.count = count
        self.size = size
        self.clients = {}
        self.lost = {}

    def client(self, share):
        if share not in self.clients:
            self.clients[share] = harness.ScriptClient(self.smbd, share)
        return self.clients[share]

    def run(self, share, appender):
        """microseconds per cycle"""
        name = 'cycle-%s.bin' % ('append' if appender else 'alone')
        path = os.path.join(self.smbd.share_path(share), name)
        with open(path, 'wb') as f:
            f.write(b'h' * self.size)
        proc = harness.start_appender(path) if appender else None
        done, usec = self.client(share).call(
            'cycles %s %d %d' % (name, self.count, self.size)).split()
        if proc is not None:
            n = harness.stop_appender(proc)
            self.lost[share] = self.lost.get(share, 0) + \
                harness.missing_records(path, n, self.size)
        return int(usec) / int(done)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--count', type=int, default=2000)
    ap.add_argument('--size', type=int, default=100)
    ap.add_argument('--json', default=os.path.join(
        harness.REPO, 'build', 'bench', 'small_files.json'))
    args = ap.parse_args()
    harness.install_module()
    work = harness.scratch_dir('bench-small-')
    shares = {'plain': {}, 'iotune': {'vfs objects': 'iotune'}}
    smbd = harness.Smbd(work, shares)
    smbd.start()
    result = {'count': args.count, 'size': args.size, 'cells': []}
    try:
        cyc = Cycler(smbd, args.count, args.size)
        for appender in (False, True):
            cyc.lost = {}
            med = median_alternating(args.rounds, {
                share: (lambda s=share: cyc.run(s, appender))
                for share in shares})
            ratio = med['iotune'] / med['plain']
            label = 'with a local appender' if appender else 'alone'
            print('open/write %d B/close, %-21s iotune %6.1f us  without '
                  '%6.1f us  %.2fx (goal <= 1.10)%s' % (
                      args.size, label, med['iotune'], med['plain'], ratio,
                      '  records lost: iotune %d, without %d' % (
                          cyc.lost.get('iotune', 0),
                          cyc.lost.get('plain', 0)) if appender else ''))
            result['cells'].append({
                'appender': appender, 'iotune_us': med['iotune'],
                'plain_us': med['plain'], 'ratio': ratio,
                'lost_iotune': cyc.lost.get('iotune', 0),
                'lost_plain': cyc.lost.get('plain', 0)})
        for c in cyc.clients.values():
            c.quit()
    finally:
        smbd.stop()
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, 'w') as f:
        json.dump(result, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
