# The write cache's disk space, against a real smbd:
# what the cache reserves for acknowledged data never costs anyone data,
# disk space or a true size.  Every test runs the same steps on a share
# without iotune and one with it, on the same kind of file system, and
# compares: bytes another writer appended survive, small files fill a
# small volume as far, holes stay holes, sizes and AllocationSize are what
# a share without iotune reports, from any tree connect.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import random
import time

import pytest

import harness
from conftest import start_smbd

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
OPLOCK_BATCH = 0x09
WINDOW = MIB            # iotune's default write cache size

# name: (file system, size); tmpfs volumes are small, to be filled
VOLUMES = {
    'strict': ('tmpfs', '16m'),
    'sparse': ('tmpfs', '64m'),
    'strided': ('tmpfs', '24m'),
    'xfs': ('xfs', 512),
}


@pytest.fixture(scope='module')
def smbd(request):
    work = harness.scratch_dir('reserve-fs-')
    mounts = []
    shares = {}
    for vol, (fstype, size) in VOLUMES.items():
        for side in ('plain', 'iot'):
            path = os.path.join(work, '%s_%s' % (vol, side))
            if fstype == 'tmpfs':
                harness.mount_tmpfs(path, size)
            else:
                # allocsize: no speculative preallocation past the end of
                # file, which would hide what the cache reserved
                harness.mount_image(path, fstype, size,
                                    'loop,allocsize=4096')
            mounts.append(path)
            shares['%s_%s' % (vol, side)] = {'path': path}
    request.addfinalizer(lambda: [harness.umount(m) for m in mounts])
    for side in ('plain', 'iot'):
        shares['strict_' + side]['strict allocate'] = 'yes'
        same = os.path.join(work, 'same_' + side)
        os.makedirs(same)
        # an alias of the same path, never with iotune
        shares['tree_' + side] = {'path': same}
        shares['alias_' + side] = {'path': same}
        shares['ext4_' + side] = {}
    for name in shares:
        if name.endswith('_iot') and not name.startswith('alias_'):
            shares[name].update(harness.iotune_share(
                write_cache_flush_timeout='60s'))
    return start_smbd(request, shares)


def path_of(smbd, share, name):
    return os.path.join(smbd.share_path(share), name)


def allocated(path):
    return os.stat(path).st_blocks * 512


def cached_writes(smbd, share):
    return harness.iotune_counters(smbd, share).get('wc_writes_cached', 0)


def both(fn, *args):
    """fn(share) on the plain and the iotune share of a volume"""
    return fn('plain', *args), fn('iot', *args)


# 1. Bytes another writer appended survive: nothing is ever truncated.

def race_appender(smbd, share, seconds):
    """A local O_APPEND writer against an SMB client's loop of open
    (batch oplock), write 100 bytes at 0, close: (records lost, records,
    cycles)"""
    name = 'appended.log'
    path = path_of(smbd, share, name)
    with open(path, 'wb') as f:
        f.write(b'h' * 100)
    client = harness.ScriptClient(smbd, share)
    appender = harness.start_appender(path)
    cycles = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert client.open(name, 'batch')[0] == OPLOCK_BATCH
        client.write(0, bytes([65 + cycles % 26]) * 100)
        client.close()
        cycles += 1
    n = harness.stop_appender(appender)
    client.quit()
    return harness.missing_records(path, n, 100), n, cycles


@pytest.mark.parametrize('volume', ['ext4', 'xfs'])
def test_local_appender_loses_nothing(smbd, volume):
    before = cached_writes(smbd, volume + '_iot')
    lost, records, cycles = race_appender(smbd, volume + '_iot', 10)
    print('%s: %d of %d records lost, %d cycles' %
          (volume, lost, records, cycles))
    assert cycles > 100 and records > cycles
    assert cached_writes(smbd, volume + '_iot') - before >= cycles
    assert lost == 0


# 2. strict allocate: small files fill a small volume as far as without.

