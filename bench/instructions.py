#!/usr/bin/python3
# Instructions smbd executes per MiB written or read, iotune (defaults)
# next to the same share without it, counted by valgrind's callgrind
# (the goal: what iotune neither caches nor shapes costs at most 1.03x
# per request).  perf's hardware counters are "not supported" in these
# VMs; callgrind counts every instruction smbd runs in user space, in
# all its threads (the thread pool's copies included), and gives the
# same count for the same work whatever else the machine is doing.  The
# kernel's side (system calls, page cache, the disk) is not counted:
# bench/write_matrix.py reports CPU time per MiB, kernel included.
#
# smbd runs under callgrind; every connection is a process of its own
# and writes its counts when it exits.  What iotune does to publish its
# counters in the store is left out of the counts: once a second
# (iotune_publish_fn) and once when the connection ends
# (iotune_share_retire, which costs more when the connection published
# before).  Both are costs per second or per connection, not per
# request; under valgrind a connection runs some 50 times longer than it
# would, so the longer connection of a pair published more often and
# would charge its requests with publishes they never cause at full
# speed (about 1,000 instructions per 64 KiB write).  Counting itself
# (in memory, per request) stays in.  Per cell, one connection writes
# --small-mib and another --large-mib in the same requests (one client,
# batch oplock, depth requests in flight, then SMB2 FLUSH): the
# difference over the difference in bytes leaves out what a connection
# costs anyway (session setup, tree connect, the counters' store).  A
# cell of requests larger than 64 KiB writes more MiB, up to 8 times
# (64 and 320 MiB at 1 MiB: 256 requests apart), not the same MiB:
# with 8 and 40 MiB the difference at 1 MiB was 32 requests, and
# what a connection does once at an unforeseen moment (the thread pool
# making or ending a thread, a timer, glibc trimming its heap) moved a
# cell by 1,000 instructions per request between rounds.  A warm-up
# connection per share comes first, so that both sides find the same
# store.  Median of --rounds.
#
# The totals move between rounds by more than iotune costs: smbd's main
# loop goes around a varying number of times per request (how the
# client's requests and the thread pool's answers happen to meet), and
# each pass costs its own (tevent, smbprofile_dump).  So each cell also
# reports the instructions in iotune's own code per request (its source
# files, inlined parts included; not what it calls: libc, smbd, the next
# layer; nor the files that only publish the counters, PUBLISH_FILE),
# which does not depend on that, and the lowest and highest
# ratio of the rounds.  Where iotune passes the requests by (the goal's
# cells), a second share without iotune runs in the same rounds (the
# control): its ratio to the first is what two alike shares read.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'tests', 'integration'))

import harness  # noqa: E402
from benchlib import KIB, MIB, passes_by, size_name  # noqa: E402
from write_matrix import LOCAL_SHARES, PAIRS  # noqa: E402

# (writes or reads, size, in flight); 64 KiB and larger writes pass the
# page-cache share's write cache by, and no read is shaped by default
CELLS = [('write', 4 * KIB, 16), ('write', 64 * KIB, 4),
         ('write', 64 * KIB, 8), ('write', MIB, 8),
         ('read', 64 * KIB, 4), ('read', MIB, 8)]
READ_FILE = 'insn-read.bin'


