# The parsers behind the benchmark's pass-through goal: what
# bench/instructions.py counts as iotune's own instructions in a
# callgrind output file (cost lines while the current file, fl= or an
# inlined fi=/fe=, is one of iotune's sources; not the inclusive cost of
# a call; compressed names resolved), checked on small hand-written
# callgrind files in the format valgrind 3.19 writes; and which cells
# pass iotune by and get a control share, and how the report shows it;
# and that the GlusterFS helper of the benchmark and the tests stops
# nothing of a glusterd it did not start.
#
# No smbd, no glusterd: this file starts only a `sleep` (a fake brick).
# It runs in the integration stage
# (tests/run_all.py: it carries no stage marker) and alone:
#   /usr/bin/python3 -m pytest -q -p no:cacheprovider \
#       tests/integration/test_bench_tools.py
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import subprocess
import sys
import time

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
sys.path.insert(0, os.path.join(REPO, 'bench'))

import bounds  # noqa: E402
import instructions  # noqa: E402
import report  # noqa: E402

HEADER = '''# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  /usr/sbin/smbd --foreground
part: 1

positions: line
events: Ir
summary: 100000

'''


def own(tmp_path, body):
    path = tmp_path / 'callgrind.4242'
    path.write_text(HEADER + body)
    return instructions.own_instructions(str(path))


def test_cost_lines_of_own_files_count(tmp_path):
    body = '''ob=(1) /usr/lib/x86_64-linux-gnu/samba/vfs/iotune.so
fl=(1) /work/main/build/../modules/wcache.c
fn=(1) iotune_wc_write
10 5
+1 3
* 2
'''
    assert own(tmp_path, body) == 10


def test_other_files_do_not_count(tmp_path):
    body = '''ob=(2) /usr/lib/x86_64-linux-gnu/samba/libsmbd-base.so.0
fl=(2) ???
fn=(2) smbd_smb2_request_process_write
0 700
fl=(3) /build/samba/source3/modules/vfs_default.c
fn=(3) vfswrap_pwrite_send
12 90
fl=(4) /build/samba/lib/ldb/modules/asq.c
fn=(4) asq_search
3 40
'''
    assert own(tmp_path, body) == 0


def test_inlined_own_code_counts_until_the_next_function(tmp_path):
    # fi=/fe= switch the file of the cost lines that follow; fn= goes
    # back to the function's own file; (id) alone names a file that an
    # earlier line named in full, cfi= included
    body = '''fl=(1) /work/main/modules/vfs_iotune_io.c
fn=(1) iotune_pwrite_send
5 7
fl=(2) ???
fn=(2) tevent_req_post
cfi=(3) /work/main/include/iotune/util.h
cfn=(3) iotune_min
calls=1 0
0 0
fi=(3)
0 11
fe=(2)
0 500
fi=(1)
0 13
fn=(4) talloc_free
0 300
'''
    assert own(tmp_path, body) == 7 + 11 + 13


def test_inclusive_cost_of_calls_does_not_count(tmp_path):
    body = '''fl=(1) /work/main/modules/vfs_iotune_pass.c
fn=(1) iotune_pass_pwrite_send
3 20
cfl=(2) ???
cfn=(2) vfswrap_pwrite_send
calls=1 0
4 90000
5 6
'''
    assert own(tmp_path, body) == 26


def test_publishing_code_does_not_count(tmp_path):
    # the counters' store and text format run once a second, not per
    # request: left out as iotune_publish_fn is left out of the totals
    body = '''fl=(1) /work/main/build/../modules/stats.c
fn=(1) iotune_stats_format
3 400
fl=(2) /work/main/build/../modules/vfs_iotune_stats.c
fn=(2) iotune_publish_fn
4 50
fl=(3) /work/main/build/../modules/vfs_iotune.c
fn=(3) iotune_count_io
5 9
fi=(4) /work/main/build/../include/iotune/stats.h
6 4
'''
    assert own(tmp_path, body) == 9 + 4


