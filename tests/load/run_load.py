#!/usr/bin/python3
# iotune's load stage: many clients at once against a real smbd, the share
# with iotune's defaults and the same share without iotune, one after the
# other, each from empty directories.  Every client is its own SMB2
# connection (one smbd process each, tests/clients/smb2-script):
#
#   stream   batch oplocks on 12 files of its own (beyond the 10 caches a
#            process may hold, so some are refused), random overlapping
#            writes of 1 byte .. 8 KiB within the first MiB
#   lease    RWH lease on one of 4 hot files, 4 KiB blocks in a 4 MiB
#            region of its own, wrapping; reopens every 32 writes to get
#            write caching back after a reader broke it
#   reader   opens a hot file (breaking the writers' write caching), reads
#            the block a writer had acknowledged last before the open, and
#            checks it holds that write or a newer one (else: stale read)
#
# At the end every file is compared with what its clients had
# acknowledged.  The stage fails on a lost byte, a stale read, a client
# error that the plain share shows less often, a PANIC or a level-0 line of
# iotune in smbd's log.  Printed per share: bytes acknowledged and checked,
# mismatches, stale reads, client errors, caches refused, peak RSS per
# smbd process.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import os
import random
import re
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'integration'))

import harness  # noqa: E402

KIB = 1024
MIB = 1024 * KIB
STREAM_FILES = 12
STREAM_SPAN = MIB
HOT_FILES = 4
REGION = 4 * MIB
BLOCK = 4 * KIB
REOPEN_EVERY = 32


