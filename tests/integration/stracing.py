# strace on a real smbd: every thread of one process and every process
# and thread it starts from then on, and the calls of one system call in
# the trace's text.  Used by the read-ahead and write cache tests.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import re
import signal
import subprocess
import time


class Strace:
    """strace -f on every thread of one process and on every process and
    thread it starts from then on"""

    def __init__(self, pid, out, trace='readahead,fadvise64'):
        tids = os.listdir('/proc/%d/task' % pid)
        args = ['strace', '-f', '-qq', '-e', 'trace=' + trace, '-o', out]
        for tid in tids:
            args += ['-p', tid]
        self.out = out
        self.proc = subprocess.Popen(args, stderr=subprocess.DEVNULL)
        self.wait_attached(pid, tids)

    def wait_attached(self, pid, tids, timeout=30):
        """until strace traces every thread it was given that still
        runs (a fixed 0.5 s could end before it had attached on a loaded
        machine)"""
        deadline = time.monotonic() + timeout
        while True:
            tracers = set()
            for tid in tids:
                try:
                    with open('/proc/%d/task/%s/status' % (pid, tid)) as f:
                        tracers |= {line.split()[1] for line in f
                                    if line.startswith('TracerPid:')}
                except FileNotFoundError:
                    pass        # an idle pool thread ended
            if tracers == {str(self.proc.pid)}:
                return
            assert self.proc.poll() is None, 'strace exited'
            assert time.monotonic() < deadline, 'strace did not attach'
            time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(10)
        with open(self.out) as f:
            return f.read()


def calls(text, name):
    """name's calls in strace's text: (fd, offset, length, advice).  A
    call another thread interrupts is split in two lines, its arguments
    ending in '<unfinished ...>' and its result in a '<... resumed>' line
    (what failed test_drop_behind_drops_only_behind now and then: the
    close's drop ran while a pool thread's drop did): the arguments are
    matched without the closing parenthesis."""
    return re.findall(r'%s\((\d+), (\d+), (\d+)(?:, (\w+))?(?:\)| <unf)'
                      % name, text)
