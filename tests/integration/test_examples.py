# The shipped examples: every examples/*.conf passes testparm as it is
# and its share works in a real smbd with the settings the example
# states; the Prometheus units are valid systemd units and their command
# writes a valid textfile for node_exporter.
#
# The GlusterFS example connects only with a running volume: its smbd
# test is marked glusterfs and runs in the glusterfs stage (the volume
# of tests/integration/gluster.py); its testparm test runs here.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import glob
import os
import random
import re
import shlex
import shutil
import stat
import subprocess
import time

import pytest

import gluster
import harness
from conftest import start_smbd
from iotune_options import config_options, parse_value

EXAMPLES = os.path.join(harness.REPO, 'examples')
CONFS = sorted(glob.glob(os.path.join(EXAMPLES, '*.conf')))
SERVICE = os.path.join(EXAMPLES, 'iotune-prometheus.service')
TIMER = os.path.join(EXAMPLES, 'iotune-prometheus.timer')
TOOLS = os.path.join(harness.REPO, 'tools')
MINIMAL_GLOBAL = ('[global]\n\tworkgroup = IOTUNE\n'
                  '\tserver role = standalone server\n')
# testparm's complaints about a parameter or a value
TESTPARM_COMPLAINTS = ('Unknown parameter', 'Ignoring', 'WARNING', 'ERROR')

KIB = 1024


def conf_id(path):
    return os.path.basename(path)


def is_glusterfs(path):
    return 'glusterfs' in ' '.join(
        v for share in parse_example(path)['shares'].values()
        for k, v in share if k == 'vfs objects').split()


def parse_example(path):
    """{'shares': {name: [(key, value)]}, 'global': [(key, value)]}: the
    sections of an example, and the lines of its commented-out [global]
    part ('# [global]' followed by '#<tab>key = value' lines)"""
    shares = {}
    commented_global = []
    current = None
    in_global_comment = False
    with open(path) as f:
        for raw in f:
            line = raw.rstrip('\n')
            if re.match(r'^#\s*\[global\]\s*$', line):
                in_global_comment = True
                continue
            if in_global_comment:
                m = re.match(r'^#\t\s*([^=#]+?)\s*=\s*(.*?)\s*$', line)
                if m:
                    commented_global.append((m.group(1), m.group(2)))
                    continue
                in_global_comment = False
            text = line.strip()
            if not text or text[0] in '#;':
                continue
            if text.startswith('['):
                current = text.strip('[]').strip()
                assert current not in shares, '%s: [%s] twice' % (path,
                                                                  current)
                shares[current] = []
                continue
            key, sep, value = text.partition('=')
            assert sep and current is not None, '%s: %r' % (path, line)
            shares[current].append((key.strip(), value.strip()))
    return {'shares': shares, 'global': commented_global}


def iotune_lines(params):
    return [(k, v) for k, v in params if k.lower().startswith('iotune:')]


def option_kinds():
    """iotune option name -> OPTION_* kind, from modules/config.c (the
    authoritative table)"""
    kinds = {name: o['kind'] for name, o in config_options().items()}
    assert 'write cache size' in kinds and 'readahead' in kinds
    return kinds


def run_testparm(conf_text, tmp_path):
    conf = tmp_path / 'smb.conf'
    conf.write_text(conf_text)
    r = subprocess.run(['testparm', '-s', str(conf)], capture_output=True,
                       text=True, timeout=60)
    return r


def parse_testparm_output(stdout):
    """section -> {lowercase key: value} of testparm -s output"""
    sections = {}
    current = None
    for line in stdout.splitlines():
        text = line.strip()
        if not text or text.startswith('#'):
            continue
        if text.startswith('['):
            current = sections.setdefault(text.strip('[]'), {})
            continue
        key, _, value = text.partition('=')
        current[' '.join(key.split()).lower()] = value.strip()
    return sections


def assert_testparm_keeps(conf_text, expect, tmp_path):
    """testparm accepts conf_text without a complaint and prints every
    line of expect ({section: [(key, value)]}) unchanged"""
    r = run_testparm(conf_text, tmp_path)
    assert r.returncode == 0, r.stderr
    complaints = [line for line in r.stderr.splitlines()
                  if any(c in line for c in TESTPARM_COMPLAINTS)]
    assert not complaints, '\n'.join(complaints)
    printed = parse_testparm_output(r.stdout)
    for section, lines in expect.items():
        assert section in printed, r.stdout
        for key, value in lines:
            got = printed[section].get(' '.join(key.split()).lower())
            assert got == value, ('[%s] %s = %s: testparm prints %r\n%s' %
                                  (section, key, value, got, r.stdout))


