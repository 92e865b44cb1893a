# A memory cgroup for smbd, shared by the read-ahead tests and
# bench/readahead.py: smbd's page cache is charged there, as when many
# clients share a server's RAM, and its reclaim stalls show in Linux's
# pressure stall information.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os


class MemoryLimit:
    """A memory cgroup (v2 or v1) that smbd and its children run in: its
    page cache is charged there, as when many clients share a server's
    RAM."""

    # (hierarchy root, the file that says it has the memory controller,
    # the limit's file)
    HIERARCHIES = (
        ('/sys/fs/cgroup', 'cgroup.controllers', 'memory.max'),
        ('/sys/fs/cgroup/unified', 'cgroup.controllers', 'memory.max'),
        ('/sys/fs/cgroup/memory', 'memory.limit_in_bytes',
         'memory.limit_in_bytes'),
    )

    def __init__(self, limit, name='iotune-bench'):
        self.path = self.root = None
        self.home = None        # where the first process added came from
        for root, probe, knob in self.HIERARCHIES:
            try:
                with open(os.path.join(root, probe)) as f:
                    if probe == 'cgroup.controllers' and \
                            'memory' not in f.read().split():
                        continue
                path = os.path.join(root, name)
                os.makedirs(path, exist_ok=True)
                with open(os.path.join(path, knob), 'w') as f:
                    f.write(str(limit))
            except OSError:
                continue
            self.path, self.root = path, root
            return

    def add(self, pid):
        if self.home is None:
            self.home = self.cgroup_of(pid)
        with open(os.path.join(self.path, 'cgroup.procs'), 'w') as f:
            f.write(str(pid))

    def cgroup_of(self, pid):
        """pid's cgroup in this hierarchy, as a directory"""
        v1 = self.root.endswith('/memory')
        try:
            with open('/proc/%d/cgroup' % pid) as f:
                for line in f:
                    _, controllers, path = line.rstrip('\n').split(':', 2)
                    if ('memory' in controllers.split(',')) if v1 \
                            else controllers == '':
                        home = os.path.join(self.root, path.lstrip('/'))
                        if os.path.isdir(home):
                            return home
        except OSError:
            pass
        return self.root

    def remove(self):
        """the processes go back where they came from, the cgroup goes"""
        if self.path is None:
            return
        home = self.home or self.root
        for pid in open(os.path.join(self.path, 'cgroup.procs')).read(
                ).split():
            try:
                with open(os.path.join(home, 'cgroup.procs'), 'w') as f:
                    f.write(pid)
            except OSError:
                pass
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def memory_limit_of(pid):
    """the lowest memory limit of pid's cgroup and its ancestors up to the
    hierarchy's root (v2: memory.high, memory.max; v1:
    memory.limit_in_bytes), by iotune's rules (include/iotune/memcg.h);
    0: none"""
    kinds = (('/sys/fs/cgroup', False, ('memory.high', 'memory.max')),
             ('/sys/fs/cgroup/unified', False,
              ('memory.high', 'memory.max')),
             ('/sys/fs/cgroup/memory', True, ('memory.limit_in_bytes',)))
    paths = {}
    with open('/proc/%d/cgroup' % pid) as f:
        for line in f:
            parts = line.rstrip('\n').split(':', 2)
            if len(parts) != 3 or not parts[2].startswith('/'):
                continue
            if parts[0] == '0' and parts[1] == '':
                paths[False] = parts[2]
            elif 'memory' in parts[1].split(','):
                paths[True] = parts[2]
    for root, v1, names in kinds:
        path = paths.get(v1, '')
        if not path.startswith('/') or not memory_controller_on(root, v1):
            continue
        d = root + path.rstrip('/')
        if not os.path.exists(d):
            continue
        limits = []
        while True:
            for name in names:
                try:
                    with open(os.path.join(d, name)) as f:
                        text = f.read().strip()
                except OSError:
                    continue
                if text.isdigit() and 0 < int(text) < 1 << 62:
                    limits.append(int(text))
            if len(d) <= len(root):
                break
            d = os.path.dirname(d)
        return min(limits) if limits else 0
    return 0


def memory_controller_on(root, v1):
    if v1:
        return os.path.exists(root)
    try:
        with open(os.path.join(root, 'cgroup.controllers')) as f:
            return 'memory' in f.read().split()
    except OSError:
        return False
