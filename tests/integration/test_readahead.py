# Read-ahead and fadvise policies against a real smbd, observed with
# strace on the smbd process serving the client (all its threads).
#
# SPDX-License-Identifier: GPL-3.0-or-later

import collections
import json
import os
import re
import subprocess
import threading
import time

import pytest

import harness
from conftest import start_smbd
from memlimit import MemoryLimit, memory_limit_of
from stracing import Strace, calls

MIB = 1024 * 1024
FILE_SIZE = 24 * MIB


def ra_share(**options):
    params = {'vfs objects': 'iotune'}
    params.update({'iotune:' + k.replace('_', ' '): v
                   for k, v in options.items()})
    return params


SHARES = {
    'ra_kernel': ra_share(),
    'ra_off': ra_share(readahead='off'),
    'ra_fixed': ra_share(readahead='fixed', readahead_offset='1M',
                         readahead_size='2M'),
    # without a pressure threshold: iotune's windows always
    'ra_adaptive': ra_share(readahead='adaptive', readahead_max='8M',
                            readahead_pressure='0'),
    # the default: Linux's read-ahead until memory pressure
    'ra_adaptive_psi': ra_share(readahead='adaptive'),
    'ra_adaptive_tight': ra_share(readahead='adaptive',
                                  readahead_pressure='1'),
    'ra_random': ra_share(fadvise='random'),
    'ra_drop': ra_share(drop_behind='yes'),
}


@pytest.fixture(scope='module')
def smbd(request):
    s = start_smbd(request, SHARES)
    data = os.urandom(FILE_SIZE)
    for share in SHARES:
        with open(os.path.join(s.share_path(share), 'data.bin'), 'wb') as f:
            f.write(data)
    s.test_data = data
    return s


def read_traced(smbd, share, tmp_path, block=MIB,
                trace='readahead,fadvise64', name='data.bin', data=None):
    """reads name (its contents: data, else the fixture's data) through
    share, traced; the trace's text.  smbd's parent process is traced
    before the client connects, so the client's process is traced from
    its fork on.  (The close's drop that CI runs missed now and then was
    in the trace, split in two lines: see calls().)"""
    data = smbd.test_data if data is None else data
    trace = Strace(smbd.proc.pid, str(tmp_path / ('%s.strace' % share)),
                   trace)
    client = harness.PyClient(smbd, share)
    fnum = client.open(name, harness.PyClient.FILE_OPEN)
    got = bytearray()
    for off in range(0, len(data), block):
        got += client.read(fnum, off, block)
    client.close(fnum)
    time.sleep(0.3)         # jobs of the thread pool finish
    text = trace.stop()
    del client
    assert bytes(got) == data
    return text


def test_kernel_mode_leaves_linux_alone(smbd, tmp_path):
    text = read_traced(smbd, 'ra_kernel', tmp_path,
                       trace='readahead,fadvise64,pread64')
    # the trace saw the reading (1 MiB reads), so its silence counts
    assert re.search(r'pread64\(\d+, .*, %d, \d+\) = %d' % (MIB, MIB), text)
    assert calls(text, 'readahead') == []
    assert calls(text, 'fadvise64') == []


def test_off_switches_kernel_readahead_off(smbd, tmp_path):
    text = read_traced(smbd, 'ra_off', tmp_path)
    advice = [c[3] for c in calls(text, 'fadvise64')]
    assert 'POSIX_FADV_RANDOM' in advice
    assert calls(text, 'readahead') == []


def test_fixed_prefetches_at_offset_multiples(smbd, tmp_path):
    text = read_traced(smbd, 'ra_fixed', tmp_path)
    ra = [(int(off), int(n)) for _, off, n, _ in calls(text, 'readahead')]
    assert len(ra) >= FILE_SIZE // MIB // 2
    for off, n in ra:
        assert 0 < n <= 2 * MIB
        # at a 1 MiB multiple, or where the previous prefetch ended
        assert off % MIB == 0


def test_adaptive_prefetches_ahead_of_the_reader(smbd, tmp_path):
    text = read_traced(smbd, 'ra_adaptive', tmp_path)
    advice = [c[3] for c in calls(text, 'fadvise64')]
    assert 'POSIX_FADV_RANDOM' in advice       # Linux's own is off
    ra = [(int(off), int(n)) for _, off, n, _ in calls(text, 'readahead')]
    assert len(ra) >= 3
    assert max(n for _, n in ra) > min(n for _, n in ra)   # grew
    assert max(n for _, n in ra) <= 8 * MIB
    covered = sum(n for _, n in ra)
    assert covered <= FILE_SIZE + 8 * MIB