@pytest.mark.parametrize('conf', CONFS, ids=conf_id)
def test_testparm_accepts_example(conf, tmp_path):
    """testparm -s on a minimal [global] plus the example as it is: no
    unknown parameter, every iotune: line printed back"""
    example = parse_example(conf)
    assert 'global' not in example['shares'], \
        '%s: [global] belongs in a comment' % conf
    assert example['shares'], '%s has no share' % conf
    with open(conf) as f:
        text = f.read()
    expect = {name: iotune_lines(params)
              for name, params in example['shares'].items()}
    assert any(expect.values()), '%s sets no iotune: option' % conf
    assert_testparm_keeps(MINIMAL_GLOBAL + '\n' + text, expect, tmp_path)


@pytest.mark.parametrize('conf', [c for c in CONFS
                                  if parse_example(c)['global']],
                         ids=conf_id)
def test_example_commented_global_part(conf, tmp_path):
    """the commented [global] part, uncommented, passes testparm too and
    holds only options the README says are read from [global]"""
    example = parse_example(conf)
    per_process = {'iotune:write cache max files', 'iotune:readahead budget'}
    for key, _ in iotune_lines(example['global']):
        assert key.lower() in per_process, \
            '%s: %s is not read from [global]' % (conf, key)
    body = ''.join('\t%s = %s\n' % kv for kv in example['global'])
    with open(conf) as f:
        text = f.read()
    assert_testparm_keeps(MINIMAL_GLOBAL + body + '\n' + text,
                          {'global': iotune_lines(example['global'])},
                          tmp_path)


@pytest.mark.parametrize('conf', CONFS, ids=conf_id)
def test_example_options_exist(conf):
    """testparm takes any iotune:<name>: a misspelt option would be
    silently ignored by iotune, so every name must be in config.c"""
    kinds = option_kinds()
    example = parse_example(conf)
    lines = example['global'] + [kv for params in
                                 example['shares'].values()
                                 for kv in params]
    for key, value in iotune_lines(lines):
        name = ' '.join(key.split(':', 1)[1].split()).lower()
        assert name in kinds, '%s: unknown option %s' % (conf, key)


# --- the examples' shares in a real smbd ---------------------------------

def canonical(kind, text):
    """a value as iotune understands it, to compare what an example
    says with what smbd's connect line reports"""
    if kind == 'OPTION_BOOL':
        return text.strip().lower() in ('yes', 'true', 'on', '1')
    return parse_value(kind, text)


def connect_settings(log, share):
    """the settings iotune logged at the tree connect of share"""
    m = re.search(r"iotune_connect: share '%s' connected: (.*)" %
                  re.escape(share), log)
    assert m, "no iotune_connect line for share '%s'" % share
    return dict(item.split(' = ', 1) for item in m.group(1).split(', '))


def smbd_shares(example, overrides=None):
    """the example's shares for harness.Smbd: path dropped (the harness
    puts it in the work dir) unless overrides give one"""
    shares = {}
    for name, params in example['shares'].items():
        p = {k: v for k, v in params if k != 'path'}
        p.update(overrides or {})
        shares[name] = p
    return shares


def service_command():
    """ExecStart of the service as systemd passes it: $$ is a $"""
    commands = unit_settings(SERVICE)[('Service', 'ExecStart')]
    assert len(commands) == 1
    return shlex.split(commands[0].replace('$$', '$'))


def run_service(textfile_dir, stat_options):
    env = dict(os.environ, TEXTFILE_DIR=str(textfile_dir),
               IOTUNE_STAT_OPTIONS=stat_options,
               PATH=TOOLS + os.pathsep + os.environ.get('PATH', ''))
    return subprocess.run(service_command(), env=env, capture_output=True,
                          text=True, timeout=60)


def prom_samples(text):
    """{(metric, labels): value} of a valid text exposition; asserts the
    format node_exporter's textfile collector accepts"""
    name_re = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
    label_re = r'%s="(?:[^"\\\n]|\\.)*"' % r'[a-zA-Z_][a-zA-Z0-9_]*'
    sample_re = re.compile(r'^(%s)(\{%s(?:,%s)*\})? (\S+)$' %
                           (name_re, label_re, label_re))
    types = {}
    helps = set()
    samples = {}
    assert text.endswith('\n')
    for line in text.splitlines():
        m = re.match(r'^# (HELP|TYPE) (%s) (.+)$' % name_re, line)
        if m:
            kind, name, rest = m.groups()
            if kind == 'TYPE':
                assert name not in types, 'TYPE %s twice' % name
                assert rest in ('counter', 'gauge', 'histogram',
                                'summary', 'untyped'), line
                types[name] = rest
            else:
                assert name not in helps, 'HELP %s twice' % name
                helps.add(name)
            continue
        m = sample_re.match(line)
        assert m, 'not a sample: %r' % line
        name, labels, value = m.group(1), m.group(2) or '', m.group(3)
        family = name
        if name not in types:
            family = re.sub(r'_(bucket|sum|count)$', '', name)
            assert types.get(family) == 'histogram', \
                'sample of an undeclared metric: %r' % line
        float(value)
        key = (name, labels)
        assert key not in samples, 'duplicate series %r' % line
        samples[key] = float(value)
    return samples


