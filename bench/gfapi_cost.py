#!/usr/bin/python3
# What one reservation costs on a GlusterFS volume, measured without smbd:
# the write cache reserves the bytes of a cached write with a fallocate
# before the write is acknowledged, and through vfs_glusterfs that is a
# glfs_fallocate(), a round trip to the brick.  With one write in flight
# every write waits for one, so (ECHO) / (iotune with free reservations
# + this) is the most exact reservations allow in the "until on disk"
# cell of the write matrix (bench/report.py prints it next to the goal).
#
#   gfapi_cost.py HOST VOLUME [--count N] [--rounds R]
#
# prints microseconds per call: the median of R rounds of N calls, each
# fallocate(fd, 0, off, 4 KiB) past the end of a new file, as a stream of
# 4 KiB cached writes makes them.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import argparse
import ctypes
import os
import statistics
import time

KIB = 1024


class Gfapi:
    """libgfapi through ctypes: one connection to a volume"""

    def __init__(self, host, volume):
        lib = ctypes.CDLL('libgfapi.so.0', use_errno=True)
        lib.glfs_new.restype = ctypes.c_void_p
        lib.glfs_new.argtypes = [ctypes.c_char_p]
        lib.glfs_set_volfile_server.argtypes = [
            ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
        lib.glfs_set_logging.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                         ctypes.c_int]
        lib.glfs_init.argtypes = [ctypes.c_void_p]
        lib.glfs_fini.argtypes = [ctypes.c_void_p]
        lib.glfs_creat.restype = ctypes.c_void_p
        lib.glfs_creat.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                   ctypes.c_int, ctypes.c_uint]
        lib.glfs_fallocate.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                       ctypes.c_longlong, ctypes.c_size_t]
        lib.glfs_close.argtypes = [ctypes.c_void_p]
        lib.glfs_unlink.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.lib = lib
        self.fs = lib.glfs_new(volume.encode())
        if not self.fs:
            raise OSError('glfs_new(%s) failed' % volume)
        lib.glfs_set_volfile_server(self.fs, b'tcp', host.encode(), 24007)
        lib.glfs_set_logging(self.fs, b'/dev/null', 0)
        if lib.glfs_init(self.fs) != 0:
            raise OSError(ctypes.get_errno(), 'glfs_init of %s on %s' %
                          (volume, host))

    def fallocate_us(self, count):
        """microseconds per 4 KiB fallocate past the end of a new file"""
        name = ('.gfapi-cost-%d' % os.getpid()).encode()
        fd = self.lib.glfs_creat(self.fs, name, os.O_RDWR | os.O_TRUNC,
                                 0o600)
        if not fd:
            raise OSError(ctypes.get_errno(), 'glfs_creat')
        try:
            started = time.monotonic()
            for i in range(count):
                if self.lib.glfs_fallocate(fd, 0, i * 4 * KIB,
                                           4 * KIB) != 0:
                    raise OSError(ctypes.get_errno(), 'glfs_fallocate')
            return (time.monotonic() - started) / count * 1e6
        finally:
            self.lib.glfs_close(fd)
            self.lib.glfs_unlink(self.fs, name)

    def close(self):
        self.lib.glfs_fini(self.fs)


def fallocate_us(host, volume, count=2000, rounds=7):
    """the median of rounds, microseconds per call"""
    g = Gfapi(host, volume)
    try:
        g.fallocate_us(count // 4)    # warm-up: connection, inode tables
        return statistics.median(g.fallocate_us(count)
                                 for _ in range(rounds))
    finally:
        g.close()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('host')
    p.add_argument('volume')
    p.add_argument('--count', type=int, default=2000)
    p.add_argument('--rounds', type=int, default=7)
    args = p.parse_args()
    print('glfs_fallocate, 4 KiB past the end: %.1f us' %
          fallocate_us(args.host, args.volume, args.count, args.rounds))


if __name__ == '__main__':
    main()