PSI_FILE = r'"(/proc/pressure/memory|/sys/fs/cgroup/[^"]*memory\.pressure)"'


def test_adaptive_reads_memory_pressure(smbd, tmp_path):
    """an adaptive share's process opens Linux's PSI file of its cgroup
    (or the system's) and reads it; with readahead pressure = 0 it never
    looks"""
    if not os.path.exists('/proc/pressure/memory'):
        pytest.skip('this kernel has no PSI')
    text = read_traced(smbd, 'ra_adaptive_psi', tmp_path,
                       trace='openat,pread64')
    opened = re.search(PSI_FILE + r', O_RDONLY\|O_CLOEXEC\) = (\d+)', text)
    assert opened, text[-2000:]
    fd = opened.group(2)
    sample = re.search(r'pread64\(%s, "some avg10=.*\) = \d+' % fd, text)
    assert sample, text[-2000:]
    text = read_traced(smbd, 'ra_adaptive', tmp_path,
                       trace='openat,pread64')
    assert not re.search(PSI_FILE, text)


def memory_stall_us():
    """the system's cumulative time some tasks stalled for memory"""
    with open('/proc/pressure/memory') as f:
        return int(re.search(r'total=(\d+)', f.read()).group(1))


def memory_avg10():
    """the system's share of the last 10 s stalled for memory, percent"""
    with open('/proc/pressure/memory') as f:
        return float(re.search(r'avg10=([\d.]+)', f.read()).group(1))


def test_adaptive_leaves_linux_on_while_memory_is_plentiful(smbd, tmp_path):
    """with a pressure threshold, adaptive neither switches Linux's
    read-ahead off nor prefetches itself while nothing stalls for memory"""
    if not os.path.exists('/proc/pressure/memory'):
        pytest.skip('this kernel has no PSI')
    # a new process's first reading is Linux's 10 s average: the stall of
    # an earlier test (or benchmark) decays first
    deadline = time.monotonic() + 40
    while memory_avg10() >= 1.0 and time.monotonic() < deadline:
        time.sleep(1)
    if memory_avg10() >= 1.0:
        pytest.skip('memory pressure: %.2f%% in the last 10 s' %
                    memory_avg10())
    ram = os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
    if 0 < memory_limit_of(smbd.proc.pid) < ram:
        pytest.skip('smbd runs in a memory cgroup with a limit: adaptive '
                    'uses its own windows there from the open')
    before = memory_stall_us()
    text = read_traced(smbd, 'ra_adaptive_psi', tmp_path)
    if memory_stall_us() - before > 10000:
        pytest.skip('tasks stalled for memory meanwhile (%d us)' %
                    (memory_stall_us() - before))
    assert 'POSIX_FADV_RANDOM' not in [c[3] for c in
                                       calls(text, 'fadvise64')]
    assert calls(text, 'readahead') == []
    # the trace saw the reads (an empty trace would pass the rest)
    text = read_traced(smbd, 'ra_adaptive', tmp_path)
    assert len(calls(text, 'readahead')) >= 3


