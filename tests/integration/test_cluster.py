# iotune in a real two-node Samba cluster (CTDB), the "cluster" test
# stage: a writer on node 0 caches; a client on node 1 opens the same
# file (the break travels through CTDB) and must read every acknowledged
# byte; clients on both nodes interleave against a model of the file;
# counters add up across the nodes.  Each check also runs on a share
# without iotune, the baseline.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import json
import os
import random
import subprocess
import threading
import time

import pytest

import cluster as cluster_mod
import harness
from test_write_cache import Model, count_stale

pytestmark = pytest.mark.cluster

KIB = 1024
TOOL = os.path.join(harness.REPO, 'tools', 'iotune-stat')


@pytest.fixture(scope='module')
def cluster(request):
    if os.geteuid() != 0:
        pytest.skip('the cluster stage needs root (ctdbd, loopback '
                    'addresses); it did not run')
    work = harness.scratch_dir('cluster-')
    data = os.path.join(work, 'data')
    shares = {}
    for name, params in [('iotune', {'vfs objects': 'iotune',
                                     'iotune:write cache flush timeout':
                                     '60s'}),
                         ('plain', {})]:
        path = os.path.join(data, name)
        os.makedirs(path)
        shares[name] = dict(params, path=path)
    # what durable handles need
    c = cluster_mod.Cluster(work, shares, global_params={
        'kernel share modes': 'no', 'posix locking': 'no',
        'kernel oplocks': 'no'})

    def stop():
        print('\ncluster teardown: %.1f s' % c.stop())
    request.addfinalizer(stop)
    c.start()
    print('\ncluster setup: %.1f s' % c.setup_seconds)
    return c


def node_smbd(cluster, n):
    return cluster.nodes[n].smbd


def read_disk(cluster, share, name):
    with open(os.path.join(cluster.shares[share]['path'], name), 'rb') as f:
        return f.read()


def while_acking(holder, fn):
    """Runs fn() in a thread while holder (autoack on) keeps its event
    loop running, so that it acknowledges the break fn's open causes."""
    result = {}

    def run():
        try:
            result['value'] = fn()
        except Exception as e:      # reported below
            result['error'] = e
    t = threading.Thread(target=run)
    t.start()
    while t.is_alive():
        holder.wait_break(50)
    t.join()
    if 'error' in result:
        raise result['error']
    return result.get('value')


def one_round(cluster, share, writer, reader, rnd, model, name):
    """The writer (node 0) writes; the reader (node 1) opens, which
    breaks the writer's oplock or lease; the writer may write more after
    the break arrived, and acknowledges at once or late; the reader then
    reads.  Returns the stale bytes it saw."""
    writer.open(name, rnd.choice(['batch', 'lease']))
    base = rnd.randrange(0, 64) * 4 * KIB
    pieces = list(range(rnd.randrange(1, 9)))
    if rnd.random() < 0.5:
        rnd.shuffle(pieces)         # out of order
    for i in pieces:
        buf = rnd.randbytes(4 * KIB)
        writer.write(base + i * 4 * KIB, buf)
        model.write(base + i * 4 * KIB, buf)
    opened = {}
    opener = threading.Thread(target=lambda: opened.setdefault(
        'fnum', reader.open(name, harness.PyClient.FILE_OPEN)))
    opener.start()
    assert writer.wait_break(10000) != 'none'
    if rnd.random() < 0.3:          # a write sent after the break came
        off = rnd.randrange(0, 96) * 4 * KIB
        buf = rnd.randbytes(4 * KIB)
        writer.write(off, buf)
        model.write(off, buf)
    if rnd.random() < 0.3:          # a late acknowledgement
        time.sleep(rnd.choice([0.05, 0.2]))
    writer.ack()
    opener.join(60)
    assert 'fnum' in opened, 'the opener on node 1 did not get in'
    got = reader.read(opened['fnum'], 0, len(model.data) + 10)
    reader.close(opened['fnum'])
    writer.close()
    return count_stale(got, model.data)


def cross_node_rounds(cluster, share, rounds, seed):
    rnd = random.Random(seed)
    name = 'cross-%d.bin' % seed
    writer = harness.ScriptClient(node_smbd(cluster, 0), share)
    reader = harness.PyClient(node_smbd(cluster, 1), share,
                              multi_threaded=True)
    writer.open(name, 'none')
    writer.truncate(0)
    writer.close()
    model = Model()
    stale = 0
    started = time.monotonic()
    for _ in range(rounds):
        stale += one_round(cluster, share, writer, reader, rnd, model,
                           name)
    writer.quit()
    assert read_disk(cluster, share, name) == bytes(model.data)
    return stale, time.monotonic() - started