def share_counter(samples, metric, share):
    return samples.get((metric, '{share="%s"}' % share))


def example_roundtrip(smbd, share, tmp_path, on_disk):
    """a stream through smbclient and small writes under a batch oplock
    through PyClient, read back identically: (bytes written, bytes read)
    at least"""
    src = tmp_path / 'stream.bin'
    back = tmp_path / 'back.bin'
    src.write_bytes(random.Random(share).randbytes(3 * 1024 * KIB + 123))
    harness.smbclient(smbd, share,
                      'put %s stream.bin; get stream.bin %s' % (src, back))
    assert back.read_bytes() == src.read_bytes()
    assert on_disk('stream.bin') == src.read_bytes()

    # the stream again in 64 KiB reads, one at a time, as a player reads:
    # read-ahead and drop-behind see a sequential stream
    client = harness.PyClient(smbd, share)
    fnum = client.open('stream.bin', harness.PyClient.FILE_OPEN)
    data = src.read_bytes()
    for offset in range(0, len(data), 64 * KIB):
        assert client.read(fnum, offset, 64 * KIB) == \
            data[offset:offset + 64 * KIB]
    client.close(fnum)

    rnd = random.Random(share + 'small')
    model = bytearray()
    small = 0
    fnum = client.open('small.bin', harness.PyClient.FILE_OVERWRITE_IF,
                       oplock=harness.PyClient.REQUEST_BATCH_OPLOCK)
    for _ in range(200):
        offset = rnd.randrange(0, 768 * KIB)
        data = rnd.randbytes(rnd.choice([1, 512, 4 * KIB, 4 * KIB + 1,
                                         16 * KIB]))
        assert client.write(fnum, data, offset) == len(data)
        small += len(data)
        if len(model) < offset:
            model.extend(bytes(offset - len(model)))
        model[offset:offset + len(data)] = data
    assert client.read(fnum, 0, len(model)) == bytes(model)
    client.close(fnum)
    fnum = client.open('small.bin', harness.PyClient.FILE_OPEN)
    assert client.read(fnum, 0, len(model) + 100) == bytes(model)
    client.close(fnum)
    del client
    assert on_disk('small.bin') == bytes(model)
    stream = src.stat().st_size
    return stream + small, 2 * stream + 2 * len(model)


def check_settings_took_effect(share, options, samples):
    """each setting of the example shows in the share's counters"""
    def counter(name):
        return share_counter(samples, 'iotune_%s_total' % name, share) or 0

    def option(name, default):
        for key, value in options.items():
            if ' '.join(key.split(':', 1)[1].split()).lower() == name:
                return value.strip().lower()
        return default

    print('%s: %s' % (share, ', '.join(
        '%s %d' % (name, counter(name)) for name in (
            'wc_writes_cached', 'wc_writes_bypassed', 'dio_writes',
            'dio_reads', 'ra_streams_detected', 'ra_prefetch_calls',
            'ra_takeovers', 'ra_drop_calls', 'ra_budget_refusals'))))
    if canonical('OPTION_SIZE', option('write cache size', '1M')) > 0:
        # the small writes under a batch oplock were coalesced
        assert counter('wc_writes_cached') > 0
    else:
        assert counter('wc_writes_cached') == 0
    direct = option('direct io', 'no')
    if direct in ('writes', 'both'):
        assert counter('dio_writes') > 0
    if direct in ('reads', 'both'):
        assert counter('dio_reads') > 0
    if direct == 'no':
        assert counter('dio_writes') == counter('dio_reads') == 0
    if option('readahead', 'kernel') == 'adaptive':
        assert counter('ra_streams_detected') > 0
        # iotune prefetches itself only where it switched Linux's
        # read-ahead off: always when the example ignores memory
        # pressure, else only under it (at an open or at a read)
        if option('readahead pressure', '10') == '0':
            assert counter('ra_prefetch_calls') > 0
        elif counter('ra_prefetch_calls') > 0:
            assert counter('ra_takeovers') + counter('fadvise_calls') > 0
    if canonical('OPTION_BOOL', option('drop behind', 'no')):
        assert counter('ra_drop_calls') > 0
    else:
        assert counter('ra_drop_calls') == 0