def fill_with_small_files(smbd, share, most=2500):
    """5000-byte files, one batch-oplock write each: how many fit"""
    client = harness.ScriptClient(smbd, share)
    count = 0
    try:
        for i in range(most):
            client.open('f%04d.bin' % i, 'batch')
            try:
                client.write(0, b's' * 5000)
            finally:
                client.close()
            count += 1
    except RuntimeError as e:
        assert 'DISK_FULL' in str(e), e
    client.quit()
    return count


def test_strict_allocate_small_files_fill_the_volume_as_far(smbd):
    client = harness.ScriptClient(smbd, 'strict_iot')
    for i in range(20):
        client.open('first%02d.bin' % i, 'batch')
        client.write(0, b'a' * 5000)
        client.close()
    size, alloc = client.stat_all('first00.bin')
    client.quit()
    assert (size, alloc) == (5000, 8192)
    held = sum(allocated(path_of(smbd, 'strict_iot', 'first%02d.bin' % i))
               for i in range(20))
    assert held <= 20 * 8192
    plain, iot = both(lambda side: fill_with_small_files(
        smbd, 'strict_' + side))
    print('5000-byte files on 16 MiB: %d without iotune, %d with' %
          (plain, iot))
    assert plain < 2500          # the volume did fill up
    assert iot >= plain - 20     # less the 20 files written first


# 3. Sizes through a second tree connect of the same session.

def two_trees(smbd, side):
    client = harness.ScriptClient(smbd, 'tree_' + side)
    alias = client.tcon('alias_' + side)
    assert client.open('trees.bin', 'batch')[0] == OPLOCK_BATCH
    client.write(0, b't' * 5000)
    seen = []
    for _ in range(2):
        client.tree(alias)
        listed = client.list_all('trees.bin')['trees.bin']
        stat = client.stat_all('trees.bin')
        client.tree(0)
        seen.append((listed, stat, client.getinfo_all()['size']))
        client.write(MIB + 100, b'u' * 4096)
    client.close()
    client.quit()
    return seen


def test_second_tree_sees_the_sizes_plain_reports(smbd):
    plain, iot = both(lambda side: two_trees(smbd, side))
    print('without iotune %s\nwith iotune    %s' % (plain, iot))
    assert cached_writes(smbd, 'tree_iot') >= 2
    assert plain[0][0][0] == 5000 and plain[1][0][0] == MIB + 100 + 4096
    assert iot == plain


# 4. AllocationSize never includes space for data that is not there.

def allocation_sizes(smbd, share):
    client = harness.ScriptClient(smbd, share)
    assert client.open('alloc.bin', 'batch')[0] == OPLOCK_BATCH
    client.write(0, b'a' * 5000)
    small = client.getinfo_all()
    listed = client.list_all('alloc.bin')['alloc.bin']
    client.close()
    assert client.open('edge.bin', 'batch')[0] == OPLOCK_BATCH
    assert client.pump('write', MIB - 2 * KIB, 4 * KIB, 4)[0] == \
        MIB - 2 * KIB
    client.write(MIB - 2 * KIB, b'e' * 4096)    # across the window edge
    edge = client.getinfo_all()
    client.close()
    after = client.stat_all('alloc.bin'), client.stat_all('edge.bin')
    client.quit()
    return ((small['size'], small['alloc']), listed,
            (edge['size'], edge['alloc']), after)


def test_allocation_size_is_what_plain_reports(smbd):
    """Equal, but for one block of ext4's extent tree: the cache
    allocates a stream's blocks write by write (fallocate), and ext4
    places them in several extents where delayed allocation makes one;
    past four extents the tree needs a block of its own."""
    plain, iot = both(lambda side: allocation_sizes(smbd, 'ext4_' + side))
    print('without iotune %s\nwith iotune    %s' % (plain, iot))
    assert plain[0] == (5000, 8192)
    assert iot[0] == iot[1] == iot[3][0] == plain[0]
    for (size, alloc), (psize, palloc) in [(iot[2], plain[2]),
                                           (iot[3][1], plain[3][1])]:
        assert size == psize
        assert palloc <= alloc <= palloc + 4 * KIB


# Issue #26: holes stay holes, and a full volume comes at the same place.

