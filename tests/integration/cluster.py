# A real two-node Samba cluster on this host, for the cluster test stage:
# two ctdbd daemons in CTDB's test mode (each with its own CTDB_BASE,
# socket and databases), and one smbd per node with "clustering = yes" on
# its own loopback address; both serve the same share paths.  Everything
# is stopped by PID, even when a test failed.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import subprocess
import time

import harness

ADDRESSES = ['127.0.1.1', '127.0.1.2']


def ctdb_env(base):
    env = dict(os.environ)
    env.update({'CTDB_TEST_MODE': 'yes', 'CTDB_BASE': base,
                'CTDB_SOCKET': os.path.join(base, 'run', 'ctdbd.socket')})
    return env


class Node:
    def __init__(self, workdir, pnn, address, nodes_file, lock_file):
        self.pnn = pnn
        self.address = address
        self.base = os.path.join(workdir, 'node.%d' % pnn)
        self.socket = os.path.join(self.base, 'run', 'ctdbd.socket')
        self.pidfile = os.path.join(self.base, 'run', 'ctdbd.pid')
        self.nodes_file = nodes_file
        self.lock_file = lock_file
        self.smbd = None

    def write_config(self):
        for d in ('run', 'var', 'events/legacy', 'db/volatile',
                  'db/persistent', 'db/state'):
            os.makedirs(os.path.join(self.base, d), exist_ok=True)
        with open(self.nodes_file) as f:
            nodes = f.read()
        with open(os.path.join(self.base, 'nodes'), 'w') as f:
            f.write(nodes)
        open(os.path.join(self.base, 'public_addresses'), 'w').close()
        db = os.path.join(self.base, 'db')
        with open(os.path.join(self.base, 'ctdb.conf'), 'w') as f:
            f.write('''[logging]
	location = file:%(base)s/log.ctdb
	log level = NOTICE

[cluster]
	cluster lock = %(lock)s
	node address = %(address)s

[database]
	volatile database directory = %(db)s/volatile
	persistent database directory = %(db)s/persistent
	state database directory = %(db)s/state

[failover]
	disabled = true

[legacy]
	realtime scheduling = false
''' % {'base': self.base, 'lock': self.lock_file, 'address': self.address,
       'db': db})

    def ctdb(self, *args, check=True, timeout=30):
        r = subprocess.run(['ctdb'] + list(args), env=ctdb_env(self.base),
                           capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError('ctdb %s on node %d: %s%s' %
                               (' '.join(args), self.pnn, r.stdout,
                                r.stderr))
        return r.stdout

    def start_ctdbd(self):
        subprocess.Popen(['ctdbd'], env=ctdb_env(self.base),
                         stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL,
                         start_new_session=True).wait(30)

class Cluster:
    """Two CTDB nodes on ADDRESSES and an smbd on each; shares is a dict
    of name -> smb.conf parameters with a 'path' both nodes share."""

    def __init__(self, workdir, shares, global_params=None):
        self.workdir = os.path.abspath(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.shares = shares
        self.global_params = dict(global_params or {})
        nodes_file = os.path.join(self.workdir, 'nodes')
        with open(nodes_file, 'w') as f:
            f.write(''.join(a + '\n' for a in ADDRESSES))
        lock = os.path.join(self.workdir, 'shared', 'cluster.lock')
        os.makedirs(os.path.dirname(lock), exist_ok=True)
        self.nodes = [Node(self.workdir, i, a, nodes_file, lock)
                      for i, a in enumerate(ADDRESSES)]
        self.setup_seconds = None

    def start(self):
        started = time.monotonic()
        for node in self.nodes:
            harness.ensure_loopback_address(node.address)
            node.write_config()
            node.start_ctdbd()
        self.wait_healthy(60)
        for node in self.nodes:         # one after the other
            node.smbd = harness.Smbd(
                os.path.join(self.workdir, 'smbd.%d' % node.pnn),
                self.shares, address=node.address,
                global_params=dict(self.global_params, **{
                    'clustering': 'yes', 'ctdbd socket': node.socket,
                    'netbios name': 'IOTUNECLUSTER'}))
            node.smbd.start()
        self.setup_seconds = time.monotonic() - started
        return self

    def wait_healthy(self, timeout):
        deadline = time.monotonic() + timeout
        out = ''
        while time.monotonic() < deadline:
            r = subprocess.run(['ctdb', 'nodestatus', 'all'],
                               env=ctdb_env(self.nodes[0].base),
                               capture_output=True, text=True, timeout=30)
            out = r.stdout + r.stderr
            if r.returncode == 0 and out.count('OK') >= len(self.nodes):
                return
            time.sleep(0.5)
        raise RuntimeError('the CTDB cluster is not healthy within %ds:\n%s'
                           % (timeout, out))

    def stop(self):
        started = time.monotonic()
        for node in self.nodes:
            if node.smbd is not None:
                node.smbd.stop()
        harness.stop_pids(harness.read_pids(
            [node.pidfile for node in self.nodes]), 15)
        return time.monotonic() - started