@pytest.mark.parametrize('share,rounds', [('iotune', 1000), ('plain', 200)])
def test_cross_node_coherence(cluster, share, rounds):
    rounds = int(os.environ.get('IOTUNE_CLUSTER_ROUNDS', rounds))
    stale, seconds = cross_node_rounds(cluster, share, rounds, seed=5)
    print('%s: %d cross-node rounds, %d stale bytes, %.0f s' %
          (share, rounds, stale, seconds))
    assert stale == 0
    if share == 'iotune':
        # the rounds did cache, and breaks from node 1 wrote it out
        time.sleep(1.5)
        c = stat_json(cluster, 0)['nodes']['0']
        assert c.get('wc_writes_cached', 0) >= rounds
        assert c.get('wc_flushes_break', 0) > 0


def test_model_checked_across_nodes(cluster):
    """A client on node 0 caches (oplock or lease) and one on node 1
    opens, reads, writes and closes the same file in between; every read
    and the final file match a model."""
    rnd = random.Random(9)
    name = 'model-2nodes.bin'
    a = harness.ScriptClient(node_smbd(cluster, 0), 'iotune')
    b = harness.ScriptClient(node_smbd(cluster, 1), 'iotune')
    a.call('autoack')
    model = Model()
    a.open(name, 'batch')
    a.truncate(0)
    b_open = False
    counts = {}
    for step in range(600):
        op = rnd.random()
        if op < 0.35:
            off = rnd.randrange(0, 256 * KIB)
            buf = rnd.randbytes(rnd.choice([1, 100, 4096, 9000]))
            (a if op < 0.25 or not b_open else b).write(off, buf)
            model.write(off, buf)
            kind = 'write'
        elif op < 0.55:
            c = a if op < 0.45 or not b_open else b
            off = rnd.randrange(0, len(model.data) + 1)
            assert c.read(off, 8192) == model.read(off, 8192), step
            kind = 'read'
        elif op < 0.7 and not b_open:
            while_acking(a, lambda: b.open(name, 'none'))
            b_open = True
            kind = 'open on node 1'
        elif op < 0.8 and b_open:
            b.close()
            b_open = False
            kind = 'close on node 1'
        elif op < 0.9 and not b_open:
            a.close()
            a.open(name, rnd.choice(['batch', 'lease']))
            kind = 'reopen on node 0'
        else:
            a.flush()
            kind = 'flush'
        counts[kind] = counts.get(kind, 0) + 1
    if b_open:
        b.close()
    a.close()
    assert read_disk(cluster, 'iotune', name) == bytes(model.data)
    print('two-node model check: %s' % counts)
    assert counts.get('open on node 1', 0) > 10
    a.quit()
    b.quit()


@pytest.mark.parametrize('share', ['iotune', 'plain'])
@pytest.mark.parametrize('how', ['connection lost', 'smbd killed'])
def test_durable_reconnect_on_the_other_node(cluster, tmp_path, share, how):
    """A client on node 0 writes 256 KiB through a durable handle with a
    lease; then its connection is lost (the client dies) or node 0's smbd
    is killed (kill -9), and the client reconnects the handle on node 1.
    A reconnect that succeeds must find every acknowledged byte; after a
    lost connection it must succeed (smbd's durable disconnect, before
    which iotune writes its cache out)."""
    name = 'durable-%s-%s.bin' % (share, how.split()[0])
    conf = harness.client_conf(
        node_smbd(cluster, 0), str(tmp_path / 'client.conf'),
        **{'libsmb:client_guid': '8f1e2f49-6a1d-4a6c-9f34-3c0b0d9d1a10'})
    key = os.urandom(16)
    a = harness.ScriptClient(node_smbd(cluster, 0), share, conf=conf)
    a.leasekey(key)
    handle = a.open_handle(name, 'lease', durable=True)
    assert handle['durable'] == '1', handle
    data = os.urandom(256 * KIB)
    for off in range(0, len(data), 16 * KIB):
        a.write(off, data[off:off + 16 * KIB])
    if how == 'smbd killed':
        for pid in node_smbd(cluster, 0).child_pids():
            os.kill(pid, 9)
    a.proc.kill()
    a.proc.wait()
    time.sleep(1)
    b = harness.ScriptClient(node_smbd(cluster, 1), share, conf=conf)
    b.leasekey(key)
    result = b.reconnect(name, handle, 'lease')
    on_disk = read_disk(cluster, share, name)
    lost = len(data) - len(os.path.commonprefix([on_disk, data]))
    print('%s, %s: durable reconnect on node 1: %s; %d of %d acknowledged '
          'bytes lost' % (share, how, result.split(' fid=')[0], lost,
                          len(data)))
    if result.startswith('ok'):
        assert lost == 0, 'a reconnect succeeded after data was lost'
        b.close()
    if how == 'connection lost':
        assert result.startswith('ok')
    if share == 'plain':
        assert lost == 0
    b.quit()


