# O_DIRECT shares against a real smbd on a disk-backed directory:
# model-checked aligned and unaligned I/O, page-cache residency after
# direct writes, the write cache feeding direct writes, client mode.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import json
import os
import random
import subprocess
import time

import pytest

import harness
from conftest import start_smbd
from test_write_cache import Model

KIB = 1024
MIB = 1024 * KIB


def dio_share(**options):
    params = {'vfs objects': 'iotune', 'iotune:direct io min size': '0'}
    params.update({'iotune:' + k.replace('_', ' '): v
                   for k, v in options.items()})
    return params


@pytest.fixture(scope='module')
def smbd(request):
    s = start_smbd(request, {
        'dio': dio_share(direct_io='both', write_cache_size='0'),
        'dio_cached': dio_share(direct_io='writes'),
        'dio_client': dio_share(direct_io='client', write_cache_size='0'),
    })
    # build/test-out lives on the repository's disk, not on tmpfs
    fstype = subprocess.run(['stat', '-f', '-c', '%T', s.workdir],
                            capture_output=True, text=True).stdout.strip()
    assert fstype != 'tmpfs'
    return s


def stat_counters(smbd, share):
    time.sleep(1.6)
    out = subprocess.run([os.path.join(harness.REPO, 'tools', 'iotune-stat'),
                          '--configfile', smbd.conf, '--json'],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)['shares'][share]['counters']


def resident_bytes(path):
    out = subprocess.run(['fincore', '--bytes', '--noheadings', '--raw',
                          '--output', 'RES', path], capture_output=True,
                         text=True, check=True).stdout
    return int(out.split()[0])


SIZES = [1, 511, 512, 4095, 4096, 4097, 65536, 65537, 300000]


def model_checked(smbd, share, oplock, seed, ops):
    rnd = random.Random(seed)
    model = Model()
    name = 'dio-%s-%d.bin' % (oplock, seed)
    c = harness.ScriptClient(smbd, share)
    c.open(name, oplock)
    c.truncate(0)
    for step in range(ops):
        op = rnd.random()
        aligned = rnd.random() < 0.5
        off = rnd.randrange(0, 2 * MIB)
        if aligned:
            off -= off % 4096
        if op < 0.5:
            size = rnd.choice(SIZES)
            if aligned:
                size = max(4096, size - size % 4096)
            buf = rnd.randbytes(size)
            assert c.write(off, buf) == size
            model.write(off, buf)
        elif op < 0.9:
            n = rnd.choice(SIZES)
            assert c.read(off, n) == model.read(off, n), \
                'read %d+%d differs at step %d' % (off, n, step)
        elif op < 0.95:
            size = rnd.randrange(0, 2 * MIB)
            c.truncate(size)
            model.truncate(size)
        else:
            c.close()
            c.open(name, oplock)
    assert c.read(0, len(model.data) + 10) == bytes(model.data)
    c.close()
    c.quit()
    with open(os.path.join(smbd.share_path(share), name), 'rb') as f:
        assert f.read() == bytes(model.data)


@pytest.mark.parametrize('seed', [1, 2, 3])
def test_model_checked_direct_io(smbd, seed):
    model_checked(smbd, 'dio', 'none', seed, 2000)


@pytest.mark.parametrize('seed', [4, 5])
def test_model_checked_write_cache_over_direct_io(smbd, seed):
    model_checked(smbd, 'dio_cached', 'batch', seed, 2000)


def test_direct_writes_leave_the_page_cache_empty(smbd):
    c = harness.ScriptClient(smbd, 'dio')
    c.open('stream.bin')
    block = os.urandom(MIB)
    for i in range(16):
        c.write(i * MIB, block)
    c.close()
    c.quit()
    path = os.path.join(smbd.share_path('dio'), 'stream.bin')
    resident = resident_bytes(path)
    print('resident after 16 MiB of direct writes: %d bytes' % resident)
    assert resident <= 16 * MIB // 20
    counters = stat_counters(smbd, 'dio')
    assert counters['dio_writes'] >= 16
    assert counters['dio_reads'] > 0
    assert counters['dio_splits'] > 0       # from the unaligned tests