def check_example_in_smbd(conf, smbd, tmp_path, on_disk_of):
    example = parse_example(conf)
    kinds = option_kinds()
    log = smbd.log_text()
    for share, params in example['shares'].items():
        written, read = example_roundtrip(smbd, share, tmp_path,
                                          on_disk_of(share))
        log = smbd.log_text()
        assert 'refusing the tree connect' not in log
        # what the example says is what iotune runs with
        settings = connect_settings(log, share)
        for key, value in iotune_lines(params):
            name = ' '.join(key.split(':', 1)[1].split()).lower()
            if name in settings:
                assert canonical(kinds[name], settings[name]) == \
                    canonical(kinds[name], value), \
                    '%s: iotune runs with %s = %s' % (key, name,
                                                      settings[name])
        # the counters reach node_exporter's textfile through the
        # Prometheus service's own command
        out = tmp_path / 'textfile'
        out.mkdir(exist_ok=True)
        deadline = time.monotonic() + 15
        while True:
            r = run_service(out, '--configfile %s' % smbd.conf)
            got = None
            if r.returncode == 0:
                samples = prom_samples((out / 'iotune.prom').read_text())
                got = share_counter(samples, 'iotune_write_bytes_total',
                                    share)
                if got is not None and got >= written:
                    break
            assert time.monotonic() < deadline, \
                'no counters of %s: rc %d %s, write bytes %r' % (
                    share, r.returncode, r.stderr, got)
            time.sleep(0.5)
        assert share_counter(samples, 'iotune_read_bytes_total',
                             share) >= read
        check_settings_took_effect(share, dict(iotune_lines(params)),
                                   samples)
    # the [global] part's iotune lines, set by the test, were taken
    assert '[global]:' not in log


def local_on_disk(smbd):
    def of(share):
        def read(name):
            with open(os.path.join(smbd.share_path(share), name),
                      'rb') as f:
                return f.read()
        return read
    return of


LOCAL = [c for c in CONFS if not is_glusterfs(c)]
GLUSTER = [c for c in CONFS if is_glusterfs(c)]


@pytest.mark.parametrize('conf', LOCAL, ids=conf_id)
def test_example_share_in_smbd(conf, request, tmp_path):
    """the example's shares (path moved to the work dir) and the iotune
    lines of its commented [global] part in a real smbd: tree connect,
    byte-identical roundtrips, the connect line with the example's
    values, and its counters through the Prometheus service"""
    example = parse_example(conf)
    # only iotune's lines of the [global] part: 'clustering = yes'
    # would need CTDB
    smbd = start_smbd(request, smbd_shares(example),
                      global_params=dict(iotune_lines(example['global'])))
    check_example_in_smbd(conf, smbd, tmp_path, local_on_disk(smbd))


@pytest.fixture(scope='module')
def volume(request):
    g = gluster.Gluster(harness.scratch_dir('glusterfs-examples-'))

    def finish():
        g.stop()
        if not getattr(request.session, 'iotune_failed', False):
            shutil.rmtree(g.workdir, ignore_errors=True)
    request.addfinalizer(finish)
    return g.start()


@pytest.mark.glusterfs
@pytest.mark.parametrize('conf', GLUSTER, ids=conf_id)
def test_glusterfs_example_share_in_smbd(conf, request, volume, tmp_path):
    """the GlusterFS example on this host's one-brick volume: its own
    vfs objects and iotune lines, volume, server and log file of the
    test's volume"""
    example = parse_example(conf)
    on_volume = {k: v for k, v in volume.share().items()
                 if k.startswith('glusterfs:') or k == 'path'}
    smbd = start_smbd(request, smbd_shares(example, on_volume),
                      global_params=dict(iotune_lines(example['global'])))

    def on_brick(share):
        def read(name):
            with open(volume.brick_file(name), 'rb') as f:
                return f.read()
        return read
    check_example_in_smbd(conf, smbd, tmp_path, on_brick)


# --- the Prometheus units, without systemd running ------------------------

def unit_lines(path):
    """the lines of a systemd unit file as systemd reads them: a line
    that ends in a backslash goes on in the next, the backslash becomes
    a space"""
    lines = []
    pending = None
    with open(path) as f:
        for line in f.read().splitlines():
            if pending is not None:
                if line.lstrip().startswith(('#', ';')):
                    continue
                line = pending + line
                pending = None
            if line.endswith('\\'):
                pending = line[:-1] + ' '
                continue
            lines.append(line)
    assert pending is None, '%s ends in a backslash' % path
    return lines


