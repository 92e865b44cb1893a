# The write cache on a hostile week, against a real smbd: full
# disks, failed flushes, a lost right to cache, timestamps, sizes, a
# killed smbd, one lease across processes.  Each test compares with a
# share without iotune where that says what "right" is.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import re
import signal
import threading
import time

import pytest

import harness
from conftest import start_smbd

KIB = 1024
MIB = 1024 * KIB
OPLOCK_BATCH = 0x09
LEASE_RWH = 0x07


def iotune(**options):
    return harness.iotune_share(**options)


@pytest.fixture(scope='module')
def smbd(request):
    work = harness.scratch_dir('safety-fs-')
    mounts = {}
    for name, size in [('tiny_plain', '256k'), ('tiny_64k', '256k'),
                       ('tiny_1m', '256k'), ('full8', '8m')]:
        mounts[name] = os.path.join(work, name)
        harness.mount_tmpfs(mounts[name], size)
    request.addfinalizer(lambda: [harness.umount(m)
                                  for m in mounts.values()])
    control = os.path.join(work, 'fault-control')
    open(control, 'w').close()
    same = os.path.join(work, 'same-path')
    os.makedirs(same)
    fault = dict(iotune(write_cache_flush_timeout='60s'))
    fault.update({'vfs objects': 'iotune iotune_fault',
                  'iotune_fault:control': control})
    shares = {
        'tiny_plain': {'path': mounts['tiny_plain']},
        'tiny_64k': dict(iotune(write_cache_size='64K'),
                         path=mounts['tiny_64k']),
        'tiny_1m': dict(iotune(), path=mounts['tiny_1m']),
        'full8': dict(iotune(write_cache_batch_reservations='yes'),
                      path=mounts['full8']),
        'fault': fault,
        'plain': {},
        'cached': iotune(write_cache_flush_timeout='60s'),
        'sizes': iotune(write_cache_flush_timeout='2s'),
        'crash': iotune(write_cache_flush_timeout='1s'),
        'nostrict': dict(iotune(write_cache_flush_timeout='60s'),
                         **{'strict sync': 'no'}),
        'same_iotune': dict(iotune(write_cache_flush_timeout='60s'),
                            path=same),
        'same_plain': {'path': same},
    }
    s = start_smbd(request, shares)
    s.control = control
    return s


def fault(smbd, rule):
    """sets the fault module's rule (empty: no faults)"""
    with open(smbd.control + '.tmp', 'w') as f:
        f.write(rule + '\n' if rule else '')
    os.rename(smbd.control + '.tmp', smbd.control)


def read_file(smbd, share, name):
    with open(os.path.join(smbd.share_path(share), name), 'rb') as f:
        return f.read()


