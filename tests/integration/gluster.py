# A real single-brick GlusterFS volume on this host, for the glusterfs
# test stage and the write benchmark: glusterd runs under setsid with its
# own working directory and is stopped by PID, with the brick process it
# started and any FUSE mount.  One per host: glusterd's CLI socket is
# /var/run/glusterd.socket and it listens on port 24007.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import glob
import os
import re
import socket
import subprocess
import time

import harness

VOLUME = 'gv0'
CLI_SOCKET = '/var/run/glusterd.socket'
BRICK_PIDS = '/var/run/gluster/vols/%s/*.pid' % VOLUME


def loopback_hostname():
    """A host name for the brick: the GlusterFS CLI refuses 127.0.0.1 and
    localhost, but takes a name that resolves to the loopback address.
    The machine's own name, mapped in /etc/hosts when it is not yet."""
    name = socket.gethostname()
    try:
        if socket.gethostbyname(name).startswith('127.'):
            return name
    except OSError:
        pass
    with open('/etc/hosts', 'a') as f:
        f.write('127.0.0.1\t%s\n' % name)
    return name


class Gluster:
    def __init__(self, workdir):
        self.workdir = os.path.abspath(workdir)
        self.state = os.path.join(self.workdir, 'glusterd')
        self.brick = os.path.join(self.workdir, 'brick')
        self.pidfile = os.path.join(self.workdir, 'glusterd.pid')
        self.log = os.path.join(self.workdir, 'glusterd.log')
        self.host = None
        self.mounts = []
        self.proc = None

    def cli(self, *args, check=True, timeout=60):
        r = subprocess.run(['gluster', '--mode=script'] + list(args),
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError('gluster %s: %s%s' % (' '.join(args),
                                                     r.stdout, r.stderr))
        return r.stdout

    def start(self):
        if os.path.exists(CLI_SOCKET):
            if self.cli_works() or glusterd_pids():
                raise RuntimeError('a glusterd already runs on this host '
                                   '(%s); stop it first' % CLI_SOCKET)
            os.unlink(CLI_SOCKET)       # left by one that was killed
        self.host = loopback_hostname()
        os.makedirs(self.state, exist_ok=True)
        os.makedirs(self.brick, exist_ok=True)
        vol = os.path.join(self.workdir, 'glusterd.vol')
        with open('/etc/glusterfs/glusterd.vol') as f:
            text = f.read()
        text = re.sub(r'option working-directory .*',
                      'option working-directory %s' % self.state, text)
        with open(vol, 'w') as f:
            f.write(text)
        self.proc = subprocess.Popen(
            ['glusterd', '-N', '-f', vol, '-p', self.pidfile, '-l',
             self.log], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.wait_for(self.cli_works, 30, 'glusterd')
        self.cli('volume', 'create', VOLUME,
                 '%s:%s' % (self.host, self.brick), 'force')
        self.cli('volume', 'start', VOLUME)
        self.wait_for(self.brick_online, 30, 'the brick')
        return self

    def wait_for(self, ready, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('glusterd exited; see %s' % self.log)
            try:
                if ready():
                    return
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.2)
        raise RuntimeError('%s not ready within %ds; see %s' %
                           (what, timeout, self.log))

    def cli_works(self):
        r = subprocess.run(['gluster', '--mode=script', 'volume', 'list'],
                           capture_output=True, timeout=10)
        return r.returncode == 0

    def brick_online(self):
        out = self.cli('volume', 'status', VOLUME, 'detail', check=False)
        return re.search(r'Online\s*:\s*Y', out or '') is not None

    def set(self, key, value):
        self.cli('volume', 'set', VOLUME, key, value)

    def mount(self, mnt):
        """A FUSE mount of the volume (GlusterFS's own client)"""
        os.makedirs(mnt, exist_ok=True)
        pidfile = os.path.join(self.workdir,
                               'fuse-%d.pid' % len(self.mounts))
        subprocess.run(['glusterfs', '--volfile-server=%s' % self.host,
                        '--volfile-id=%s' % VOLUME,
                        '--pid-file=%s' % pidfile, mnt], check=True)
        self.mounts.append((mnt, pidfile))
        self.wait_for(lambda: os.path.ismount(mnt), 30, 'the FUSE mount')
        return mnt

    def share(self, modules='glusterfs', **params):
        """smb.conf parameters of a share on the volume through
        vfs_glusterfs (modules: the whole 'vfs objects')"""
        p = {'vfs objects': modules, 'path': '/',
             'glusterfs:volume': VOLUME,
             'glusterfs:volfile_server': self.host,
             'glusterfs:logfile': os.path.join(self.workdir,
                                               'vfs_glusterfs.log'),
             'kernel share modes': 'no'}
        p.update(params)
        return p

    def brick_file(self, name):
        return os.path.join(self.brick, name)

    def profile_start(self):
        """starts the volume's profile; one already started goes on (a
        second start is refused)"""
        try:
            self.cli('volume', 'profile', VOLUME, 'start')
        except RuntimeError as e:
            if 'already started' not in str(e):
                raise

    def write_calls(self):
        """WRITE calls the brick served since the profile started"""
        out = self.cli('volume', 'profile', VOLUME, 'info', 'cumulative')
        calls = 0
        for line in out.splitlines():
            words = line.split()
            if words and words[-1] == 'WRITE':
                calls += int(words[-2])
        return calls

    def stop(self):
        for mnt, pidfile in self.mounts:
            subprocess.run(['umount', '-l', mnt])
            harness.stop_pids(harness.read_pids([pidfile]), 3)
        self.mounts = []
        if self.proc is None:
            # this one started no glusterd (start() refused, finding one
            # that runs): the bricks and the socket are that one's
            return
        # the socket is ours only while our glusterd runs (one that
        # exited may have lost the socket or the port to another)
        ours = self.proc.poll() is None
        bricks = self.own_bricks()
        harness.stop_pids([self.proc.pid], 3)
        self.proc = None
        harness.stop_pids([pid for pid in bricks.values() if pid], 3)
        for path in bricks:
            os.unlink(path)
        if ours and os.path.exists(CLI_SOCKET):
            os.unlink(CLI_SOCKET)

    def own_bricks(self):
        """pid file -> pid of the volume's brick processes that serve
        this one's brick (another glusterd's volume has the same name),
        and pid file -> None for those whose process is gone"""
        bricks = {}
        for path in glob.glob(BRICK_PIDS):
            for pid in harness.read_pids([path]):
                args = process_args(pid)
                if not args:
                    bricks[path] = None
                elif self.brick.encode() in args:
                    bricks[path] = pid
        return bricks


def process_args(pid):
    """a process's arguments ([] once it is gone)"""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().split(b'\0')
    except OSError:
        return []


def glusterd_pids():
    """the glusterd processes of this host, ours or not (one that is
    still starting does not answer its CLI yet)"""
    pids = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/comm' % entry) as f:
                if f.read().strip() == 'glusterd':
                    pids.append(int(entry))
        except OSError:
            pass
    return pids