@pytest.mark.parametrize('path, is_own', [
    ('/work/main/modules/rsvq.c', True),
    ('../modules/vfs_iotune.c', True),
    ('modules/wcache_priv.h', True),
    ('/work/main/include/iotune/wcache.h', True),
    ('/build/samba-4.17/source3/modules/vfs_default.c', False),
    ('../../source3/modules/vfs_io_uring.c', False),
    ('/build/samba-4.17/lib/ldb/modules/rdn_name.c', False),
    ('/work/main/modules/sub/x.c', False),
    ('/work/main/tests/unit/test_wcache.c', False),
])
def test_own_file_names(path, is_own):
    assert bool(instructions.OWN_FILE.search(path)) is is_own


# The control of the pass-through cells: a second share without iotune
# in the same rounds, shown next to the goal (bench/report.py)

@pytest.mark.parametrize('kind, op, block, passes', [
    ('pagecache', 'write', 4 * 1024, False),
    ('pagecache', 'write', 64 * 1024, True),
    ('pagecache', 'write', 1024 * 1024, True),
    ('pagecache', 'read', 64 * 1024, True),
    ('odirect', 'write', 64 * 1024, False),
    ('odirect', 'read', 1024 * 1024, False),
])
def test_which_cells_pass_iotune_by(kind, op, block, passes):
    assert instructions.passes_by(kind, op, block) is passes
    row = {'backend': kind, 'op': op, 'block': block}
    assert report.instructions_passes_by(row) is passes


def test_control_row_pairs_the_rounds_in_order():
    row = instructions.control_row([110, 90, 101], [100, 100, 99])
    assert row['control_insn_per_mib'] == 101
    assert row['control_ratio'] == 1.01
    assert row['control_low'] == 0.9
    assert row['control_high'] == 1.1


def test_report_shows_the_control_beside_the_goal():
    cell = {'backend': 'pagecache', 'op': 'write', 'block': 64 * 1024,
            'depth': 8, 'small_mib': 8, 'large_mib': 40,
            'iotune_insn_per_mib': 381774, 'base_insn_per_mib': 369900,
            'ratio': 1.032, 'ratio_low': 0.997, 'ratio_high': 1.062,
            'extra_per_request': 742, 'own_per_request': 369,
            'control_insn_per_mib': 370000, 'control_ratio': 1.0,
            'control_low': 0.97, 'control_high': 1.04}
    rows = report.instruction_rows({'cells': [cell]})
    assert len(rows) == 1
    assert rows[0][2] == 'not met'
    assert 'control, a second share without iotune' in rows[0][3]
    assert '1.000x (rounds 0.970-1.040)' in rows[0][3]
    md = []
    report.instructions_section({'cells': [cell], 'small_mib': 8,
                                 'large_mib': 40}, md)
    line = [m for m in md if m.startswith('| pagecache | writes 64K')][0]
    assert line.endswith('| 1.000 (0.970-1.040) |')


# The bound of exact reservations where one is a round trip, at the
# speed of the goal's own yardstick (1 MiB writes without the cache)

def test_one_trip_at_backend_speed():
    r = {'depth': 4, '1M without': 1000.0}
    # 4 x 64 KiB = 262144 bytes take 262.144 us at 1000 MB/s; one
    # round trip of 262.144 us more halves the rate
    assert bounds.one_trip_at_backend_speed(r, '64K', 262.144) == \
        pytest.approx(0.5)
    assert bounds.one_trip_at_backend_speed(r, '16K', 0) == \
        pytest.approx(1.0)
    deeper = dict(r, depth=16)
    assert bounds.one_trip_at_backend_speed(deeper, '64K', 262.144) == \
        pytest.approx(0.8)


# The no-regression goal is judged beside a control pair of the column's
# own backend where the run has one

def cells_of(backend, ratios):
    return [{'backend': backend, 'block': 4096 << i, 'depth': 1,
             'ratio': r, 'ratio_q1': r - 0.05, 'ratio_q3': r + 0.01}
            for i, r in enumerate(ratios)]


def test_glusterfs_is_judged_beside_its_own_control():
    cells = (cells_of('glusterfs', [1.0, 0.9]) +
             cells_of('control', [1.0, 1.0]) +
             cells_of('glusterfs-control', [0.9, 1.0]))
    assert report.control_of(cells, 'glusterfs') == 'glusterfs-control'
    worst = min((c for c in cells if c['backend'] == 'glusterfs'),
                key=lambda c: c['ratio'])
    text = report.regression_detail(cells, 'glusterfs', worst)
    assert 'glusterfs-control spread 0.85-1.01' in text
    assert 'below 0.97: 1 of 2' in text


