# The write cache against a real smbd: coalescing seen in smbd's own
# profile counters, model-checked data integrity, coherence on oplock and
# lease breaks, flush errors reported to the client.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import random
import re
import threading
import time

import pytest

import harness
from conftest import IOTUNE, PLAIN, start_smbd
from stracing import Strace, calls

KIB = 1024
MIB = 1024 * KIB

# SMB2 oplock levels as the server grants them
OPLOCK_BATCH = 0x09


def share(**options):
    params = dict(IOTUNE)
    params.update({'iotune:' + k.replace('_', ' '): v
                   for k, v in options.items()})
    return params


@pytest.fixture(scope='module')
def smbd(request):
    shares = {
        'plain': PLAIN,
        'iotune': IOTUNE,
        'small': share(write_cache_size='64K'),
        # no timed flush during a coherence round: only the break flushes
        'coherent': share(write_cache_flush_timeout='60s'),
        'timed': share(write_cache_flush_timeout='100ms'),
        'strict': dict(IOTUNE, **{'strict allocate': 'yes'}),
        'limited': share(write_cache_max_files='2',
                         write_cache_flush_timeout='60s'),
        'no_writeback': share(write_cache_start_writeback='no'),
        # handles opened unbuffered write their windows with O_DIRECT
        'dio_client': share(direct_io='client', direct_io_min_size='0'),
        'dio_client_64k': share(direct_io='client'),
    }
    return start_smbd(request, shares,
                      global_params={'smbd profiling level': 'count'})


def backend_writes(smbd):
    c = harness.profile_counters(smbd)
    return c.get('syscall_asys_pwrite_count', 0) + \
        c.get('syscall_pwrite_count', 0)


def settle_counters(smbd):
    """smbd processes dump their counters about once a second"""
    time.sleep(1.5)
    return backend_writes(smbd)


def write_sequential(smbd, share_name, total, block):
    client = harness.PyClient(smbd, share_name)
    fnum = client.open('seq.bin', harness.PyClient.FILE_OVERWRITE_IF,
                       oplock=harness.PyClient.REQUEST_BATCH_OPLOCK)
    data = random.Random(3).randbytes(total)
    for off in range(0, total, block):
        client.write(fnum, data[off:off + block], off)
    client.close(fnum)
    with open(os.path.join(smbd.share_path(share_name), 'seq.bin'),
              'rb') as f:
        assert f.read() == data
    del client


def test_coalescing_cuts_backend_pwrites_100x(smbd):
    """16 MiB in 4 KiB writes: smbstatus -P counts the backend pwrites."""
    before = settle_counters(smbd)
    write_sequential(smbd, 'plain', 16 * MIB, 4 * KIB)
    plain = settle_counters(smbd) - before
    before = plain + before
    write_sequential(smbd, 'iotune', 16 * MIB, 4 * KIB)
    tuned = settle_counters(smbd) - before
    print('backend pwrite calls for 16 MiB in 4 KiB writes: plain %d, '
          'iotune %d, ratio %.0fx' % (plain, tuned, plain / max(tuned, 1)))
    assert plain >= 4096
    assert tuned >= 1
    assert plain >= 100 * tuned


class Model:
    """What the file must contain."""

    def __init__(self):
        self.data = bytearray()

    def write(self, off, buf):
        if off > len(self.data):
            self.data.extend(bytes(off - len(self.data)))
        self.data[off:off + len(buf)] = buf

    def truncate(self, size):
        if size < len(self.data):
            del self.data[size:]
        else:
            self.data.extend(bytes(size - len(self.data)))

    def read(self, off, n):
        return bytes(self.data[off:off + n])


WRITE_SIZES = [1, 7, 100, 512, 4096, 4097, 16384, 65536, 70000]


def read_share_file(smbd, share_name):
    """a reader of the files of a share on the local disk"""
    def read(name):
        with open(os.path.join(smbd.share_path(share_name), name),
                  'rb') as f:
            return f.read()
    return read


