# The write cache over a real GlusterFS volume through Samba's
# vfs_glusterfs (the "glusterfs" test stage, not the integration stage):
# every pwrite is an RPC to the brick there, which is where the cache
# pays most.  Correctness (a model check, coherence on breaks) and the
# brick's WRITE call counts; throughput is measured by
# bench/write_matrix.py --gluster, not here.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os

import pytest

import gluster
import harness
from conftest import start_smbd
from test_write_cache import coherence_rounds, run_model_checked

pytestmark = pytest.mark.glusterfs

KIB = 1024
MIB = 1024 * KIB


@pytest.fixture(scope='module')
def volume(request):
    g = gluster.Gluster(harness.scratch_dir('glusterfs-'))
    request.addfinalizer(g.stop)
    return g.start()


@pytest.fixture(scope='module')
def smbd(request, volume):
    return start_smbd(request, {
        'gl_plain': volume.share('glusterfs'),
        'gl_iotune': volume.share(
            'iotune glusterfs',
            **{'iotune:write cache flush timeout': '60s'}),
        # shares of their own: no other test's counters
        'gl_pipelined': volume.share('iotune glusterfs'),
        'gl_paced': volume.share('iotune glusterfs'),
    })


def on_brick(volume):
    def read(name):
        with open(volume.brick_file(name), 'rb') as f:
            return f.read()
    return read


def pump_pattern(block):
    """what smb2-script pump writes into every block"""
    return bytes((i * 2654435761 >> 24) & 0xff for i in range(block))


def pump_to_brick(volume, smbd, share, name, depth):
    """16 MiB in 4 KiB writes, depth in flight, then FLUSH: the brick's
    WRITE calls it took; the file on the brick is checked"""
    before = volume.write_calls()
    c = harness.ScriptClient(smbd, share)
    c.open(name, 'batch')
    assert c.pump('write', 16 * MIB, 4 * KIB, depth)[0] == 16 * MIB
    c.flush()
    c.close()
    c.quit()
    calls = volume.write_calls() - before
    data = on_brick(volume)(name)
    assert data == pump_pattern(4 * KIB) * (16 * MIB // (4 * KIB))
    return calls


def test_brick_write_calls_cut_100x(volume, smbd):
    """16 MiB in 4 KiB writes, one in flight: the brick's WRITE calls"""
    volume.profile_start()
    calls = {share: pump_to_brick(volume, smbd, share,
                                  'calls-%s.bin' % share, 1)
             for share in ['gl_plain', 'gl_iotune']}
    print('brick WRITE calls for 16 MiB in 4 KiB writes: %s' % calls)
    assert calls['gl_plain'] >= 4096
    assert calls['gl_plain'] >= 100 * calls['gl_iotune']


def test_pipelined_writes_share_slow_reservations(volume, smbd):
    """A fallocate through vfs_glusterfs is a round trip to the brick:
    with 8 writes in flight, the writes that arrive while a batch of
    reservations waits for the client's next ones share one call, and
    are cached and written to the brick in large pieces, every byte
    intact.  (Each connection is a process of its own that measures the
    cost of a reservation from its first ones: inline, one each, until
    then.)"""
    volume.profile_start()
    before = harness.iotune_counters(smbd, 'gl_pipelined')
    calls = pump_to_brick(volume, smbd, 'gl_pipelined', 'pipelined.bin', 8)

    def delta(counters, name):
        return counters.get(name, 0) - before.get(name, 0)

    # the connection's process publishes as it ends
    after = harness.iotune_counters_until(
        smbd, 'gl_pipelined',
        lambda c: delta(c, 'wc_writes_total') >= 4096)
    cached = delta(after, 'wc_writes_cached')
    reservations = delta(after, 'wc_reserve_calls')
    # each of those calls holds smbd's main thread for a round trip
    reserving_us = delta(after, 'wc_reserve_us')
    print('pipelined: %d of 4096 writes cached with %d reservation '
          'calls (%d us on the main thread), %d brick WRITE calls' % (
              cached, reservations, reserving_us, calls))
    assert cached > 4096 * 3 // 4
    assert reserving_us >= reservations > 0
    assert reservations < cached // 2
    assert calls < 4096 // 4


def test_batches_wait_for_the_client_s_next_writes(volume, smbd):
    """With 4 writes in flight the client sends its next writes one by
    one, as the answers of the last batch reach it: the first arrives
    alone, and a batch that started with it would leave the other three
    a round trip of their own (about 2.5 writes per call).  A batch waits
    for as many writes as the last one held, at most a reservation's
    cost: nearly 4 writes share a call."""
    before = harness.iotune_counters(smbd, 'gl_paced')
    pump_to_brick(volume, smbd, 'gl_paced', 'paced.bin', 4)

    def delta(counters, name):
        return counters.get(name, 0) - before.get(name, 0)

    after = harness.iotune_counters_until(
        smbd, 'gl_paced', lambda c: delta(c, 'wc_writes_total') >= 4096)
    cached = delta(after, 'wc_writes_cached')
    calls = delta(after, 'wc_reserve_calls')
    print('4 in flight: %d of 4096 writes cached with %d reservation '
          'calls (%.2f writes a call)' % (cached, calls,
                                         cached / max(calls, 1)))
    assert cached > 4096 * 3 // 4
    assert cached >= 3.2 * calls


@pytest.mark.parametrize('oplock', ['batch', 'lease'])
def test_model_checked_through_glusterfs(volume, smbd, oplock):
    counts = run_model_checked(smbd, 'gl_iotune', oplock, 11, 1000,
                               on_disk=on_brick(volume))
    print('glusterfs %s: %s' % (oplock, counts))
    assert counts['truncate'] > 0 and counts['flush'] > 0


@pytest.mark.parametrize('oplock', ['batch', 'lease'])
def test_break_coherence_on_glusterfs(volume, smbd, oplock):
    rounds = int(os.environ.get('IOTUNE_GLUSTER_ROUNDS', '200'))
    stale = coherence_rounds(smbd, oplock, rounds, seed=7,
                             share='gl_iotune', on_disk=on_brick(volume))
    print('glusterfs coherence with %s: %d rounds, %d stale bytes' %
          (oplock, rounds, stale))
    assert stale == 0