def test_older_runs_borrow_the_page_cache_control():
    cells = cells_of('glusterfs', [1.0]) + cells_of('control', [1.0])
    assert report.control_of(cells, 'glusterfs') == 'control'
    assert report.control_of(cells, 'pagecache') == 'control'


# Whether the disk bounds the O_DIRECT coalescing cells

def test_disk_alone_against_the_cells_yardstick():
    wm = {'coalescing': [{'backend': 'odirect', '1M without': 1000.0},
                         {'backend': 'odirect', '1M without': 1250.0},
                         {'backend': 'glusterfs', '1M without': 100.0}]}
    text = ' '.join(report.disk_alone_lines(
        wm, {'reserved_windows_mbs': 1500.0}))
    assert '1500 MB/s, 1.20-1.50 of the 1M writes' in text
    assert '(1000-1250 MB/s through smbd)' in text
    assert 'does not stop them below 0.9' in text
    assert 'one after the other' not in text  # no free reservations
    text = ' '.join(report.disk_alone_lines(
        wm, {'reserved_windows_mbs': 1000.0}))
    assert 'a bound of the disk' in text
    assert report.disk_alone_lines(wm, {}) == []


def test_flushes_and_writes_one_after_the_other():
    # 1 / (1 / 500 + 1 / 1500) = 375 MB/s, of 1000: 0.375
    wm = {'coalescing': [{'backend': 'odirect', 'depth': 8,
                          '1M without': 1000.0,
                          'free reservations 64K': 500.0,
                          'cached 64K': 400.0}]}
    text = ' '.join(report.disk_alone_lines(
        wm, {'reserved_windows_mbs': 1500.0}))
    assert 'x8 0.38 (measured 0.40)' in text


# The round-trip cells say what the SMB2 FLUSH after the last write adds

def test_flush_after_the_last_write_is_shown_apart():
    row = {'backend': 'pagecache', 'writes': 8192, 'echo_us': 52.0,
           'iotune_us': 61.0, 'iotune_flush_us': 3.56,
           'free_flush_us': 3.21, 'base_flush_us': 4.08,
           'null_flush_us': 0.16}
    text = ' '.join(report.flush_lines({'floor': [row]}))
    assert 'pagecache (8192 writes): iotune 3.56, free res. 3.21, ' \
        'null WRITE 0.16, without 4.08.' in text
    # 52 / (61 - 3.56) = 0.905
    assert 'ECHO / (iotune - its FLUSH) pagecache 0.91.' in text
    del row['iotune_flush_us']
    assert report.flush_lines({'floor': [row]}) == []   # an older run


def test_flush_split_divides_the_flush_by_the_writes():
    import write_matrix

    class FakePumper:
        flush_s = 0.0

        def run(self, share, total, block, depth):
            self.flush_s = 0.004            # 4 ms of FLUSH
            return total / 0.5 / 1e6         # in 0.5 s in all

    us, flush_us = write_matrix.flush_split(FakePumper(), 'pc_iotune',
                                            8 * 1024 * 1024, 4096)
    assert round(us, 3) == round(0.5e6 / 2048, 3)
    assert round(flush_us, 3) == round(4000 / 2048, 3)


# The pass-through goal is judged on the unrounded ratio

@pytest.mark.parametrize('iotune, base, text, verdict', [
    (385906, 374596, '1.0302', 'not met'),   # 1.030 rounded
    (103000, 100000, '1.030', 'met'),
    (101000, 100000, '1.010', 'met'),
    (104000, 100000, '1.040', 'not met'),
])
def test_pass_through_ratio_unrounded(iotune, base, text, verdict):
    cell = {'backend': 'pagecache', 'op': 'write', 'block': 65536,
            'depth': 4, 'iotune_insn_per_mib': iotune,
            'base_insn_per_mib': base, 'ratio': round(iotune / base, 3),
            'ratio_low': 1.0, 'ratio_high': 1.0, 'extra_per_request': 0,
            'own_per_request': 0}
    row = report.instruction_rows({'cells': [cell]})[0]
    assert row[1:3] == (text, verdict)