def run_model_checked(smbd, share_name, oplock, seed, ops, on_disk=None):
    """ops random writes, reads, truncates, flushes and reopens against a
    model of the file; on_disk(name) reads the file where it is stored
    (the share's directory by default)"""
    on_disk = on_disk or read_share_file(smbd, share_name)
    rnd = random.Random(seed)
    model = Model()
    name = 'model-%s-%d.bin' % (oplock, seed)
    client = harness.ScriptClient(smbd, share_name)
    level, lease = client.open(name, oplock)
    assert level != 0, 'no oplock/lease granted'
    client.truncate(0)
    counts = {}
    for step in range(ops):
        op = rnd.random()
        if op < 0.55:
            size = rnd.choice(WRITE_SIZES)
            if rnd.random() < 0.2:
                off = len(model.data) + rnd.choice([0, 0, 1, 5000])
            else:
                off = rnd.randrange(0, 640 * KIB)
            buf = rnd.randbytes(size)
            assert client.write(off, buf) == size
            model.write(off, buf)
            kind = 'write'
        elif op < 0.75:
            off = rnd.randrange(0, max(len(model.data), 1) + 4 * KIB)
            n = rnd.choice([1, 100, 4096, 65536, 200000])
            got = client.read(off, n)
            assert got == model.read(off, n), \
                'read %d+%d differs at step %d' % (off, n, step)
            kind = 'read'
        elif op < 0.83:
            size = rnd.randrange(0, 700 * KIB)
            client.truncate(size)
            model.truncate(size)
            kind = 'truncate'
        elif op < 0.91:
            client.flush()
            kind = 'flush'
        elif op < 0.96:
            client.close()
            level, lease = client.open(name, oplock)
            kind = 'reopen'
        else:
            got = client.read(0, len(model.data) + 10)
            assert got == bytes(model.data), 'whole file differs'
            kind = 'read all'
        counts[kind] = counts.get(kind, 0) + 1
    client.close()
    client.quit()
    assert on_disk(name) == bytes(model.data)
    return counts


@pytest.mark.parametrize('share_name', ['small', 'iotune'])
@pytest.mark.parametrize('oplock', ['batch', 'lease'])
@pytest.mark.parametrize('seed', [1, 2, 3])
def test_model_checked_integrity(smbd, share_name, oplock, seed):
    counts = run_model_checked(smbd, share_name, oplock, seed, 2000)
    print('%s %s seed %d: %s' % (share_name, oplock, seed, counts))
    assert counts['truncate'] > 0 and counts['flush'] > 0


def coherence_rounds(smbd, oplock, rounds, seed, share='coherent',
                     on_disk=None):
    """A writer holding an oplock or lease makes small writes; a second
    connection opens the file, which breaks the writer's oplock/lease.
    Once smbd has answered a request sent after the break, the file on
    disk must hold every acknowledged byte, before any ack; the opener
    must then read them too.  Returns the number of stale bytes seen."""
    on_disk = on_disk or read_share_file(smbd, share)
    rnd = random.Random(seed)
    name = 'coherence-%s.bin' % oplock
    writer = harness.ScriptClient(smbd, share)
    reader = harness.PyClient(smbd, share, multi_threaded=True)
    stale = 0
    model = Model()
    for r in range(rounds):
        level, lease = writer.open(name, oplock)
        assert level != 0, 'round %d: nothing granted' % r
        if r == 0:
            writer.truncate(0)
        for _ in range(rnd.randrange(1, 8)):
            off = rnd.randrange(0, 96 * KIB)
            buf = rnd.randbytes(rnd.choice([1, 100, 4096, 8192]))
            assert writer.write(off, buf) == len(buf)
            model.write(off, buf)
        opened = {}
        opener = threading.Thread(target=lambda: opened.setdefault(
            'fnum', reader.open(name, harness.PyClient.FILE_OPEN)))
        opener.start()
        brk = writer.wait_break(10000)
        assert brk != 'none', 'round %d: no break' % r
        writer.echo()
        stale += count_stale(on_disk(name), model.data)
        writer.ack()
        opener.join(60)
        assert 'fnum' in opened, 'round %d: the opener did not get in' % r
        got = reader.read(opened['fnum'], 0, len(model.data) + 10)
        stale += count_stale(got, model.data)
        reader.close(opened['fnum'])
        writer.close()
    writer.quit()
    return stale