def test_write_cache_flushes_go_direct(smbd):
    before = stat_counters(smbd, 'dio_cached').get('dio_writes', 0)
    c = harness.ScriptClient(smbd, 'dio_cached')
    c.open('coalesced.bin', 'batch')
    data = os.urandom(4 * MIB)
    for off in range(0, len(data), 64 * KIB):
        c.write(off, data[off:off + 64 * KIB])
    c.close()
    c.quit()
    with open(os.path.join(smbd.share_path('dio_cached'), 'coalesced.bin'),
              'rb') as f:
        assert f.read() == data
    after = stat_counters(smbd, 'dio_cached')['dio_writes']
    # 64 writes of 64 KiB reach the disk as 4 direct 1 MiB flushes
    assert 1 <= after - before <= 8


def test_client_mode_follows_no_intermediate_buffering(smbd):
    c = harness.ScriptClient(smbd, 'dio_client')
    c.open('plain.bin')
    c.write(0, os.urandom(MIB))
    c.close()
    assert stat_counters(smbd, 'dio_client').get('dio_writes', 0) == 0
    c.open('unbuffered.bin', unbuffered=True)
    c.write(0, os.urandom(MIB))
    c.close()
    c.quit()
    assert stat_counters(smbd, 'dio_client')['dio_writes'] >= 1


@pytest.fixture
def no_odirect_smbd(request, tmp_path):
    """ramfs refuses O_DIRECT with EINVAL (this kernel's tmpfs accepts it)"""
    mount = tmp_path / 'ramfs'
    mount.mkdir()
    subprocess.run(['mount', '-t', 'ramfs', 'ramfs', str(mount)], check=True)
    request.addfinalizer(lambda: subprocess.run(['umount', '-l',
                                                 str(mount)]))
    probe = os.path.join(mount, 'probe')
    with open(probe, 'wb'):
        pass
    with pytest.raises(OSError):
        os.close(os.open(probe, os.O_RDONLY | os.O_DIRECT))
    os.unlink(probe)
    return start_smbd(request, {
        'nodirect': dict(dio_share(direct_io='both', write_cache_size='0'),
                         path=str(mount)),
    }, log_level=1)


def test_file_system_without_o_direct_falls_back(no_odirect_smbd):
    smbd = no_odirect_smbd
    data = {}
    c = harness.ScriptClient(smbd, 'nodirect')
    for i in range(3):
        name = 'f%d.bin' % i
        data[name] = os.urandom(MIB + 1000 * i)
        c.open(name)
        assert c.write(0, data[name]) == len(data[name])
        assert c.read(0, len(data[name]) + 10) == data[name]
        c.close()
    c.quit()
    for name, content in data.items():
        with open(os.path.join(smbd.share_path('nodirect'), name),
                  'rb') as f:
            assert f.read() == content
    log = smbd.log_text()
    line = "share 'nodirect': the file system refuses O_DIRECT"
    assert log.count(line) == 1, log[-2000:]
    counters = stat_counters(smbd, 'nodirect')
    assert counters['dio_fallbacks'] >= 1
    assert counters.get('dio_writes', 0) == 0
    assert counters.get('dio_reads', 0) == 0


def pump_pattern(block):
    """the bytes smb2-script's pump writes in every block"""
    return bytes((i * 2654435761 >> 24) & 0xff for i in range(block))


@pytest.mark.parametrize('share', ['dio', 'dio_cached'])
def test_requests_in_flight(smbd, share):
    """8 writes and then 8 reads in flight at once, as real clients send
    them, through direct I/O (and the write cache)"""
    block, total = 256 * KIB + 512, 8 * MIB + 4096
    c = harness.ScriptClient(smbd, share)
    c.open('inflight.bin', 'batch')
    assert c.pump('write', total, block, 8)[0] == total
    assert c.pump('read', total, block, 8)[0] == total
    c.close()
    c.quit()
    pattern = pump_pattern(block)
    expected = b''.join(pattern[:min(block, total - off)]
                        for off in range(0, total, block))
    with open(os.path.join(smbd.share_path(share), 'inflight.bin'),
              'rb') as f:
        assert f.read() == expected