def test_report_text_needs_no_matplotlib():
    # the Debian 13 chroot collects this file and has no matplotlib
    code = ('import sys; sys.modules["matplotlib"] = None; '
            'sys.path.insert(0, %r); import report; '
            'print(report.instructions_passes_by('
            '{"backend": "pagecache", "block": 65536}))' %
            os.path.join(REPO, 'bench'))
    out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == 'True'


# The GlusterFS helper of the tests and benchmarks: one that found
# another glusterd running (start() refuses) stops nothing of that one

def test_gluster_stop_without_start_leaves_the_other_alone(tmp_path,
                                                           monkeypatch):
    import gluster
    pids = tmp_path / 'vols'
    pids.mkdir()
    sock = tmp_path / 'glusterd.socket'
    sock.write_text('')
    brick = subprocess.Popen(['sleep', '60'])
    try:
        (pids / 'brick.pid').write_text('%d\n' % brick.pid)
        monkeypatch.setattr(gluster, 'BRICK_PIDS', str(pids / '*.pid'))
        monkeypatch.setattr(gluster, 'CLI_SOCKET', str(sock))
        gluster.Gluster(str(tmp_path / 'work')).stop()
        assert brick.poll() is None
        assert sock.exists()
        assert (pids / 'brick.pid').exists()
    finally:
        brick.kill()
        brick.wait()


def fake_gluster(tmp_path, monkeypatch):
    """a Gluster whose pid files and CLI socket are under tmp_path"""
    import gluster
    pids = tmp_path / 'vols'
    pids.mkdir()
    sock = tmp_path / 'glusterd.socket'
    sock.write_text('')
    monkeypatch.setattr(gluster, 'BRICK_PIDS', str(pids / '*.pid'))
    monkeypatch.setattr(gluster, 'CLI_SOCKET', str(sock))
    return gluster.Gluster(str(tmp_path / 'work')), pids, sock


def exec_done(proc, word):
    """proc, once its arguments show word: Popen may return before the
    exec"""
    import gluster
    for _ in range(100):
        if word.encode() in gluster.process_args(proc.pid):
            break
        time.sleep(0.05)
    return proc


def fake_brick(path):
    """a process whose arguments name a brick, as glusterfsd's do"""
    return exec_done(subprocess.Popen(
        [sys.executable, '-c', 'import time; time.sleep(60)', path]), path)


def test_gluster_stop_kills_only_its_own_brick(tmp_path, monkeypatch):
    g, pids, sock = fake_gluster(tmp_path, monkeypatch)
    gone = subprocess.Popen(['true'])
    gone.wait()
    procs = [exec_done(subprocess.Popen(['sleep', '60']), 'sleep'),
             fake_brick(g.brick),
             fake_brick('/elsewhere/brick')]
    g.proc, ours, other = procs
    try:
        (pids / 'ours.pid').write_text('%d\n' % ours.pid)
        (pids / 'other.pid').write_text('%d\n' % other.pid)
        (pids / 'stale.pid').write_text('%d\n' % gone.pid)
        g.stop()
        assert ours.wait(5) is not None
        assert other.poll() is None
        assert sorted(os.listdir(pids)) == ['other.pid']
        assert not sock.exists()        # our glusterd ran until stop()
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_gluster_stop_after_its_glusterd_exited_keeps_the_socket(
        tmp_path, monkeypatch):
    g, _, sock = fake_gluster(tmp_path, monkeypatch)
    g.proc = subprocess.Popen(['true'])
    g.proc.wait()
    g.stop()
    assert sock.exists()    # another glusterd may have taken it


def test_gluster_start_refuses_while_a_glusterd_starts(tmp_path,
                                                       monkeypatch):
    import gluster
    import shutil
    g, _, sock = fake_gluster(tmp_path, monkeypatch)
    monkeypatch.setattr(gluster.Gluster, 'cli_works', lambda self: False)

    def went_on():
        raise AssertionError('start() went on to start a glusterd')
    monkeypatch.setattr(gluster, 'loopback_hostname', went_on)
    glusterd = tmp_path / 'glusterd'    # its name is what counts
    shutil.copy('/bin/sleep', glusterd)
    starting = exec_done(subprocess.Popen([str(glusterd), '60']),
                         str(glusterd))
    try:
        with pytest.raises(RuntimeError, match='already runs'):
            g.start()
        assert sock.exists()
    finally:
        starting.kill()
        starting.wait()