def write_until_error(client, total, block, data_seed=7):
    """writes block-sized pieces until one fails: (acked data, error)"""
    acked = bytearray()
    for off in range(0, total, block):
        piece = bytes([(data_seed + off // block) % 251]) * block
        try:
            client.write(off, piece)
        except RuntimeError as e:
            return bytes(acked), str(e)
        acked += piece
    return bytes(acked), None


def open_breaking(writer, open_fn):
    """Runs open_fn() in a thread: its open breaks the oplock or lease of
    writer (with autoack on), which acknowledges while it waits for the
    break.  Returns what open_fn returned."""
    result = {}
    opener = threading.Thread(
        target=lambda: result.setdefault('r', open_fn()))
    opener.start()
    assert writer.wait_break(10000) != 'none'
    writer.echo()           # the ack is on the wire before the echo
    opener.join(60)
    assert 'r' in result, 'the opener did not get in'
    return result['r']


def child_cpu(smbd):
    return harness.cpu_seconds(smbd.child_pids())


def flush_error_lines(smbd):
    return len(re.findall(r'writing cached data of .* failed',
                          smbd.log_text()))


# 1. A full disk: the client gets DISK_FULL, smbd does not spin, the log
#    is not flooded.

def test_full_disk_fails_the_write_and_smbd_stays_idle(smbd):
    """16 MiB of 4 KiB writes under a batch oplock to an 8 MiB tmpfs"""
    client = harness.ScriptClient(smbd, 'full8')
    assert client.open('big.bin', 'batch')[0] == OPLOCK_BATCH
    acked, error = write_until_error(client, 16 * MIB, 4 * KIB)
    assert error is not None and 'DISK_FULL' in error, error
    cpu = child_cpu(smbd)
    time.sleep(3)
    idle_cpu = child_cpu(smbd) - cpu
    print('acknowledged %d bytes; CPU of smbd in 3 idle seconds after '
          'the error: %.2f s' % (len(acked), idle_cpu))
    assert idle_cpu < 0.5, 'smbd spins after a full disk'
    # every acknowledged byte is readable by another client
    client.call('autoack')
    reader = harness.ScriptClient(smbd, 'full8')
    open_breaking(client, lambda: reader.open('big.bin', 'none'))
    got = b''
    while True:
        piece = reader.read(len(got), MIB)
        if not piece:
            break
        got += piece
    reader.close()
    reader.quit()
    assert got == acked
    client.close()
    client.quit()


def test_failing_flushes_fail_writes_back_off_and_log_rarely(smbd):
    """Flushes fail (the disk says ENOSPC although space was reserved):
    the next write gets DISK_FULL, every later write retries the old data
    first and fails the same way, no retry loop runs in between, one log
    line; when the disk recovers, every acknowledged byte is written."""
    fault(smbd, 'pwrite ENOSPC')
    client = harness.ScriptClient(smbd, 'fault')
    try:
        assert client.open('failing.bin', 'batch')[0] == OPLOCK_BATCH
        lines = flush_error_lines(smbd)
        acked, error = write_until_error(client, 4 * MIB, 4 * KIB)
        assert error is not None and 'DISK_FULL' in error, error
        errors = 1
        for i in range(50):
            try:
                client.write(len(acked) + i * 4 * KIB, b'x' * 4 * KIB)
            except RuntimeError as e:
                assert 'DISK_FULL' in str(e)
                errors += 1
        assert errors == 51, 'a write was acknowledged on a full disk'
        cpu = child_cpu(smbd)
        time.sleep(3)
        idle_cpu = child_cpu(smbd) - cpu
        new_lines = flush_error_lines(smbd) - lines
        print('acknowledged %d bytes, then %d writes failed; %d log '
              'lines; CPU in 3 idle s: %.2f' %
              (len(acked), errors, new_lines, idle_cpu))
        assert idle_cpu < 0.5
        assert 1 <= new_lines <= 2
        fault(smbd, '')
        client.flush()
        assert read_file(smbd, 'fault', 'failing.bin') == acked
        client.close()
    finally:
        fault(smbd, '')
        client.quit()


def pump_pattern(block):
    """the data of every request of smb2-script's pump"""
    return bytes(((i * 2654435761) & 0xffffffff) >> 24
                 for i in range(block))


@pytest.mark.parametrize('depth', [4, 16])
def test_full_disk_with_writes_in_flight(smbd, depth):
    """4 KiB writes, depth of them in flight, under a batch oplock into
    an 8 MiB tmpfs with 'write cache batch reservations' (the writes
    that arrive while one batch is on its way share the next).  Every
    write acknowledged is in the file after the close, the ones that
    failed failed with DISK_FULL and hold nothing, and nothing else is
    in the file."""
    block = 4 * KIB
    path = smbd.share_path('full8')
    for name in os.listdir(path):
        os.unlink(os.path.join(path, name))
    before = harness.iotune_counters(smbd, 'full8')
    client = harness.ScriptClient(smbd, 'full8')
    name = 'pipelined-%d.bin' % depth
    assert client.open(name, 'batch')[0] == OPLOCK_BATCH
    status, sent, failed = client.pump_until_error(16 * MIB, block, depth)
    client.close()
    client.quit()
    assert status == 'NT_STATUS_DISK_FULL', status
    assert failed and sent <= 16 * MIB
    data = read_file(smbd, 'full8', name)
    assert len(data) <= sent
    pattern = pump_pattern(block)
    acked = 0
    for off in range(0, sent, block):
        got = data[off:off + block]
        if off in failed:
            assert got.count(0) == len(got), 'failed write at %d ' \
                'left data' % off
            continue
        assert got == pattern, 'acknowledged write at %d lost' % off
        acked += 1
    after = harness.iotune_counters_until(
        smbd, 'full8', lambda c: c.get('wc_writes_cached', 0) >=
        before.get('wc_writes_cached', 0) + acked // 2)
    cached = after['wc_writes_cached'] - before.get('wc_writes_cached', 0)
    calls = after['wc_reserve_calls'] - before.get('wc_reserve_calls', 0)
    print('depth %d: %d writes acknowledged, %d failed, %d cached with '
          '%d reservation calls' % (depth, acked, len(failed), cached,
                                    calls))
    assert acked > 0 and cached > 0
    # some batch decided more than one write (inline: a call per write)
    assert calls < cached
    for name in os.listdir(path):
        os.unlink(os.path.join(path, name))


# 2. Never acknowledge more than the disk holds.

@pytest.mark.parametrize('share', ['tiny_64k', 'tiny_1m'])
def test_never_acknowledges_more_than_fits(smbd, share):
    """256 KiB tmpfs: what iotune acknowledges, a second client reads;
    never more than a share without iotune acknowledges."""
    results = {}
    for s in ['tiny_plain', share]:
        client = harness.ScriptClient(smbd, s)
        client.open('fill.bin', 'batch')
        acked, error = write_until_error(client, 1 * MIB, 4 * KIB)
        assert error is not None and 'DISK_FULL' in error, (s, error)
        reader = harness.ScriptClient(smbd, s)
        client.call('autoack')
        open_breaking(client, lambda: reader.open('fill.bin', 'none'))
        got = reader.read(0, len(acked) + 4 * KIB)
        reader.close()
        reader.quit()
        results[s] = (len(acked), len(got))
        assert got == acked, '%s: %d acknowledged, %d readable' % (
            s, len(acked), len(got))
        client.close()
        client.quit()
    print('acknowledged / readable bytes: %s' % results)
    assert results[share][0] <= results['tiny_plain'][0]


# 3. A failed break flush never overwrites a newer write of another
#    client later, and the error reaches the writer.

@pytest.mark.parametrize('errname,status', [('ENOSPC', 'DISK_FULL'),
                                            ('EIO', 'IO_DEVICE_ERROR')])
def test_failed_break_flush_never_overwrites_newer_data(smbd, errname,
                                                       status):
    name = 'lost-%s.bin' % errname
    a = harness.ScriptClient(smbd, 'fault')
    b = harness.ScriptClient(smbd, 'fault')
    try:
        a.call('autoack')
        assert a.open(name, 'batch')[0] == OPLOCK_BATCH
        data = bytes(range(256)) * (512 * KIB // 256)
        for off in range(0, len(data), 16 * KIB):
            a.write(off, data[off:off + 16 * KIB])
        # all cached: reserved (the size is true), not written
        assert read_file(smbd, 'fault', name) == bytes(len(data))
        fault(smbd, 'pwrite %s after %d' % (errname, 200 * KIB))
        # B breaks A: A's flush fails part-way
        open_breaking(a, lambda: b.open(name, 'none'))
        fault(smbd, '')             # space comes back
        b.write(400 * KIB, b'B' * 16)
        assert b.read(400 * KIB, 16) == b'B' * 16
        with pytest.raises(RuntimeError) as e:
            a.close()
        assert status in str(e.value)
        on_disk = read_file(smbd, 'fault', name)
        assert on_disk[400 * KIB:400 * KIB + 16] == b'B' * 16
        assert on_disk[:200 * KIB] == data[:200 * KIB]
        b.close()
        log = smbd.log_text()
        assert 'could not be written' in log and 'are lost' in log
    finally:
        fault(smbd, '')
        a.quit()
        b.quit()


# 4. LastWriteTime set before close is kept.

NT_2020 = 132223104000000000        # 2020-01-01 00:00:00 UTC
NT_2020_NS = 1577836800 * 10 ** 9


@pytest.mark.parametrize('oplock', ['batch', 'lease'])
def test_write_time_set_before_close_is_kept(smbd, oplock):
    mtimes = {}
    for share in ['plain', 'cached']:
        c = harness.ScriptClient(smbd, share)
        c.open('copied-%s.bin' % oplock, oplock)
        c.write(0, b'data of a copied file' * 100)
        c.settime(NT_2020)
        c.write(100, b'more')       # a copy tool may write after it too
        c.close()
        c.quit()
        path = os.path.join(smbd.share_path(share),
                            'copied-%s.bin' % oplock)
        mtimes[share] = int(os.stat(path).st_mtime)
    print('mtime after close: %s' % mtimes)
    assert mtimes['plain'] == 1577836800
    assert mtimes['cached'] == mtimes['plain']


def _flushes_for_times(smbd):
    return harness.iotune_counters(smbd, 'cached').get('wc_flushes_times', 0)


@pytest.mark.parametrize('oplock', ['batch', 'lease'])
def test_write_time_restored_needs_no_flush(smbd, oplock):
    """smbd 4.23+ sets a sticky write time again after every write; a set
    that only restores the time the file has keeps the cache (no flush
    for 'times'), and the time is set again after the data lands, so the
    file ends with the time set and all its data.  (A set of a new time
    writes the cache out first: test_write_time_set_before_close_is_kept.)
    """
    name = 'restored-%s.bin' % oplock
    path = os.path.join(smbd.share_path('cached'), name)
    with open(path, 'wb') as f:
        f.write(b'x' * 64 * KIB)
    os.utime(path, ns=(NT_2020_NS, NT_2020_NS))
    before = _flushes_for_times(smbd)
    c = harness.ScriptClient(smbd, 'cached')
    c.open(name, oplock)
    for i in range(8):
        c.write(i * 4 * KIB, bytes([65 + i]) * 4 * KIB)   # rewrites
        c.settime(NT_2020)
        c.write(64 * KIB + i * 100, b'%02d' % i * 50)     # extends
        c.settime(NT_2020)
    c.write(60 * KIB, b'last')
    on_disk_before_close = os.stat(path)
    c.close()
    c.quit()
    st = os.stat(path)
    with open(path, 'rb') as f:
        data = f.read()
    flushes = _flushes_for_times(smbd) - before
    print('flushes for times: %d; size %d before close, %d after; '
          'mtime %d' % (flushes, on_disk_before_close.st_size, st.st_size,
                        st.st_mtime_ns))
    assert flushes == 0
    assert st.st_mtime_ns == NT_2020_NS
    assert len(data) == 64 * KIB + 800
    for i in range(8):
        assert data[i * 4 * KIB:(i + 1) * 4 * KIB - (4 if i == 7 else 0)] \
            .startswith(bytes([65 + i]) * 100)
        assert data[64 * KIB + i * 100:64 * KIB + (i + 1) * 100] == \
            b'%02d' % i * 50
    assert data[60 * KIB:60 * KIB + 4] == b'last'


# 5. Sizes: everything the writer's smbd serves shows the cached data;
#    other processes see it within the flush timeout.

@pytest.mark.parametrize('oplock', ['batch', 'lease'])
def test_sizes_with_cached_data(smbd, oplock):
    name = 'sized-%s.bin' % oplock
    path = os.path.join(smbd.share_path('sizes'), name)
    w = harness.ScriptClient(smbd, 'sizes')
    other = harness.ScriptClient(smbd, 'sizes')
    w.open(name, oplock)
    w.truncate(0)
    w.write(0, b'z' * 5000)
    written = time.monotonic()
    # the reservation made the size on disk: every tree, process and
    # local program sees it at once, as without the cache
    assert os.path.getsize(path) == 5000
    assert w.getinfo()[0] == 5000
    assert w.stat(name) == 5000                     # a stat open
    assert w.list(name)[name] == 5000               # a directory listing
    assert other.stat(name) == 5000                 # another process
    assert other.list(name)[name] == 5000
    # the bytes: at most the flush timeout later
    seen = None
    while time.monotonic() - written < 10:
        with open(path, 'rb') as f:
            if f.read() == b'z' * 5000:
                seen = time.monotonic() - written
                break
        time.sleep(0.1)
    print('%s: the data was on disk after %.1f s (flush timeout 2 s)' %
          (oplock, seen or -1))
    assert seen is not None and seen < 2 + 1.5
    w.close()
    other.quit()
    w.quit()


# 6. A killed smbd: FLUSH and the timeout make data survive; with
#    "strict sync = no" nothing is cached.

def kill_child(smbd, client):
    """kills (-9) the smbd child that serves client's connection"""
    before = set(smbd.child_pids())
    assert before
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    client.proc.kill()
    client.proc.wait()


@pytest.mark.parametrize('share,how', [('crash', 'flush'),
                                       ('crash', 'timeout'),
                                       ('nostrict', 'flush')])
def test_acknowledged_data_survives_kill_9(smbd, share, how):
    name = 'kill-%s-%s.bin' % (share, how)
    c = harness.ScriptClient(smbd, share)
    c.open(name, 'batch')
    data = os.urandom(8 * 64 * KIB)
    for off in range(0, len(data), 64 * KIB):
        c.write(off, data[off:off + 64 * KIB])
    if how == 'flush':
        c.flush()
    else:
        time.sleep(1 + 1)           # the flush timeout, and some
    kill_child(smbd, c)
    assert read_file(smbd, share, name) == data


def test_strict_sync_no_is_not_cached(smbd):
    c = harness.ScriptClient(smbd, 'nostrict')
    c.open('nostrict.bin', 'batch')
    c.write(0, b'on disk at once')
    assert read_file(smbd, 'nostrict', 'nostrict.bin') == b'on disk at once'
    c.close()
    c.quit()
    assert 'strict sync = no' in smbd.log_text()


def test_what_a_kill_loses_is_bounded(smbd):
    """Without FLUSH, a kill -9 loses at most the data of the last flush
    timeout: never more than two windows of a file (one being written,
    one being filled).  The file keeps the size the writes gave it (the
    reservation set it); what was lost reads as zeros."""
    c = harness.ScriptClient(smbd, 'crash')
    c.open('exposure.bin', 'batch')
    data = os.urandom(3 * MIB + 12345)
    for off in range(0, len(data), 64 * KIB):
        c.write(off, data[off:off + 64 * KIB])
    kill_child(smbd, c)
    on_disk = read_file(smbd, 'crash', 'exposure.bin')
    assert len(on_disk) <= len(data)
    kept = 0
    while kept < len(on_disk) and on_disk[kept] == data[kept]:
        kept += 1
    kept -= kept % (64 * KIB)     # a written piece may end in zeros too
    lost = len(data) - kept
    print('kill -9 right after 3 MiB of writes: %d bytes lost (window 1 '
          'MiB), file size %d' % (lost, len(on_disk)))
    assert on_disk[:kept] == data[:kept]
    assert on_disk[kept:] == bytes(len(on_disk) - kept)
    assert lost <= 2 * MIB


def test_slow_writer_loses_at_most_the_last_flush_timeout(smbd):
    """4 KiB every 50 ms (a document saved slowly), flush timeout 1 s:
    a kill -9 loses only what was written in about the last second,
    whatever the window size."""
    c = harness.ScriptClient(smbd, 'crash')
    c.open('slow.bin', 'batch')
    data = os.urandom(60 * 4 * KIB)
    written = []
    for off in range(0, len(data), 4 * KIB):
        c.write(off, data[off:off + 4 * KIB])
        written.append((time.monotonic(), off + 4 * KIB))
        time.sleep(0.05)
    killed = time.monotonic()
    kill_child(smbd, c)
    on_disk = read_file(smbd, 'crash', 'slow.bin')
    # each cached write's reservation gave the file its size: a lost
    # block reads as zeros, a block that landed holds what was written
    piece = 4 * KIB
    landed = [on_disk[off:off + piece] == data[off:off + piece]
              for off in range(0, len(data), piece)]
    for off in range(0, len(on_disk), piece):
        assert landed[off // piece] or \
            on_disk[off:off + piece] == bytes(len(on_disk[off:off + piece]))
    kept = (landed + [False]).index(False) * piece
    # older than the timeout and 1 s of slack: must be in the file
    must = max([end for t, end in written if killed - t > 2.0] or [0])
    print('slow writer, kill -9: %d of %d bytes landed, %d lost '
          '(written in the last %.1f s)' %
          (sum(landed) * piece, len(data), len(data) - sum(landed) * piece,
           killed - min([t for t, end in written if end > kept]
                        or [killed])))
    assert kept >= must
    assert all(landed[:kept // piece])


# 7. One lease through two handles the cache cannot see.

def one_lease_two_handles(smbd, conf_path, guid, shares, name):
    """Two connections with one client GUID open name with one lease key,
    a on shares[0] and b on shares[1]; a writes 8 KiB (cached, where it
    may be), b opens without a break and must read it, then b writes.
    Returns (a, b) and the expected file."""
    conf = harness.client_conf(smbd, conf_path,
                               **{'libsmb:client_guid': guid})
    a = harness.ScriptClient(smbd, shares[0], conf=conf)
    b = harness.ScriptClient(smbd, shares[1], conf=conf)
    for c in (a, b):
        c.leasekey(bytes(range(16)))
    assert a.open(name, 'lease')[1] & 0x2
    a.truncate(0)
    a.write(0, b'A' * 8192)
    assert b.open(name, 'lease')[1] & 0x2
    assert a.wait_break(300) == 'none'      # one lease: no break
    assert b.read(0, 8192) == b'A' * 8192
    b.write(100, b'B' * 10)
    want = bytearray(b'A' * 8192)
    want[100:110] = b'B' * 10
    return a, b, want


def test_same_lease_through_a_share_without_iotune(smbd, tmp_path):
    """Same client GUID and lease key on [same_iotune] and [same_plain]
    (one path): smbd passes both connections to one process and sends no
    break; the handle on the share without iotune must read every byte
    and its write must not be overwritten later."""
    a, b, want = one_lease_two_handles(
        smbd, str(tmp_path / 'client.conf'),
        '8f1e2f49-6a1d-4a6c-9f34-3c0b0d9d1a01',
        ('same_iotune', 'same_plain'), 'shared-lease.bin')
    a.write(5000, b'C' * 10)
    want[5000:5010] = b'C' * 10
    a.close()
    b.close()
    assert read_file(smbd, 'same_plain', 'shared-lease.bin') == want
    a.quit()
    b.quit()


@pytest.fixture(scope='module')
def smbd_no_multichannel(request):
    return start_smbd(request, {
        'cached': iotune(write_cache_flush_timeout='60s'),
    }, global_params={'server multi channel support': 'no'})


def test_same_lease_from_two_processes(smbd_no_multichannel, tmp_path):
    """Without multichannel, two connections of one client GUID are two
    smbd processes sharing one lease without a break: the second must
    read what the first acknowledged, and the first must never write
    stale data over the second's write."""
    smbd = smbd_no_multichannel
    a, b, want = one_lease_two_handles(
        smbd, str(tmp_path / 'client.conf'),
        '8f1e2f49-6a1d-4a6c-9f34-3c0b0d9d1a02', ('cached', 'cached'),
        'two-procs.bin')
    assert len(smbd.child_pids()) >= 2
    a.close()
    b.close()
    assert read_file(smbd, 'cached', 'two-procs.bin') == want
    assert 'multi channel' in smbd.log_text()
    a.quit()
    b.quit()


# The test client itself: "break" answers "none", also with autoack.

def test_client_reports_no_break_and_breaks_with_autoack(smbd):
    a = harness.ScriptClient(smbd, 'plain')
    a.call('autoack')
    a.open('client-break.bin', 'batch')
    assert a.wait_break(200) == 'none'
    b = harness.ScriptClient(smbd, 'plain')
    opened = threading.Thread(target=lambda: b.open('client-break.bin',
                                                    'none'))
    opened.start()
    assert a.wait_break(10000).startswith('oplock')
    opened.join(30)
    a.close()
    b.close()
    a.quit()
    b.quit()