class Phase:
    """What the clients of one share saw"""

    def __init__(self, share, path, n_lease):
        self.share = share
        self.path = path
        # lease writer w writes region w // HOT_FILES of hot-(w % HOT_FILES)
        self.hot_size = -(-n_lease // HOT_FILES) * REGION
        self.lock = threading.Lock()
        self.acked_bytes = 0
        self.errors = {}
        self.stale = 0
        self.hot_reads = 0
        self.models = {}            # file name -> (bytearray, bytearray)
        self.last_acked = {}        # lease writer -> (block, generation)

    def error(self, kind, detail):
        with self.lock:
            self.errors.setdefault(kind, [0, detail])[0] += 1

    def model(self, name, size):
        with self.lock:
            if name not in self.models:
                self.models[name] = (bytearray(size), bytearray(size))
            return self.models[name]


def stream_client(smbd, phase, cid, stop):
    rnd = random.Random(cid)
    names = ['s%02d-%02d.bin' % (cid, i) for i in range(STREAM_FILES)]
    models = [phase.model(name, STREAM_SPAN) for name in names]
    c = harness.ScriptClient(smbd, phase.share)
    try:
        for slot, name in enumerate(names):
            c.use(slot)
            c.open(name, 'batch')
        while not stop.is_set():
            slot = rnd.randrange(STREAM_FILES)
            n = rnd.randint(1, 8 * KIB)
            off = rnd.randrange(0, STREAM_SPAN - n)
            data = rnd.randbytes(n)
            c.use(slot)
            if c.write(off, data) != n:
                raise RuntimeError('short write')
            data_m, mask = models[slot]
            data_m[off:off + n] = data
            mask[off:off + n] = b'\1' * n
            with phase.lock:
                phase.acked_bytes += n
        for slot in range(STREAM_FILES):
            c.use(slot)
            c.close()
    finally:
        c.quit()


def block_of(writer, k, gen):
    head = b'W%03d K%06d G%06d|' % (writer, k, gen)
    return (head * (BLOCK // len(head) + 1))[:BLOCK]


def region(writer):
    return (writer // HOT_FILES) * REGION


def lease_client(smbd, phase, cid, stop):
    name = 'hot-%d.bin' % (cid % HOT_FILES)
    base = region(cid)
    data_m, mask = phase.model(name, phase.hot_size)
    c = harness.ScriptClient(smbd, phase.share)
    try:
        c.call('autoack')
        c.open(name, 'lease')
        k = gen = writes = 0
        while not stop.is_set():
            block = block_of(cid, k, gen)
            if c.write(base + k * BLOCK, block) != BLOCK:
                raise RuntimeError('short write')
            at = base + k * BLOCK
            with phase.lock:
                data_m[at:at + BLOCK] = block
                mask[at:at + BLOCK] = b'\1' * BLOCK
                phase.acked_bytes += BLOCK
                phase.last_acked[cid] = (k, gen)
            k += 1
            if k == REGION // BLOCK:
                k, gen = 0, gen + 1
            writes += 1
            if writes % REOPEN_EVERY == 0:
                c.close()
                c.open(name, 'lease')
        c.close()
    finally:
        c.quit()


def reader_client(smbd, phase, cid, stop, writers):
    rnd = random.Random(cid)
    c = harness.ScriptClient(smbd, phase.share)
    try:
        read_hot(c, phase, rnd, stop, writers)
    finally:
        c.quit()


def read_hot(c, phase, rnd, stop, writers):
    while not stop.is_set():
        w = rnd.choice(writers)
        with phase.lock:
            seen = phase.last_acked.get(w)
        if seen is None:
            time.sleep(0.01)
            continue
        k, gen = seen
        c.open('hot-%d.bin' % (w % HOT_FILES), 'none')
        got = c.read(region(w) + k * BLOCK, BLOCK)
        c.close()
        m = re.match(rb'W(\d{3}) K(\d{6}) G(\d{6})\|', got)
        with phase.lock:
            phase.hot_reads += 1
            if (m is None or int(m.group(1)) != w or
                    int(m.group(2)) != k or int(m.group(3)) < gen or
                    got != block_of(w, k, int(m.group(3)))):
                phase.stale += 1


def guarded(fn, phase, *args):
    try:
        fn(*args)
    except Exception as e:      # noqa: BLE001 -- counted, compared
        kind = re.sub(r'\d+', 'N', str(e))[:80]
        phase.error(kind, str(e)[:200])


def peak_rss_kib(pids):
    peaks = []
    for pid in pids:
        try:
            with open('/proc/%d/status' % pid) as f:
                m = re.search(r'VmHWM:\s+(\d+) kB', f.read())
        except OSError:
            continue
        if m:
            peaks.append(int(m.group(1)))
    return peaks


def run_clients(smbd, phase, counts, seconds):
    stop = threading.Event()
    n_stream, n_lease, n_reader = counts
    writers = list(range(n_lease))
    threads = []
    for i in range(n_stream):
        threads.append((stream_client, (smbd, phase, i, stop)))
    for i in range(n_lease):
        threads.append((lease_client, (smbd, phase, i, stop)))
    for i in range(n_reader):
        threads.append((reader_client, (smbd, phase, 1000 + i, stop,
                                        writers)))
    running = [threading.Thread(target=guarded, args=(fn, phase) + args)
               for fn, args in threads]
    for t in running:
        t.start()
    time.sleep(seconds)
    peaks = peak_rss_kib(smbd.child_pids())
    stop.set()
    for t in running:
        t.join(300)
    phase.hung = sum(t.is_alive() for t in running)
    return peaks


def compare(phase):
    """(bytes checked, bytes that differ from the acknowledged data)"""
    checked = differ = 0
    for name, (data_m, mask) in sorted(phase.models.items()):
        with open(os.path.join(phase.path, name), 'rb') as f:
            disk = f.read()
        disk = disk + bytes(max(0, len(data_m) - len(disk)))
        for i in range(0, len(data_m), MIB):
            m = mask[i:i + MIB]
            if not any(m):
                continue
            want = data_m[i:i + MIB]
            got = disk[i:i + MIB]
            if want == got:
                checked += m.count(1)
                continue
            for j, flag in enumerate(m):
                if flag:
                    checked += 1
                    differ += want[j] != got[j]
    return checked, differ


def log_problems(smbd):
    text = smbd.log_text()
    panics = text.count('PANIC')
    level0 = len(re.findall(r'^\[[^\]]*,\s+0[\],][^\n]*vfs_iotune', text,
                            re.M))
    return panics, level0


def run_phase(smbd, share, counts, seconds):
    path = smbd.share_path(share)
    shutil.rmtree(path)
    os.makedirs(path)
    phase = Phase(share, path, counts[1])
    before = harness.iotune_counters(smbd, share)
    peaks = run_clients(smbd, phase, counts, seconds)
    time.sleep(1)
    phase.checked, phase.differ = compare(phase)
    after = harness.iotune_counters(smbd, share)
    phase.refused = (after.get('wc_caches_refused', 0) -
                     before.get('wc_caches_refused', 0))
    phase.peak = max(peaks) if peaks else 0
    phase.peak_median = sorted(peaks)[len(peaks) // 2] if peaks else 0
    phase.processes = len(peaks)
    return phase


def report(p):
    print('load: %-7s acknowledged %d bytes, checked %d, differ %d; '
          'hot reads %d, stale %d; client errors %d; caches refused %d; '
          'peak RSS per smbd process: max %.1f MiB, median %.1f MiB '
          '(%d processes)' %
          (p.share, p.acked_bytes, p.checked, p.differ, p.hot_reads,
           p.stale, sum(v[0] for v in p.errors.values()), p.refused,
           p.peak / 1024, p.peak_median / 1024, p.processes), flush=True)
    for kind, (n, detail) in sorted(p.errors.items()):
        print('load: %-7s %d x %s' % (p.share, n, detail))


def verdict(iotune, plain, panics, level0):
    problems = []
    for p in (iotune, plain):
        if p.acked_bytes == 0 or p.hot_reads == 0 or p.checked == 0:
            problems.append('%s: no work done (%d bytes acknowledged, %d '
                            'hot reads)' % (p.share, p.acked_bytes,
                                            p.hot_reads))
        if p.hung:
            problems.append('%s: %d clients did not finish' %
                            (p.share, p.hung))
        if p.differ:
            problems.append('%s: %d bytes differ from what was '
                            'acknowledged' % (p.share, p.differ))
        if p.stale:
            problems.append('%s: %d stale reads' % (p.share, p.stale))
    extra = [k for k, (n, _) in iotune.errors.items()
             if n > plain.errors.get(k, [0])[0]]
    if extra:
        problems.append('client errors more often with iotune: %s' %
                        sorted(extra))
    if panics:
        problems.append('%d PANIC in smbd.log' % panics)
    if level0:
        problems.append('%d level-0 lines of iotune in smbd.log' % level0)
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--seconds', type=int, default=60,
                    help='per share (default 60)')
    ap.add_argument('--clients', type=int, default=50)
    args = ap.parse_args()
    n_lease = args.clients * 2 // 5
    n_reader = args.clients // 5
    counts = (args.clients - n_lease - n_reader, n_lease, n_reader)
    harness.install_module()
    work = harness.scratch_dir('load-')
    shares = {'iotune': {'vfs objects': 'iotune'}, 'plain': {}}
    smbd = harness.Smbd(work, shares, log_level='1',
                        global_params={'max open files': '65536'})
    smbd.start()
    try:
        print('load: %d clients (%d stream, %d lease, %d readers), %d s '
              'per share, smbd %s' % ((args.clients,) + counts +
                                      (args.seconds, smbd.address)),
              flush=True)
        iotune = run_phase(smbd, 'iotune', counts, args.seconds)
        report(iotune)
        plain = run_phase(smbd, 'plain', counts, args.seconds)
        report(plain)
        panics, level0 = log_problems(smbd)
    finally:
        smbd.stop()
    problems = verdict(iotune, plain, panics, level0)
    for p in problems:
        print('load: FAIL %s' % p)
    print('load: %s' % ('passed' if not problems else 'failed'))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