def count_stale(got, want):
    n = sum(1 for a, b in zip(got, want) if a != b)
    return n + abs(len(got) - len(want))


@pytest.mark.parametrize('oplock', ['batch', 'lease'])
def test_coherence_on_break(smbd, oplock):
    rounds = int(os.environ.get('IOTUNE_COHERENCE_ROUNDS', '1000'))
    started = time.monotonic()
    stale = coherence_rounds(smbd, oplock, rounds, seed=len(oplock))
    print('coherence with %s: %d rounds, %d stale bytes, %.0fs' %
          (oplock, rounds, stale, time.monotonic() - started))
    assert stale == 0


def test_two_handles_of_one_lease_share_the_cache(smbd):
    """Two handles with the same lease key in one smbd: no break, one
    cache, each handle reads what the other wrote."""
    c = harness.ScriptClient(smbd, 'coherent')
    assert c.open('shared.bin', 'lease')[1] & 0x2      # write caching
    c.truncate(0)
    c.write(0, b'first handle ')
    c.use(1)
    assert c.open('shared.bin', 'lease')[1] & 0x2
    assert c.read(0, 100) == b'first handle '
    c.write(13, b'second handle')
    c.use(0)
    assert c.read(0, 100) == b'first handle second handle'
    path = os.path.join(smbd.share_path('coherent'), 'shared.bin')
    with open(path, 'rb') as f:
        # all still cached: the size is true, the bytes are not there
        assert f.read() == bytes(len(b'first handle second handle'))
    c.close()
    c.use(1)
    assert c.read(0, 100) == b'first handle second handle'
    c.close()
    c.quit()
    with open(path, 'rb') as f:
        assert f.read() == b'first handle second handle'


def test_second_open_in_same_process_breaks_and_sees_data(smbd):
    """A batch oplock holder and a second open on the same connection
    (so the same smbd): the break flushes, the new handle reads it all."""
    c = harness.ScriptClient(smbd, 'coherent')
    c.call('autoack')
    assert c.open('same.bin', 'batch')[0] == OPLOCK_BATCH
    c.truncate(0)
    c.write(0, b'a' * 5000)
    c.write(100, b'b' * 10)
    path = os.path.join(smbd.share_path('coherent'), 'same.bin')
    c.use(1)
    started = time.monotonic()
    c.open('same.bin', 'none')
    # acknowledged at once: not the 35 s break timeout
    assert time.monotonic() - started < 10
    want = b'a' * 100 + b'b' * 10 + b'a' * 4890
    with open(path, 'rb') as f:
        assert f.read() == want
    assert c.read(0, 6000) == want
    c.close()
    c.use(0)
    c.close()
    c.quit()


def test_cache_count_is_bounded_per_process(smbd):
    """With 'write cache max files = 2' the third file of one smbd process
    is written straight to disk."""
    c = harness.ScriptClient(smbd, 'limited')
    for slot in range(3):
        c.use(slot)
        assert c.open('f%d.bin' % slot, 'batch')[0] == OPLOCK_BATCH
        c.write(0, b'data %d' % slot)
    on_disk = []
    for slot in range(3):
        with open(os.path.join(smbd.share_path('limited'),
                               'f%d.bin' % slot), 'rb') as f:
            on_disk.append(f.read())
    assert on_disk == [bytes(6), bytes(6), b'data 2']  # reserved, cached
    for slot in range(3):
        c.use(slot)
        c.close()
    c.quit()
    for slot in range(3):
        with open(os.path.join(smbd.share_path('limited'),
                               'f%d.bin' % slot), 'rb') as f:
            assert f.read() == b'data %d' % slot