def stat_tool(cluster, n, *args):
    return subprocess.run([TOOL, '--configfile', node_smbd(cluster, n).conf]
                          + list(args), capture_output=True, text=True,
                          check=True, env=cluster_mod.ctdb_env(
                              cluster.nodes[n].base)).stdout


def stat_json(cluster, n):
    return json.loads(stat_tool(cluster, n, '--json'))['shares']['iotune']


def write_through_node(cluster, n, name, size):
    """size bytes in 4 KiB writes under a batch oplock through node n, then
    closed"""
    c = harness.ScriptClient(node_smbd(cluster, n), 'iotune')
    c.open(name, 'batch')
    for off in range(0, size, 4 * KIB):
        c.write(off, b'c' * 4 * KIB)
    c.close()
    c.quit()


def test_counters_add_up_across_nodes(cluster):
    """The same workload through both nodes: iotune-stat on either node
    shows the cluster's totals and each node's part."""
    try:
        before = stat_json(cluster, 0)['counters'].get('write_bytes', 0)
    except subprocess.CalledProcessError:
        before = 0                      # no counters yet
    for n, size in [(0, 300 * KIB), (1, 500 * KIB)]:
        write_through_node(cluster, n, 'counted-%d.bin' % n, size)
    time.sleep(2)
    views = [stat_json(cluster, n) for n in (0, 1)]
    for n, view in enumerate(views):
        print('iotune-stat on node %d: write_bytes %d (node 0: %d, node '
              '1: %d)' % (n, view['counters']['write_bytes'],
                          view['nodes']['0'].get('write_bytes', 0),
                          view['nodes']['1'].get('write_bytes', 0)))
        assert view['counters']['write_bytes'] - before == 800 * KIB
        assert view['nodes']['1'].get('write_bytes', 0) >= 500 * KIB
    assert views[0]['counters'] == views[1]['counters']
    tables = [stat_tool(cluster, n) for n in (0, 1)]
    for n, table in enumerate(tables):
        print('iotune-stat on node %d:\n%s' % (n, table))
    assert tables[0] == tables[1]
    prom = stat_tool(cluster, 1, '--prometheus')
    print('iotune-stat --prometheus on node 1 (write bytes):\n' +
          '\n'.join(l for l in prom.splitlines()
                    if l.startswith('iotune_write_bytes_total')))
    assert 'iotune_write_bytes_total{share="iotune",node="1"}' in prom


def test_reset_on_one_node_resets_every_node(cluster):
    """iotune-stat --reset on node 1 starts the cluster's totals and each
    node's part from zero; what is written afterwards counts again on the
    node that served it."""
    write_through_node(cluster, 0, 'before-reset.bin', 4 * KIB)
    time.sleep(2)
    stat_tool(cluster, 1, '--reset')
    for n in (0, 1):
        view = stat_json(cluster, n)
        assert view['counters'].get('write_bytes', 0) == 0
        for node in view['nodes'].values():
            assert node.get('write_bytes', 0) == 0, view['nodes']
    write_through_node(cluster, 1, 'after-reset.bin', 8 * KIB)
    time.sleep(2)
    view = stat_json(cluster, 0)
    print('after --reset and 8 KiB through node 1: %s' %
          {n: v.get('write_bytes', 0) for n, v in view['nodes'].items()})
    assert view['counters']['write_bytes'] == 8 * KIB
    assert view['nodes']['1']['write_bytes'] == 8 * KIB
    assert view['nodes']['0'].get('write_bytes', 0) == 0