def totals(path, timeout=120):
    """the instruction count of a callgrind output file, once written"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith('totals:'):
                        return int(line.split()[1])
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    raise RuntimeError('no callgrind totals in %s' % path)


PUBLISHING = ('iotune_publish_fn', 'iotune_share_retire')
# iotune's sources; Samba's own modules (source3/modules, ldb's) are not,
# should its debugging symbols be installed
OWN_FILE = re.compile(r'(^|/)(?<!source3/)(?<!ldb/)'
                      r'(modules|include/iotune)/[^/]+\.[ch]$')
# of them, those that only publish the counters (the store, the text
# format): left out of iotune's own code as publishing is left out of
# the totals.  They run once a second, so a connection that lasts
# longer under valgrind would charge its requests with them (at 1 MiB
# requests, about 425 instructions per request in a probe)
PUBLISH_FILE = re.compile(r'(^|/)modules/(vfs_iotune_)?stats\.c$')


def own_instructions(path):
    """the instructions of a callgrind output file that run in iotune's
    own source files (cost lines while the current file, fl= or an
    inlined fi=/fe=, is one of them; a call's inclusive cost is not)"""
    files = {}
    fl = cur = None
    skip = False
    total = 0

    def file_of(value):
        # compressed names: "(id) name" the first time, "(id)" after
        m = re.match(r'\((\d+)\)(?: (.*))?$', value)
        if m is None:
            return value
        if m.group(2) is not None:
            files[m.group(1)] = m.group(2)
        return files.get(m.group(1))

    with open(path) as f:
        for line in f:
            if line[:1].isdigit() or line[:1] in '+-*':
                if skip:
                    skip = False
                elif (cur is not None and OWN_FILE.search(cur) and
                      not PUBLISH_FILE.search(cur)):
                    words = line.split()
                    total += int(words[1]) if len(words) > 1 else 0
                continue
            key, _, value = line.rstrip('\n').partition('=')
            if key == 'fl':
                fl = cur = file_of(value)
            elif key in ('fi', 'fe'):
                cur = file_of(value)
            elif key == 'fn':
                cur = fl
            elif key in ('cfi', 'cfl'):
                file_of(value)
            elif key == 'calls':
                skip = True
    return total


def periodic(path):
    """the instructions of publishing the counters in a callgrind output
    file (inclusive, each function once), to be left out"""
    out = subprocess.run(['callgrind_annotate', '--inclusive=yes',
                          '--auto=no', '--threshold=100', path],
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        words = line.split()
        for fn in PUBLISHING:
            if fn not in found and words and any(
                    w.endswith(':' + fn) for w in words):
                found[fn] = int(words[0].replace(',', ''))
    return sum(found.values())


class Counter:
    def __init__(self, smbd, outdir):
        self.smbd = smbd
        self.outdir = outdir

    def connection(self, share, total, block, depth, op='write'):
        """instructions of one connection that writes (or reads) total
        bytes, and those of them in iotune's own code"""
        before = set(self.smbd.child_pids())
        c = harness.ScriptClient(self.smbd, share)
        new = set(self.smbd.child_pids()) - before
        assert len(new) == 1, new
        pid = new.pop()
        if op == 'read':
            c.open(READ_FILE, 'batch')
        else:
            c.open('insn.bin', 'batch')
            c.truncate(0)
        done, _ = c.pump(op, total, block, depth)
        assert done == total, (done, total)
        if op == 'write':
            c.flush()
        c.close()
        c.quit()
        path = os.path.join(self.outdir, 'callgrind.%d' % pid)
        return totals(path) - periodic(path), own_instructions(path)

    def per_mib(self, share, block, depth, small, large, op='write'):
        """instructions per MiB between a connection that moves small
        bytes and one that moves large bytes, all and iotune's own"""
        a = self.connection(share, small, block, depth, op)
        b = self.connection(share, large, block, depth, op)
        mib = (large - small) / MIB
        return (b[0] - a[0]) / mib, (b[1] - a[1]) / mib


def cell_bytes(args, block):
    """the small and the large connection's bytes for block-sized
    requests: --small-mib and --large-mib, times block / 64 KiB when
    block is larger, at most 8 times"""
    scale = min(8, max(1, block // (64 * KIB)))
    return args.small_mib * MIB * scale, args.large_mib * MIB * scale


def make_read_files(smbd, shares, size):
    """the file the read cells read, on every share, written once"""
    for share in shares:
        c = harness.ScriptClient(smbd, share)
        c.open(READ_FILE, 'none')
        c.truncate(0)
        c.pump('write', size, MIB, 4)
        c.flush()
        c.close()
        c.quit()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--small-mib', type=int, default=8)
    ap.add_argument('--large-mib', type=int, default=40)
    ap.add_argument('--json', default=os.path.join(
        harness.REPO, 'build', 'instructions.json'))
    args = ap.parse_args()
    if shutil.which('valgrind') is None:
        sys.exit('valgrind is missing: run scripts/install-deps.sh')
    harness.install_module()
    workdir = harness.scratch_dir('bench-insn-')
    outdir = os.path.join(workdir, 'callgrind')
    os.makedirs(outdir)
    shares = {name: LOCAL_SHARES[name]
              for kind in ('pagecache', 'odirect', 'control')
              for name in PAIRS[kind]}
    wrapper = ['valgrind', '--tool=callgrind', '--quiet',
               '--callgrind-out-file=%s/callgrind.%%p' % outdir]
    smbd = harness.Smbd(workdir, shares, log_level='0', wrapper=wrapper)
    smbd.start(timeout=120)  # slow to start under valgrind
    try:
        rows = measure(args, Counter(smbd, outdir), shares)
    finally:
        smbd.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    with open(args.json, 'w') as f:
        json.dump({'date': time.strftime('%Y-%m-%d'), 'cells': rows,
                   'small_mib': args.small_mib,
                   'large_mib': args.large_mib}, f, indent=1)
    print('wrote %s' % args.json)
    return 0


def measure(args, counter, shares):
    rows = []
    make_read_files(counter.smbd, shares,
                    max(cell_bytes(args, block)[1]
                        for op, block, _ in CELLS if op == 'read'))
    for share in shares:
        counter.connection(share, MIB, 64 * KIB, 1)
        counter.connection(share, MIB, 64 * KIB, 1, 'read')
    for op, block, depth in CELLS:
        for kind in ('pagecache', 'odirect'):
            tuned, base = PAIRS[kind]
            # the control share: a second share without iotune, in the
            # same rounds, where the pair is iotune passing requests by
            # against a share without it (the criterion's noise floor)
            control = (PAIRS['control'][0]
                       if passes_by(kind, op, block) else None)
            got = {tuned: [], base: [], control: []}
            own = []
            small, large = cell_bytes(args, block)
            for r in range(args.rounds):
                order = [s for s in (tuned, base, control) if s]
                for share in order if r % 2 == 0 else order[::-1]:
                    mib, own_mib = counter.per_mib(
                        share, block, depth, small, large, op)
                    got[share].append(mib)
                    if share == tuned:
                        own.append(own_mib)
            row = cell_row(kind, op, block, depth, small, large,
                           got[tuned], got[base], own)
            if control:
                row.update(control_row(got[control], got[base]))
            rows.append(row)
            print('insn %-9s %-5s %4s x%-2d  iotune %10.0f  without '
                  '%10.0f instructions/MiB  %.3fx (rounds %.3f-%.3f)  '
                  '%+d per request, %d in iotune\'s code' %
                  (kind, op, size_name(block), depth,
                   row['iotune_insn_per_mib'], row['base_insn_per_mib'],
                   row['ratio'], row['ratio_low'], row['ratio_high'],
                   row['extra_per_request'], row['own_per_request']),
                  flush=True)
            if control:
                print('insn %-9s %-5s %4s x%-2d  control (a second share '
                      'without iotune) %.3fx (rounds %.3f-%.3f)' %
                      ('control', op, size_name(block), depth,
                       row['control_ratio'], row['control_low'],
                       row['control_high']), flush=True)
    return rows


def control_row(control, base):
    """the control share against the share without iotune: the median
    of each, their ratio, and the rounds' lowest and highest ratio"""
    ratios = [c / b for c, b in zip(control, base)]
    median = round(statistics.median(control))
    return {'control_insn_per_mib': median,
            'control_ratio': round(median / round(statistics.median(base)),
                                   3),
            'control_low': round(min(ratios), 3),
            'control_high': round(max(ratios), 3)}


def cell_row(kind, op, block, depth, small, large, tuned, base, own):
    """a cell's medians; the rounds' ratios pair the rounds in order"""
    row = {'backend': kind, 'op': op, 'block': block,
           'depth': depth, 'small_mib': small // MIB,
           'large_mib': large // MIB,
           'iotune_insn_per_mib': round(statistics.median(tuned)),
           'base_insn_per_mib': round(statistics.median(base))}
    row['ratio'] = round(row['iotune_insn_per_mib'] /
                         row['base_insn_per_mib'], 3)
    ratios = [t / b for t, b in zip(tuned, base)]
    row['ratio_low'] = round(min(ratios), 3)
    row['ratio_high'] = round(max(ratios), 3)
    # what iotune adds to each request (negative: saves), and what runs
    # in its own code
    row['extra_per_request'] = round(
        (row['iotune_insn_per_mib'] - row['base_insn_per_mib']) *
        block / MIB)
    row['own_per_request'] = round(statistics.median(own) * block / MIB)
    return row


if __name__ == '__main__':
    sys.exit(main())