def test_large_writes_make_no_cache(smbd):
    """A file written only in writes of the bypass size or more gets no
    cache: with both caches of 'write cache max files = 2' holding dirty
    data, 128 KiB writes to a third file are not refused a cache; a small
    write to a fourth file is."""
    def refused():
        time.sleep(1.6)     # smbd processes publish once a second
        return harness.iotune_counters(smbd, 'limited').get(
            'wc_caches_refused', 0)

    before = refused()
    # quickly: smbd sets a written file's time after 2 s, which writes
    # out and ends its cache
    c = harness.ScriptClient(smbd, 'limited')
    for slot, name in enumerate(['dirty0', 'dirty1', 'large', 'small']):
        c.use(slot)
        assert c.open(name + '.bin', 'batch')[0] == OPLOCK_BATCH
        if name == 'large':
            for i in range(4):
                c.write(i * 128 * KIB, b'L' * (128 * KIB))
        else:
            c.write(0, name.encode())
    with open(os.path.join(smbd.share_path('limited'), 'small.bin'),
              'rb') as f:
        assert f.read() == b'small'     # refused a cache: on disk
    assert refused() == before + 1
    for slot in range(4):
        c.use(slot)
        c.close()
    c.quit()


def test_timed_flush_writes_idle_data(smbd):
    client = harness.ScriptClient(smbd, 'timed')
    assert client.open('idle.bin', 'batch')[0] == OPLOCK_BATCH
    client.write(0, b'idle data')
    path = os.path.join(smbd.share_path('timed'), 'idle.bin')
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(path, 'rb') as f:
            if f.read() == b'idle data':
                break
        time.sleep(0.05)
    with open(path, 'rb') as f:
        assert f.read() == b'idle data'
    client.close()
    client.quit()


def test_cached_data_reaches_disk_on_flush(smbd):
    """Cached writes are not in the file until SMB2 FLUSH writes them."""
    client = harness.ScriptClient(smbd, 'iotune')
    assert client.open('notcached.bin', 'batch')[0] == OPLOCK_BATCH
    client.write(0, b'x' * 100)
    path = os.path.join(smbd.share_path('iotune'), 'notcached.bin')
    with open(path, 'rb') as f:
        assert f.read() == bytes(100)   # cached: reserved, not written
    client.flush()
    with open(path, 'rb') as f:
        assert f.read() == b'x' * 100
    client.close()
    client.quit()


def test_idle_cache_ends_and_keeps_the_times(smbd):
    """A cache kept idle for its stream's next write ends a second later,
    holding no more blocks than its data needs (nothing was reserved
    ahead, nothing is truncated), and the file's modification time stays
    what the flush made it.  (The client sets a write time first: smbd
    then leaves the time alone, where it would otherwise set it 2 s after
    the first write.)"""
    name = 'idle-end.bin'
    client = harness.ScriptClient(smbd, 'timed')
    assert client.open(name, 'batch')[0] == OPLOCK_BATCH
    client.settime(132223104000000000)     # 2020-01-01
    size = 2 * MIB + 100
    assert client.pump('write', size, 4 * KIB, 1)[0] == size
    path = os.path.join(smbd.share_path('timed'), name)
    time.sleep(0.5)         # the timed flush (100 ms)
    flushed = os.stat(path)
    assert flushed.st_size == size
    assert flushed.st_blocks * 512 <= size + 64 * KIB
    time.sleep(1.5)         # the idle cache ends after a second
    st = os.stat(path)
    assert st.st_blocks * 512 <= size + 64 * KIB
    assert st.st_mtime_ns == flushed.st_mtime_ns
    client.close()
    client.quit()


def windows(text):
    """how many 1 MiB windows the trace saw written whole"""
    return len(re.findall(r'pwrite64\(\d+, .*, %d, \d+\) = %d' %
                          (MIB, MIB), text))


