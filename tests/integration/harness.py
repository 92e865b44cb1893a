# iotune test harness: a private, real smbd on its own loopback address,
# and the clients that talk to it.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import hashlib
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
USER = 'root'
PASSWORD = 'iotune-Test1'
SMB_PORT = 445
# the build whose module, fault module and test client the tests use
# (build-sanitize for the sanitize stage)
BUILD = os.path.join(REPO, os.environ.get('IOTUNE_BUILD_DIR', 'build'))
# libraries preloaded into smbd (libasan/libubsan for the sanitize stage)
SMBD_PRELOAD = os.environ.get('IOTUNE_SMBD_PRELOAD', '')


def smbd_build_option(name):
    out = subprocess.check_output(['smbd', '-b'], text=True)
    for line in out.splitlines():
        key, _, value = line.strip().partition(': ')
        if key == name:
            return value
    raise RuntimeError('smbd -b does not name %s' % name)


def module_path():
    return os.path.join(smbd_build_option('MODULESDIR'), 'vfs', 'iotune.so')


def install_module():
    """Installs build/iotune.so, and the test-only fault module
    iotune_fault.so, where smbd 4.17 looks for them (it refuses paths in
    'vfs objects').  A new inode each time, so running smbds keep the
    copy they mapped."""
    dest = module_path()
    for built, name in [('iotune.so', 'iotune.so'),
                        ('tests/vfs/iotune_fault.so', 'iotune_fault.so')]:
        built = os.path.join(BUILD, built)
        if not os.path.isfile(built):
            raise RuntimeError('%s is missing: run ./waf build first' %
                               built)
        target = os.path.join(os.path.dirname(dest), name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = target + '.tmp'
        shutil.copyfile(built, tmp)
        os.chmod(tmp, 0o644)
        os.rename(tmp, target)
    return dest


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def port_in_use(address, port=SMB_PORT):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((address, port)) == 0


def pick_address(first=20, last=250):
    """A loopback address on which nothing listens on port 445; the
    search starts at a random place so that concurrent runs rarely meet."""
    span = last - first
    start = random.randrange(span)
    for i in range(span):
        address = '127.0.0.%d' % (first + (start + i) % span)
        if not port_in_use(address):
            return address
    raise RuntimeError('no free loopback address for smbd')


def ensure_loopback_address(address):
    out = subprocess.run(['ip', '-4', 'addr', 'show', 'dev', 'lo'],
                         capture_output=True, text=True).stdout
    if (' %s/' % address) in out:
        return
    subprocess.run(['ip', 'addr', 'add', address + '/32', 'dev', 'lo'],
                   check=True)


def read_pids(paths):
    """the pids in these pid files (missing or unreadable ones left out)"""
    pids = []
    for path in paths:
        try:
            with open(path) as f:
                pids.append(int(f.read().strip()))
        except (OSError, ValueError):
            pass
    return pids


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_pids(pids, timeout):
    """SIGTERM to every process, then SIGKILL to those still there after
    timeout seconds"""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Smbd:
    """A real smbd with private directories, its own passdb and user, on
    its own loopback address.  Shares are a dict of name -> dict of
    smb.conf parameters (a 'path' is created under the work dir when not
    given)."""

    def __init__(self, workdir, shares, global_params=None, address=None,
                 log_level='1 vfs:3', wrapper=None):
        """wrapper: a command smbd runs under (valgrind, for example)"""
        self.workdir = os.path.abspath(workdir)
        self.wrapper = list(wrapper or [])
        self.address = address or pick_address()
        self.shares = shares
        self.global_params = dict(global_params or {})
        self.log_level = log_level
        self.conf = os.path.join(self.workdir, 'smb.conf')
        self.log = os.path.join(self.workdir, 'log.smbd')
        self.proc = None

    def share_path(self, share):
        params = self.shares[share]
        return params.get('path', os.path.join(self.workdir, 'shares',
                                               share))

    def _dir(self, name):
        path = os.path.join(self.workdir, name)
        os.makedirs(path, exist_ok=True)
        return path

    def write_conf(self):
        g = {
            'workgroup': 'IOTUNE',
            'server role': 'standalone server',
            'interfaces': self.address,
            'bind interfaces only': 'yes',
            'smb ports': str(SMB_PORT),
            'disable netbios': 'yes',
            'lock directory': self._dir('lock'),
            'state directory': self._dir('state'),
            'cache directory': self._dir('cache'),
            'pid directory': self._dir('pid'),
            'private dir': self._dir('private'),
            'ncalrpc dir': self._dir('ncalrpc'),
            'binddns dir': self._dir('binddns'),
            'log file': self.log,
            'max log size': '0',
            'log level': self.log_level,
            'passdb backend': 'tdbsam:%s' % os.path.join(
                self._dir('private'), 'passdb.tdb'),
            'load printers': 'no',
            'printing': 'bsd',
            'printcap name': '/dev/null',
            'disable spoolss': 'yes',
            'panic action': '/bin/true',
        }
        g.update(self.global_params)
        lines = ['[global]']
        lines += ['\t%s = %s' % kv for kv in g.items()]
        for name, params in self.shares.items():
            os.makedirs(self.share_path(name), exist_ok=True)
            p = {'path': self.share_path(name), 'read only': 'no'}
            p.update(params)
            lines.append('')
            lines.append('[%s]' % name)
            lines += ['\t%s = %s' % kv for kv in p.items()]
        with open(self.conf, 'w') as f:
            f.write('\n'.join(lines) + '\n')

    def add_user(self):
        subprocess.run(['smbpasswd', '-c', self.conf, '-s', '-a', USER],
                       input='%s\n%s\n' % (PASSWORD, PASSWORD), text=True,
                       check=True, capture_output=True)

    def start(self, timeout=30):
        os.makedirs(self.workdir, exist_ok=True)
        ensure_loopback_address(self.address)
        self.write_conf()
        self.add_user()
        env = dict(os.environ)
        if SMBD_PRELOAD:
            env['LD_PRELOAD'] = SMBD_PRELOAD
        self.proc = subprocess.Popen(
            self.wrapper + ['smbd', '--foreground', '--no-process-group',
             '--configfile=%s' % self.conf],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.workdir, 'smbd.stderr'), 'w'),
            start_new_session=True, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('smbd exited with %d:\n%s' %
                                   (self.proc.returncode, self.log_tail()))
            if port_in_use(self.address):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError('smbd did not listen on %s:%d within %ds' %
                           (self.address, SMB_PORT, timeout))

    def pids(self):
        """PIDs of this smbd and its descendants (a process per client,
        notifyd, cleanupd ...), found by parentage: smbd 4.18 and later
        retitle their children (smbd[ADDR]), so their command lines no
        longer name the config file."""
        if self.proc is None:
            return []
        children = {}
        for entry in os.listdir('/proc'):
            if not entry.isdigit():
                continue
            try:
                with open('/proc/%s/stat' % entry) as f:
                    ppid = int(f.read().rsplit(')', 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        found = [self.proc.pid]
        for pid in found:
            found.extend(children.get(pid, []))
        return found

    def child_pids(self):
        return [p for p in self.pids() if self.proc and p != self.proc.pid]

    def child_maps(self, path):
        """does a child (a client's smbd process) have path mapped, a
        module it loaded?"""
        return any(path in open('/proc/%d/maps' % pid).read()
                   for pid in self.child_pids())

    def stop(self, timeout=15):
        if self.proc is None:
            return
        pid = self.proc.pid
        family = self.pids()    # before they lose their parent
        if self.proc.poll() is None:
            os.kill(pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self.proc.wait()
        for leftover in family:
            if leftover == pid or not pid_alive(leftover):
                continue
            try:
                os.kill(leftover, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None

    def log_text(self):
        try:
            with open(self.log, errors='replace') as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def log_tail(self, lines=40):
        return '\n'.join(self.log_text().splitlines()[-lines:])

    def unc(self, share):
        return '//%s/%s' % (self.address, share)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def profile_counters(smbd):
    """smbd's own profile counters ('smbstatus -P'), summed over its
    processes, as a dict; needs 'smbd profiling level = count'."""
    r = subprocess.run(['smbstatus', '-P', '--configfile=%s' % smbd.conf],
                       capture_output=True, text=True, check=True)
    counters = {}
    for line in r.stdout.splitlines():
        name, sep, value = line.partition(':')
        if sep and value.strip().isdigit():
            counters[name.strip()] = int(value)
    return counters


def iotune_share(**options):
    """share parameters with iotune and options (write_cache_size='64K'
    is 'iotune:write cache size = 64K')"""
    params = {'vfs objects': 'iotune'}
    params.update({'iotune:' + k.replace('_', ' '): v
                   for k, v in options.items()})
    return params


# A local writer that appends 8-byte records 0, 1, 2 ... to the file
# argv[1] with O_APPEND (16 every 0.2 ms) from when it prints "go" until
# its stdin closes, then prints how many it wrote.
APPENDER = r'''
import os, select, struct, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
n = 0
print('go', flush=True)
while not select.select([sys.stdin], [], [], 0)[0]:
    for _ in range(16):
        os.write(fd, struct.pack('<Q', n))
        n += 1
    time.sleep(0.0002)
print(n, flush=True)
'''


def start_appender(path):
    proc = subprocess.Popen([sys.executable, '-c', APPENDER, path],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    if proc.stdout.readline().strip() != 'go':
        raise RuntimeError('the appender did not start')
    return proc


def stop_appender(proc):
    """how many records it wrote"""
    proc.stdin.write('stop\n')
    proc.stdin.close()
    n = int(proc.stdout.readline())
    proc.wait()
    return n


def missing_records(path, n, header):
    """of the appender's records 0 .. n-1, how many are not in the file
    past its first header bytes (each lies at a multiple of 8 past it:
    one append writes each whole)"""
    with open(path, 'rb') as f:
        f.seek(header)
        data = f.read()
    seen = bytearray(n)
    for (k,) in struct.iter_unpack('<Q', data[:len(data) // 8 * 8]):
        if k < n:
            seen[k] = 1
    return n - sum(seen)


def iotune_counters(smbd, share):
    """iotune's counters of one share, summed over smbd's processes
    ('iotune-stat --json'; {} before any process published them)."""
    r = subprocess.run([os.path.join(REPO, 'tools', 'iotune-stat'),
                        '--configfile', smbd.conf, '--json'],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and 'no counters yet' in r.stderr:
        return {}
    if r.returncode != 0:
        raise RuntimeError('iotune-stat --json: %s' % r.stderr)
    shares = json.loads(r.stdout)['shares']
    return shares.get(share, {}).get('counters', {})


def iotune_counters_until(smbd, share, done, timeout=30):
    """iotune_counters() again every 0.2 s until done(counters) is true
    or timeout seconds passed; the last ones either way.  A process
    publishes once a second and as it ends, which on a loaded machine
    can take longer than a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        counters = iotune_counters(smbd, share)
        if done(counters) or time.monotonic() >= deadline:
            return counters
        time.sleep(0.2)


def smbclient(smbd, share, commands, check=True, timeout=300):
    """Runs smbclient commands against a share; returns the result."""
    r = subprocess.run(
        ['smbclient', smbd.unc(share), '-U', '%s%%%s' % (USER, PASSWORD),
         '--configfile=%s' % smbd.conf, '-m', 'SMB3', '-c', commands],
        capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError('smbclient %s %r failed (%d):\n%s%s' %
                           (share, commands, r.returncode, r.stdout,
                            r.stderr))
    return r


class PyClient:
    """One SMB2 connection through the python3-samba bindings: each call
    is one SMB2 request.  Needs /usr/bin/python3 (Debian's, with samba)."""

    # SMB1-style NTCreateX flags, mapped by libsmb to SMB2 oplock levels
    REQUEST_OPLOCK = 0x02
    REQUEST_BATCH_OPLOCK = 0x04

    GENERIC_READ_WRITE = 0x00120089 | 0x00120116
    FILE_OPEN = 1
    FILE_CREATE = 2
    FILE_OPEN_IF = 3
    FILE_OVERWRITE_IF = 5

    def __init__(self, smbd, share, multi_threaded=False):
        from samba import credentials
        from samba.samba3 import libsmb_samba_internal as libsmb
        from samba.samba3 import param as s3param

        lp = s3param.get_context()
        lp.load(smbd.conf)
        creds = credentials.Credentials()
        creds.guess(lp)
        creds.set_username(USER)
        creds.set_password(PASSWORD)
        self.conn = libsmb.Conn(smbd.address, share, lp, creds,
                                multi_threaded=multi_threaded)

    def open(self, name, disposition=FILE_OPEN_IF, oplock=0,
             share_access=0x7):
        return self.conn.create(name,
                                CreateFlags=oplock,
                                DesiredAccess=self.GENERIC_READ_WRITE,
                                ShareAccess=share_access,
                                CreateDisposition=disposition)

    def write(self, fnum, data, offset):
        return self.conn.write(fnum, data, offset)

    def read(self, fnum, offset, size):
        return self.conn.read(fnum, offset, size)

    def close(self, fnum):
        self.conn.close(fnum)

    def unlink(self, name):
        self.conn.unlink(name)


class ScriptClient:
    """One SMB2 connection through build/tests/clients/smb2-script: leases,
    break acknowledgements, FLUSH and truncate."""

    BINARY = os.path.join(BUILD, 'tests', 'clients', 'smb2-script')

    def __init__(self, smbd, share, conf=None):
        """conf: a client smb.conf instead of the server's (for example
        one with 'libsmb:client_guid')"""
        self.proc = subprocess.Popen(
            [self.BINARY, conf or smbd.conf, smbd.address, share, USER,
             PASSWORD],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, bufsize=1)
        ready = self.proc.stdout.readline()
        if ready.strip() != 'ok ready':
            raise RuntimeError('smb2-script did not start: %r %s' %
                               (ready, self.proc.stderr.read()))

    def call(self, line):
        self.proc.stdin.write(line + '\n')
        answer = self.proc.stdout.readline().rstrip('\n')
        if not answer.startswith('ok'):
            raise RuntimeError('smb2-script %r: %s' % (line[:60], answer))
        return answer[3:]

    def open(self, name, oplock='none', unbuffered=False):
        words = self.open_handle(name, oplock, unbuffered)
        return int(words['oplock']), int(words['lease'])

    def open_handle(self, name, oplock='none', unbuffered=False,
                    durable=False):
        """all the open says: oplock, lease, durable, fid, guid"""
        return dict(w.split('=', 1) for w in self.call(
            'open %s %s%s%s' % (name, oplock,
                                ' unbuffered' if unbuffered else '',
                                ' durable' if durable else '')).split())

    def reconnect(self, name, handle, oplock='none'):
        """a durable v2 reconnect (DH2C) of handle (what open_handle
        returned, possibly from another client); the status text"""
        self.proc.stdin.write('reconnect %s %s %s %s\n' %
                              (name, handle['fid'], handle['guid'], oplock))
        return self.proc.stdout.readline().rstrip('\n')

    def write(self, offset, data):
        return int(self.call('write %d %s' % (offset, data.hex())))

    def read(self, offset, size):
        return bytes.fromhex(self.call('read %d %d' % (offset, size)))

    def flush(self):
        self.call('flush')

    def pump(self, kind, total, block, depth):
        """streams total bytes from offset 0 ('write' or 'read') in block
        sized requests, depth of them in flight: (bytes, seconds)"""
        done, usec = self.call('pump %s %d %d %d' %
                               (kind, total, block, depth)).split()
        return int(done), int(usec) / 1e6

    def pump_until_error(self, total, block, depth):
        """'pump write' that may fail: (status, bytes sent, offsets of the
        requests that failed); (None, total, []) when all were written.
        Every request sent and not failed was acknowledged."""
        self.proc.stdin.write('pump write %d %d %d\n' % (total, block,
                                                         depth))
        answer = self.proc.stdout.readline().rstrip('\n')
        if answer.startswith('ok'):
            return None, total, []
        words = answer.split()
        if words[:1] != ['err'] or words[2:3] != ['sent'] or \
                words[4:5] != ['failed']:
            raise RuntimeError('smb2-script pump: %s' % answer)
        return words[1], int(words[3]), [int(w) for w in words[5:]]

    def truncate(self, size):
        self.call('truncate %d' % size)

    def close(self):
        self.call('close')

    def echo(self):
        self.call('echo')

    def wait_break(self, ms):
        return self.call('break %d' % ms)

    def ack(self):
        self.call('ack')

    def settime(self, nttime):
        """SET_INFO FileBasicInformation with LastWriteTime only"""
        self.call('settime %d' % nttime)

    def getinfo(self):
        """(EndOfFile, LastWriteTime) of the open handle"""
        words = self.getinfo_all()
        return words['size'], words['mtime']

    def getinfo_all(self):
        """{'size', 'mtime', 'alloc'} (FileNetworkOpenInformation's
        EndOfFile, LastWriteTime, AllocationSize) of the open handle"""
        return {k: int(v) for k, v in (w.split('=') for w in
                                        self.call('getinfo').split())}

    def stat(self, name):
        """EndOfFile as a stat open (CREATE with FILE_READ_ATTRIBUTES)
        of name reports it"""
        return self.stat_all(name)[0]

    def stat_all(self, name):
        """(EndOfFile, AllocationSize) from a stat open's CREATE"""
        words = dict(w.split('=') for w in
                     self.call('stat %s' % name).split())
        return int(words['size']), int(words['alloc'])

    def list(self, pattern='*'):
        """{name: EndOfFile} of the share's root"""
        out = self.call('list %s' % pattern).split()
        return {k: int(v) for k, v in (w.rsplit('=', 1) for w in out)}

    def list_all(self, pattern='*'):
        """{name: (EndOfFile, AllocationSize)} of the share's root"""
        out = self.call('list %s alloc' % pattern).split()
        return {k: tuple(int(x) for x in v.split('/'))
                for k, v in (w.rsplit('=', 1) for w in out)}

    def tcon(self, share):
        """a further tree connect on the same session: its number"""
        return int(self.call('tcon %s' % share).split('=')[1])

    def tree(self, number):
        """later calls go to tree number (0: the first)"""
        self.call('tree %d' % number)

    def leasekey(self, key):
        """later lease opens use this 16-byte lease key"""
        self.call('leasekey %s' % key.hex())

    def use(self, slot):
        """later calls act on handle slot (0-7) of this connection"""
        self.call('use %d' % slot)

    def quit(self):
        if self.proc.poll() is None:
            self.proc.stdin.write('quit\n')
            self.proc.stdin.close()
            self.proc.wait(10)


def client_conf(smbd, path, **params):
    """A client smb.conf: the server's plus params (e.g. a fixed
    libsmb:client_guid)"""
    with open(smbd.conf) as f:
        text = f.read()
    extra = ''.join('\t%s = %s\n' % kv for kv in params.items())
    text = text.replace('[global]\n', '[global]\n' + extra, 1)
    with open(path, 'w') as f:
        f.write(text)
    return path


def cpu_seconds(pids, main_thread_only=False):
    """user + system CPU time the processes (or only their main threads)
    used so far"""
    ticks = os.sysconf('SC_CLK_TCK')
    total = 0
    for pid in pids:
        path = '/proc/%d/task/%d/stat' % (pid, pid) if main_thread_only \
            else '/proc/%d/stat' % pid
        try:
            with open(path) as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=%s' % size,
                    'tmpfs', path], check=True)


def mount_image(path, fstype, size_mb, options='loop'):
    """A file system of fstype ('xfs', 'btrfs', 'ext4') on a loop device
    over a sparse image file next to path, mounted at path with options
    (which must include 'loop')"""
    os.makedirs(path, exist_ok=True)
    image = path + '.img'
    with open(image, 'wb') as f:
        f.truncate(size_mb * 1024 * 1024)
    mkfs = {'ext4': ['mkfs.ext4', '-q', '-F'], 'xfs': ['mkfs.xfs', '-q', '-f'],
            'btrfs': ['mkfs.btrfs', '-q', '-f']}[fstype]
    subprocess.run(mkfs + [image], check=True)
    subprocess.run(['mount', '-o', options, image, path], check=True)


def umount(path):
    subprocess.run(['umount', '-l', path])


def scratch_dir(prefix):
    base = os.environ.get('IOTUNE_TEST_OUT',
                          os.path.join(REPO, 'build', 'test-out'))
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=prefix, dir=base)
