#!/usr/bin/python3
# The figures bench/report.py prints beside the write cache's goals, as
# functions of one row of the run's JSON (bench/write_matrix.py): what
# exact reservations allow the one-in-flight cell (a bound), estimates of
# what they allow the coalescing cells (one_trip_*: not bounds, runs have
# passed them), and what the cached runs would reach if they differed
# from those with free reservations only by the time smbd's main thread
# spent in reservation calls.  Figures are fractions of the goal's
# yardstick.
#
# SPDX-License-Identifier: GPL-3.0-or-later

# the coalescing goal's cached request sizes, by their names in the JSON
COALESCE_BYTES = {'16K': 16 * 1024, '64K': 64 * 1024}


def one_trip_per_depth(r, size, trip_us):
    """An estimate of exact reservations: with d writes in flight the
    client sends no more before one of them is answered, and none is
    answered before its bytes are reserved; if every d writes took the
    time they take with free reservations plus one whole round trip.
    Not a bound: a write waits for its reservation while the others
    move, and runs have passed it.  As a fraction of 1M writes without
    the cache."""
    block = COALESCE_BYTES[size]
    return free_plus_seconds(r, size, r['depth'] * block, trip_us / 1e6)


def one_trip_at_backend_speed(r, size, trip_us):
    """The same estimate with the writes otherwise as fast as 1M writes
    without the cache (the goal's own yardstick) instead of cached
    writes with free reservations: d * size bytes per (their time at
    that speed + one round trip).  Not a bound either, for the same
    reason: only d * size bytes per round trip alone would be one."""
    block = COALESCE_BYTES[size]
    moved = r['depth'] * block
    rate = r['1M without'] * 1e6
    return moved / (moved / rate + trip_us / 1e6) / rate


def free_plus_seconds(r, size, moved, extra_s):
    """moved bytes at the speed of the cached writes with free
    reservations, extra_s seconds later: a fraction of 1M writes
    without the cache"""
    free_s = moved / (r['free reservations ' + size] * 1e6)
    return moved / (free_s + extra_s) / 1e6 / r['1M without']


def free_plus_reserving(r, size):
    """The cached run as it would be if it differed from the one with
    free reservations only by the time smbd's main thread spent in the
    cache's reservation calls (measured in the cached runs; nothing else
    can happen on that thread meanwhile).  As a fraction of 1M writes
    without the cache; None where the run has no such figure."""
    if 'reserve ms ' + size not in r:
        return None
    return free_plus_seconds(r, size, r['bytes ' + size],
                             r['reserve ms ' + size] / 1e3)


def exact_reservation_bound(r):
    """With one write in flight a cached write is answered only once its
    bytes are reserved: at best, the write with free reservations plus
    one reservation (measured alone), against the ECHO."""
    return r['echo_us'] / (r['free_us'] + r['fallocate_us'])