def write_traced(smbd, share_name, tmp_path, size, seen, unbuffered=False,
                 stride=4 * KIB):
    """size bytes in 4 KiB writes (one every stride bytes) under a batch
    oplock, one in flight,
    then SMB2 FLUSH and close, with smbd traced from before the client's
    process forks; the file's contents are checked; the trace's text
    once seen(text) is true (the pool's last jobs may still run after
    the close), or after 10 s"""
    out = tmp_path / (share_name + '.strace')
    trace = Strace(smbd.proc.pid, str(out), 'sync_file_range,pwrite64')
    client = harness.ScriptClient(smbd, share_name)
    assert client.open('wb.bin', 'batch', unbuffered)[0] == OPLOCK_BATCH
    data = bytearray(random.Random(5).randbytes(size))
    for off in range(0, size, stride):
        client.write(off, data[off:off + 4 * KIB])
        data[off + 4 * KIB:off + stride] = bytes(stride - 4 * KIB)
    del data[size - stride + 4 * KIB:]
    client.flush()
    client.close()
    client.quit()
    deadline = time.monotonic() + 10
    while not seen(out.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)         # a job that would break the rule lands too
    text = trace.stop()
    with open(os.path.join(smbd.share_path(share_name), 'wb.bin'),
              'rb') as f:
        assert f.read() == data
    return text


def test_written_windows_start_their_writeback(smbd, tmp_path):
    """Each 1 MiB window the cache writes into the page cache asks Linux
    to start writing it to disk (sync_file_range, SYNC_FILE_RANGE_WRITE
    alone: nothing waits), over the window's bytes; with "write cache
    start writeback = no" no such call is made, while the same windows
    are written (the trace saw them, so its silence counts)."""
    size = 4 * MIB

    def ranges(text):
        return sorted((int(off), int(n), flags) for _, off, n, flags in
                      calls(text, 'sync_file_range'))

    def covered(text):
        """the end of what the calls cover from offset 0 without a gap
        (the pool may run one window's call before an older one's)"""
        end = 0
        for off, n, _ in ranges(text):
            if off > end:
                break
            end = max(end, off + n)
        return end

    text = write_traced(smbd, 'iotune', tmp_path, size,
                        lambda t: covered(t) == size)
    assert {f for _, _, f in ranges(text)} == {'SYNC_FILE_RANGE_WRITE'}
    assert covered(text) == size, ranges(text)
    assert max(off + n for off, n, _ in ranges(text)) == size, ranges(text)
    assert len(ranges(text)) <= size // MIB + 1, ranges(text)
    text = write_traced(smbd, 'no_writeback', tmp_path, size,
                        lambda t: windows(t) >= size // MIB)
    assert windows(text) >= 3, text[-2000:]
    assert calls(text, 'sync_file_range') == []


def test_direct_windows_start_no_writeback(smbd, tmp_path):
    """A handle opened unbuffered on a "direct io = client" share has its
    windows written with O_DIRECT: nothing of them is in the page cache,
    so none asks for a write-back, while a buffered handle's windows on
    the same share do (the trace saw both kinds of windows written)."""
    size = 4 * MIB
    text = write_traced(smbd, 'dio_client', tmp_path, size,
                        lambda t: windows(t) >= size // MIB,
                        unbuffered=True)
    assert windows(text) >= 3, text[-2000:]
    assert calls(text, 'sync_file_range') == []
    text = write_traced(smbd, 'dio_client', tmp_path, size,
                        lambda t: calls(t, 'sync_file_range') != [])
    assert calls(text, 'sync_file_range') != [], text[-2000:]


def test_small_pieces_of_direct_handles_start_their_writeback(smbd,
                                                              tmp_path):
    """With the default "direct io min size" (64K), an unbuffered handle's
    flush pieces under it go through the page cache: 4 KiB writes 4 KiB
    apart make windows of 4 KiB extents, and those windows ask for their
    write-back; a contiguous stream's 1 MiB pieces go direct and ask
    none, on the same share."""
    size = 4 * MIB
    text = write_traced(smbd, 'dio_client_64k', tmp_path, size,
                        lambda t: calls(t, 'sync_file_range') != [],
                        unbuffered=True, stride=8 * KIB)
    assert calls(text, 'sync_file_range') != [], text[-2000:]
    text = write_traced(smbd, 'dio_client_64k', tmp_path, size,
                        lambda t: re.search(r'pwrite64\(\d+, .*, %d, %d\)'
                                            % (MIB, size - MIB), t),
                        unbuffered=True)
    assert calls(text, 'sync_file_range') == []