def test_adaptive_takes_over_under_memory_pressure(smbd, tmp_path):
    """smbd in a memory cgroup smaller than what 8 readers read at once:
    reclaim stalls it (Linux's PSI), and adaptive switches Linux's
    read-ahead off (RANDOM, at the open or at a read) and prefetches with
    its own, shrinking windows"""
    if not os.path.exists('/proc/pressure/memory'):
        pytest.skip('this kernel has no PSI')
    if harness.SMBD_PRELOAD:
        # ASan keeps freed buffers in its quarantine (256 MiB a process):
        # 8 sanitized smbd children do not fit 96 MiB, the cgroup's OOM
        # killer ends them (the sanitize stage of an earlier CI run)
        pytest.skip('smbd runs with sanitizers: its own memory outgrows '
                    'the 96 MiB cgroup')
    limit = MemoryLimit(96 * MIB, 'iotune-test-%d' % os.getpid())
    if limit.path is None:
        pytest.skip('no memory cgroup')
    share, size = 'ra_adaptive_tight', 48 * MIB
    names = ['tight%d.bin' % i for i in range(8)]
    for name in names:
        with open(os.path.join(smbd.share_path(share), name), 'wb') as f:
            f.write(os.urandom(size))
            f.flush()
            os.fsync(f.fileno())    # clean pages: they can be dropped
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    before = counters(smbd, share)
    stall = memory_stall_us()
    try:
        limit.add(smbd.proc.pid)
        clients = [harness.ScriptClient(smbd, share) for _ in names]
        for c, name in zip(clients, names):
            c.open(name)
        got = [0] * len(names)

        def read(i):
            got[i] = clients[i].pump('read', size, MIB, 4)[0]
        threads = [threading.Thread(target=read, args=(i,))
                   for i in range(len(names))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for c in clients:
            c.close()
            c.quit()
    finally:
        limit.remove()
    assert got == [size] * len(names)
    stall = memory_stall_us() - stall
    time.sleep(1.6)
    c = counters(smbd, share)
    # Linux's read-ahead switched off (RANDOM): at the open, or at a read
    # when the pressure came (ra_takeovers); both are advice applied
    advised = c['fadvise_calls'] - before['fadvise_calls']
    assert advised > 0, 'stalled %d us' % stall
    assert c['ra_prefetch_calls'] > before['ra_prefetch_calls']


def test_adaptive_own_windows_in_a_memory_cgroup(smbd, tmp_path):
    """smbd in a memory cgroup with a limit below the RAM: adaptive reads
    the cgroup's limit and serves the file with its own windows from the
    open (Linux's read-ahead off, RANDOM), though nothing stalls; outside
    it, the same share leaves Linux's on (the test before)"""
    if not os.path.exists('/proc/pressure/memory'):
        pytest.skip('this kernel has no PSI')
    ram = os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
    limit = MemoryLimit(min(ram // 2, 2048 * MIB),
                        'iotune-test-limit-%d' % os.getpid())
    if limit.path is None:
        pytest.skip('no memory cgroup')
    try:
        limit.add(smbd.proc.pid)
        text = read_traced(smbd, 'ra_adaptive_psi', tmp_path,
                           trace='openat,fadvise64,readahead')
    finally:
        limit.remove()
    assert re.search(r'"%s/[^"]*memory\.(max|high|limit_in_bytes)"'
                     % re.escape(limit.root), text), text[-2000:]
    assert 'POSIX_FADV_RANDOM' in [c[3] for c in calls(text, 'fadvise64')]
    assert len(calls(text, 'readahead')) >= 3


def test_fadvise_option(smbd, tmp_path):
    text = read_traced(smbd, 'ra_random', tmp_path)
    assert 'POSIX_FADV_RANDOM' in [c[3] for c in calls(text, 'fadvise64')]


def test_drop_behind_drops_only_behind(smbd, tmp_path):
    # drops come in pieces of 32 MiB: a file of several
    size = 3 * 32 * MIB + 8 * MIB
    data = os.urandom(size)
    with open(os.path.join(smbd.share_path('ra_drop'), 'big.bin'),
              'wb') as f:
        f.write(data)
    text = read_traced(smbd, 'ra_drop', tmp_path, name='big.bin', data=data)
    drops = [(int(off), int(n)) for _, off, n, adv in
             calls(text, 'fadvise64') if adv == 'POSIX_FADV_DONTNEED']
    # once it closed: all it read, once (in the close itself; a pool
    # thread may still run a drop of the reading after it)
    assert drops.count((0, size)) == 1
    # while it reads: contiguous pieces from the start, behind the reader
    # (pool threads may run two of them in either order)
    behind = sorted(d for d in drops if d != (0, size))
    assert len(behind) >= 1
    end = 0
    for off, n in behind:
        assert off == end
        end = off + n
    assert 0 < end < size


def counters(smbd, share):
    """share's counters, iotune-stat --json; zeros before any process
    published (the tool then exits with 1)"""
    run = subprocess.run([os.path.join(harness.REPO, 'tools', 'iotune-stat'),
                          '--configfile', smbd.conf, '--json'],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return collections.defaultdict(int)
    return json.loads(run.stdout)['shares'].get(share, {}).get(
        'counters', collections.defaultdict(int))


def test_counters_show_readahead(smbd, tmp_path):
    read_traced(smbd, 'ra_adaptive', tmp_path)
    time.sleep(1.6)
    c = counters(smbd, 'ra_adaptive')
    assert c['ra_prefetch_calls'] > 0
    assert c['ra_streams_detected'] > 0
    assert c['fadvise_calls'] > 0