def random_writes(smbd, share, count, seed=26):
    """count random 4 KiB writes into a 1 GiB file with a hole (SET_INFO
    EndOfFile): (acknowledged, allocated while open, after close, a write
    to another file afterwards worked)"""
    rng = random.Random(seed)
    client = harness.ScriptClient(smbd, share)
    assert client.open('holes.bin', 'batch')[0] == OPLOCK_BATCH
    client.truncate(GIB)
    acked = 0
    for _ in range(count):
        try:
            client.write(rng.randrange(GIB // (4 * KIB)) * 4 * KIB,
                         b'r' * 4096)
        except RuntimeError as e:
            assert 'DISK_FULL' in str(e), e
            break
        acked += 1
    path = path_of(smbd, share, 'holes.bin')
    open_alloc = allocated(path)
    client.close()
    closed_alloc = allocated(path)
    client.open('other.bin', 'batch')
    try:
        client.write(0, b'o' * 4096)
        other = True
    except RuntimeError:
        other = False
    client.close()
    client.quit()
    return acked, open_alloc, closed_alloc, other


def test_random_writes_on_a_small_volume_keep_their_holes(smbd):
    plain, iot = both(lambda side: random_writes(smbd, 'sparse_' + side,
                                                 400))
    print('400 random 4K writes, 64 MiB tmpfs: without iotune %s, '
          'with %s' % (plain, iot))
    assert plain[0] == 400 and plain[3]
    assert iot[0] == 400 and iot[3]
    assert iot[1] <= plain[2] + WINDOW
    assert iot[2] <= plain[2]


@pytest.mark.parametrize('volume', ['ext4', 'xfs'])
def test_random_writes_allocate_what_plain_does(smbd, volume):
    plain, iot = both(lambda side: random_writes(
        smbd, '%s_%s' % (volume, side), 200))
    print('200 random 4K writes, %s: without iotune %s, with %s' %
          (volume, plain, iot))
    assert plain[0] == iot[0] == 200
    assert iot[1] <= plain[2] + WINDOW
    assert iot[2] <= plain[2] + 64 * KIB


def stream_then_jump(smbd, share, stream, jump):
    name = 'jump%d.bin' % jump
    client = harness.ScriptClient(smbd, share)
    assert client.open(name, 'batch')[0] == OPLOCK_BATCH
    assert client.pump('write', stream, 4 * KIB, 4)[0] == stream
    client.write(jump, b'j' * 4096)
    client.close()
    client.quit()
    return allocated(path_of(smbd, share, name))


@pytest.mark.parametrize('volume', ['ext4', 'xfs'])
@pytest.mark.parametrize('stream,jump', [(8 * MIB, 200 * MIB),
                                         (2 * MIB, 64 * MIB)])
def test_stream_then_far_jump_allocates_what_plain_does(smbd, volume,
                                                        stream, jump):
    plain, iot = both(lambda side: stream_then_jump(
        smbd, '%s_%s' % (volume, side), stream, jump))
    print('%s: %d MiB then a write at %d MiB: %d without iotune, %d with'
          % (volume, stream // MIB, jump // MIB, plain, iot))
    assert iot <= plain + 64 * KIB


def strided_regions(smbd, share):
    """2 MiB regions at 64 MiB strides, in 16 KiB writes (cached: below
    the bypass size), until the volume is full: bytes acknowledged"""
    client = harness.ScriptClient(smbd, share)
    assert client.open('strided.bin', 'batch')[0] == OPLOCK_BATCH
    acked = 0
    try:
        for region in range(64):
            for off in range(0, 2 * MIB, 16 * KIB):
                client.write(region * 64 * MIB + off, b'g' * 16 * KIB)
                acked += 16 * KIB
    except RuntimeError as e:
        assert 'DISK_FULL' in str(e), e
    try:
        client.close()
    except RuntimeError:
        pass
    client.quit()
    os.unlink(path_of(smbd, share, 'strided.bin'))
    return acked


def test_strided_regions_fill_the_volume_as_far(smbd):
    plain, iot = both(lambda side: strided_regions(smbd, 'strided_' + side))
    print('24 MiB tmpfs, strided: %d bytes acknowledged without iotune, '
          '%d with' % (plain, iot))
    assert plain < 64 * 2 * MIB
    assert iot >= plain - WINDOW
