# iotune's counters across smbd processes, read by tools/iotune-stat, and
# their smbcontrol behaviour, against a real smbd.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import json
import os
import re
import subprocess
import threading
import time

import pytest

import harness
from conftest import IOTUNE, start_smbd

TOOL = os.path.join(harness.REPO, 'tools', 'iotune-stat')
PUBLISH_WAIT = 1.6      # smbd processes publish once a second


@pytest.fixture(scope='module')
def smbd(request):
    quiet = dict(IOTUNE)
    quiet['iotune:stats'] = 'no'
    busy = dict(IOTUNE)
    # readahead pressure = 0: iotune prefetches whatever the machine's
    # memory pressure
    busy.update({'iotune:readahead': 'adaptive',
                 'iotune:readahead pressure': '0',
                 'iotune:direct io': 'reads',
                 'iotune:direct io min size': '0'})
    return start_smbd(request, {'iotune': IOTUNE, 'quiet': quiet,
                                'busy': busy},
                      global_params={'smbd profiling level': 'count'})


def stat(smbd, *args, check=True):
    r = subprocess.run([TOOL, '--configfile', smbd.conf] + list(args),
                       capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise RuntimeError('iotune-stat %s: %s' % (args, r.stderr))
    return r


def counters(smbd, share='iotune'):
    r = stat(smbd, '--json', check=False)
    if r.returncode != 0 and 'no counters yet' in r.stderr:
        return {'counters': {}, 'processes': []}
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    return data['shares'].get(share, {'counters': {}, 'processes': []})


def move_data(smbd, name, write, read):
    client = harness.PyClient(smbd, 'iotune')
    fnum = client.open(name, harness.PyClient.FILE_OVERWRITE_IF)
    data = os.urandom(write)
    for off in range(0, write, 60000):
        client.write(fnum, data[off:off + 60000], off)
    got = b''
    while len(got) < read:
        got += client.read(fnum, len(got) % write, min(read - len(got),
                                                        write))
    client.close(fnum)
    return client


def test_totals_equal_bytes_moved_across_disconnect(smbd):
    stat(smbd, '--reset', check=False)
    base = counters(smbd)['counters']
    clients = [move_data(smbd, 'f%d' % i, w, r) for i, (w, r) in
               enumerate([(300000, 100000), (123457, 1), (65536, 200000)])]
    del clients[0]          # that smbd process ends
    time.sleep(PUBLISH_WAIT)
    entry = counters(smbd)
    c = entry['counters']
    assert c['write_bytes'] - base.get('write_bytes', 0) == \
        300000 + 123457 + 65536
    assert c['read_bytes'] - base.get('read_bytes', 0) == \
        100000 + 1 + 200000
    alive = [p for p in entry['processes'] if p['alive']]
    assert len(alive) == 2
    assert len({p['pid'] for p in alive}) == 2
    del clients


def test_stats_no_is_not_published(smbd):
    client = harness.PyClient(smbd, 'quiet')
    fnum = client.open('q', harness.PyClient.FILE_OVERWRITE_IF)
    client.write(fnum, b'q' * 1000, 0)
    client.close(fnum)
    time.sleep(PUBLISH_WAIT)
    assert counters(smbd, 'quiet') == {'counters': {}, 'processes': []}


def tdbdump(path, wait=3.0):
    """tdbdump's text of path; tried again for a while when it cannot
    open the tdb (a read-only open that meets smbd's commit on its way
    fails, see iotune-stat's OPEN_WAIT_S)"""
    deadline = time.monotonic() + wait
    while True:
        r = subprocess.run(['tdbdump', path], capture_output=True,
                           text=True)
        if r.returncode == 0 or time.monotonic() >= deadline:
            assert r.returncode == 0, r.stderr
            return r.stdout
        time.sleep(0.1)


def test_store_holds_share_names_not_file_names(smbd):
    move_data(smbd, 'secret-file-name.doc', 1000, 10)
    time.sleep(PUBLISH_WAIT)
    out = tdbdump(os.path.join(smbd.workdir, 'lock', 'iotune_stats.tdb'))
    assert 'iotune' in out
    assert 'secret' not in out


def test_interval_shows_rates_during_a_transfer(smbd, tmp_path):
    src = tmp_path / 'big'
    src.write_bytes(os.urandom(64 * 1024 * 1024))
    stop = threading.Event()

    def transfer():
        while not stop.is_set():
            harness.smbclient(smbd, 'iotune', 'put %s big' % src)
    t = threading.Thread(target=transfer)
    t.start()
    try:
        r = stat(smbd, '--interval', '1', '--count', '3')
    finally:
        stop.set()
        t.join()
    rates = [float(line.split()[3]) for line in r.stdout.splitlines()
             if line.split()[1:2] == ['iotune']]
    print(r.stdout)
    assert len(rates) == 3
    assert max(rates) > 0


def test_store_in_a_commit_is_read_once_committed(tmp_path):
    """A read-only open of a tdb whose writer is between the prepare and
    the end of a commit fails; iotune-stat tries again for a while, and
    says what it tried when the commit never ends (no smbd here: the
    test is the writer)."""
    import tdb
    conf = tmp_path / 'smb.conf'
    conf.write_text('[global]\n\tlock directory = %s\n' % tmp_path)
    db = tdb.Tdb(str(tmp_path / 'iotune_stats.tdb'), 0, tdb.DEFAULT,
                 os.O_RDWR | os.O_CREAT)

    def prepared(key):
        db.transaction_start()
        db[key] = b''       # a change: a commit with something to do
        db.transaction_prepare_commit()
        return subprocess.Popen([TOOL, '--configfile', str(conf), '--json'],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    tool = prepared(b'other1')
    time.sleep(1)
    assert tool.poll() is None          # still trying
    db.transaction_commit()
    out, err = tool.communicate(timeout=30)
    assert tool.returncode == 0, err
    assert json.loads(out)['shares'] == {}
    tool = prepared(b'other2')
    out, err = tool.communicate(timeout=30)
    db.transaction_cancel()
    assert tool.returncode != 0
    assert 'tried for 3 s' in err, err
    db.close()


PROM_LINE = re.compile(
    r'^(# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+|'
    r'[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*"'
    r'(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*")*)?\})? '
    r'(-?[0-9.e+-]+|\+Inf|NaN))$')


def test_prometheus_and_json_formats(smbd):
    move_data(smbd, 'p', 5000, 5000)
    time.sleep(PUBLISH_WAIT)
    text = stat(smbd, '--prometheus').stdout
    for line in text.splitlines():
        assert PROM_LINE.match(line), line
    assert re.search(r'^iotune_write_bytes_total\{share="iotune"\} \d+$',
                     text, re.M)
    assert 'iotune_write_latency_seconds_bucket{share="iotune",le="+Inf"}' \
        in text
    data = json.loads(stat(smbd, '--json').stdout)
    assert data['shares']['iotune']['counters']['write_ops'] > 0
    table = stat(smbd).stdout
    assert table.splitlines()[0].split()[:3] == ['share', 'read', 'ops']


def test_smbcontrol_profile_switches_iotune_and_smbd(smbd):
    """One connection stays up; smbcontrol all profile off/count/flush
    switch and reset its iotune counters, and smbd's own profiling still
    follows the same messages."""
    client = harness.PyClient(smbd, 'iotune')
    fnum = client.open('ctl', harness.PyClient.FILE_OVERWRITE_IF)
    pid = max(smbd.child_pids())

    def control(what):
        subprocess.run(['smbcontrol', '--configfile', smbd.conf, 'all',
                        'profile', what], check=True, capture_output=True)
        time.sleep(0.3)

    def mine():
        time.sleep(PUBLISH_WAIT)
        for p in counters(smbd)['processes']:
            if p['pid'] == pid:
                return p['counters'].get('write_bytes', 0)
        return 0

    def smbd_writes():
        time.sleep(PUBLISH_WAIT)
        return harness.profile_counters(smbd).get('smb2_write_count', 0)

    control('count')
    client.write(fnum, b'a' * 1000, 0)
    assert mine() == 1000
    control('off')
    before = smbd_writes()
    client.write(fnum, b'b' * 2000, 0)
    assert mine() == 1000              # iotune stopped counting
    assert smbd_writes() == before     # and so did smbd
    control('count')
    client.write(fnum, b'c' * 4000, 0)
    assert mine() == 5000
    assert smbd_writes() > before
    control('flush')
    assert mine() == 0
    client.write(fnum, b'd' * 8, 0)
    assert mine() == 8
    client.close(fnum)
    log = smbd.log_text()
    assert 'Profiling counts turned ON' in log
    assert 'Profiling turned OFF' in log


def test_profile_off_stops_every_iotune_counter(smbd):
    """With profiling off, nothing iotune counts moves: the write cache
    (absorbed writes, flushes), read-ahead, fadvise, direct I/O; on
    again, they all count."""
    client = harness.ScriptClient(smbd, 'busy')

    def control(what):
        subprocess.run(['smbcontrol', '--configfile', smbd.conf, 'all',
                        'profile', what], check=True, capture_output=True)
        time.sleep(0.3)

    def work(name):
        client.open(name, 'batch')
        for off in range(0, 256 * 1024, 4096):
            client.write(off, b'w' * 4096)
        client.flush()
        for off in range(0, 256 * 1024, 65536):
            client.read(off, 65536)
        client.close()
        time.sleep(PUBLISH_WAIT)
        return counters(smbd, 'busy')['counters']

    control('off')
    off = work('off.bin')
    moved = sorted(k for k, v in off.items()
                   if v and k != 'wc_caches_active')
    assert moved == [], 'counted with profiling off: %s' % moved
    control('count')
    on = work('on.bin')
    for name in ['wc_writes_cached', 'wc_flushes_fsync', 'ra_prefetch_calls',
                 'fadvise_calls', 'dio_reads', 'write_ops']:
        assert on.get(name, 0) > 0, name
    client.quit()


def test_clear_errors(smbd, tmp_path):
    conf = tmp_path / 'smb.conf'
    lockdir = tmp_path / 'lock'
    lockdir.mkdir()
    conf.write_text('[global]\n\tlock directory = %s\n' % lockdir)
    r = subprocess.run([TOOL, '--configfile', str(conf)],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert 'no counters yet' in r.stderr and 'vfs objects = iotune' in \
        r.stderr
    (lockdir / 'iotune_stats.tdb').mkdir()
    r = subprocess.run([TOOL, '--configfile', str(conf)],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert 'cannot open' in r.stderr
    r = subprocess.run([TOOL, '--configfile', str(tmp_path / 'none')],
                       capture_output=True, text=True)
    assert r.returncode == 1 and 'does not exist' in r.stderr
