# Shared by iotune's benchmarks: alternating rounds and their medians
# and quartiles, sizes as names, the no-regression summary of
# write-matrix cells, the machine's busy CPUs.
#
# SPDX-License-Identifier: GPL-3.0-or-later

import statistics


def alternating(rounds, fns):
    """Runs every function of fns (name -> fn) once per round, in order on
    even rounds and reversed on odd ones, so that drift of the machine
    hits all alike; returns name -> the list of its results, one per
    round."""
    results = {name: [] for name in fns}
    names = list(fns)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            results[name].append(fns[name]())
    return results


def median_alternating(rounds, fns):
    """alternating(): name -> the median of its results (a tuple of
    medians when fn returns tuples)"""
    return {name: median_of_results(v)
            for name, v in alternating(rounds, fns).items()}


def quartiles(ratios):
    """(first quartile, median, third quartile) of the rounds' ratios"""
    if len(ratios) < 2:
        return ratios * 3
    return statistics.quantiles(ratios, n=4)


def median_of_results(values):
    if isinstance(values[0], tuple):
        return tuple(statistics.median(v[i] for v in values)
                     for i in range(len(values[0])))
    return statistics.median(values)


KIB = 1024
MIB = 1024 * KIB


def passes_by(kind, op, block):
    """whether bench/instructions.py's cell of kind, op (write or read)
    and block passes iotune by: on the page-cache share, writes of 64 KiB
    and more (the cache takes smaller ones) and every read"""
    return kind == 'pagecache' and (op == 'read' or block >= 64 * KIB)


def size_name(n):
    return '%dM' % (n // MIB) if n >= MIB else '%dK' % (n // KIB)


def regression_summary(cells, backend):
    """of one backend's write-matrix cells: (worst cell, medians below
    0.97, clear regressions - cells whose upper quartile is below 0.97 -,
    number of cells)"""
    mine = [c for c in cells if c['backend'] == backend]
    return (min(mine, key=lambda c: c['ratio']),
            sum(c['ratio'] < 0.97 for c in mine),
            sum(c['ratio_q3'] < 0.97 for c in mine), len(mine))


def machine_cpu():
    """(all, idle) jiffies of the machine so far"""
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), v[3] + v[4]


def busy_since(before):
    """the share of the machine's CPUs (all cores) busy since before,
    from 0 to 1 (waiting for I/O counts as idle).  /proc/stat counts in
    jiffies of 10 ms: for a run of a few tens of milliseconds (the 64K
    and 256K cells at scale 1) the figure is rough."""
    now = machine_cpu()
    total = now[0] - before[0]
    return 1 - (now[1] - before[1]) / total if total > 0 else 0.0