def unit_settings(path):
    """{(section, key): [values]} of a systemd unit file"""
    settings = {}
    section = None
    for line in unit_lines(path):
        text = line.strip()
        if not text or text[0] in '#;':
            continue
        if text.startswith('['):
            section = text.strip('[]')
            continue
        key, _, value = text.partition('=')
        settings.setdefault((section, key.strip()), []).append(value.strip())
    return settings


def test_units_verify(tmp_path):
    """systemd-analyze verify: no error, no ignored line"""
    if shutil.which('systemd-analyze') is None:
        pytest.skip('systemd-analyze is not installed')
    for unit in (SERVICE, TIMER):
        shutil.copy(unit, tmp_path)
    units = [str(tmp_path / os.path.basename(u)) for u in (SERVICE, TIMER)]
    r = subprocess.run(['systemd-analyze', 'verify', '--man=no'] + units,
                       capture_output=True, text=True, timeout=60)
    about_ours = [line for line in (r.stdout + r.stderr).splitlines()
                  if 'iotune-prometheus' in line]
    assert r.returncode == 0 and not about_ours, r.stdout + r.stderr


def test_units_oneshot_every_15s():
    service = unit_settings(SERVICE)
    timer = unit_settings(TIMER)
    assert service[('Service', 'Type')] == ['oneshot']
    assert 'TEXTFILE_DIR=/var/lib/prometheus/node-exporter' in \
        service[('Service', 'Environment')]
    assert timer[('Install', 'WantedBy')] == ['timers.target']
    calendar = timer[('Timer', 'OnCalendar')]
    assert len(calendar) == 1
    if shutil.which('systemd-analyze') is None:
        pytest.skip('systemd-analyze is not installed')
    r = subprocess.run(['systemd-analyze', 'calendar', '--iterations=5',
                        calendar[0]], capture_output=True, text=True,
                       check=True, timeout=60)
    times = re.findall(r'(?:Next elapse|Iter\. #\d+): \w+ \S+ '
                       r'(\d\d):(\d\d):(\d\d)', r.stdout)
    assert len(times) == 5, r.stdout
    seconds = [int(h) * 3600 + int(m) * 60 + int(s) for h, m, s in times]
    steps = {(b - a) % 86400 for a, b in zip(seconds, seconds[1:])}
    assert steps == {15}, r.stdout


def test_service_command_without_smbd(tmp_path):
    """no store yet: the command fails with iotune-stat's message and
    leaves the previous file and no temporary file; with a store it
    writes a valid, world-readable file atomically"""
    lockdir = tmp_path / 'lock'
    lockdir.mkdir()
    conf = tmp_path / 'smb.conf'
    conf.write_text('[global]\n\tlock directory = %s\n' % lockdir)
    out = tmp_path / 'textfile'
    out.mkdir()
    (out / 'iotune.prom').write_text('# old\n')
    r = run_service(out, '--configfile %s' % conf)
    assert r.returncode != 0
    assert 'no counters yet' in r.stderr
    assert os.listdir(out) == ['iotune.prom']
    assert (out / 'iotune.prom').read_text() == '# old\n'

    import tdb
    db = tdb.open(str(lockdir / 'iotune_stats.tdb'), 0, tdb.DEFAULT,
                  os.O_RDWR | os.O_CREAT, 0o600)
    db.store(b'total:0:office', b'read_ops 3\nread_bytes 12288\n'
             b'write_ops 2\nwrite_bytes 8192\nread_latency_us_count 3\n'
             b'read_latency_us_sum 30\nread_latency_us_bucket_3 3\n',
             tdb.REPLACE)
    db.close()
    r = run_service(out, '--configfile %s' % conf)
    assert r.returncode == 0, r.stderr
    assert os.listdir(out) == ['iotune.prom']
    mode = os.stat(out / 'iotune.prom').st_mode
    assert stat.S_IMODE(mode) == 0o644
    samples = prom_samples((out / 'iotune.prom').read_text())
    assert share_counter(samples, 'iotune_write_bytes_total',
                         'office') == 8192
    assert share_counter(samples, 'iotune_read_ops_total', 'office') == 3
    assert samples[('iotune_read_latency_seconds_count',
                    '{share="office"}')] == 3
    assert samples[('iotune_read_latency_seconds_bucket',
                    '{share="office",le="+Inf"}')] == 3
